"""The sequential gate of one transformation as the design declares it (pure).

``annotation.science.observations.fixed_sequence`` gives the gate's observations in their fixed
order (each item's mean over its first ``design.gate_raters`` counted raters, and who they were).
``gate_outcome`` turns them into the decision the design asks for:

- **the confidence sequence** (``design.adaptive_sequence``): ``"plugin"``, the betting sequence of
  ``annotation.science.sequential`` (unchanged since issue 19); ``"agrapa"``, the betting sequence
  with the variance-adaptive aGRAPA bet; ``"asymptotic"``, the asymptotic confidence sequence, valid
  as the number of items grows (``annotation.science.variance_sequences`` states both);
- **the estimator** (``design.gate_estimator``): ``"human"``, the human item means alone; or
  ``"prediction_powered"``, PPI++: the LLM judges' score of every output of the run (``N`` of them,
  fixed before any human rating is used) corrected item by item by the human ratings, so that the
  estimate stays unbiased for the human mean whatever the judge's quality or bias
  (``variance_sequences.prediction_powered_observations``, drawn without replacement from the
  ``N`` outputs);
- **who decides**: no decision before ``design.adaptive_min_items`` observations *and* before
  ``design.min_raters`` distinct raters are behind them (the first observation at which that many
  distinct raters have been seen is a stopping time, so starting the rule there keeps its
  guarantee).

What the estimate targets
-------------------------
Human only: the mean of the item means of a random item of the run rated by the gate's raters
(with one rating per item: one rating by a random rater of the pool, so a rater's personal bias
enters the estimate; the target is the mean over the rater pool). Prediction-powered: the mean,
over the run's ``N`` outputs, of that same human item mean; the judge only narrows the interval.

The judge's scores must be complete before the sequence starts: while some output lacks its
score the gate makes no prediction-powered decision (``waiting_for_judge``), and once it has them
the observations are computed from the first item on, so every check sees the same sequence. A
judge whose fingerprint (judges, models, prompts, parameters) differs from the one the sequence
started with voids it: no decision until the study is revised.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from annotation.science.observations import FixedSequence
from annotation.science.sequential import Decision, JointDecision, Settled, joint_decision, settle_questions
from annotation.science.variance_sequences import (
    BoundedObservations,
    bounded_settle,
    human_observations,
    prediction_powered_observations,
)


@dataclass(frozen=True)
class JudgeScores:
    """The judges' scores a prediction-powered gate uses, on each question's scale.

    ``population``: question -> the score of every one of the run's ``N`` outputs (failed answers
    already replaced by their fixed stand-in); ``items``: study item -> question -> the score of
    its output; ``fingerprint``: what the scores depend on (judges, models, prompts, parameters);
    ``label``: how pages name the judges (e.g. "judge default").
    """

    population: Mapping[str, np.ndarray]
    items: Mapping[int, Mapping[str, float]]
    fingerprint: str
    label: str = "the LLM judge"

    @property
    def outputs(self) -> int:
        return int(next(iter(self.population.values())).size) if self.population else 0


@dataclass(frozen=True)
class JudgeAgreement:
    """How the judge compared with the humans on one question's observed items so far."""

    correlation: float | None  # Pearson, None under 3 items or without variance
    bias: float  # mean of judge minus human item mean
    weight: float  # lam of the next observation (PPI++'s tuned weight from the items so far)
    judge_mean: float  # the judge's mean over all N outputs
    estimate: float  # the prediction-powered point estimate now

    def to_dict(self) -> dict:
        return {
            "correlation": None if self.correlation is None else round(self.correlation, 4),
            "bias": round(self.bias, 4),
            "weight": round(self.weight, 4),
            "judge_mean": round(self.judge_mean, 4),
            "estimate": round(self.estimate, 4),
        }


