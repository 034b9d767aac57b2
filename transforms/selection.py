"""Generator selection: compare candidate generator models on the same texts (pure module).

Every candidate transforms the same texts; every judge scores every candidate's successful
outputs (the *crossover* matrix, so a judge's preference for its own outputs shows up); each
candidate's per-text score is the mean over the judges that gave one. Candidates are then compared
pairwise with paired bootstrap tests on the texts both transformed successfully, Holm-corrected
over all pairs, and summarised as significance letters (candidates sharing a letter are not
significantly different).

For paraphrase-like transformations (the lexical axis: the meaning is kept in the source's language)
the judge's similarity score (0–5) of original and rewrite can be a criterion next to quality and
fluency (:func:`selection_criteria`).

A selection over several transformations is also *pooled* (:func:`pool_transformations`): a
candidate's pooled score is the mean over transformations of its mean per-text score on each (every
transformation weighs the same, as the multi-axis benchmark averages transformations), with a
bootstrap interval that resamples texts within each transformation; the *top-k crossover* lists
which candidates are in the top k on each transformation and pooled, and which pairs of candidates
swap order between transformations.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from core.errors import ShiftlabError
from core.stats import bootstrap_ci, compact_letters, holm, paired_bootstrap_test
from transforms.judging import JudgeKind
from transforms.registry import Axis, transformation_get

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
    transformation: str = ""


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


DEFAULT_CRITERIA: tuple[str, ...] = (JudgeKind.QUALITY.value, JudgeKind.FLUENCY.value)
PARAPHRASE_LIKE_AXES = frozenset({Axis.LEXICAL})


def paraphrase_like(transformation: str) -> bool:
    """Whether a rewrite of ``transformation`` should mean the same as its original in the same
    language (the lexical axis: paraphrase, backtranslation, style change), so that the judge's
    similarity of the two is a fair criterion."""
    return transformation_get(transformation).axis in PARAPHRASE_LIKE_AXES


class SelectionError(ShiftlabError, ValueError):
    """Selection options that cannot be compared (unknown or unfit criteria)."""


def selection_criteria(transformations: Sequence[str], requested: Sequence[str] | None = None) -> tuple[str, ...]:
    """The judged dimensions a selection compares: ``requested`` (default quality and fluency),
    checked. Similarity is refused unless every transformation is paraphrase-like: a translation or
    a summary is not meant to be judged "the same meaning, same words" against its original."""
    criteria = tuple(dict.fromkeys(requested or DEFAULT_CRITERIA))
    allowed = {k.value for k in JudgeKind}
    unknown = [c for c in criteria if c not in allowed]
    if unknown:
        raise SelectionError(f"unknown criteria {unknown}: choose from {', '.join(sorted(allowed))}")
    if JudgeKind.SIMILARITY.value in criteria:
        unfit = [t for t in transformations if not paraphrase_like(t)]
        if unfit:
            raise SelectionError(
                f"judged similarity is a criterion only for paraphrase-like transformations (lexical axis); "
                f"{', '.join(unfit)} change length or language: use quality and fluency for them"
            )
    return criteria


def _cell(values: Sequence[float | None], *, seed: int, n_resamples: int) -> Cell:
    parsed = [v for v in values if v is not None]
    if not parsed:
        return Cell(0, None, None, None, len(values))
    ci = bootstrap_ci(parsed, np.mean, rng=np.random.default_rng(seed), n_resamples=n_resamples)
    return Cell(len(parsed), ci.estimate, ci.low, ci.high, len(values) - len(parsed))


def text_scores(
    *,
    candidates: Sequence[str],
    judges: Sequence[str],
    scores: Mapping[tuple[str, str], Mapping[TextKey, float | None]],
) -> dict[str, dict[TextKey, float]]:
    """Each candidate's score per text: the mean over the judges that gave the text a score."""
    per_text: dict[str, dict[TextKey, float]] = {}
    for candidate in candidates:
        collected: dict[TextKey, list[float]] = {}
        for judge in judges:
            for key, score in scores.get((judge, candidate), {}).items():
                if score is not None:
                    collected.setdefault(key, []).append(score)
        per_text[candidate] = {key: float(np.mean(values)) for key, values in collected.items()}
    return per_text


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
    per_text = text_scores(candidates=candidates, judges=judges, scores=scores)
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


