"""Variance-adaptive confidence sequences with per-observation bounds, and prediction-powered
observations from an LLM judge (pure: numpy and scipy only).

Four pieces, for a sequential gate that spends fewer human ratings (issue 40):

- ``bounded_confidence_sequence`` / ``bounded_settle`` / ``bounded_settle_questions``: an
  anytime-valid confidence sequence (CS) for a mean, and the pass / fail / undecided decision at a
  threshold, for observations whose bounds may differ from one observation to the next but are
  known before each is seen, with a *variance-adaptive* bet;
- ``asymptotic_confidence_sequence`` (``method="asymptotic"`` of the decisions): the asymptotic
  CS of Waudby-Smith et al. [6]_, which uses the variance and no range; valid only as the number
  of observations grows (its condition is stated there);
- ``prediction_powered_observations``: the PPI++ observations of Angelopoulos et al. [3]_ [4]_
  built one human-rated item at a time, with their predictable bounds, so that the CS above runs
  on them (the judge's score on every output lowers the variance the CS sees);
- ``ppi_mean_interval``: the fixed-``n`` PPI++ interval for a mean, the one ``ppi_py.ppi_mean_ci``
  (``ppi-python`` 0.2.3) computes, for a study read once at its end.

The betting confidence sequence
-------------------------------
Observations ``x_1, x_2, ...`` arrive one at a time. Before ``x_t`` is seen, bounds
``lo_t <= x_t <= hi_t`` are known (they may depend on ``x_1 .. x_{t-1}`` and on anything fixed in
advance: *predictable* bounds), and every observation has the same conditional mean::

    E[x_t | x_1 .. x_{t-1}] = mu        for every t                                        (C)

(i.i.d. draws satisfy it; so do the prediction-powered observations below, and draws without
replacement from a finite population once recentred, see below). For every candidate mean ``m``
two gamblers bet against it, as in Waudby-Smith and Ramdas [1]_ (their hedged capital, Theorem 3)::

    K+_t(m) = prod_{i<=t} (1 + b+_i(m) (x_i - m)),    K-_t(m) = prod_{i<=t} (1 - b-_i(m) (x_i - m))

with bets ``b+_i, b-_i >= 0`` computed from ``x_1 .. x_{i-1}`` only, truncated to
``b+_i <= c / (m - lo_i)`` and ``b-_i <= c / (hi_i - m)`` (``c = TRUNCATION = 1/2``): because
``x_i`` lies in ``[lo_i, hi_i]``, every factor is at least ``1 - c > 0``. Under (C) with
``m = mu`` each factor has conditional mean ``1``, so both capitals are nonnegative martingales
starting at 1, and by Ville's inequality [2]_ ``P(sup_t K+_t(mu) >= 2/alpha) <= alpha/2`` (and the
same for ``K-``). The CS at time ``t`` is the set of ``m`` whose two capitals never reached
``2/alpha`` so far: it holds ``mu`` at every ``t`` at once with probability at least ``1 - alpha``,
so it may be read after every observation and the study stopped whenever one likes.

Validity needs exactly: predictable bets, predictable bounds that hold surely, and (C). It does not
need the bets to be good: a poor bet only slows the CS. The bounds must be known *before* the
observation; bounds that use a quantity revealed together with it (for prediction-powered
observations: the judge's score of the very item drawn) would let the bet depend on that
quantity, and ``E[x_t | that quantity]`` is not ``mu``: the martingale argument fails.

**The bet (variance-adaptive).** The default ``strategy="agrapa"`` is the approximate
growth-rate-adaptive bet of [1]_ (aGRAPA)::

    b_t(m) = (mu_{t-1} - m) / (s2_{t-1} + (mu_{t-1} - m)^2),   b+ = max(b, 0),  b- = max(-b, 0)

where ``mu_{t-1}`` is the mean of ``x_1 .. x_{t-1}`` shrunk towards ``m`` (one pseudo-observation
at ``m``, so the first bet is 0) and ``s2_{t-1}`` a running variance (one pseudo-observation of
variance ``((hi_1 - lo_1)/2)^2``). It is the bet that maximises the expected log-growth of the
capital to second order: against a gap ``d = mu - m`` it grows the capital by about
``d^2 / (2 (s2 + d^2))`` per observation, so halving the variance about halves the observations a
decision needs, until the truncation ``c / (m - lo)`` caps the bet (large gaps, small variances).
On a 1-5 scale with the threshold at 3 the cap is ``1/4`` and it binds for typical ratings (the
log-optimal bet ``d / (s2 + d^2)`` exceeds it once the gap ``d`` is above about a quarter of the
variance), so there aGRAPA and the plug-in bet settle alike: the range, not the bet, holds a
betting sequence back (``benchmarks/gate_savings.py``), and the asymptotic sequence escapes it.
``strategy="plugin"`` is the predictable plug-in bet ``sqrt(2 log(2/alpha) / (s2_{t-1} t
log(1 + t)))`` of [1]_ (eq. 26), the one ``annotation.science.sequential`` uses today: it depends
on the variance too, but not on the gap, and sits at the truncation for most of a study on a
1-5 scale.

**The decision** at a threshold ``tau`` reads the two capitals at ``m = tau`` only, as
``annotation.science.sequential.settle`` does: *pass* the first time (at or after ``min_items``
observations) ``K+(tau)`` reaches ``2/alpha_pass``, *fail* the first time ``K-(tau)`` reaches
``2/alpha``. For a true mean ``mu <= tau`` the "above" capital at ``tau`` is a nonnegative
supermartingale (each factor has conditional mean ``1 + b+ (mu - tau) <= 1``), so a wrong pass has
probability at most ``alpha_pass/2`` whatever ``mu`` below ``tau``; likewise a wrong fail at most
``alpha/2``. Several questions (``bounded_settle_questions``) take the corrections of
``sequential.settle_questions``: fail side at ``alpha / n_questions`` per question (a union,
Bonferroni), pass side at ``alpha`` (an intersection: intersection-union, Berger [5]_). With
``raters``, no decision is taken before ``min_raters`` distinct raters are behind the
observations (one person never decides a gate).

Without replacement
-------------------
Items drawn *without* replacement from ``N`` outputs do not satisfy (C): the conditional mean of
the next draw is the mean of the outputs not drawn yet. As in [1]_ (sampling without
replacement), the observation ``y_t`` of the ``t``-th draw is recentred as::

    x_t = ((N - t + 1) y_t + Y_{t-1}) / N,      Y_{t-1} = y_1 + ... + y_{t-1}

whose conditional mean is exactly the population mean (of the values ``y`` the ``N`` outputs
carry), with predictable bounds ``((N - t + 1) [lo_t, hi_t] + Y_{t-1}) / N`` (narrower as the
population runs out). With rater noise the values are the ratings each output would get from the
rater it is given (noise independent of the order): the CS then covers their mean over the ``N``
outputs, which differs from the mean of the outputs' expected ratings by the average of ``N``
noise terms (about ``sd / sqrt(N)``, 0.03 on a 1-5 scale for ``N = 1000``).

Prediction-powered observations (PPI++)
---------------------------------------
A run has ``N`` outputs; the judge scored all of them (``g_1 .. g_N``, so ``mean_N(g)`` is known
before any human rating). Items are drawn uniformly at random; for the ``t``-th one the human item
mean is ``h_t`` (on the question's scale ``[h_lo, h_hi]``) and the judge's score ``g_t``. The
observation is::

    z_t = lam_t mean_N(g) + h_t - lam_t g_t

with ``lam_t`` computed from items ``1 .. t-1`` only: ``lam_t = clip(cov_{t-1}(h, g) /
var_N(g), 0, 1)`` (the sample covariance of the earlier pairs over the judge's variance over all
``N`` outputs: the weight that minimises ``var(z)``; ``0`` before two pairs; the clip to ``[0,
1]`` is ppi_py's and keeps the bounds no wider than a judge of weight 1). Drawn with replacement,
``E[g_t] = mean_N(g)`` and so ``E[z_t | past] = E[h_t] = mu``: **the estimand is the mean, over the
``N`` outputs of the run, of each output's expected human item mean**, and ``z_t`` is unbiased for
it whatever the judge's quality or bias (a biased or useless judge only costs variance: a constant
bias cancels in ``mean_N(g) - g_t``, and ``lam_t`` tends to 0 for a judge unrelated to the humans).
Without replacement ``mean_N(g)`` is replaced by the mean of the judge's scores over the outputs not
drawn yet, and the observation is recentred as above (with ``y_t = z_t`` and ``Y`` the sum of the
earlier ``h``; the conditional mean of ``z_t`` is then the mean of ``h`` over the outputs left).

The bounds are predictable because ``g_t`` is *not* used: ``g_t`` can be any of the judge's scores
left, so::

    lam_t (mean_N(g) - max g) + h_lo  <=  z_t  <=  lam_t (mean_N(g) - min g) + h_hi

a width of ``(h_hi - h_lo) + lam_t (max g - min g)``, wider than the human scale. (Taking ``g_t``
as known before ``h_t``, bounds of the human scale's width, would make the bets depend on ``g_t``,
and ``E[z_t | g_t]`` is ``mu`` only where the humans' mean given the judge's score is linear with
slope ``lam_t``; otherwise the martingale argument above fails.) The variance of ``z`` is what
the judge lowers: ``var(h) (1 - corr(h, g)^2)`` at the best weight, never below the raters' own
noise. With the betting sequence
the wider range also lowers the cap on the bet (``c / (m - lo_t)``), which on a 1-5 scale costs
more than the variance saves: in ``benchmarks/gate_savings.py`` a judge correlated 0.9 with the
true item means made the betting gate use 5-11% *more* ratings, while the asymptotic sequence,
which sees only the variance, used 2-14% fewer.

References
----------
.. [1] I. Waudby-Smith and A. Ramdas, "Estimating means of bounded random variables by betting",
   Journal of the Royal Statistical Society Series B, 86(1):1-27, 2024. doi:10.1093/jrsssb/qkad009
.. [2] J. Ville, "Etude critique de la notion de collectif", Gauthier-Villars, 1939.
.. [3] A. N. Angelopoulos, S. Bates, C. Fannjiang, M. I. Jordan and T. Zrnic, "Prediction-powered
   inference", Science, 382(6671):669-674, 2023. doi:10.1126/science.adi6000
.. [4] A. N. Angelopoulos, J. C. Duchi and T. Zrnic, "PPI++: Efficient prediction-powered
   inference", arXiv:2311.01453, 2023 (reference implementation: ``ppi-python`` 0.2.3).
.. [5] R. L. Berger, "Multiparameter hypothesis testing and acceptance sampling", Technometrics,
   24(4):295-300, 1982. doi:10.1080/00401706.1982.10487790
.. [6] I. Waudby-Smith, D. Arbour, R. Sinha, E. H. Kennedy and A. Ramdas, "Time-uniform central
   limit theory and asymptotic confidence sequences", Annals of Statistics, 52(6), 2024
   (arXiv:2103.06476).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from scipy.stats import norm

from annotation.science.sequential import Decision, JointDecision, Settled, joint_decision

TRUNCATION = 0.5  # c: a bet never risks more than this share of the capital
GRID_POINTS = 1001  # candidate means for the reported interval (the decision needs none)
MIN_RATERS = 3  # distinct raters behind any decision when raters are given
OPTIMIZE_AT = 100  # where the asymptotic sequence is tightest: a study's items per transformation
Strategy = Literal["agrapa", "plugin"]
Method = Literal["betting", "asymptotic"]
Sampling = Literal["with_replacement", "without_replacement"]


@dataclass(frozen=True, eq=False)
class BoundedObservations:
    """Observations with their predictable bounds, ready for the confidence sequence.

    Attributes
    ----------
    values, lower, upper : numpy.ndarray
        ``x_t`` and the bounds ``lo_t <= x_t <= hi_t`` known before ``x_t`` was seen.
    mean_range : tuple of float
        Where the estimated mean can lie (the question's scale): the reported interval's range.
    """

    values: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    mean_range: tuple[float, float]

    def __post_init__(self) -> None:
        x, lo, hi = (np.asarray(a, dtype=float) for a in (self.values, self.lower, self.upper))
        if x.ndim != 1 or x.shape != lo.shape or x.shape != hi.shape:
            raise ValueError("values, lower and upper must be one-dimensional and of the same length")
        if x.size and (np.isnan(x).any() or (x < lo - 1e-9).any() or (x > hi + 1e-9).any()):
            raise ValueError("every observation must lie within its bounds")
        if not self.mean_range[1] > self.mean_range[0]:
            raise ValueError(f"mean_range must be (low, high) with high > low, got {self.mean_range!r}")
        object.__setattr__(self, "values", x)
        object.__setattr__(self, "lower", lo)
        object.__setattr__(self, "upper", hi)


@dataclass(frozen=True, eq=False)
class PredictionPoweredObservations(BoundedObservations):
    """``BoundedObservations`` built from a judge and human ratings (``prediction_powered_observations``).

    Attributes
    ----------
    weights : numpy.ndarray
        ``lam_t`` of each observation (from the earlier items only).
    judge_mean : float
        The judge's mean over all ``N`` outputs.
    population : int
        ``N``.
    sampling : str
        ``"with_replacement"`` or ``"without_replacement"`` (recentred observations).
    """

    weights: np.ndarray = field(default_factory=lambda: np.empty(0))
    judge_mean: float = float("nan")
    population: int = 0
    sampling: str = "with_replacement"


@dataclass(frozen=True)
class ConfidenceSequence:
    """The running confidence sequence: ``lower[t-1], upper[t-1]`` after ``t`` observations."""

    lower: np.ndarray
    upper: np.ndarray
    alpha: float


@dataclass(frozen=True)
class PPIMeanInterval:
    """The fixed-``n`` PPI++ interval for a mean (``ppi_mean_interval``).

    Attributes
    ----------
    estimate, lower, upper : float
        Point estimate and two-sided ``1 - alpha`` interval.
    weight : float
        The tuned ``lam`` (ppi_py's ``lhat``), or the one given.
    std_error : float
        The standard error the interval uses.
    n, population : int
        Human-rated items and judged outputs.
    """

    estimate: float
    lower: float
    upper: float
    weight: float
    std_error: float
    n: int
    population: int


# --------------------------------------------------------------------------- the capital


def _running_variance(x: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """``s2_t`` after each observation (rows of ``x``): one pseudo-observation at the first
    bounds' midpoint with variance ``((hi_1 - lo_1)/2)^2``, then the running squared deviations
    from the running mean (as [1], eq. 26)."""
    t = np.arange(1, x.shape[-1] + 1, dtype=float)
    mid = (lo[..., :1] + hi[..., :1]) / 2
    prior = ((hi[..., :1] - lo[..., :1]) / 2) ** 2
    mean = (mid + np.cumsum(x, axis=-1)) / (t + 1)
    return (prior + np.cumsum((x - mean) ** 2, axis=-1)) / (t + 1)


def _log_capital(
    x: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    m: np.ndarray,
    *,
    alpha: float,
    strategy: Strategy,
    truncation: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Cumulative log-capital of the two gamblers, shape ``x.shape + m.shape[-1:]``.

    ``x, lo, hi`` have shape ``(rows, T)``; ``m`` shape ``(rows or 1, G)`` (candidate means).
    """
    rows, steps = x.shape
    t = np.arange(1, steps + 1, dtype=float)
    var = _running_variance(x, lo, hi)
    var_before = np.concatenate((((hi[:, :1] - lo[:, :1]) / 2) ** 2, var[:, :-1]), axis=1)
    var_before = np.maximum(var_before, 1e-12)[:, :, None]
    x3, lo3, hi3, mm = x[:, :, None], lo[:, :, None], hi[:, :, None], m[:, None, :]
    if strategy == "agrapa":
        # mean of the earlier observations shrunk towards m (one pseudo-observation at m): the gap
        gap = np.cumsum(x3 - mm, axis=1) / (t[None, :, None] + 1)
        gap = np.concatenate((np.zeros_like(gap[:, :1]), gap[:, :-1]), axis=1)
        bet = gap / (var_before + gap**2)
        up, down = np.maximum(bet, 0.0), np.maximum(-bet, 0.0)
    elif strategy == "plugin":
        bet = np.sqrt(2 * np.log(2 / alpha) / (var_before * t[None, :, None] * np.log1p(t[None, :, None])))
        up = down = np.broadcast_to(bet, (rows, steps, m.shape[-1]))
    else:
        raise ValueError(f"strategy must be 'agrapa' or 'plugin', got {strategy!r}")
    width = np.maximum(hi3 - lo3, 1e-12)
    up = np.minimum(up, truncation / np.maximum(mm - lo3, 1e-9 * width))
    down = np.minimum(down, truncation / np.maximum(hi3 - mm, 1e-9 * width))
    diff = x3 - mm
    return np.cumsum(np.log1p(up * diff), axis=1), np.cumsum(np.log1p(-down * diff), axis=1)


def _check_alpha(alpha: float, name: str = "alpha") -> None:
    if not 0 < alpha < 1:
        raise ValueError(f"{name} must lie in (0, 1), got {alpha!r}")


def _first_allowed(n: int, *, min_items: int, raters: Sequence[str] | None, min_raters: int) -> int:
    """The first observation (1-based) at which a decision may be taken (``n + 1``: none yet)."""
    if min_items < 1:
        raise ValueError(f"min_items must be at least 1, got {min_items!r}")
    start = min_items
    if raters is not None:
        if len(raters) != n:
            raise ValueError("raters must name the rater behind each observation")
        seen: set[str] = set()
        enough = n + 1
        for i, r in enumerate(raters, start=1):
            seen.add(r)
            if len(seen) >= min_raters:
                enough = i
                break
        start = max(start, enough)
    return start


def first_settlements(
    values: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    *,
    threshold: float,
    alpha: float,
    alpha_pass: float | None = None,
    min_items: int = 10,
    strategy: Strategy = "agrapa",
    truncation: float = TRUNCATION,
) -> tuple[np.ndarray, np.ndarray]:
    """``bounded_settle``'s rule over many sequences at once (rows of ``values``).

    Returns
    -------
    n : numpy.ndarray
        For each row, the observation (1-based) at which it first settles (``inf``: never).
    passed : numpy.ndarray
        Whether that first settlement is a pass.
    """
    _check_alpha(alpha)
    x = np.atleast_2d(np.asarray(values, dtype=float))
    lo = np.broadcast_to(np.atleast_2d(np.asarray(lower, dtype=float)), x.shape)
    hi = np.broadcast_to(np.atleast_2d(np.asarray(upper, dtype=float)), x.shape)
    m = np.full((1, 1), float(threshold))
    log_up, log_down = _log_capital(x, lo, hi, m, alpha=alpha, strategy=strategy, truncation=truncation)
    log_up, log_down = log_up[..., 0], log_down[..., 0]
    n = np.arange(1, x.shape[-1] + 1)
    passed = (log_up >= np.log(2 / (alpha if alpha_pass is None else alpha_pass))) & (n >= min_items)
    failed = (log_down >= np.log(2 / alpha)) & (n >= min_items)
    first_pass = np.where(passed.any(axis=-1), passed.argmax(axis=-1) + 1, np.inf)
    first_fail = np.where(failed.any(axis=-1), failed.argmax(axis=-1) + 1, np.inf)
    return np.minimum(first_pass, first_fail), first_pass < first_fail


def asymptotic_radius(
    t: np.ndarray, variance: np.ndarray, *, alpha: float, optimize_at: int = OPTIMIZE_AT
) -> np.ndarray:
    """Half-width of the asymptotic confidence sequence of [6]_ after ``t`` observations whose
    empirical variance is ``variance``: ``sd sqrt(2 (t r2 + 1) / (t^2 r2) log(sqrt(t r2 + 1) / alpha))``,
    Robbins' two-sided normal-mixture boundary for a unit variance scaled by the standard deviation,
    with ``r2 = (-2 log alpha + log(-2 log alpha + 1)) / optimize_at``, the mixture that makes it
    (nearly) tightest at ``t = optimize_at``."""
    _check_alpha(alpha)
    r2 = (-2 * np.log(alpha) + np.log(-2 * np.log(alpha) + 1)) / optimize_at
    spread = t * r2 + 1
    return np.sqrt(variance) * np.sqrt(2 * spread / (t**2 * r2) * np.log(np.sqrt(spread) / alpha))


def _running_moments(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    t = np.arange(1, x.shape[-1] + 1, dtype=float)
    mean = np.cumsum(x, axis=-1) / t
    variance = np.maximum(np.cumsum(x**2, axis=-1) / t - mean**2, 0.0)
    return t, mean, variance


def asymptotic_first_settlements(
    values: np.ndarray,
    *,
    threshold: float,
    alpha: float,
    alpha_pass: float | None = None,
    min_items: int = 10,
    optimize_at: int = OPTIMIZE_AT,
) -> tuple[np.ndarray, np.ndarray]:
    """``first_settlements`` with the asymptotic sequence (``method="asymptotic"``): pass the first
    time the lower end at ``alpha_pass`` is above ``threshold``, fail the first time the
    upper end at ``alpha`` is below it (each side of a two-sided sequence at level ``a`` errs with
    about ``a/2``)."""
    x = np.atleast_2d(np.asarray(values, dtype=float))
    t, mean, variance = _running_moments(x)
    above = mean - asymptotic_radius(
        t, variance, alpha=alpha if alpha_pass is None else alpha_pass, optimize_at=optimize_at
    )
    below = mean + asymptotic_radius(t, variance, alpha=alpha, optimize_at=optimize_at)
    passed = (above > threshold) & (t >= min_items)
    failed = (below < threshold) & (t >= min_items)
    first_pass = np.where(passed.any(axis=-1), passed.argmax(axis=-1) + 1, np.inf)
    first_fail = np.where(failed.any(axis=-1), failed.argmax(axis=-1) + 1, np.inf)
    return np.minimum(first_pass, first_fail), first_pass < first_fail


def asymptotic_confidence_sequence(
    observations: BoundedObservations | Sequence[float] | np.ndarray,
    *,
    alpha: float,
    alpha_above: float | None = None,
    optimize_at: int = OPTIMIZE_AT,
) -> ConfidenceSequence:
    """The asymptotic ``1 - alpha`` confidence sequence of Waudby-Smith et al. [6]_ (Robbins'
    normal-mixture boundary with the empirical variance in place of the true one), as a running
    intersection. Bounds are not used: it needs no range, only the variance.

    **Validity is asymptotic**: for observations with a common conditional mean, conditional
    variances whose running average converges almost surely and a Lindeberg-type moment condition
    (bounded observations satisfy it), the probability that it holds the mean at every time from
    ``m`` on tends to at least ``1 - alpha`` as ``m`` grows ([6]_ treats independent and
    martingale-dependent observations). No finite-sample guarantee: with few observations its error can exceed
    ``alpha`` (the benchmark measures it at ``min_items = 10``).

    Examples
    --------
    >>> cs = asymptotic_confidence_sequence([3.0, 4.0] * 50, alpha=0.05)
    >>> bool(cs.lower[-1] < 3.5 < cs.upper[-1])
    True
    """
    _check_alpha(alpha)
    x = observations.values if isinstance(observations, BoundedObservations) else np.asarray(observations, float)
    if not x.size:
        return ConfidenceSequence(np.empty(0), np.empty(0), alpha)
    t, mean, variance = _running_moments(x)
    lower = mean - asymptotic_radius(
        t, variance, alpha=alpha if alpha_above is None else alpha_above, optimize_at=optimize_at
    )
    upper = mean + asymptotic_radius(t, variance, alpha=alpha, optimize_at=optimize_at)
    return ConfidenceSequence(np.maximum.accumulate(lower), np.minimum.accumulate(upper), alpha)


# --------------------------------------------------------------------------- public CS and decisions


def bounded_confidence_sequence(
    observations: BoundedObservations,
    *,
    alpha: float,
    alpha_above: float | None = None,
    strategy: Strategy = "agrapa",
    truncation: float = TRUNCATION,
    grid_points: int = GRID_POINTS,
) -> ConfidenceSequence:
    """The running ``1 - alpha`` confidence sequence for the common conditional mean.

    Parameters
    ----------
    observations : BoundedObservations
        Values with predictable bounds; the mean is searched in ``observations.mean_range``.
    alpha : float
        Level: the sequence holds the mean at every time at once with probability ``>= 1 - alpha``.
    alpha_above : float, optional
        Level of the "above" gamblers (the lower end) instead of ``alpha``.
    strategy : {"agrapa", "plugin"}
        The bet (see the module docstring).
    truncation : float
        ``c``: the largest share of the capital a bet risks.
    grid_points : int
        Candidate means on ``mean_range``.

    Returns
    -------
    ConfidenceSequence
        The hull of the candidate means no gambler has rejected so far, after each observation
        (the running intersection: an end once moved never moves back). Where every candidate is
        rejected (probability at most ``alpha``), the running mean of the values is reported.

    Examples
    --------
    >>> obs = BoundedObservations(np.array([4.0, 5.0] * 20), np.ones(40), np.full(40, 5.0), (1, 5))
    >>> cs = bounded_confidence_sequence(obs, alpha=0.05)
    >>> bool(3.5 < cs.lower[-1] < 4.5 < cs.upper[-1] <= 5.0)
    True
    """
    _check_alpha(alpha)
    x = observations.values
    if not x.size:
        return ConfidenceSequence(np.empty(0), np.empty(0), alpha)
    low, high = observations.mean_range
    grid = np.linspace(low, high, grid_points)
    log_up, log_down = _log_capital(
        x[None],
        observations.lower[None],
        observations.upper[None],
        grid[None],
        alpha=alpha,
        strategy=strategy,
        truncation=truncation,
    )
    log_up = np.maximum.accumulate(log_up[0], axis=0)
    log_down = np.maximum.accumulate(log_down[0], axis=0)
    kept = (log_up < np.log(2 / (alpha if alpha_above is None else alpha_above))) & (log_down < np.log(2 / alpha))
    any_kept = kept.any(axis=1)
    running = np.cumsum(x) / np.arange(1, x.size + 1)
    lower = np.where(any_kept, grid[np.argmax(kept, axis=1)], running)
    upper = np.where(any_kept, grid[grid_points - 1 - np.argmax(kept[:, ::-1], axis=1)], running)
    return ConfidenceSequence(lower, upper, alpha)


def bounded_settle(
    observations: BoundedObservations,
    *,
    threshold: float,
    alpha: float,
    min_items: int = 10,
    alpha_pass: float | None = None,
    raters: Sequence[str] | None = None,
    min_raters: int = MIN_RATERS,
    method: Method = "betting",
    strategy: Strategy = "agrapa",
    truncation: float = TRUNCATION,
    optimize_at: int = OPTIMIZE_AT,
) -> Decision:
    """Whether the mean is settled at or above ``threshold`` (pass), below it (fail), or not yet.

    Same semantics as ``annotation.science.sequential.settle``: the first time, at or after
    ``min_items`` observations (and, with ``raters``, once ``min_raters`` distinct raters are
    behind them), that the "above" capital at ``threshold`` reaches ``2/alpha_pass`` passes and
    the "below" capital reaching ``2/alpha`` fails. A wrong pass and a wrong fail each have
    probability at most ``alpha_pass/2`` and ``alpha/2`` at every stopping time.

    Parameters
    ----------
    observations : BoundedObservations
        Values with predictable bounds, in the fixed order they were observed.
    threshold, alpha : float
        Acceptance threshold (on the observations' scale) and level.
    min_items : int
        No decision before this many observations.
    alpha_pass : float, optional
        Level of the pass side (default ``alpha``).
    raters : sequence of str, optional
        The rater behind each observation; a decision then needs ``min_raters`` distinct ones.
    min_raters : int
        See ``raters``.
    method : {"betting", "asymptotic"}
        The betting sequence (valid at every sample size) or the asymptotic one
        (``asymptotic_confidence_sequence``: only the variance, bounds unused, valid as the
        number of observations grows).
    strategy, truncation
        The bet (see ``bounded_confidence_sequence``).
    optimize_at : int
        Where the asymptotic sequence is tightest.

    Returns
    -------
    Decision
        State, the observation at which it settled (or the number seen), and the confidence
        sequence's interval then.

    Examples
    --------
    >>> obs = BoundedObservations(np.full(12, 5.0), np.ones(12), np.full(12, 5.0), (1, 5))
    >>> bounded_settle(obs, threshold=3.0, alpha=0.05).state.value
    'pass'
    """
    _check_alpha(alpha)
    x = observations.values
    start = _first_allowed(x.size, min_items=min_items, raters=raters, min_raters=min_raters)
    if not x.size:
        return Decision(Settled.UNDECIDED, 0, None, None)
    if method == "asymptotic":
        n_first, passed = asymptotic_first_settlements(
            x[None], threshold=threshold, alpha=alpha, alpha_pass=alpha_pass, min_items=start, optimize_at=optimize_at
        )
    elif method == "betting":
        n_first, passed = first_settlements(
            x[None],
            observations.lower[None],
            observations.upper[None],
            threshold=threshold,
            alpha=alpha,
            alpha_pass=alpha_pass,
            min_items=start,
            strategy=strategy,
            truncation=truncation,
        )
    else:
        raise ValueError(f"method must be 'betting' or 'asymptotic', got {method!r}")
    state, n = Settled.UNDECIDED, x.size
    if np.isfinite(n_first[0]):
        state, n = (Settled.PASS if passed[0] else Settled.FAIL), int(n_first[0])
    head = BoundedObservations(x[:n], observations.lower[:n], observations.upper[:n], observations.mean_range)
    if method == "asymptotic":
        cs = asymptotic_confidence_sequence(head, alpha=alpha, alpha_above=alpha_pass, optimize_at=optimize_at)
    else:
        cs = bounded_confidence_sequence(
            head, alpha=alpha, alpha_above=alpha_pass, strategy=strategy, truncation=truncation
        )
    return Decision(state, n, round(float(cs.lower[-1]), 4), round(float(cs.upper[-1]), 4))


def bounded_settle_questions(
    per_question: Mapping[str, BoundedObservations],
    *,
    threshold: float,
    alpha: float,
    min_items: int = 10,
    raters: Sequence[str] | None = None,
    min_raters: int = MIN_RATERS,
    method: Method = "betting",
    strategy: Strategy = "agrapa",
    truncation: float = TRUNCATION,
    optimize_at: int = OPTIMIZE_AT,
) -> JointDecision:
    """The decision over several questions with the corrections of
    ``sequential.settle_questions``: each question's fail side at ``alpha / n_questions``, its
    pass side at ``alpha``; fail at the first question settled below, pass once all settled above.

    Examples
    --------
    >>> high = BoundedObservations(np.full(15, 5.0), np.ones(15), np.full(15, 5.0), (1, 5))
    >>> bounded_settle_questions({"a": high, "b": high}, threshold=3.0, alpha=0.05).state.value
    'pass'
    """
    if not per_question:
        raise ValueError("the sequential gate needs at least one question")
    lengths = {v.values.size for v in per_question.values()}
    if len(lengths) != 1:
        raise ValueError("every question needs the same items, in the same order")
    share = alpha / len(per_question)
    decisions = {
        name: bounded_settle(
            obs,
            threshold=threshold,
            alpha=share,
            min_items=min_items,
            alpha_pass=alpha,
            raters=raters,
            min_raters=min_raters,
            method=method,
            strategy=strategy,
            truncation=truncation,
            optimize_at=optimize_at,
        )
        for name, obs in sorted(per_question.items())
    }
    return joint_decision(decisions, observed=lengths.pop(), alpha=alpha, share=share)


# --------------------------------------------------------------------------- observations


def _ppi_rows(
    judge_all: np.ndarray,
    judge: np.ndarray,
    human: np.ndarray,
    *,
    scale: tuple[float, float],
    sampling: Sampling,
    weight: float | None,
    min_pairs: int = 2,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Rows of prediction-powered observations: ``judge_all`` (rows, N), ``judge`` and ``human``
    (rows, T). Returns values, lower, upper, weights, each (rows, T)."""
    h_lo, h_hi = float(scale[0]), float(scale[1])
    rows, steps = human.shape
    population = judge_all.shape[-1]
    g_total = judge_all.sum(axis=-1, keepdims=True)
    g_min, g_max = judge_all.min(axis=-1, keepdims=True), judge_all.max(axis=-1, keepdims=True)
    g_var = judge_all.var(axis=-1, keepdims=True)
    if weight is None:
        # cov of pairs 1..t-1 (ddof 1), for the observation t
        t = np.arange(1, steps + 1, dtype=float)
        sg, sh, sgh = np.cumsum(judge, axis=-1), np.cumsum(human, axis=-1), np.cumsum(judge * human, axis=-1)
        with np.errstate(invalid="ignore", divide="ignore"):
            cov = (sgh - sg * sh / t) / (t - 1)
            lam = np.where(g_var > 0, cov / g_var, 0.0)
        lam = np.where(t >= min_pairs, np.clip(np.nan_to_num(lam), 0.0, 1.0), 0.0)
        lam = np.concatenate((np.zeros((rows, 1)), lam[:, :-1]), axis=-1)
    else:
        if not 0 <= weight <= 1:
            raise ValueError(f"weight must lie in [0, 1], got {weight!r}")
        lam = np.full((rows, steps), float(weight))
    if sampling == "with_replacement":
        g_ref = np.broadcast_to(g_total / population, (rows, steps))
    elif sampling == "without_replacement":
        if steps > population:
            raise ValueError("without replacement, at most N items can be drawn")
        drawn_before = np.concatenate((np.zeros((rows, 1)), np.cumsum(judge, axis=-1)[:, :-1]), axis=-1)
        g_ref = (g_total - drawn_before) / (population - np.arange(steps))
    else:
        raise ValueError(f"sampling must be 'with_replacement' or 'without_replacement', got {sampling!r}")
    z = lam * g_ref + human - lam * judge
    lo = lam * (g_ref - g_max) + h_lo
    hi = lam * (g_ref - g_min) + h_hi
    if sampling == "without_replacement":
        left = population - np.arange(steps)  # N - t + 1
        h_before = np.concatenate((np.zeros((rows, 1)), np.cumsum(human, axis=-1)[:, :-1]), axis=-1)
        z, lo, hi = ((left * a + h_before) / population for a in (z, lo, hi))
    return z, lo, hi, lam


def prediction_powered_observations(
    judge_all: Sequence[float] | np.ndarray,
    judge: Sequence[float] | np.ndarray,
    human: Sequence[float] | np.ndarray,
    *,
    scale: tuple[float, float],
    sampling: Sampling = "with_replacement",
    weight: float | None = None,
) -> PredictionPoweredObservations:
    """The PPI++ observations ``z_t = lam_t mean_N(g) + h_t - lam_t g_t`` and their predictable bounds.

    Parameters
    ----------
    judge_all : array_like
        The judge's score on every one of the run's ``N`` outputs (fixed before any human rating;
        a failed judge answer must get its stand-in before then too).
    judge, human : array_like
        For the human-rated items in the order they were observed: the judge's score and the human
        item mean (on ``scale``).
    scale : tuple of float
        The human rating scale ``(h_lo, h_hi)``.
    sampling : {"with_replacement", "without_replacement"}
        How the items were drawn from the ``N`` outputs (uniformly at random); without
        replacement the observations are recentred (module docstring) and the judge's scores of
        the rated items must be among ``judge_all``.
    weight : float, optional
        A fixed ``lam`` in ``[0, 1]`` (``0``: the human ratings alone). Default: ``lam_t`` tuned
        from items ``1 .. t-1``, clipped to ``[0, 1]``.

    Returns
    -------
    PredictionPoweredObservations
        Their mean is, under either sampling, the mean over the ``N`` outputs of the human item
        mean, whatever the judge.

    Examples
    --------
    >>> obs = prediction_powered_observations([3.0, 4.0, 5.0, 2.0], [4.0, 2.0], [4.0, 3.0], scale=(1, 5))
    >>> obs.values.tolist(), obs.weights.tolist()
    ([4.0, 3.0], [0.0, 0.0])
    """
    g_all = np.asarray(judge_all, dtype=float)
    g, h = np.asarray(judge, dtype=float), np.asarray(human, dtype=float)
    low, high = float(scale[0]), float(scale[1])
    if not high > low:
        raise ValueError(f"scale must be (low, high) with high > low, got {scale!r}")
    if g_all.ndim != 1 or not g_all.size or np.isnan(g_all).any():
        raise ValueError("judge_all needs the judge's score on every output (no missing value)")
    if g.shape != h.shape or g.ndim != 1:
        raise ValueError("judge and human must be one-dimensional and of the same length")
    if h.size and (np.isnan(h).any() or h.min() < low or h.max() > high):
        raise ValueError(f"human item means must lie on the scale [{low:g}, {high:g}]")
    if g.size and (np.isnan(g).any() or g.min() < g_all.min() or g.max() > g_all.max()):
        raise ValueError("the judge's scores of the rated items must come from judge_all")
    if sampling == "without_replacement":
        values, counts = np.unique(g_all, return_counts=True)
        drawn_values, drawn_counts = np.unique(g, return_counts=True)
        where = np.searchsorted(values, drawn_values)
        if (
            (where >= values.size).any()
            or (values[np.minimum(where, values.size - 1)] != drawn_values).any()
            or (counts[np.minimum(where, values.size - 1)] < drawn_counts).any()
        ):
            raise ValueError("without replacement, each rated item's judge score must be a distinct output's")
    z, lo, hi, lam = _ppi_rows(g_all[None], g[None], h[None], scale=(low, high), sampling=sampling, weight=weight)
    return PredictionPoweredObservations(
        values=z[0],
        lower=lo[0],
        upper=hi[0],
        mean_range=(low, high),
        weights=lam[0],
        judge_mean=float(g_all.mean()),
        population=int(g_all.size),
        sampling=sampling,
    )


def human_observations(
    human: Sequence[float] | np.ndarray,
    *,
    scale: tuple[float, float],
    population: int | None = None,
) -> BoundedObservations:
    """Human item means alone as ``BoundedObservations``: the scale as bounds, or, drawn without
    replacement from ``population`` outputs, recentred (module docstring).

    Examples
    --------
    >>> human_observations([2.0, 4.0], scale=(1, 5)).upper.tolist()
    [5.0, 5.0]
    >>> human_observations([2.0, 4.0], scale=(1, 5), population=2).values.tolist()
    [2.0, 3.0]
    """
    h = np.asarray(human, dtype=float)
    low, high = float(scale[0]), float(scale[1])
    if h.ndim != 1 or (h.size and (np.isnan(h).any() or h.min() < low or h.max() > high)):
        raise ValueError(f"human item means must be one-dimensional on the scale [{low:g}, {high:g}]")
    if population is None:
        return BoundedObservations(h, np.full(h.size, low), np.full(h.size, high), (low, high))
    if h.size > population:
        raise ValueError("without replacement, at most population items can be drawn")
    z, lo, hi, _ = _ppi_rows(
        np.zeros((1, population)),
        np.zeros((1, h.size)),
        h[None],
        scale=(low, high),
        sampling="without_replacement",
        weight=0.0,
    )
    return BoundedObservations(z[0], lo[0], hi[0], (low, high))


# --------------------------------------------------------------------------- fixed n


def ppi_weight(human: np.ndarray, judge: np.ndarray, judge_all: np.ndarray) -> np.ndarray:
    """PPI++'s tuned ``lam`` for the mean [4]_, row by row (the last axis): ``cov(h, g) / ((1 + n/N)
    var(g))``, the covariance over the ``n`` rated pairs (divided by ``n``), the variance over the
    rated and all judged scores together (divided by ``n + N - 1``), clipped to ``[0, 1]`` (the
    value ``ppi_py`` 0.2.3 computes as ``lhat``)."""
    n, population = human.shape[-1], judge_all.shape[-1]
    hc = human - human.mean(axis=-1, keepdims=True)
    gc = judge - judge.mean(axis=-1, keepdims=True)
    cov = (hc * gc).sum(axis=-1) / n
    var = np.concatenate((judge, judge_all), axis=-1).var(axis=-1, ddof=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        lam = np.where(var > 0, cov / ((1 + n / population) * var), 0.0)
    return np.clip(np.nan_to_num(lam), 0.0, 1.0)


def ppi_mean_interval(
    human: Sequence[float] | np.ndarray,
    judge: Sequence[float] | np.ndarray,
    judge_all: Sequence[float] | np.ndarray,
    *,
    alpha: float = 0.1,
    weight: float | None = None,
) -> PPIMeanInterval:
    """The fixed-``n`` PPI++ two-sided interval for the mean of the human item means.

    ``estimate = mean_N(lam g_all) + mean_n(h - lam g)``, standard error ``sqrt(var(lam g_all)/N +
    var(h - lam g)/n)`` (variances dividing by the count), interval ``estimate -/+ z_{1-alpha/2}
    se`` (a normal approximation: valid as ``n`` grows, for one look at the data). Equal to
    ``ppi_py.ppi_mean_ci(human, judge, judge_all, alpha=alpha)`` with its tuned ``lhat``. ppi_py
    treats ``judge_all`` as a sample independent of the rated items; when it is the whole run
    (the rated items among it), its term ``var(lam g_all)/N`` is a slight overstatement.

    Parameters
    ----------
    human, judge : array_like
        Human item means and the judge's scores of the same items.
    judge_all : array_like
        The judge's scores of the outputs (``ppi_py``'s ``Yhat_unlabeled``).
    alpha : float
        ``1 - alpha`` coverage.
    weight : float, optional
        A fixed ``lam`` (ppi_py's ``lam``); default the tuned one (``ppi_weight``).

    Examples
    --------
    >>> r = ppi_mean_interval([3.0, 4.0, 5.0], [3.0, 4.0, 5.0], [3.0, 4.0, 5.0, 4.0], weight=1.0)
    >>> round(r.estimate, 6), round(r.std_error ** 2, 6)
    (4.0, 0.125)
    """
    _check_alpha(alpha)
    h, g, g_all = (np.asarray(a, dtype=float) for a in (human, judge, judge_all))
    if h.ndim != 1 or h.shape != g.shape or g_all.ndim != 1 or h.size < 2 or not g_all.size:
        raise ValueError("human and judge need the same items (at least 2); judge_all at least one output")
    lam = float(ppi_weight(h, g, g_all)) if weight is None else float(weight)
    estimate = float((lam * g_all).mean() + (h - lam * g).mean())
    se = float(np.sqrt((lam * g_all).var() / g_all.size + (h - lam * g).var() / h.size))
    q = float(norm.ppf(1 - alpha / 2))
    return PPIMeanInterval(estimate, estimate - q * se, estimate + q * se, lam, se, int(h.size), int(g_all.size))