@dataclass(frozen=True)
class GateOutcome:
    """The decision and what it rests on."""

    decision: JointDecision
    observed_items: int
    raters: int  # distinct raters behind the observed items
    min_items: int  # the first observation at which a decision may be taken (after min raters)
    estimator: str
    sequence: str
    waiting_for_judge: str = ""  # why the prediction-powered gate cannot observe yet
    judge: dict[str, JudgeAgreement] = field(default_factory=dict)
    judge_outputs: int = 0
    judge_label: str = ""
    judge_fingerprint: str = ""
    # The prediction-powered observations per question (empty otherwise): the forecast draws from them.
    observations: Mapping[str, BoundedObservations] = field(default_factory=dict)
    decided_raters: int = 0  # distinct raters behind the items up to the one it settled at

    def basis(self) -> str:
        """What the decision rests on, in one sentence for the evidence, pages, config and card: once
        settled, the items up to the one it settled at (and their raters), else those observed."""
        items, raters = self.observed_items, self.raters
        if self.decision.state is not Settled.UNDECIDED:
            items, raters = self.decision.n, self.decided_raters
        people = f"{raters} rater{'s' if raters != 1 else ''}"
        if self.estimator == "prediction_powered" and not self.waiting_for_judge:
            return (
                f"{self.judge_label} on {self.judge_outputs:,} outputs, corrected by {items} "
                f"human-rated items from {people}"
            )
        return f"{items} human-rated items from {people}"

    def to_dict(self) -> dict:
        data = {
            **self.decision.to_dict(),
            "estimator": self.estimator,
            "sequence": self.sequence,
            "raters": self.raters,
            "decided_raters": self.decided_raters,
            "decision_from_item": self.min_items,
            "basis": self.basis(),
        }
        if self.estimator == "prediction_powered":
            data["judge"] = {
                "label": self.judge_label,
                "outputs": self.judge_outputs,
                "fingerprint": self.judge_fingerprint,
                "waiting": self.waiting_for_judge,
                "questions": {q: a.to_dict() for q, a in sorted(self.judge.items())},
            }
        return data

    def summary(self) -> str:
        if self.waiting_for_judge:
            return f"not settled: {self.waiting_for_judge}"
        return f"{self.decision.summary()}; on {self.basis()}"


def decisions_allowed_from(ledger: Sequence[tuple[int, Sequence[int]]], *, min_items: int, min_raters: int) -> int:
    """The first observation (1-based) at which the gate may decide: ``min_items`` observations and
    ``min_raters`` distinct raters behind them (``len(ledger) + 1``: not yet).

    >>> decisions_allowed_from([(1, (7,)), (2, (7,)), (3, (8,)), (4, (9,))], min_items=2, min_raters=3)
    4
    """
    seen: set[int] = set()
    for position, (_, raters) in enumerate(ledger, start=1):
        seen.update(raters)
        if len(seen) >= min_raters:
            return max(min_items, position)
    return max(min_items, len(ledger) + 1)


def _undecided(questions: Sequence[str], observed: int, alpha: float) -> JointDecision:
    decisions = {q: Decision(Settled.UNDECIDED, observed, None, None) for q in sorted(questions)}
    return joint_decision(decisions, observed=observed, alpha=alpha, share=alpha / len(questions))


def _agreement(human: np.ndarray, judge: np.ndarray, judge_all: np.ndarray, obs) -> JudgeAgreement:
    """Correlation and bias of the judge against the human item means so far, and PPI++'s weight
    for the next item (the sample covariance over the judge's variance over all outputs, clipped to
    [0, 1], as ``variance_sequences`` computes it)."""
    if human.size >= 3 and human.std() > 0 and judge.std() > 0:
        correlation = float(np.corrcoef(human, judge)[0, 1])
    else:
        correlation = None
    if human.size >= 2:
        cov = float(np.cov(human, judge, ddof=1)[0, 1])
        var_n = float(np.var(judge_all))
        weight = float(np.clip(cov / var_n, 0.0, 1.0)) if var_n > 0 else 0.0
    else:
        weight = 0.0
    return JudgeAgreement(
        correlation=correlation,
        bias=float((judge - human).mean()) if human.size else 0.0,
        weight=weight,
        judge_mean=float(obs.judge_mean),
        estimate=float(obs.values.mean()) if obs.values.size else float(obs.judge_mean),
    )


