"""Adaptive stopping of a study: a sequential gate that stays valid under optional stopping (pure).

A study with ``design.adaptive`` looks at its ratings after every sync and asks, for each
transformation and question, whether the mean rating is already known to lie above or below the
acceptance threshold. The answer comes from a *confidence sequence* (CS): a sequence of intervals
``C_1, C_2, ...`` that covers the true mean at every ``n`` simultaneously with probability at least
``1 - alpha``, so the study may look after each item and stop whenever it likes without inflating
its error rate (a fixed-``n`` confidence interval, checked repeatedly, would not keep ``alpha``).

Method
------
The hedged-capital confidence sequence of Waudby-Smith and Ramdas [1]_ (their Theorem 3) for the
mean ``m`` of observations in ``[0, 1]``. For every candidate mean ``m`` two gamblers bet on the
observations, one that the mean is above ``m`` and one that it is below::

    K+_t(m) = prod_{i<=t} (1 + l+_i(m) (x_i - m)),    K-_t(m) = prod_{i<=t} (1 - l-_i(m) (x_i - m))

with predictable bets (they use only ``x_1 .. x_{i-1}``): the predictable plug-in of [1]_ (eq. 26)
``l_i = sqrt(2 log(2/alpha) / (s2_{i-1} i log(1 + i)))``, ``s2`` a regularised running variance,
truncated to ``c/m`` (``K+``) and ``c/(1 - m)`` (``K-``) with ``c = 1/2`` so that no bet can lose
more than half the capital. Under the mean ``m`` each capital is a nonnegative martingale (a
supermartingale for every mean on the gambler's losing side), so by Ville's inequality
``P(sup_t K+_t(m) >= 2/alpha) <= alpha/2``, and likewise for ``K-``. ``m`` leaves the CS once either
capital, at any time so far, reached ``2/alpha`` (the hedged process ``max(K+/2, K-/2) >= 1/alpha``
of [1]_, i.e. ``alpha/2`` for each side; the running intersection keeps it valid).

The decision at the threshold ``tau`` reads the two capitals at ``m = tau`` only: *pass* once
``K+(tau)`` reached ``2/alpha`` (the mean is settled above ``tau``), *fail* once ``K-(tau)`` did (settled
below). Because a bet on "above ``tau``" loses in expectation under every mean ``<= tau``, the
chance of ever wrongly passing is at most ``alpha/2`` whatever the true mean below ``tau`` (the
null is composite, the test stays valid), and the same holds for wrongly failing: at a true mean
exactly at the threshold the rule settles either way with probability at most ``alpha`` in all.

Several questions: a transformation passes once every question is settled above, and fails as
soon as one is settled below. The two sides need different corrections:

- *fail* ("some question is below") is a union of questions: a wrong fail needs any one question
  whose mean is at or above ``tau`` to settle below, so each question's "below" gambler plays at
  ``alpha / (2 n_questions)`` (Bonferroni: at most ``alpha/2`` in all);
- *pass* ("every question is above") is an intersection: a wrong pass needs *every* question to
  settle above, including one whose mean is below ``tau``, which happens with probability at most
  that question's own level. So each question's "above" gambler plays at ``alpha / 2``, with no
  correction (the intersection-union principle, Berger [3]_).

Whatever the true means, the chance of a wrong pass and the chance of a wrong fail each stay at
most ``alpha/2``, as with a single question. The reported interval of a question is the hull of the
candidate means neither of its gamblers has rejected at their levels (lower end at ``alpha/2``,
upper end at ``alpha/(2 n_questions)``).

No decision is taken before ``min_items`` observations: a few early items can look decisive by
chance (the bound still holds, but a degenerate early stop, say on the first ten identical items,
would tell a researcher little).

Unit of observation
-------------------
Ratings of one item by different raters are correlated (they share the item), so single ratings
are not independent observations. The unit is the *item*: the mean of its counted raters'
ratings (the first ``raters_per_item`` raters who answered every question), rescaled to
``[0, 1]`` by the question's scale. Only items with the full ``raters_per_item`` counted raters
enter, so every observation is the same kind of quantity; with items drawn at random from the
transformation's outputs and queues in random order, the sequence is a sequence of i.i.d. draws
whose mean is the gate's mean (every item weighted equally).

With ``design.adaptive_gate_raters`` (say 2 of 3 raters per item, pull assignment) the
observation is the mean of the item's first *two* counted raters, and the third is asked only
where those two disagree (``assignment.raters_needed``: more than a quarter of the scale apart on a
question). The observation never depends on whether the third was asked: the first two raters are
fixed before anyone rated the item, so their mean is still an unbiased draw of the gate's mean,
item after item, and the martingale argument above is unchanged (the rule only sees a noisier
observation: item spread plus rater noise / 2 instead of / 3). The mean of *all* raters asked
would not do: the number asked then depends on the ratings (a stopping rule inside the item), and
such a mean is biased on a skewed item (``test_sequential`` enumerates one exactly). What the
third rater gives is kept out of the sequential observations: it goes to the contested item's
record, the rater model and agreement (AC2 needs 2 raters per item, which every item has;
controls are per rater and unchanged), and to the end-of-study gate's means if the rule never
settles. A rejected rater is again the exception: the item's first raters are then whoever
counts first, possibly a third rater asked because of the rejected one's disagreement. The
complete study's decision (every item with all its raters) and this study's can then
differ near the threshold even when nothing settled early; ``benchmarks/adaptive_gate.py`` counts
those as differing decisions.

Order of observation
--------------------
The guarantee of [1]_ (Theorem 3, through Ville's inequality [2]_) is for *one* sequence
``x_1, x_2, ...`` seen in a fixed order, each bet depending only on the observations before it,
and for any stopping time of that sequence. The gate therefore sees items in the order they
*first* completed (``observations.fixed_sequence``): the order is stored at each check and only extended, never
rebuilt; an item never moves and none is inserted before one already observed. Rebuilding the
order from submission times at every check (as before issue 29) could insert an item in the past
(ratings synced late, a rater whose ratings start counting when their control check passes) or
remove one, so successive checks saw different sequences, which the guarantee does not cover. The
order in which items complete must not depend on their ratings (annotators rate at their own pace,
items arrive in random order); a rater rejected after their items entered leaves the item in its
place with its remaining raters, and the sequence stops before it until a replacement completes
it (the one case where an observed value changes: the replacement's rating replaces the rejected
one's, which [1]_ does not cover either, and which only a rejection causes).

References
----------
.. [1] I. Waudby-Smith and A. Ramdas, "Estimating means of bounded random variables by betting",
   Journal of the Royal Statistical Society Series B, 86(1):1-27, 2024 (read paper 2023).
   doi:10.1093/jrsssb/qkad009
.. [2] J. Ville, "Etude critique de la notion de collectif", Gauthier-Villars, 1939.
.. [3] R. L. Berger, "Multiparameter hypothesis testing and acceptance sampling", Technometrics,
   24(4):295-300, 1982. doi:10.1080/00401706.1982.10487790
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np

TRUNCATION = 0.5  # c in [1]: a bet never risks more than this share of the capital
GRID_POINTS = 1001  # candidate means for the reported interval (the decision needs none)


class Settled(StrEnum):
    UNDECIDED = "undecided"
    PASS = "pass"
    FAIL = "fail"


@dataclass(frozen=True)
class Decision:
    """The sequential decision on one mean after ``n`` observations (when settled: the
    observation at which it settled), with the confidence sequence's interval then, on the
    rating scale (None before any observation)."""

    state: Settled
    n: int
    lower: float | None
    upper: float | None

    def to_dict(self) -> dict:
        return {"state": self.state.value, "n": self.n, "lower": self.lower, "upper": self.upper}


@dataclass(frozen=True)
class JointDecision:
    """The decision of a transformation over all its questions (see ``settle_questions``)."""

    state: Settled
    n: int  # items at which it settled, or items observed so far
    observed: int  # items with the full number of counted raters so far
    alpha: float
    alpha_per_question: float  # each question's level on the fail side (its "below" gambler)
    questions: dict[str, Decision] = field(default_factory=dict)
    alpha_pass_per_question: float | None = None  # on the pass side (None: alpha_per_question)

    def to_dict(self) -> dict:
        return {
            "state": self.state.value,
            "n": self.n,
            "observed": self.observed,
            "alpha": self.alpha,
            "alpha_per_question": self.alpha_per_question,
            "alpha_pass_per_question": self.alpha_pass_per_question or self.alpha_per_question,
            "questions": {name: d.to_dict() for name, d in self.questions.items()},
        }

    def summary(self) -> str:
        """One line for pages and commands, e.g. ``settled: pass at 24 items (quality [3.12, 4.40])``."""
        intervals = ", ".join(
            f"{name} [{d.lower:.2f}, {d.upper:.2f}]" if d.lower is not None else f"{name} no items"
            for name, d in self.questions.items()
        )
        if self.state is Settled.UNDECIDED:
            return f"not settled yet ({self.observed} items, interval {intervals})"
        return f"settled: {self.state.value} at {self.n} items (interval {intervals})"


def _validate(x: np.ndarray, *, alpha: float, scale: tuple[float, float]) -> tuple[float, float]:
    low, high = float(scale[0]), float(scale[1])
    if not high > low:
        raise ValueError(f"scale must be (low, high) with high > low, got {scale!r}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
    if x.ndim != 1:
        raise ValueError("observations must be one-dimensional")
    if x.size and (np.isnan(x).any() or x.min() < low or x.max() > high):
        raise ValueError(f"observations must lie on the scale [{low:g}, {high:g}]")
    return low, high


def _bets(x: np.ndarray, alpha: float) -> np.ndarray:
    """The predictable plug-in bet sizes ``l_1 .. l_n`` of [1] (each uses only earlier data)."""
    t = np.arange(1, x.shape[-1] + 1, dtype=float)
    mean = (0.5 + np.cumsum(x, axis=-1)) / (t + 1)
    var = (0.25 + np.cumsum((x - mean) ** 2, axis=-1)) / (t + 1)
    previous = np.concatenate((np.full(x.shape[:-1] + (1,), 0.25), var[..., :-1]), axis=-1)
    return np.sqrt(2 * np.log(2 / alpha) / (previous * t * np.log1p(t)))


def capital(x: Sequence[float] | np.ndarray, m: float | np.ndarray, *, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Log-capital of the two gamblers against the candidate mean(s) ``m`` after each observation.

    ``x`` holds observations in ``[0, 1]``; returns ``(log K+, log K-)``, each of shape
    ``(len(x),) + shape(m)``, with the running maximum already taken (once reached, a level stays
    reached: the running intersection of the CS).
    """
    x = np.asarray(x, dtype=float)
    m = np.asarray(m, dtype=float)
    lam = _bets(x, alpha).reshape((-1,) + (1,) * m.ndim)
    with np.errstate(divide="ignore"):
        up = np.minimum(lam, TRUNCATION / m)
        down = np.minimum(lam, TRUNCATION / (1 - m))
    diff = x.reshape((-1,) + (1,) * m.ndim) - m
    log_up = np.maximum.accumulate(np.cumsum(np.log1p(up * diff), axis=0), axis=0)
    log_down = np.maximum.accumulate(np.cumsum(np.log1p(-down * diff), axis=0), axis=0)
    return log_up, log_down


