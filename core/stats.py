"""General statistics shared by the judge (transforms), the robustness reports and the human
baselines (evaluation): Hodges–Lehmann location, percentile-bootstrap intervals, paired bootstrap
and Wilcoxon tests, Holm's correction, compact letter displays, Wilson and Fisher z intervals, and
the rank correlations (Spearman's rho, Kendall's tau-b). Pure: numpy and scipy, no Django, no I/O.

Agreement between raters lives in ``annotation.science.agreement``; statistics of benchmark results
(paired shifts, split-half reliability, embedding drift) in ``evaluation.stats``.

Every resampling function takes an explicit ``rng: numpy.random.Generator`` so results are
reproducible from a seed and never depend on global random state.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from statistics import NormalDist

import numpy as np
from scipy import stats


def _as_sample(data: Sequence[float] | np.ndarray, *, name: str = "data", min_size: int = 1) -> np.ndarray:
    x = np.asarray(data, dtype=float)
    if x.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {x.shape}")
    if x.size < min_size:
        raise ValueError(f"{name} needs at least {min_size} value(s), got {x.size}")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{name} contains NaN or infinite values: drop them first")
    return x


def hodges_lehmann(data: Sequence[float] | np.ndarray) -> float:
    """One-sample Hodges–Lehmann estimator: the median of all Walsh averages (x_i + x_j) / 2 with
    i <= j (self-pairs included). Applied to paired differences it is the HL location shift.

    References
    ----------
    Hodges, J. L. and Lehmann, E. L. (1963). Estimates of location based on rank tests.
    Annals of Mathematical Statistics 34(2), 598–611.
    """
    x = _as_sample(data)
    i, j = np.triu_indices(x.size)
    return float(np.median((x[i] + x[j]) / 2.0))


# Up to this many values the signed-rank distribution is counted exactly; above, the normal approximation.
SIGNED_RANK_EXACT_MAX_N = 400


def signed_rank_pmf(n: int) -> np.ndarray:
    """Null distribution of the Wilcoxon signed-rank statistic T+ for ``n`` untied values:
    ``pmf[t] = P(T+ = t)`` for t = 0 .. n(n+1)/2, counted exactly (each rank 1..n is in T+ with
    probability 1/2, independently; adding rank r shifts the counts by r)."""
    if n < 0:
        raise ValueError(f"n must be non-negative, got {n}")
    pmf = np.zeros(n * (n + 1) // 2 + 1)
    pmf[0] = 1.0
    for rank in range(1, n + 1):
        shifted = np.zeros_like(pmf)
        shifted[rank:] = pmf[:-rank]
        pmf = (pmf + shifted) / 2.0
    return pmf


@dataclass(frozen=True)
class WalshInterval:
    """Hodges–Lehmann estimate with its distribution-free interval [W_(k), W_(M+1-k)] between the
    k-th smallest and k-th largest of the M Walsh averages; ``confidence`` is the achieved coverage
    (the signed-rank distribution is discrete, so it is at least the nominal one where n allows it,
    and below it when n is too small: see ``hodges_lehmann_interval``)."""

    estimate: float
    low: float
    high: float
    confidence: float
    nominal: float
    order: int  # k
    method: str  # "exact" (signed-rank distribution counted) or "normal" (its normal approximation)


def hodges_lehmann_interval(data: Sequence[float] | np.ndarray, *, confidence: float = 0.95) -> WalshInterval:
    """One-sample Hodges–Lehmann estimate (median of the Walsh averages, self-pairs included) with
    the distribution-free confidence interval that inverts the Wilcoxon signed-rank test.

    With the M = n(n+1)/2 Walsh averages sorted, P(W_(k) <= θ <= W_(M+1-k)) = 1 − 2·P(T+ <= k−1)
    for a continuous distribution symmetric about θ; k is the largest order whose lower-tail
    probability is at most (1 − confidence)/2. The signed-rank distribution is counted exactly up to
    ``SIGNED_RANK_EXACT_MAX_N`` values, approximated by the normal (with continuity correction)
    above. When n is too small to reach ``confidence`` (n <= 5 at 95%), the interval is the range
    of the data (k = 1) and ``confidence`` reports the lower coverage it achieves.

    References
    ----------
    Hollander, M., Wolfe, D. A. and Chicken, E. (2014). Nonparametric Statistical Methods, 3rd ed.,
    §3.3 (Tukey's Walsh-average interval).
    """
    x = _as_sample(data)
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    n = x.size
    i, j = np.triu_indices(n)
    walsh = np.sort((x[i] + x[j]) / 2.0)
    m = walsh.size
    tail = (1.0 - confidence) / 2.0
    if n <= SIGNED_RANK_EXACT_MAX_N:
        method = "exact"
        cdf = np.cumsum(signed_rank_pmf(n))
        # tolerance: a tail probability equal to alpha/2 up to rounding counts as within it
        within = np.nonzero(cdf <= tail * (1 + 1e-9))[0]
        k = int(within[-1]) + 1 if within.size else 1
        achieved = 1.0 - 2.0 * float(cdf[k - 1])
    else:
        method = "normal"
        mean = m / 2.0
        sd = float(np.sqrt(n * (n + 1) * (2 * n + 1) / 24.0))
        z = NormalDist().inv_cdf(1.0 - tail)
        k = max(1, int(np.floor(mean + 0.5 - z * sd)))
        achieved = 1.0 - 2.0 * NormalDist().cdf((k - 0.5 - mean) / sd)
    k = min(k, (m + 1) // 2)
    return WalshInterval(
        float(np.median(walsh)), float(walsh[k - 1]), float(walsh[m - k]), achieved, confidence, k, method
    )


@dataclass(frozen=True)
class ConfidenceInterval:
    estimate: float
    low: float
    high: float
    confidence: float
    n_resamples: int


def bootstrap_ci(
    data: Sequence[float] | np.ndarray,
    statistic: Callable[[np.ndarray], float] = np.mean,
    *,
    rng: np.random.Generator,
    n_resamples: int = 1000,
    confidence: float = 0.95,
) -> ConfidenceInterval:
    """Percentile-bootstrap confidence interval of ``statistic`` over a one-dimensional sample.

    Resamples are drawn as ``rng.integers(0, n, (n_resamples, n))`` and the bounds are linear
    percentiles of the resampled statistics, the same recipe as ``scipy.stats.bootstrap(...,
    method="percentile")`` (so both agree for the same generator state).
    """
    x = _as_sample(data)
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be positive, got {n_resamples}")
    indices = rng.integers(0, x.size, (n_resamples, x.size))
    replicates = np.array([statistic(x[row]) for row in indices], dtype=float)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.percentile(replicates, [100 * alpha, 100 * (1 - alpha)])
    return ConfidenceInterval(float(statistic(x)), float(low), float(high), confidence, n_resamples)


@dataclass(frozen=True)
class PairedTestResult:
    """Mean of ``a - b`` with its percentile-bootstrap interval and a two-sided p-value."""

    n: int
    mean_difference: float
    low: float
    high: float
    p_value: float


def paired_bootstrap_test(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    *,
    rng: np.random.Generator,
    n_resamples: int = 1000,
    confidence: float = 0.95,
) -> PairedTestResult:
    """Two-sided paired bootstrap test of "the mean of a - b is zero".

    The null distribution comes from resampling the differences after centring them on zero;
    the p-value is ``(1 + #{|mean*| >= |observed mean|}) / (1 + n_resamples)``, which never
    reports an impossible p of exactly zero. The interval resamples the uncentred differences
    with the same indices.

    References
    ----------
    Efron, B. and Tibshirani, R. J. (1993). An Introduction to the Bootstrap, §16.4.
    """
    x = _as_sample(a, name="a")
    y = _as_sample(b, name="b")
    if x.size != y.size:
        raise ValueError(f"paired samples must have the same length, got {x.size} and {y.size}")
    d = x - y
    observed = float(d.mean())
    indices = rng.integers(0, d.size, (n_resamples, d.size))
    replicates = d[indices].mean(axis=1)
    null = replicates - observed
    # A tolerance keeps ties (e.g. all differences equal) from flipping on rounding noise.
    extreme = np.abs(null) >= abs(observed) - 1e-12
    alpha = (1.0 - confidence) / 2.0
    low, high = np.percentile(replicates, [100 * alpha, 100 * (1 - alpha)])
    return PairedTestResult(d.size, observed, float(low), float(high), float((1 + extreme.sum()) / (1 + n_resamples)))


def wilcoxon_p_value(differences: Sequence[float] | np.ndarray) -> tuple[float | None, float | None]:
    """Two-sided Wilcoxon signed-rank test of the differences (scipy's defaults: zero differences
    dropped, exact distribution for small samples). Returns (None, None) when it is undefined:
    fewer than one non-zero difference; (0, 1.0) style answers are never invented."""
    d = np.asarray(differences, dtype=float)
    if np.count_nonzero(d) == 0:
        return None, None
    result = stats.wilcoxon(d)
    return float(result.statistic), float(result.pvalue)


def holm(p_values: Sequence[float] | np.ndarray) -> np.ndarray:
    """Holm's step-down adjusted p-values (family-wise error control), in the input order.

    References
    ----------
    Holm, S. (1979). A simple sequentially rejective multiple test procedure.
    Scandinavian Journal of Statistics 6(2), 65–70.
    """
    p = np.asarray(p_values, dtype=float)
    if p.ndim != 1:
        raise ValueError("p_values must be one-dimensional")
    if np.any((p < 0) | (p > 1) | ~np.isfinite(p)):
        raise ValueError("p-values must lie in [0, 1]")
    m = p.size
    order = np.argsort(p, kind="stable")
    stepped = np.maximum.accumulate((m - np.arange(m)) * p[order])
    adjusted = np.empty(m)
    adjusted[order] = np.minimum(stepped, 1.0)
    return adjusted


def compact_letters(
    order: Sequence[Hashable], significant: Mapping[frozenset, bool] | set[frozenset]
) -> dict[Hashable, str]:
    """Compact letter display: two groups share a letter exactly when they are NOT significantly
    different. ``order`` lists the groups best first (letters are handed out in that order);
    ``significant`` holds the significantly different pairs (as frozensets), or maps every pair to
    a bool.

    Uses the insert-and-absorb algorithm: start with one letter covering everyone; for each
    significant pair, split every letter holding both; drop letters contained in another.

    References
    ----------
    Piepho, H.-P. (2004). An algorithm for a letter-based representation of all-pairwise
    comparisons. Journal of Computational and Graphical Statistics 13(2), 456–466.
    """
    groups = list(order)
    if len(set(groups)) != len(groups):
        raise ValueError("group names must be unique")
    if isinstance(significant, Mapping):
        pairs = {pair for pair, is_significant in significant.items() if is_significant}
    else:
        pairs = set(significant)
    columns: list[frozenset] = [frozenset(groups)] if groups else []
    for first, second in combinations(groups, 2):
        if frozenset((first, second)) not in pairs:
            continue
        split = []
        for column in columns:
            if first in column and second in column:
                split += [column - {first}, column - {second}]
            else:
                split.append(column)
        columns = [c for c in dict.fromkeys(split) if not any(c < other for other in split)]
    rank = {g: i for i, g in enumerate(groups)}
    columns.sort(key=lambda c: sorted(rank[g] for g in c))
    letters = {g: "" for g in groups}
    for index, column in enumerate(columns):
        for g in column:
            letters[g] += _letter(index)
    return letters


def _letter(index: int) -> str:
    """a..z, then aa, ab, ... for very many groups."""
    text = ""
    index += 1
    while index:
        index, rest = divmod(index - 1, 26)
        text = chr(ord("a") + rest) + text
    return text


def _normal_quantile(confidence: float) -> float:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    return NormalDist().inv_cdf(0.5 + confidence / 2.0)


def wilson_interval(successes: float, n: int, *, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion ``successes / n``.

    ``successes`` may be fractional (e.g. an accuracy averaged over experiments times ``n``).

    References
    ----------
    Wilson, E. B. (1927). Probable inference, the law of succession, and statistical inference.
    Journal of the American Statistical Association 22(158), 209–212.
    """
    if n < 1:
        raise ValueError(f"n must be a positive count, got {n}")
    if not 0 <= successes <= n:
        raise ValueError(f"successes must lie in [0, n={n}], got {successes}")
    z = _normal_quantile(confidence)
    p = successes / n
    denominator = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z / denominator * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return float(max(0.0, centre - half)), float(min(1.0, centre + half))


def fisher_z_interval(
    r: float, n: int, *, confidence: float = 0.95, method: str = "pearson"
) -> tuple[float, float] | None:
    """Confidence interval of a correlation through Fisher's z = atanh(r): z ± q·se, back with tanh.

    ``method="pearson"`` uses se = sqrt(1 / (n − 3)). ``method="spearman"`` uses Bonett and
    Wright's se = sqrt((1 + r²/2) / (n − 3)) for Spearman's rho, whose sampling variance exceeds
    Pearson's; the plain Pearson se would make rho's interval too narrow. Returns None when n <= 3
    (the standard error is undefined) or r is NaN; |r| = 1 gives the degenerate interval (r, r).

    References
    ----------
    Fisher, R. A. (1921). On the "probable error" of a coefficient of correlation deduced from a
    small sample. Metron 1, 3–32.
    Bonett, D. G. and Wright, T. A. (2000). Sample size requirements for estimating Pearson,
    Kendall and Spearman correlations. Psychometrika 65(1), 23–28.
    """
    if method not in ("pearson", "spearman"):
        raise ValueError(f"method must be 'pearson' or 'spearman', got {method!r}")
    if not -1 <= r <= 1 and not np.isnan(r):
        raise ValueError(f"a correlation lies in [-1, 1], got {r}")
    if n <= 3 or np.isnan(r):
        return None
    if abs(r) == 1:
        return float(r), float(r)
    variance = 1.0 + r * r / 2.0 if method == "spearman" else 1.0
    half = _normal_quantile(confidence) * np.sqrt(variance / (n - 3))
    z = np.arctanh(r)
    return float(np.tanh(z - half)), float(np.tanh(z + half))


def spearman_rho(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Spearman's rho between paired values (None when undefined: fewer than three pairs or a
    constant side)."""
    if len(a) != len(b):
        raise ValueError(f"paired values needed, got {len(a)} and {len(b)}")
    if len(a) < 3 or len(set(a)) < 2 or len(set(b)) < 2:
        return None
    return float(stats.spearmanr(a, b).statistic)


def kendall_tau(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Kendall's tau-b between two score lists over the same models (None when undefined)."""
    if len(a) != len(b):
        raise ValueError("both rankings must score the same models")
    if len(a) < 2 or len(set(a)) < 2 or len(set(b)) < 2:
        return None
    return float(stats.kendalltau(a, b).statistic)


@dataclass(frozen=True)
class CorrelationResult:
    n: int
    spearman: float | None
    ci_low: float | None
    ci_high: float | None


def spearman_with_ci(
    x: Sequence[float], y: Sequence[float], *, rng: np.random.Generator, n_resamples: int = 1000
) -> CorrelationResult:
    """Spearman's rho with a 95% percentile-bootstrap interval over resampled pairs (resamples
    where a side is constant are skipped: rho is undefined there)."""
    a = np.asarray(x, dtype=float)
    b = np.asarray(y, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError("x and y must be paired 1-D arrays")
    if a.size < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return CorrelationResult(int(a.size), None, None, None)
    rho = float(stats.spearmanr(a, b).statistic)
    replicates = []
    for rows in rng.integers(0, a.size, (n_resamples, a.size)):
        if np.ptp(a[rows]) > 0 and np.ptp(b[rows]) > 0:
            replicates.append(stats.spearmanr(a[rows], b[rows]).statistic)
    if not replicates:
        return CorrelationResult(int(a.size), rho, None, None)
    low, high = np.percentile(replicates, [2.5, 97.5])
    return CorrelationResult(int(a.size), rho, float(low), float(high))
