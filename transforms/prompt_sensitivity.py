"""Prompt sensitivity: one transformation of the same texts under several prompt versions (pure module).

Each prompt version is one transformation run; the runs differ only in their prompt wording, so
every text is transformed once per version and the versions can be compared text by text:

- error rate (share of texts whose transformation failed), with a percentile-bootstrap interval
  over texts; whether the versions differ is Cochran's Q test on the texts (a text is a block, its
  failed/succeeded outcome under each version the k related binary observations; for two versions
  it is McNemar's test without continuity correction);
- edit distance of the successful texts: median, interquartile range and a bootstrap interval of
  the median; judge scores and benchmark Δ: mean with a bootstrap interval. Whether the versions
  differ is a within-block permutation test: the statistic is the range (largest minus smallest)
  of the versions' medians (edit distance) or means (judge scores, Δ) over the blocks that have a
  value under every version (a text for edit distances and judge scores; a model × dataset × seed
  unit of a benchmark run for Δ), and the null distribution shuffles the version labels within
  each block. The p-value is ``(1 + #{range* >= observed}) / (1 + n_resamples)``.

References
----------
Cochran, W. G. (1950). The comparison of percentages in matched samples. Biometrika 37, 256–266.
Good, P. (2005). Permutation, Parametric, and Bootstrap Tests of Hypotheses, 3rd ed., §3.5.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from core.stats import bootstrap_ci

BlockKey = Hashable  # a text (item id, field) or a benchmark unit (model, dataset, seed)


@dataclass(frozen=True)
class Estimate:
    """A statistic of one version with its percentile-bootstrap interval (None below two values)."""

    n: int
    value: float | None
    ci_low: float | None
    ci_high: float | None


@dataclass(frozen=True)
class MedianIQR:
    """Median and interquartile range of a sample, with a bootstrap interval of the median."""

    n: int
    median: float | None
    q1: float | None
    q3: float | None
    ci_low: float | None
    ci_high: float | None


@dataclass(frozen=True)
class VersionInput:
    """What one prompt version's run gives: each text's outcome (True = transformed), the edit
    distance of each successful text, per-text judge scores by kind, and benchmark Δ by unit."""

    label: str
    run_id: int
    outcomes: Mapping[BlockKey, bool]
    edit_distances: Mapping[BlockKey, float]
    judge_scores: Mapping[str, Mapping[BlockKey, float]] = field(default_factory=dict)
    benchmark_deltas: Mapping[BlockKey, float] = field(default_factory=dict)


@dataclass(frozen=True)
class VersionStats:
    label: str
    run_id: int
    n_texts: int
    error_rate: Estimate
    edit_distance: MedianIQR
    judge: dict[str, Estimate]
    benchmark_delta: Estimate | None


@dataclass(frozen=True)
class SpreadTest:
    """How far apart the versions are on one metric, and a test of "the prompts do not differ".

    ``spread`` is the largest minus the smallest version estimate (each version on all of its own
    values); ``n_blocks`` the blocks with a value under every version, which the test uses."""

    metric: str
    spread: float | None
    n_blocks: int
    test: str  # "cochran_q" or "permutation"
    statistic: float | None
    p_value: float | None


@dataclass(frozen=True)
class SensitivityReport:
    versions: list[VersionStats]
    spreads: list[SpreadTest]
    seed: int
    n_resamples: int
    confidence: float


def cochran_q(table: np.ndarray | Sequence[Sequence[int]]) -> tuple[float, float]:
    """Cochran's Q and its chi-square p-value (k - 1 degrees of freedom) for a blocks × k table
    of 0/1 outcomes. Blocks with the same outcome under every condition carry no information and
    are allowed; when every block is such, Q is 0 and p is 1."""
    x = np.asarray(table, dtype=float)
    if x.ndim != 2 or x.shape[1] < 2:
        raise ValueError(f"Cochran's Q needs a blocks x conditions table with 2+ conditions, got shape {x.shape}")
    if not np.isin(x, (0.0, 1.0)).all():
        raise ValueError("Cochran's Q needs 0/1 outcomes")
    k = x.shape[1]
    columns, rows = x.sum(axis=0), x.sum(axis=1)
    total = x.sum()
    denominator = k * total - float((rows**2).sum())
    if denominator == 0:
        return 0.0, 1.0
    q = (k - 1) * (k * float((columns**2).sum()) - total**2) / denominator
    return float(q), float(stats.chi2.sf(q, k - 1))


def permutation_range_test(
    matrix: np.ndarray | Sequence[Sequence[float]],
    *,
    statistic: Callable[..., np.ndarray] = np.mean,
    rng: np.random.Generator,
    n_resamples: int = 1000,
) -> tuple[float, float]:
    """Within-block permutation test of "the k conditions do not differ" on a blocks × k matrix.

    The statistic is the range of the column ``statistic`` (``np.mean`` or ``np.median``, called
    with ``axis=0``); each resample shuffles every row independently. Returns the observed range
    and ``(1 + #{resampled >= observed}) / (1 + n_resamples)``."""
    x = np.asarray(matrix, dtype=float)
    if x.ndim != 2 or x.shape[1] < 2 or x.shape[0] < 1:
        raise ValueError(f"a permutation test needs a blocks x conditions matrix with 2+ conditions, got {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError("the matrix contains NaN or infinite values: keep only complete blocks")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be positive, got {n_resamples}")

    def spread(m: np.ndarray) -> float:
        column = statistic(m, axis=0)
        return float(column.max() - column.min())

    observed = spread(x)
    order = rng.random((n_resamples, *x.shape)).argsort(axis=2)
    shuffled = np.take_along_axis(np.broadcast_to(x, order.shape), order, axis=2)
    column = statistic(shuffled, axis=1)
    replicates = column.max(axis=1) - column.min(axis=1)
    extreme = int((replicates >= observed - 1e-12).sum())  # the tolerance keeps exact ties counted
    return observed, (1 + extreme) / (1 + n_resamples)


def _estimate(values: Sequence[float], statistic, *, seed: int, n_resamples: int, confidence: float) -> Estimate:
    if not values:
        return Estimate(0, None, None, None)
    if len(values) < 2:
        return Estimate(1, float(statistic(np.asarray(values, dtype=float))), None, None)
    ci = bootstrap_ci(
        values, statistic, rng=np.random.default_rng(seed), n_resamples=n_resamples, confidence=confidence
    )
    return Estimate(len(values), ci.estimate, ci.low, ci.high)


def _median_iqr(values: Sequence[float], *, seed: int, n_resamples: int, confidence: float) -> MedianIQR:
    if not values:
        return MedianIQR(0, None, None, None, None, None)
    q1, median, q3 = (float(v) for v in np.percentile(values, [25, 50, 75]))
    ci = _estimate(values, np.median, seed=seed, n_resamples=n_resamples, confidence=confidence)
    return MedianIQR(len(values), median, q1, q3, ci.ci_low, ci.ci_high)


def _complete_blocks(maps: Sequence[Mapping[BlockKey, float]]) -> np.ndarray:
    common = set(maps[0]).intersection(*maps[1:])
    keys = sorted(common, key=repr)
    return np.array([[float(m[key]) for m in maps] for key in keys], dtype=float).reshape(len(keys), len(maps))


def _spread(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return max(present) - min(present) if len(present) == len(values) and present else None


def _permutation_spread(
    metric: str,
    maps: Sequence[Mapping[BlockKey, float]],
    estimates: Sequence[float | None],
    statistic,
    *,
    seed: int,
    n_resamples: int,
) -> SpreadTest:
    matrix = _complete_blocks(maps)
    if matrix.shape[0] < 2:  # one block cannot separate the prompt from chance
        return SpreadTest(metric, _spread(estimates), matrix.shape[0], "permutation", None, None)
    observed, p = permutation_range_test(
        matrix, statistic=statistic, rng=np.random.default_rng(seed), n_resamples=n_resamples
    )
    return SpreadTest(metric, _spread(estimates), matrix.shape[0], "permutation", observed, p)


def prompt_sensitivity(
    versions: Sequence[VersionInput], *, seed: int = 0, n_resamples: int = 1000, confidence: float = 0.95
) -> SensitivityReport:
    """Per-version statistics and the spread across versions (see the module docstring).

    Judge kinds are compared when every version has scores of that kind; benchmark Δ when every
    version has Δ values. Interval and test generators are seeded with ``seed`` alone, so a
    version's interval does not depend on the other versions."""
    if len(versions) < 2:
        raise ValueError("a prompt-sensitivity report compares at least two prompt versions")
    if n_resamples < 100:
        raise ValueError(f"use at least 100 resamples, got {n_resamples}")
    options = {"seed": seed, "n_resamples": n_resamples, "confidence": confidence}
    kinds = [k for k in versions[0].judge_scores if all(v.judge_scores.get(k) for v in versions)]
    with_deltas = all(v.benchmark_deltas for v in versions)
    stats_rows = []
    for v in versions:
        failed = [0.0 if ok else 1.0 for _, ok in sorted(v.outcomes.items(), key=lambda kv: repr(kv[0]))]
        stats_rows.append(
            VersionStats(
                label=v.label,
                run_id=v.run_id,
                n_texts=len(v.outcomes),
                error_rate=_estimate(failed, np.mean, **options),
                edit_distance=_median_iqr(list(v.edit_distances.values()), **options),
                judge={
                    kind: _estimate(list(v.judge_scores[kind].values()), np.mean, **options) for kind in v.judge_scores
                },
                benchmark_delta=_estimate(list(v.benchmark_deltas.values()), np.mean, **options)
                if v.benchmark_deltas
                else None,
            )
        )
    failures = [{key: 0.0 if ok else 1.0 for key, ok in v.outcomes.items()} for v in versions]
    table = _complete_blocks(failures)
    q, p = cochran_q(table) if table.shape[0] else (None, None)
    compared = [
        (
            "edit distance (median)",
            [v.edit_distances for v in versions],
            [s.edit_distance.median for s in stats_rows],
            np.median,
        ),
        *(
            (
                f"judge {kind} (mean)",
                [v.judge_scores[kind] for v in versions],
                [s.judge[kind].value for s in stats_rows],
                np.mean,
            )
            for kind in kinds
        ),
    ]
    if with_deltas:
        compared.append(
            (
                "benchmark Δ (mean)",
                [v.benchmark_deltas for v in versions],
                [s.benchmark_delta.value for s in stats_rows],
                np.mean,
            )
        )
    spreads = [
        SpreadTest("error rate", _spread([s.error_rate.value for s in stats_rows]), table.shape[0], "cochran_q", q, p),
        *(
            _permutation_spread(label, values, estimates, statistic, seed=seed, n_resamples=n_resamples)
            for label, values, estimates, statistic in compared
        ),
    ]
    return SensitivityReport(stats_rows, spreads, seed, n_resamples, confidence)
