"""Statistics specific to benchmark results (pure module: numpy and scipy, no Django, no I/O).

The general building blocks (Hodges–Lehmann, percentile bootstrap, Wilcoxon, Holm, Spearman and
Kendall) live in ``core.stats``; this module applies them to benchmark results (SPEC §5): how far
do scores move under a transformation and is the move significant, are per-axis profiles
reliable, how far do embeddings drift, and do two models' correlations with gold differ.

Units of observation are explicit in every function: callers pass paired arrays whose rows are
the unit (a dataset × run pair for *pooled* analyses, a dataset for *run-aggregated* ones, an
item for drift).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from core.stats import (
    bootstrap_ci,
    hodges_lehmann,
    hodges_lehmann_interval,
    holm,
    spearman_rho,
    wilcoxon_p_value,
)

# How the Hodges–Lehmann interval is made, the default first: ``walsh`` (distribution-free, from the
# ordered Walsh averages; the papers) or ``bootstrap`` (percentile bootstrap, before November 2026).
SHIFT_INTERVALS = ("walsh", "bootstrap")


@dataclass(frozen=True)
class ShiftResult:
    """Paired change from ``before`` to ``after`` (after − before)."""

    label: str
    n: int
    hodges_lehmann: float
    ci_low: float
    ci_high: float
    median_absolute_difference: float
    wilcoxon_statistic: float | None
    p_value: float | None
    p_holm: float | None = None
    ci_confidence: float | None = None  # the interval's achieved coverage (walsh) or nominal level (bootstrap)
    ci_method: str = "walsh"  # see SHIFT_INTERVALS


def paired_shift(
    before: Sequence[float] | np.ndarray,
    after: Sequence[float] | np.ndarray,
    *,
    label: str = "",
    rng: np.random.Generator | None = None,
    n_resamples: int = 1000,
    interval: str = "walsh",
) -> ShiftResult:
    """Hodges–Lehmann shift of the paired differences (after − before) with its 95% interval, the
    median absolute difference and the Wilcoxon p-value.

    ``interval="walsh"`` (default): the distribution-free interval between ordered Walsh averages
    (``core.stats.hodges_lehmann_interval``; exact signed-rank order for small n, its achieved
    coverage in ``ci_confidence``). ``interval="bootstrap"``: a percentile bootstrap with ``rng``
    and ``n_resamples`` (it under-covers at small n: 89% at n = 8 in issue 29's simulation)."""
    x = np.asarray(before, dtype=float)
    y = np.asarray(after, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"before and after must be paired 1-D arrays, got {x.shape} and {y.shape}")
    if interval not in SHIFT_INTERVALS:
        raise ValueError(f"interval must be one of {', '.join(SHIFT_INTERVALS)}, got {interval!r}")
    d = y - x
    if interval == "walsh":
        walsh = hodges_lehmann_interval(d)
        estimate, low, high, level = walsh.estimate, walsh.low, walsh.high, walsh.confidence
    else:
        if rng is None:
            raise ValueError("the bootstrap interval needs rng (a numpy Generator)")
        ci = bootstrap_ci(d, hodges_lehmann, rng=rng, n_resamples=n_resamples)
        estimate, low, high, level = ci.estimate, ci.low, ci.high, ci.confidence
    statistic, p = wilcoxon_p_value(d)
    median_abs = float(np.median(np.abs(d)))
    return ShiftResult(label, int(d.size), estimate, low, high, median_abs, statistic, p, None, level, interval)


def paired_shifts(
    pairs: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    *,
    seed: int,
    n_resamples: int = 1000,
    interval: str = "walsh",
) -> list[ShiftResult]:
    """``paired_shift`` for each label (e.g. each transformation), with Holm-corrected p-values
    over the labels that have one. With the bootstrap interval each label uses a generator seeded
    with ``seed``, so a result does not depend on the other labels."""
    results = [
        paired_shift(
            before,
            after,
            label=label,
            rng=np.random.default_rng(seed),
            n_resamples=n_resamples,
            interval=interval,
        )
        for label, (before, after) in pairs.items()
    ]
    tested = [i for i, r in enumerate(results) if r.p_value is not None]
    adjusted = holm([results[i].p_value for i in tested]) if tested else []
    by_index = dict(zip(tested, adjusted, strict=True))
    return [
        ShiftResult(**{**r.__dict__, "p_holm": float(by_index[i]) if i in by_index else None})
        for i, r in enumerate(results)
    ]


def aggregate_runs(values: Mapping[tuple[str, int], float]) -> dict[str, float]:
    """Run-aggregated unit: the mean over runs (seeds) of each dataset's score.
    ``values`` maps (dataset, seed) to a score."""
    grouped: dict[str, list[float]] = {}
    for (dataset, _seed), value in values.items():
        grouped.setdefault(dataset, []).append(value)
    return {dataset: float(np.mean(v)) for dataset, v in sorted(grouped.items())}


@dataclass(frozen=True)
class SplitHalfResult:
    n_splits: int
    median: float | None
    spearmans: tuple[float, ...]


def split_half_reliability(
    scores: np.ndarray, strata: Sequence[str], *, n_splits: int = 100, rng: np.random.Generator
) -> SplitHalfResult:
    """Reliability of a per-axis model profile: split the datasets at random into two halves
    within each stratum (task type), average each model's score over each half, and correlate the
    two halves' model scores (Spearman). The median over ``n_splits`` splits is reported.

    ``scores`` has one row per dataset and one column per model (e.g. the score change under one
    axis); ``strata`` gives each dataset's task type. An odd dataset out in a stratum goes to a
    random half.
    """
    values = np.asarray(scores, dtype=float)
    if values.ndim != 2 or values.shape[0] != len(strata):
        raise ValueError(f"scores must be datasets x models with {len(strata)} rows, got {values.shape}")
    if values.shape[0] < 2 or values.shape[1] < 3:
        raise ValueError("split-half reliability needs at least 2 datasets and 3 models")
    groups: dict[str, list[int]] = {}
    for index, stratum in enumerate(strata):
        groups.setdefault(stratum, []).append(index)
    spearmans = []
    for _ in range(n_splits):
        first, second = [], []
        for members in groups.values():
            order = rng.permutation(members)
            half = len(order) // 2
            if len(order) % 2 and rng.random() < 0.5:
                half += 1
            first += list(order[:half])
            second += list(order[half:])
        if not first or not second:
            continue
        rho = spearman_rho(values[first].mean(axis=0), values[second].mean(axis=0))
        if rho is not None:  # None: a half's model scores are all equal
            spearmans.append(rho)
    return SplitHalfResult(n_splits, float(np.median(spearmans)) if spearmans else None, tuple(spearmans))


def embedding_drift(original: np.ndarray, transformed: np.ndarray) -> np.ndarray:
    """Per-item drift 1 − cos(original, transformed) of paired embedding rows."""
    a = np.asarray(original, dtype=float)
    b = np.asarray(transformed, dtype=float)
    if a.shape != b.shape or a.ndim != 2:
        raise ValueError(f"paired embedding matrices must have the same 2-D shape, got {a.shape} and {b.shape}")
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    if np.any(norms == 0):
        raise ValueError("an embedding is all zeros: cosine undefined")
    return 1.0 - np.einsum("ij,ij->i", a, b) / norms


@dataclass(frozen=True)
class CorrelationDifference:
    """Spearman correlation of two predictors with the same gold scores, and of their difference
    (a − b) a percentile-bootstrap interval over resampled items."""

    n: int
    spearman_a: float
    spearman_b: float
    difference: float
    ci_low: float
    ci_high: float
    confidence: float
    n_resamples: int


def spearman_difference_with_ci(
    gold: Sequence[float],
    predicted_a: Sequence[float],
    predicted_b: Sequence[float],
    *,
    rng: np.random.Generator,
    n_resamples: int = 1000,
    confidence: float = 0.95,
) -> CorrelationDifference:
    """Paired comparison of two models on one set of scored pairs (e.g. STS): each bootstrap
    resample draws items with replacement and recomputes both correlations on the same items, so
    the interval reflects that the models share their test items (the two scores are correlated).
    """
    gold, a, b = (np.asarray(x, dtype=float) for x in (gold, predicted_a, predicted_b))
    if not (gold.shape == a.shape == b.shape) or gold.ndim != 1:
        raise ValueError(f"gold {gold.shape}, predicted_a {a.shape}, predicted_b {b.shape}: need paired 1-D arrays")
    if gold.size < 3 or np.ptp(gold) == 0:
        raise ValueError("need at least three items with varying gold scores to correlate")

    def difference(rows: np.ndarray) -> float:
        rows = rows.astype(np.int64)
        return float(stats.spearmanr(a[rows], gold[rows]).statistic - stats.spearmanr(b[rows], gold[rows]).statistic)

    ci = bootstrap_ci(np.arange(gold.size), difference, rng=rng, n_resamples=n_resamples, confidence=confidence)
    return CorrelationDifference(
        n=int(gold.size),
        spearman_a=float(stats.spearmanr(a, gold).statistic),
        spearman_b=float(stats.spearmanr(b, gold).statistic),
        difference=ci.estimate,
        ci_low=ci.low,
        ci_high=ci.high,
        confidence=confidence,
        n_resamples=n_resamples,
    )
