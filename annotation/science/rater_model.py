"""An ordinal rater model: a Dawid–Skene model whose confusion matrices are discretised normals
with a bias and a noise scale per rater, and a competence with an interval (pure module).

Each rated unit (an item's question) has a latent true category ``t`` of the ordered scale, with
prevalences ``pi``. Rater ``r`` answers category ``k`` of a unit of true category ``t`` with
probability ``Phi((k + 1/2 - t - bias_r) / sigma_r) - Phi((k - 1/2 - t - bias_r) / sigma_r)``
(the end categories open to infinity): a row of Dawid and Skene's (1979) confusion matrix, but
with two parameters per rater instead of ``K (K - 1)``, which a rater with a few dozen ratings
cannot identify; it is the ordered-probit rater of Johnson (1996) with thresholds at the
half-points. The latent categories are integrated out and ``pi``, every ``bias_r`` and
``sigma_r`` are fitted by EM (the M-step for the raters by L-BFGS with the analytic gradient),
under weak priors: ``bias ~ N(0, 1)``, ``log sigma ~ N(0, 1)``, a Dirichlet(2, ..., 2) on ``pi``.

The model gives each rater's ``bias`` and ``sigma`` and the prevalences. It does not judge
who is careless: when the true categories cluster (most items 3 or 4), a rater answering 3
everywhere agrees with the latent truth on many items and EM fits them as the *most* precise rater
(issue 29: on the clustered study of ``annotation.science.rater_simulation``, seed 0, the old
posterior-accuracy competence gave the straight-liners at 3 0.71 and 0.73 against 0.25-0.56 for the
careful raters). Raters in ``exclude`` (rejected ones) are fitted but
do not count in the latent categories.

**Competence** is Pearson's r, across the rater's units, between their answer and the
*leave-one-out consensus*: the weighted mean of the other raters' answers to the same unit
(excluded raters weigh 0), clipped to [0, 1]. The weights are 1 in a first round, then each
rater's competence from the round before (``CONSENSUS_ROUNDS`` in all), so that random raters and
straight-liners stop diluting everyone's consensus. It measures how much the rater's answers follow
the items: a constant answer has no variation and scores 0 whatever its value (a straight-liner
cannot rank above any rater with a positive correlation), and so does anything that does not
depend on the item (a uniform random rater, one answering the study's mode with noise), up to the
chance correlation of their number of ratings. It does not see a constant offset: a careful rater
who answers one category too high keeps a high competence; ``bias`` reports the offset, and
``annotation.science.annotator_quality.carefulness`` combines both with the control pass rate and time per item.
Against the same consensus each rater also gets an ``offset`` (mean answer - consensus, with its
standard error) and an ``agreement``: Lin's (1989) concordance correlation, which unlike r falls
with a constant offset (relative to how much the items differ), shrunk towards the study's median
agreement with weight ``n / (n + AGREEMENT_PRIOR_PAIRS)`` on the rater's own (a constant answer
keeps 0). With fewer than ``MIN_PAIRS`` ratings that have a consensus the competence is 0 with the interval
[0, 1] (nothing is known). The interval is a percentile bootstrap of r over the rater's (answer,
consensus) pairs with the consensus held fixed (seeded ``numpy.random.Generator``): it shows how
many ratings the figure rests on, not the uncertainty of the peers' answers. ``competence_units``
restricts it to the real items (controls would let a rater who gets them right and straight-lines
the rest follow the consensus on controls alone). The old competence, the rater's mean
probability that the true category is the one they answered given the other raters' answers, was
dropped for the reason above; the parametric ``sum_t pi_t P(k = t | t)`` was rejected before it:
a straight-liner is outside the two-parameter family, so it overrates them.

References
----------
Dawid, A. P. and Skene, A. M. (1979). Maximum likelihood estimation of observer error-rates using
the EM algorithm. Journal of the Royal Statistical Society C 28(1), 20–28.
Johnson, V. E. (1996). On Bayesian analysis of multirater ordinal data: an application to
automated essay grading. Journal of the American Statistical Association 91(433), 42–51.
Efron, B. and Tibshirani, R. J. (1993). An Introduction to the Bootstrap. Chapman & Hall, ch. 13.
Lin, L. I. (1989). A concordance correlation coefficient to evaluate reproducibility. Biometrics
45(1), 255–268.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Hashable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import optimize, special
from threadpoolctl import ThreadpoolController

BIAS_PRIOR_SD = 1.0
LOG_SIGMA_PRIOR_SD = 1.0
PREVALENCE_PRIOR = 2.0  # Dirichlet concentration per category
MAX_ITERATIONS = 100
CONSENSUS_ROUNDS = 3  # equal weights, then twice weighted by the raters' competence
MIN_PAIRS = 3  # ratings with a consensus below which a competence means nothing
AGREEMENT_PRIOR_PAIRS = 10  # ratings at which a rater's own agreement and the study's median weigh the same
TOLERANCE = 1e-5  # change of the log posterior per rating that ends EM
_LOG_SQRT_2PI = 0.5 * np.log(2 * np.pi)
# The BLAS libraries loaded with numpy and scipy, found once (finding them takes milliseconds).
_THREADPOOLS = ThreadpoolController()
# The thread limit is process-wide: fits in several threads take turns, so that each restores the
# number of threads the one before it found.
_ONE_BLAS_THREAD = threading.Lock()


@dataclass(frozen=True)
class RaterEstimate:
    rater: Hashable
    n_ratings: int
    bias: float  # in categories: + = answers above the true category
    sigma: float  # noise scale, in categories
    competence: float  # Pearson's r with the leave-one-out consensus, clipped to [0, 1]
    ci_low: float | None  # percentile bootstrap interval of the competence (None: n_boot = 0)
    ci_high: float | None
    n_consensus: int = 0  # ratings with a consensus that the competence rests on (< MIN_PAIRS: unknown)
    offset: float = 0.0  # mean of answer - consensus over those ratings, in categories (+ = too high)
    offset_se: float | None = None  # its standard error (None below MIN_PAIRS ratings)
    # Lin's concordance correlation with the consensus, clipped to [0, 1], shrunk towards the
    # study's median with weight n / (n + AGREEMENT_PRIOR_PAIRS) on the rater's own (0 stays 0
    # for a constant answer)
    agreement: float = 0.0


@dataclass(frozen=True)
class RaterModelFit:
    raters: tuple[RaterEstimate, ...]
    prevalence: tuple[float, ...]  # of each category of the scale, low to high
    n_units: int
    n_ratings: int
    n_boot: int
    confidence: float
    converged: bool

    def rater(self, rater: Hashable) -> RaterEstimate:
        for estimate in self.raters:
            if estimate.rater == rater:
                return estimate
        raise KeyError(rater)


def _consensus_competence(
    unit_index: np.ndarray, rater_index: np.ndarray, answers: np.ndarray, *, n_raters: int, excluded: set[int]
) -> tuple[np.ndarray, np.ndarray]:
    """Each rating's leave-one-out consensus and each rater's competence (their correlation with
    it), the consensus weighting raters by competence for ``CONSENSUS_ROUNDS`` rounds; excluded
    raters weigh nothing."""
    weights = np.array([0.0 if r in excluded else 1.0 for r in range(n_raters)])
    for _ in range(CONSENSUS_ROUNDS):
        consensus = _leave_one_out_consensus(unit_index, rater_index, answers, weights)
        competence = np.array(
            [_correlation(answers[rater_index == r], consensus[rater_index == r]) for r in range(n_raters)]
        )
        weights = np.where([r in excluded for r in range(n_raters)], 0.0, competence)
    return consensus, competence


@dataclass(frozen=True)
class _Offset:
    offset: float
    se: float | None
    agreement: float
    n: int = 0  # pairs it rests on
    constant: bool = False  # the rater gave one answer to all of them


def _shrunk(offsets: list[_Offset], excluded: set[int]) -> list[_Offset]:
    """Each agreement moved towards the median agreement of the counted raters, with weight
    ``n / (n + AGREEMENT_PRIOR_PAIRS)`` on the rater's own (empirical-Bayes-style shrinkage: on
    a dozen ratings Lin's coefficient swings widely, and a careful rater whose few items happen to
    disagree would otherwise score near 0). A constant answer keeps 0: its 0 is no chance result."""
    known = [o.agreement for r, o in enumerate(offsets) if r not in excluded and o.se is not None and not o.constant]
    if not known:
        return offsets
    typical = float(np.median(known))
    shrunk = []
    for o in offsets:
        if o.se is not None and not o.constant:
            weight = o.n / (o.n + AGREEMENT_PRIOR_PAIRS)
            o = _Offset(o.offset, o.se, weight * o.agreement + (1 - weight) * typical, o.n, o.constant)
        shrunk.append(o)
    return shrunk


def _offset(answers: np.ndarray, consensus: np.ndarray) -> _Offset:
    """One rater's mean signed difference from the consensus with its standard error, and Lin's
    (1989) concordance correlation ``2 cov / (var_x + var_c + (mean_x - mean_c)**2)``: 1 only
    for answers equal to the consensus, lowered by noise, by a constant offset relative to how
    much the items differ, and 0 for an answer that does not follow the items."""
    valid = ~np.isnan(consensus)
    x, c = answers[valid].astype(float), consensus[valid]
    if x.size < MIN_PAIRS:
        return _Offset(0.0, None, 0.0)
    difference = x - c
    dx, dc = x - x.mean(), c - c.mean()
    spread = float((dx * dx).mean() + (dc * dc).mean() + difference.mean() ** 2)
    agreement = 2 * float((dx * dc).mean()) / spread if spread > 1e-12 else 0.0
    return _Offset(
        offset=float(difference.mean()),
        se=float(difference.std(ddof=1) / np.sqrt(x.size)),
        agreement=float(np.clip(agreement, 0.0, 1.0)),
        n=int(x.size),
        constant=bool(np.all(x == x[0])),
    )


def _competence_interval(
    answers: np.ndarray, consensus: np.ndarray, *, rng: np.random.Generator, n_boot: int, confidence: float
) -> tuple[float, float]:
    """Percentile bootstrap interval of one rater's competence (pairs resampled); (0, 1) when
    fewer than ``MIN_PAIRS`` of their ratings have a consensus."""
    valid = ~np.isnan(consensus)
    x, c = answers[valid].astype(float), consensus[valid]
    if x.size < MIN_PAIRS:
        return (0.0, 1.0)
    tail = (1.0 - confidence) / 2.0
    draws = rng.integers(0, x.size, size=(n_boot, x.size))
    resampled = _rowwise_correlation(x[draws], c[draws])
    return (float(np.quantile(resampled, tail)), float(np.quantile(resampled, 1 - tail)))


def _competences(
    unit_index: np.ndarray,
    rater_index: np.ndarray,
    answers: np.ndarray,
    *,
    n_raters: int,
    excluded: set[int],
    rng: np.random.Generator,
    n_boot: int,
    confidence: float,
) -> tuple[np.ndarray, list[tuple[float | None, float | None]], np.ndarray, list[_Offset]]:
    """Each rater's competence over the ratings given, its bootstrap interval (``(None, None)``
    without bootstrap), how many of their ratings had a consensus to compare with, and their
    offset from it."""
    consensus, competence = _consensus_competence(
        unit_index, rater_index, answers, n_raters=n_raters, excluded=excluded
    )
    n_consensus = np.bincount(rater_index[~np.isnan(consensus)], minlength=n_raters)
    rows = [rater_index == r for r in range(n_raters)]
    intervals: list[tuple[float | None, float | None]] = [(None, None)] * n_raters
    if n_boot:
        intervals = [
            _competence_interval(answers[m], consensus[m], rng=rng, n_boot=n_boot, confidence=confidence) for m in rows
        ]
    offsets = _shrunk([_offset(answers[m], consensus[m]) for m in rows], excluded)
    return competence, intervals, n_consensus, offsets


def _estimate(
    rater: Hashable,
    n_ratings: int,
    bias_log_sigma: np.ndarray,
    competence: float,
    interval: tuple[float | None, float | None],
    n_consensus: int,
    offset: _Offset,
) -> RaterEstimate:
    return RaterEstimate(
        rater=rater,
        n_ratings=int(n_ratings),
        bias=float(bias_log_sigma[0]),
        sigma=float(np.exp(bias_log_sigma[1])),
        competence=float(competence),
        ci_low=interval[0],
        ci_high=interval[1],
        n_consensus=int(n_consensus),
        offset=offset.offset,
        offset_se=offset.se,
        agreement=offset.agreement,
    )


def fit_rater_model(
    ratings: Sequence[tuple[Hashable, Hashable, int]],
    *,
    scale: tuple[int, int],
    rng: np.random.Generator,
    n_boot: int = 200,
    confidence: float = 0.95,
    min_raters_per_unit: int = 2,
    exclude: Collection[Hashable] = (),
    competence_units: Collection[Hashable] | None = None,
) -> RaterModelFit:
    """Fit the ordinal rater model to ``(unit, rater, value)`` triples.

    Parameters
    ----------
    ratings
        One triple per rating; a unit is whatever each rater rated once (an item's question).
    scale
        ``(low, high)``: the categories are the integers from ``low`` to ``high``.
    rng
        Draws the bootstrap resamples.
    n_boot
        Bootstrap replicates of each rater's mean; 0 gives no intervals.
    confidence
        Coverage of the percentile intervals.
    min_raters_per_unit
        Units with fewer raters are left out: a lone rating says nothing about its rater.
    exclude
        Raters (rejected ones) who get estimates but move nothing: they count neither in the
        latent categories of the model nor in anyone's consensus.
    competence_units
        The units the competence is measured on (None: all). Pass the real items: controls have
        obvious answers, so a rater who gets them right and straight-lines the rest would
        otherwise follow the consensus on the controls alone.

    Returns
    -------
    RaterModelFit
        One ``RaterEstimate`` per rater with a rating of a kept unit, in order of first appearance.
    """
    unit_ids, unit_index, rater_ids, rater_index, answers = _validated(
        ratings, scale=scale, min_raters=min_raters_per_unit, n_boot=n_boot, confidence=confidence
    )
    n_raters, n_categories = len(rater_ids), scale[1] - scale[0] + 1
    if not n_raters:
        return RaterModelFit(
            raters=(), prevalence=(), n_units=0, n_ratings=0, n_boot=n_boot, confidence=confidence, converged=True
        )
    n_units = int(unit_index.max()) + 1
    excluded = {n for n, r in enumerate(rater_ids) if r in exclude}
    counted = np.array([r not in excluded for r in rater_index], dtype=bool)
    # One BLAS thread: L-BFGS-B's small LAPACK calls (scipy >= 1.15) wait on OpenBLAS's thread pool
    # for milliseconds each, most of the fit's time on a busy server (scipy issue #22438).
    with _ONE_BLAS_THREAD, _THREADPOOLS.limit(limits=1, user_api="blas"):
        params, prevalence, converged = _Model(
            unit_index, rater_index, answers, n_units, n_raters, n_categories, counted
        ).fit()
    counts = np.bincount(rater_index, minlength=n_raters)
    wanted = None if competence_units is None else set(competence_units)
    scored = np.array([wanted is None or unit_ids[u] in wanted for u in unit_index], dtype=bool)
    competence, intervals, n_consensus, offsets = _competences(
        unit_index[scored],
        rater_index[scored],
        answers[scored],
        n_raters=n_raters,
        excluded=excluded,
        rng=rng,
        n_boot=n_boot,
        confidence=confidence,
    )
    estimates = tuple(
        _estimate(
            rater_ids[r], counts[r], params[[r, n_raters + r]], competence[r], intervals[r], n_consensus[r], offsets[r]
        )
        for r in range(n_raters)
    )
    return RaterModelFit(
        raters=estimates,
        prevalence=tuple(float(p) for p in prevalence),
        n_units=n_units,
        n_ratings=int(answers.size),
        n_boot=n_boot,
        confidence=confidence,
        converged=converged,
    )


def confusion_matrix(bias: float, sigma: float, n_categories: int) -> np.ndarray:
    """``[t, k]`` = probability of answering category ``k`` (0-based) when the truth is ``t``."""
    k = np.arange(n_categories)
    truth = np.arange(n_categories)[:, None]
    upper = np.where(k == n_categories - 1, np.inf, k + 0.5)[None, :] - truth - bias
    lower = np.where(k == 0, -np.inf, k - 0.5)[None, :] - truth - bias
    return special.ndtr(upper / sigma) - special.ndtr(lower / sigma)


class _Model:
    """EM over the latent categories for one data set (answers 0-based)."""

    def __init__(self, unit, rater, answers, n_units, n_raters, n_categories, counted):
        self.unit, self.rater, self.answers, self.counted = unit, rater, answers, counted
        self.n_units, self.n_raters, self.n_categories = n_units, n_raters, n_categories
        # A rating's terms depend only on its (rater, answer) and the candidate truth: they are
        # computed once per rater, answer and truth (n_raters x K x K values) and each rating reads
        # its row ``cell`` of that table, instead of computing them again for every rating.
        categories = np.arange(n_categories)
        truth = categories[None, :]
        # Bounds of each answer's category minus each candidate truth: shape (K answers, K truths).
        self.upper = np.where(categories == n_categories - 1, np.inf, categories + 0.5)[:, None] - truth
        self.lower = np.where(categories == 0, -np.inf, categories - 0.5)[:, None] - truth
        self.cell = rater * n_categories + answers

    def fit(self) -> tuple[np.ndarray, np.ndarray, bool]:
        params = np.concatenate([np.zeros(self.n_raters), np.full(self.n_raters, np.log(0.7))])
        votes = np.zeros((self.n_units, self.n_categories))
        np.add.at(votes, (self.unit, self.answers), 1.0)  # EM starts from the smoothed vote shares
        posterior = (votes + 0.1) / (votes + 0.1).sum(axis=1, keepdims=True)
        previous = -np.inf
        for _ in range(MAX_ITERATIONS):
            counts = posterior.sum(axis=0) + PREVALENCE_PRIOR - 1.0
            prevalence = counts / counts.sum()
            result = optimize.minimize(
                self._expected_loss,
                params,
                args=(posterior[self.unit],),
                jac=True,
                method="L-BFGS-B",
                options={"maxiter": 10},
            )
            params = result.x
            posterior, log_evidence = self._posterior(params, prevalence)
            objective = log_evidence - self._prior_loss(params) + (PREVALENCE_PRIOR - 1.0) * np.log(prevalence).sum()
            if abs(objective - previous) < TOLERANCE * self.answers.size:
                return params, prevalence, True
            previous = objective
        return params, prevalence, False

    def _log_likelihood(self, params: np.ndarray):
        """log P(answer | truth) per rater, answer and truth (rows: ``rater * K + answer``), with
        the standardised bounds and each rater's sigma."""
        n_r, k = self.n_raters, self.n_categories
        bias, sigma = params[:n_r][:, None, None], np.exp(params[n_r:])
        a = ((self.upper[None] - bias) / sigma[:, None, None]).reshape(n_r * k, k)
        b = ((self.lower[None] - bias) / sigma[:, None, None]).reshape(n_r * k, k)
        return _log_interval_probability(b, a), a, b, sigma

    def _posterior(self, params, prevalence) -> tuple[np.ndarray, float]:
        log_p = self._log_likelihood(params)[0][self.cell]
        per_unit = np.zeros((self.n_units, self.n_categories))
        np.add.at(per_unit, self.unit, log_p * self.counted[:, None])  # excluded raters move nothing
        log_joint = np.log(prevalence)[None, :] + per_unit
        log_evidence = special.logsumexp(log_joint, axis=1, keepdims=True)
        return np.exp(log_joint - log_evidence), float(log_evidence.sum())

    def _prior_loss(self, params: np.ndarray) -> float:
        bias, log_sigma = params[: self.n_raters], params[self.n_raters :]
        return 0.5 * float(np.sum((bias / BIAS_PRIOR_SD) ** 2) + np.sum((log_sigma / LOG_SIGMA_PRIOR_SD) ** 2))

    def _expected_loss(self, params: np.ndarray, weights: np.ndarray) -> tuple[float, np.ndarray]:
        """The M-step's objective, -E[log P(answers | truth)] + priors, and its gradient."""
        table, a, b, sigma = self._log_likelihood(params)
        phi_a, phi_b = _phi_ratio(a, table), _phi_ratio(b, table)
        log_p = table[self.cell]
        d_bias = weights * (phi_b - phi_a)[self.cell] / sigma[self.rater][:, None]
        d_log_sigma = weights * (_times(b, phi_b) - _times(a, phi_a))[self.cell]
        n_r = self.n_raters
        bias, log_sigma = params[:n_r], params[n_r:]
        value = -float(np.sum(weights * log_p)) + self._prior_loss(params)
        grad = np.concatenate(
            [
                -np.bincount(self.rater, weights=d_bias.sum(axis=1), minlength=n_r) + bias / BIAS_PRIOR_SD**2,
                -np.bincount(self.rater, weights=d_log_sigma.sum(axis=1), minlength=n_r)
                + log_sigma / LOG_SIGMA_PRIOR_SD**2,
            ]
        )
        return value, grad


def _leave_one_out_consensus(unit, rater, answers, weights) -> np.ndarray:
    """Per rating: the weighted mean of the *other* raters' answers to its unit (NaN where no
    other rater has weight)."""
    w = weights[rater]
    total = np.bincount(unit, weights=w * answers)
    mass = np.bincount(unit, weights=w)
    others = mass[unit] - w
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(others > 1e-12, (total[unit] - w * answers) / others, np.nan)


def _correlation(x: np.ndarray, consensus: np.ndarray) -> float:
    """Pearson's r of a rater's answers with their consensus, clipped at 0; 0 without at least
    ``MIN_PAIRS`` pairs or without variation on either side (a constant answer carries no
    information about the items)."""
    valid = ~np.isnan(consensus)
    if valid.sum() < MIN_PAIRS:
        return 0.0
    return float(_rowwise_correlation(x[valid][None, :].astype(float), consensus[valid][None, :])[0])


def _rowwise_correlation(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pearson's r of each row pair, clipped to [0, 1]; 0 for a constant row."""
    dx = x - x.mean(axis=1, keepdims=True)
    dy = y - y.mean(axis=1, keepdims=True)
    sxx, syy = (dx * dx).sum(axis=1), (dy * dy).sum(axis=1)
    denominator = np.sqrt(sxx * syy)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.where(denominator > 1e-12, (dx * dy).sum(axis=1) / denominator, 0.0)
    return np.clip(r, 0.0, 1.0)


def _log_interval_probability(low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """log(Phi(high) - Phi(low)) for low < high, computed in the tail where it is accurate."""
    flip = low > 0  # both in the upper tail: use the mirrored interval (-high, -low)
    lo, hi = np.where(flip, -high, low), np.where(flip, -low, high)
    log_hi, log_lo = special.log_ndtr(hi), special.log_ndtr(lo)
    gap = np.minimum(log_lo - log_hi, -1e-300)  # < 0: the interval is never empty
    return log_hi + np.log(-np.expm1(gap))


def _phi_ratio(x: np.ndarray, log_p: np.ndarray) -> np.ndarray:
    """phi(x) / P, 0 where x is infinite."""
    finite = np.isfinite(x)
    safe = np.where(finite, x, 0.0)
    return np.where(finite, np.exp(np.minimum(-0.5 * safe**2 - _LOG_SQRT_2PI - log_p, 700.0)), 0.0)


def _times(x: np.ndarray, ratio: np.ndarray) -> np.ndarray:
    """x * ratio, 0 where x is infinite (x phi(x) -> 0)."""
    finite = np.isfinite(x)
    return np.where(finite, np.where(finite, x, 0.0) * ratio, 0.0)


def _validated(ratings, *, scale: tuple[int, int], min_raters: int, n_boot: int, confidence: float):
    low, high = scale
    if not (isinstance(low, int) and isinstance(high, int) and low < high):
        raise ValueError(f"scale must be (low, high) integers with low < high, got {scale!r}")
    if n_boot < 0 or not 0 < confidence < 1:
        raise ValueError(f"n_boot must be >= 0 and confidence in (0, 1), got {n_boot} and {confidence}")
    rows: dict[tuple[Hashable, Hashable], int] = {}
    for unit, rater, value in ratings:
        if (unit, rater) in rows:
            raise ValueError(f"rater {rater!r} rated unit {unit!r} twice: keep one rating per rater and unit")
        if value != int(value) or not low <= value <= high:
            raise ValueError(f"rating {value!r} of unit {unit!r} by {rater!r} is not a category of {low}-{high}")
        rows[(unit, rater)] = int(value) - low
    per_unit: dict[Hashable, int] = {}
    for unit, _ in rows:
        per_unit[unit] = per_unit.get(unit, 0) + 1
    kept = [(unit, rater, value) for (unit, rater), value in rows.items() if per_unit[unit] >= min_raters]
    unit_codes = {u: n for n, u in enumerate(dict.fromkeys(row[0] for row in kept))}
    rater_ids = list(dict.fromkeys(row[1] for row in kept))
    rater_codes = {r: n for n, r in enumerate(rater_ids)}
    return (
        list(unit_codes),
        np.array([unit_codes[row[0]] for row in kept], dtype=int),
        rater_ids,
        np.array([rater_codes[row[1]] for row in kept], dtype=int),
        np.array([row[2] for row in kept], dtype=int),
    )
