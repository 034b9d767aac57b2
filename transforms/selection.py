"""Generator selection: compare candidate generator models on the same texts (pure module).

Every candidate transforms the same texts; every judge scores every candidate's successful
outputs (the *crossover* matrix, so a judge's preference for its own outputs shows up); each
candidate's per-text score is the mean over the judges that gave one. Candidates are then compared
pairwise with paired bootstrap tests on the texts both transformed successfully, Holm-corrected
over all pairs, and summarised as significance letters (candidates sharing a letter are not
significantly different).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from core.stats import bootstrap_ci, compact_letters, holm, paired_bootstrap_test

TextKey = Hashable  # identifies one transformed text, e.g. (item id, side)


@dataclass(frozen=True)
class CandidateStats:
    """What the transformation run of one candidate says about it, before any judging."""

    name: str
    model: str
    run_id: int
    n_texts: int
    error_rate: float
    error_rates: dict[str, float]
    mean_edit_distance: float | None
    seconds_per_text: float | None


@dataclass(frozen=True)
class Cell:
    """Mean judge score of a group of texts with its percentile-bootstrap interval."""

    n: int
    mean: float | None
    ci_low: float | None
    ci_high: float | None
    n_unparsed: int = 0  # texts the judge was asked about but gave no score on the scale


@dataclass(frozen=True)
class PairComparison:
    first: str
    second: str
    n: int
    mean_difference: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    p_holm: float | None
    significant: bool


@dataclass(frozen=True)
class KindComparison:
    """One judged dimension (quality or fluency) across candidates and judges."""

    kind: str
    crossover: dict[str, dict[str, Cell]]  # judge -> candidate -> cell
    overall: dict[str, Cell]  # candidate -> mean over judges, per text, then over texts
    ranking: list[str]  # best first
    pairwise: list[PairComparison]
    letters: dict[str, str]


@dataclass(frozen=True)
class SelectionReport:
    candidates: list[CandidateStats]
    judges: list[str]
    kinds: dict[str, KindComparison]
    alpha: float
    n_resamples: int
    seed: int


def _cell(values: Sequence[float | None], *, seed: int, n_resamples: int) -> Cell:
    parsed = [v for v in values if v is not None]
    if not parsed:
        return Cell(0, None, None, None, len(values))
    ci = bootstrap_ci(parsed, np.mean, rng=np.random.default_rng(seed), n_resamples=n_resamples)
    return Cell(len(parsed), ci.estimate, ci.low, ci.high, len(values) - len(parsed))


def compare_kind(
    *,
    kind: str,
    candidates: Sequence[str],
    judges: Sequence[str],
    scores: Mapping[tuple[str, str], Mapping[TextKey, float | None]],
    seed: int,
    n_resamples: int = 1000,
    alpha: float = 0.05,
) -> KindComparison:
    """Compare candidates on one judged dimension.

    ``scores[(judge, candidate)]`` maps each successfully transformed text of the candidate to the
    judge's score (None for a parse failure). Texts a candidate failed to transform are absent:
    they are counted in its error rate, not scored.
    """
    crossover = {
        judge: {
            candidate: _cell(list(scores.get((judge, candidate), {}).values()), seed=seed, n_resamples=n_resamples)
            for candidate in candidates
        }
        for judge in judges
    }
    per_text: dict[str, dict[TextKey, float]] = {}
    for candidate in candidates:
        collected: dict[TextKey, list[float]] = {}
        for judge in judges:
            for key, score in scores.get((judge, candidate), {}).items():
                if score is not None:
                    collected.setdefault(key, []).append(score)
        per_text[candidate] = {key: float(np.mean(values)) for key, values in collected.items()}
    overall = {c: _cell(list(per_text[c].values()), seed=seed, n_resamples=n_resamples) for c in candidates}
    ranking = sorted(candidates, key=lambda c: (overall[c].mean is None, -(overall[c].mean or 0.0), c))

    pairs = list(combinations(ranking, 2))
    raw = []
    for first, second in pairs:
        common = sorted(set(per_text[first]) & set(per_text[second]), key=repr)
        if len(common) < 2:
            raw.append((len(common), None))
            continue
        test = paired_bootstrap_test(
            [per_text[first][k] for k in common],
            [per_text[second][k] for k in common],
            rng=np.random.default_rng(seed),
            n_resamples=n_resamples,
        )
        raw.append((len(common), test))
    tested = [test.p_value for _, test in raw if test is not None]
    adjusted = iter(holm(tested)) if tested else iter(())
    pairwise = []
    for (first, second), (n, test) in zip(pairs, raw, strict=True):
        if test is None:
            pairwise.append(PairComparison(first, second, n, None, None, None, None, None, False))
            continue
        p_holm = float(next(adjusted))
        pairwise.append(
            PairComparison(
                first, second, n, test.mean_difference, test.low, test.high, test.p_value, p_holm, p_holm < alpha
            )
        )
    letters = compact_letters(ranking, {frozenset((p.first, p.second)) for p in pairwise if p.significant})
    return KindComparison(kind, crossover, overall, ranking, pairwise, letters)