# --- pooled over transformations ---------------------------------------------------------------


@dataclass(frozen=True)
class Crossing:
    """Two candidates whose order differs between transformations (by mean score)."""

    first: str
    second: str
    first_ahead_on: list[str]
    second_ahead_on: list[str]


@dataclass(frozen=True)
class PooledComparison:
    """One judged dimension pooled over transformations, with the top-k crossover."""

    kind: str
    transformations: list[str]
    k: int
    by_transformation: dict[str, dict[str, float | None]]  # transformation -> candidate -> mean
    rankings: dict[str, list[str]]  # transformation -> candidates, best first
    overall: dict[str, Cell]  # candidate -> mean of its per-transformation means [stratified bootstrap]
    ranking: list[str]  # pooled, best first
    top_k: dict[str, list[str]]  # transformation, and "pooled" -> the k best candidates
    top_k_everywhere: list[str]  # in the top k of every transformation and pooled
    crossings: list[Crossing]


def _rank(means: Mapping[str, float | None]) -> list[str]:
    return sorted(means, key=lambda c: (means[c] is None, -(means[c] or 0.0), c))


def _stratified_cell(groups: Sequence[np.ndarray], *, seed: int, n_resamples: int, confidence: float = 0.95) -> Cell:
    """Mean of the group means, with a percentile interval from resampling within every group."""
    n = sum(len(g) for g in groups)
    if not groups or any(len(g) == 0 for g in groups):
        return Cell(n, None, None, None)
    rng = np.random.default_rng(seed)
    replicates = np.zeros(n_resamples)
    for g in groups:
        replicates += g[rng.integers(0, len(g), (n_resamples, len(g)))].mean(axis=1)
    replicates /= len(groups)
    alpha = (1 - confidence) / 2
    low, high = np.percentile(replicates, [100 * alpha, 100 * (1 - alpha)])
    return Cell(n, float(np.mean([g.mean() for g in groups])), float(low), float(high))


def pool_transformations(
    *,
    kind: str,
    candidates: Sequence[str],
    per_text: Mapping[str, Mapping[str, Mapping[TextKey, float]]],
    k: int = 3,
    seed: int,
    n_resamples: int = 1000,
) -> PooledComparison:
    """Pool one judged dimension over transformations.

    ``per_text[transformation][candidate]`` maps each text the candidate transformed successfully
    (and a judge scored) to its score (see :func:`text_scores`). A candidate without a score on
    some transformation has no pooled score and ranks last."""
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    transformations = list(per_text)
    if len(transformations) < 2:
        raise ValueError("pooling needs at least two transformations")
    means = {
        t: {c: float(np.mean(list(v.values()))) if (v := per_text[t].get(c)) else None for c in candidates}
        for t in transformations
    }
    rankings = {t: _rank(means[t]) for t in transformations}
    overall = {
        c: _stratified_cell(
            [np.fromiter(per_text[t].get(c, {}).values(), dtype=float) for t in transformations],
            seed=seed,
            n_resamples=n_resamples,
        )
        for c in candidates
    }
    ranking = _rank({c: overall[c].mean for c in candidates})

    def top(order: list[str], scores: Mapping[str, float | None]) -> list[str]:
        return [c for c in order if scores[c] is not None][:k]

    top_k = {t: top(rankings[t], means[t]) for t in transformations}
    top_k["pooled"] = top(ranking, {c: overall[c].mean for c in candidates})
    everywhere = [c for c in ranking if all(c in members for members in top_k.values())]
    crossings = []
    for first, second in combinations(ranking, 2):
        ahead = {
            t: means[t][first] > means[t][second]
            for t in transformations
            if means[t][first] is not None and means[t][second] is not None and means[t][first] != means[t][second]
        }
        if len(set(ahead.values())) == 2:
            crossings.append(
                Crossing(first, second, [t for t, a in ahead.items() if a], [t for t, a in ahead.items() if not a])
            )
    return PooledComparison(kind, transformations, k, means, rankings, overall, ranking, top_k, everywhere, crossings)