def gate_outcome(seen: FixedSequence, **options) -> GateOutcome:
    """The gate's decision on ``seen`` (see ``_gate_outcome`` for the options), with the raters
    behind the items it settled on."""
    outcome = _gate_outcome(seen, **options)
    settled_on = seen.ledger[: outcome.decision.n] if outcome.decision.state is not Settled.UNDECIDED else ()
    return replace(outcome, decided_raters=len({r for _, rs in settled_on for r in rs}))


def _gate_outcome(
    seen: FixedSequence,
    *,
    questions: Mapping[str, tuple[float, float]],
    threshold: float,
    alpha: float,
    min_items: int,
    min_raters: int,
    sequence: str = "plugin",
    estimator: str = "human",
    judge: JudgeScores | None = None,
    judge_waiting: str = "",
    judge_started_with: str = "",
) -> GateOutcome:
    """The gate's decision on ``seen`` (see the module docstring).

    ``questions`` maps each question to its scale. For ``estimator="prediction_powered"``,
    ``judge`` holds the judges' complete scores (None: not complete yet, ``judge_waiting`` says how
    far they are) and ``judge_started_with`` the fingerprint of the judge the sequence began with
    (empty: none yet).
    """
    names = sorted(questions)
    observed = len(seen.items)
    raters = len({r for _, rs in seen.ledger[:observed] for r in rs})
    start = decisions_allowed_from(seen.ledger[:observed], min_items=min_items, min_raters=min_raters)
    common = dict(observed_items=observed, raters=raters, min_items=start, estimator=estimator, sequence=sequence)
    if estimator == "prediction_powered":
        if judge is None:
            waiting = judge_waiting or "waiting for the LLM judges to score every output"
            return GateOutcome(_undecided(names, observed, alpha), waiting_for_judge=waiting, **common)
        if judge_started_with and judge.fingerprint != judge_started_with:
            waiting = (
                "the judges, their models or prompts changed since the sequence began, which voids its "
                "prediction-powered evidence: revise the study (a new version starts a new sequence)"
            )
            return GateOutcome(_undecided(names, observed, alpha), waiting_for_judge=waiting, **common)
        return _prediction_powered(seen, names, questions, threshold, alpha, start, sequence, judge, common)
    if sequence == "plugin":
        decision = settle_questions(
            {q: seen.means[q] for q in names},
            threshold=threshold,
            alpha=alpha,
            scales=questions,
            min_items=start,
        )
        return GateOutcome(decision, **common)
    per_question = {q: human_observations(seen.means[q], scale=questions[q]) for q in names}
    return GateOutcome(_settle(per_question, threshold, alpha, start, sequence), **common)


def _settle(per_question: Mapping[str, BoundedObservations], threshold, alpha, start, sequence) -> JointDecision:
    """Each question's decision with the corrections of ``sequential.settle_questions``."""
    share = alpha / len(per_question)
    method, strategy = ("asymptotic", "agrapa") if sequence == "asymptotic" else ("betting", sequence)
    decisions = {
        q: bounded_settle(
            obs, threshold=threshold, alpha=share, alpha_pass=alpha, min_items=start, method=method, strategy=strategy
        )
        for q, obs in sorted(per_question.items())
    }
    observed = next(iter(per_question.values())).values.size
    return joint_decision(decisions, observed=observed, alpha=alpha, share=share)


def _prediction_powered(seen, names, questions, threshold, alpha, start, sequence, judge: JudgeScores, common):
    per_question: dict[str, BoundedObservations] = {}
    agreement: dict[str, JudgeAgreement] = {}
    population = judge.outputs
    for q in names:
        human = np.asarray(seen.means[q], dtype=float)
        if q not in judge.population:  # a question no judge scale fits: the human ratings alone
            per_question[q] = human_observations(human, scale=questions[q], population=population)
            continue
        scores = np.array([judge.items[item][q] for item in seen.items], dtype=float)
        obs = prediction_powered_observations(
            judge.population[q], scores, human, scale=questions[q], sampling="without_replacement"
        )
        per_question[q] = obs
        agreement[q] = _agreement(human, scores, judge.population[q], obs)
    decision = _settle(per_question, threshold, alpha, start, sequence)
    return GateOutcome(
        decision,
        judge=agreement,
        judge_outputs=population,
        judge_label=judge.label,
        judge_fingerprint=judge.fingerprint,
        observations=per_question,
        **common,
    )