def confidence_sequence(
    observations: Sequence[float] | np.ndarray,
    *,
    alpha: float,
    scale: tuple[float, float],
    alpha_above: float | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The running ``1 - alpha`` confidence sequence for the mean: lower and upper bounds after
    each observation, on the rating scale (the hull of the candidate means on a grid of
    ``GRID_POINTS`` that no gambler has rejected so far). With ``alpha_above`` the "above" gamblers
    (who set the lower end) play at that level instead (``alpha_above/2`` for that side).

    Examples
    --------
    >>> lower, upper = confidence_sequence([4, 5, 4, 4, 5] * 4, alpha=0.05, scale=(1, 5))
    >>> bool(lower[-1] > 3.0 and upper[-1] <= 5.0)
    True
    """
    x = np.asarray(observations, dtype=float)
    low, high = _validate(x, alpha=alpha, scale=scale)
    if not x.size:
        return np.empty(0), np.empty(0)
    grid = np.linspace(0.0, 1.0, GRID_POINTS)
    log_up, log_down = capital((x - low) / (high - low), grid, alpha=alpha)
    level = np.log(2 / alpha)
    level_up = np.log(2 / (alpha if alpha_above is None else alpha_above))
    kept = (log_up < level_up) & (log_down < level)
    # An empty set can only happen when the data contradict every mean (probability <= alpha):
    # report the running mean as a degenerate interval then.
    lower = np.where(kept.any(axis=1), grid[np.argmax(kept, axis=1)], np.nan)
    upper = np.where(kept.any(axis=1), grid[GRID_POINTS - 1 - np.argmax(kept[:, ::-1], axis=1)], np.nan)
    running = np.cumsum(x) / np.arange(1, x.size + 1)
    scaled = (running - low) / (high - low)
    lower, upper = np.where(np.isnan(lower), scaled, lower), np.where(np.isnan(upper), scaled, upper)
    return low + lower * (high - low), low + upper * (high - low)


def settle(
    observations: Sequence[float] | np.ndarray,
    *,
    threshold: float,
    alpha: float,
    scale: tuple[float, float],
    min_items: int = 10,
    alpha_pass: float | None = None,
) -> Decision:
    """Whether the mean of ``observations`` (per-item means on the rating ``scale``, in the order
    the items completed) is settled at or above ``threshold`` (pass), below it (fail), or not yet.

    The first time at or after ``min_items`` observations that a gambler's capital against
    ``threshold`` has reached ``2/alpha`` settles it; a wrong pass (true mean below the threshold)
    or a wrong fail (mean at or above it) each happens with probability at most ``alpha/2``, however
    often one looks. ``n`` is the observation at which it settled (or the number seen). With
    ``alpha_pass`` the pass side plays at that level instead (a wrong pass at most ``alpha_pass/2``);
    the bet sizes stay those of ``alpha``.

    Examples
    --------
    >>> settle([5.0] * 12, threshold=3.0, alpha=0.05, scale=(1, 5)).state.value
    'pass'
    >>> settle([5.0] * 9, threshold=3.0, alpha=0.05, scale=(1, 5)).state.value
    'undecided'
    """
    x = np.asarray(observations, dtype=float)
    low, high = _validate(x, alpha=alpha, scale=scale)
    if min_items < 1:
        raise ValueError(f"min_items must be at least 1, got {min_items!r}")
    if not x.size:
        return Decision(Settled.UNDECIDED, 0, None, None)
    tau = float(np.clip((threshold - low) / (high - low), 0.0, 1.0))
    log_up, log_down = capital((x - low) / (high - low), tau, alpha=alpha)
    level = np.log(2 / alpha)
    level_up = np.log(2 / (alpha if alpha_pass is None else alpha_pass))
    start = min_items - 1
    state, n = Settled.UNDECIDED, x.size
    if x.size >= min_items:
        passed = np.flatnonzero(log_up[start:] >= level_up)
        failed = np.flatnonzero(log_down[start:] >= level)
        first_pass = passed[0] if passed.size else np.inf
        first_fail = failed[0] if failed.size else np.inf
        if first_pass < first_fail:
            state, n = Settled.PASS, int(start + first_pass + 1)
        elif first_fail < first_pass:
            state, n = Settled.FAIL, int(start + first_fail + 1)
    lower, upper = confidence_sequence(x[:n], alpha=alpha, scale=(low, high), alpha_above=alpha_pass)
    return Decision(state, n, round(float(lower[-1]), 4), round(float(upper[-1]), 4))


def settle_questions(
    per_question: Mapping[str, Sequence[float]],
    *,
    threshold: float,
    alpha: float,
    scales: Mapping[str, tuple[float, float]],
    min_items: int = 10,
) -> JointDecision:
    """The decision of a transformation: each question's ``settle``, its fail side at
    ``alpha / n_questions`` and its pass side at ``alpha`` (see the module docstring); it fails at
    the first question settled below, passes once every question is settled above.

    ``per_question`` maps each question to its per-item means, all in the same item order.
    """
    if not per_question:
        raise ValueError("the sequential gate needs at least one question")
    lengths = {len(v) for v in per_question.values()}
    if len(lengths) != 1:
        raise ValueError("every question needs the same items, in the same order")
    share = alpha / len(per_question)
    decisions = {
        name: settle(
            values, threshold=threshold, alpha=share, scale=scales[name], min_items=min_items, alpha_pass=alpha
        )
        for name, values in sorted(per_question.items())
    }
    return joint_decision(decisions, observed=lengths.pop(), alpha=alpha, share=share)


def joint_decision(decisions: dict[str, Decision], *, observed: int, alpha: float, share: float) -> JointDecision:
    """The transformation's decision from its questions' (each fail side played at ``share``, each
    pass side at ``alpha``): fail as soon as one question fails, pass once every question passed."""
    fails = [d.n for d in decisions.values() if d.state is Settled.FAIL]
    if fails:
        state, n = Settled.FAIL, min(fails)
    elif all(d.state is Settled.PASS for d in decisions.values()):
        state, n = Settled.PASS, max(d.n for d in decisions.values())
    else:
        state, n = Settled.UNDECIDED, observed
    return JointDecision(state, n, observed, alpha, share, decisions, alpha_pass_per_question=alpha)


def first_events(x: np.ndarray, tau: float, *, alpha: float, alpha_pass: float, min_items: int) -> tuple:
    """For each row of ``x`` (sequences on ``[0, 1]``): the item (1-based) at which ``settle``
    would first settle it, and whether that is a pass (``inf`` where it never settles). The rule
    vectorised over many sequences, for ``saving_forecast``'s simulated continuations."""
    lam = _bets(x, alpha)
    with np.errstate(divide="ignore"):
        up = np.minimum(lam, TRUNCATION / tau)
        down = np.minimum(lam, TRUNCATION / (1 - tau))
    log_up = np.cumsum(np.log1p(up * (x - tau)), axis=-1)
    log_down = np.cumsum(np.log1p(-down * (x - tau)), axis=-1)
    n = np.arange(1, x.shape[-1] + 1)
    passed = (log_up >= np.log(2 / alpha_pass)) & (n >= min_items)
    failed = (log_down >= np.log(2 / alpha)) & (n >= min_items)
    first_pass = np.where(passed.any(axis=-1), passed.argmax(axis=-1) + 1, np.inf)
    first_fail = np.where(failed.any(axis=-1), failed.argmax(axis=-1) + 1, np.inf)
    return np.minimum(first_pass, first_fail), first_pass < first_fail
