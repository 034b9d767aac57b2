"""Adaptive stopping of a study (``design.adaptive``): after each sync, the sequential gate of each
transformation (``annotation.science.sequential``) is computed from the counted ratings; once it is
settled, the transformation's items that annotators have not submitted yet leave their queues.

- ``study_adaptive_decisions``: the current decision of each transformation (reads only);
  ``study_adaptive_rows`` adds the saving predicted from each transformation's own items so far.
- ``study_adaptive_check``: stores the decisions in ``Study.sample_info["adaptive"]`` and the
  fixed order the gate observes items in in ``Study.sample_info["adaptive_order"]`` (the order items
  first completed, extended at each check, never rebuilt: ``observations.fixed_sequence``), ends the
  open assignments of settled transformations (``study.adaptive.settled``, audited with the
  evidence), gives them back if a later change of counted ratings (a rejected rater) unsettles the
  transformation (``study.adaptive.unsettled``), and pushes the change to Argilla
  (``argilla_services.study_argilla_reconcile``). Argilla being unreachable never undoes a
  decision: the assignments stay ended in Django and the next check (every sync) or publish
  removes the records.

Non-adaptive designs are left exactly as they are.
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from annotation.argilla import ArgillaError
from annotation.argilla.client import argilla_connection
from annotation.kinds import ItemKind
from annotation.models import Annotator, Assignment, Rating, Study
from annotation.science.gate_sequence import GateOutcome
from annotation.science.observations import FixedSequence
from annotation.science.saving_forecast import MIN_FORECAST_ITEMS, RatingCosts, SavingForecast, forecast_saving
from annotation.science.sequential import JointDecision, Settled
from annotation.studies.argilla_services import study_argilla_reconcile
from annotation.studies.design_services import study_design
from annotation.studies.selectors import CountedRating, counted_ratings, sequential_outcome
from core.services import audit_record

logger = logging.getLogger(__name__)

SETTLED_PREFIX = "settled: "  # end_reason of assignments withdrawn by the sequential gate


@dataclass(frozen=True)
class AdaptiveResult:
    decisions: dict[str, JointDecision] = field(default_factory=dict)
    withdrawn: dict[str, int] = field(default_factory=dict)  # transformation -> assignments ended now
    restored: dict[str, int] = field(default_factory=dict)  # transformation -> assignments given back now
    argilla_error: str = ""  # why Argilla could not be updated (the decision stands)

    def summary(self) -> str:
        parts = [f"{name}: {d.summary()}" for name, d in sorted(self.decisions.items())]
        parts += [f"{name}: {n} open assignments withdrawn" for name, n in sorted(self.withdrawn.items())]
        parts += [f"{name}: {n} assignments given back" for name, n in sorted(self.restored.items())]
        if self.argilla_error:
            parts.append(f"Argilla not updated yet ({self.argilla_error}); the next sync retries")
        return "; ".join(parts)


def study_adaptive_observations(
    *, study: Study, ratings: Sequence[CountedRating] | None = None, populations: dict | None = None
) -> dict[str, tuple[FixedSequence, GateOutcome]]:
    """Transformation -> its observations in their fixed order (the stored order extended by the
    items completed since) and its sequential gate now; empty for a non-adaptive design.
    ``populations``: transformation -> the judges' scores (``JudgePopulation``) when the caller read
    them already (the study page shows them too), so the cache is read once."""
    design = study_design(study)
    if not design.adaptive or not study.is_locked:
        return {}
    ratings = counted_ratings(study) if ratings is None else ratings
    by_transformation: dict[str, list[CountedRating]] = defaultdict(list)
    for r in ratings:
        by_transformation[r.transformation].append(r)
    return {
        name: sequential_outcome(study, design, by_transformation[name], name, (populations or {}).get(name))
        for name in sorted({r.transformation for r in study.runs.all()})
    }


def study_adaptive_decisions(
    *, study: Study, ratings: Sequence[CountedRating] | None = None
) -> dict[str, JointDecision]:
    """Transformation -> its sequential decision now; empty for a non-adaptive design."""
    return {name: o.decision for name, (_, o) in study_adaptive_observations(study=study, ratings=ratings).items()}


@dataclass(frozen=True)
class AdaptiveRow:
    """One transformation of an adaptive study as pages and the API show it."""

    transformation: str
    decision: JointDecision
    forecast: SavingForecast | None  # None: too few items yet to predict from (see ``forecast_line``)
    outcome: GateOutcome | None = None  # what the decision rests on (estimator, raters, judge agreement)
    classic: bool = True  # a design without the gate options of issue 40 (the page then shows what it always did)

    @property
    def basis_shown(self) -> bool:
        return not self.classic

    @property
    def judge_rows(self) -> list[tuple[str, dict]]:
        """Per question: the judge's agreement with the humans so far, the estimate and its interval."""
        if self.outcome is None:
            return []
        rows = []
        for question, agreement in sorted(self.outcome.judge.items()):
            interval = self.decision.questions.get(question)
            rows.append(
                (
                    question,
                    {
                        **agreement.to_dict(),
                        "lower": None if interval is None else interval.lower,
                        "upper": None if interval is None else interval.upper,
                    },
                )
            )
        return rows

    @property
    def forecast_line(self) -> str:
        if self.forecast is not None:
            return self.forecast.summary()
        if self.outcome is not None and self.outcome.waiting_for_judge:
            return self.outcome.waiting_for_judge
        return (
            f"saving not predicted yet ({self.decision.observed} items fully rated, {MIN_FORECAST_ITEMS} needed): "
            "it depends on how far the true mean lies from the threshold"
        )


def _partial_means(design, ratings: Sequence[CountedRating], observed: dict) -> dict[str, dict[str, list[float]]]:
    """Transformation -> question -> the mean of each started item not observed yet (some of its
    raters answered every question, fewer than the gate observes): what ``forecast_saving`` also
    draws the items to come from."""
    questions = [q.name for q in design.questions]
    answers: dict[str, dict[int, dict[int, dict[str, float]]]] = defaultdict(lambda: defaultdict(dict))
    for r in ratings:
        answers[r.transformation][r.item_id].setdefault(r.annotator_id, {})[r.question] = r.value
    partial = {}
    for name, (seen, _) in observed.items():
        items = set(seen.items)
        started = [
            [a for a in raters.values() if set(questions) <= set(a)]
            for item, raters in sorted(answers[name].items())
            if item not in items
        ]
        started = [rows for rows in started if rows]
        partial[name] = {q: [sum(a[q] for a in rows) / len(rows) for rows in started] for q in questions}
    return partial


def _rating_costs(design, ratings: Sequence[CountedRating], observed: dict) -> dict[str, RatingCosts]:
    """Transformation -> what its ratings cost so far: observed items that got more than the
    gate's raters (contested: ``design.adaptive_gate_raters``) and the ratings already given to
    items not observed yet (spent whenever it settles)."""
    pairs: dict[str, set[tuple[int, int]]] = defaultdict(set)
    for r in ratings:
        pairs[r.transformation].add((r.item_id, r.annotator_id))
    costs = {}
    for name, (seen, _) in observed.items():
        items = set(seen.items)
        raters = Counter(item for item, _ in pairs.get(name, ()))
        contested = sum(1 for item in items if raters[item] > design.gate_raters)
        in_flight = sum(n for item, n in raters.items() if item not in items)
        costs[name] = RatingCosts(design.gate_raters, design.raters_per_item, contested, float(in_flight))
    return costs


def study_adaptive_rows(
    *, study: Study, ratings: Sequence[CountedRating] | None = None, populations: dict | None = None
) -> list[AdaptiveRow]:
    """Each transformation's decision and the saving predicted from its own items so far
    (``saving_forecast.forecast_saving``, seeded by the design's seed: the page shows the same figure
    until new ratings come); empty for a non-adaptive design."""
    design = study_design(study)
    ratings = counted_ratings(study) if ratings is None and design.adaptive and study.is_locked else ratings
    observed = study_adaptive_observations(study=study, ratings=ratings, populations=populations)
    drawn = Counter(study.items.filter(kind=ItemKind.REAL).values_list("transformation", flat=True))
    costs = _rating_costs(design, ratings or [], observed)
    partial = _partial_means(design, ratings or [], observed)
    rows = []
    for name, (seen, outcome) in observed.items():
        forecast = None
        if not outcome.waiting_for_judge:
            ppi = outcome.observations
            forecast = forecast_saving(
                {q: obs.values.tolist() for q, obs in ppi.items()} if ppi else seen.means,
                threshold=design.acceptance_threshold,
                alpha=design.adaptive_alpha,
                scales={q.name: (q.low, q.high) for q in design.questions},
                min_items=min(max(outcome.min_items, design.adaptive_min_items), max(drawn[name], 1)),
                total=drawn[name],
                seed=design.seed,
                costs=costs[name],
                partial=None if ppi else partial[name],
                sequence=design.adaptive_sequence,
                decision=None if design.classic_gate else outcome.decision,
                bounds={q: (obs.lower, obs.upper) for q, obs in ppi.items()} or None,
            )
        rows.append(AdaptiveRow(name, outcome.decision, forecast, outcome, design.classic_gate))
    return rows


def _open_assignments(study: Study, transformation: str) -> list[Assignment]:
    """Active assignments of the transformation's real items whose annotator has not submitted them."""
    rows = list(
        Assignment.objects.filter(
            annotator__study=study,
            active=True,
            study_item__kind=ItemKind.REAL,
            study_item__transformation=transformation,
        )
    )
    submitted = set(
        Rating.objects.filter(
            study_item__study=study, study_item__transformation=transformation, active=True
        ).values_list("annotator_id", "study_item_id")
    )
    return [a for a in rows if (a.annotator_id, a.study_item_id) not in submitted]


def _withdrawn(study: Study, transformation: str):
    return Assignment.objects.filter(
        annotator__study=study,
        active=False,
        study_item__transformation=transformation,
        end_reason__startswith=SETTLED_PREFIX,
    )


def _argilla_pending(study: Study) -> bool:
    """Whether Argilla still shows a withdrawn record, or lacks one given back."""
    if study.published_at is None:
        return False
    ended = Assignment.objects.filter(annotator__study=study, active=False, end_reason__startswith=SETTLED_PREFIX)
    restored = Assignment.objects.filter(
        annotator__study=study,
        annotator__status=Annotator.Status.ACTIVE,
        active=True,
        argilla_record_id=None,
        end_reason__startswith="given back",
    )
    return ended.exclude(argilla_record_id=None).exists() or restored.exists()


def _judge_started(study: Study, outcomes: dict[str, GateOutcome]) -> dict:
    """``adaptive_judge``: per transformation, the fingerprint of the judge its prediction-powered
    sequence began with (fixed at the first check that observed an item with the judge complete), so
    that a later change of judge, model or prompt voids the sequence instead of changing it."""
    started = dict(study.sample_info.get("adaptive_judge", {}))
    for name, outcome in outcomes.items():
        if outcome.judge_fingerprint and outcome.observed_items and name not in started:
            started[name] = outcome.judge_fingerprint
    return {"adaptive_judge": started} if started else {}


def study_adaptive_check(*, study: Study, actor: AbstractBaseUser | None = None, client=None) -> AdaptiveResult:
    """Decide, store, withdraw or give back, and push to Argilla (see the module docstring).

    Idempotent: a check with nothing new writes the decisions only. ``client`` is an Argilla
    connection (None: a new owner connection, opened only when Argilla needs an update).
    """
    design = study_design(study)
    if not design.adaptive:
        return AdaptiveResult()
    withdrawn: dict[str, int] = {}
    restored: dict[str, int] = {}
    with transaction.atomic():
        study = Study.objects.select_for_update().get(pk=study.pk)
        observed = study_adaptive_observations(study=study)
        decisions = {name: o.decision for name, (_, o) in observed.items()}
        outcomes = {name: o for name, (_, o) in observed.items()}
        before = study.sample_info.get("adaptive", {})
        now = timezone.now()
        for name, decision in decisions.items():
            state = decision.state
            previous = before.get(name, {}).get("state", Settled.UNDECIDED.value)
            if state is not Settled.UNDECIDED:
                rows = _open_assignments(study, name)
                reason = f"{SETTLED_PREFIX}{state.value} at {decision.n} items"
                Assignment.objects.filter(pk__in=[a.pk for a in rows]).update(
                    active=False, ended_at=now, end_reason=reason
                )
                if rows or state.value != previous:
                    withdrawn[name] = len(rows)
                    per_annotator = Counter(a.annotator_id for a in rows)
                    names = dict(study.annotators.values_list("pk", "user__username"))
                    audit_record(
                        actor=actor,
                        verb="study.adaptive.settled",
                        obj=study,
                        payload={
                            "transformation": name,
                            "decision": decision.to_dict(),
                            "summary": decision.summary(),
                            **({} if design.classic_gate else {"basis": outcomes[name].basis()}),
                            "withdrawn": len(rows),
                            "withdrawn_per_annotator": {names[k]: n for k, n in sorted(per_annotator.items())},
                            "design_hash": study.design_hash,
                        },
                    )
            elif previous != Settled.UNDECIDED.value:
                # Counted ratings changed since it settled (a rater rejected): it needs its items again.
                back = _withdrawn(study, name).filter(annotator__status=Annotator.Status.ACTIVE)
                count = back.update(
                    active=True, ended_at=None, end_reason="given back: no longer settled after ratings changed"
                )
                restored[name] = count
                audit_record(
                    actor=actor,
                    verb="study.adaptive.unsettled",
                    obj=study,
                    payload={"transformation": name, "decision": decision.to_dict(), "given_back": count},
                )
        stored = {
            name: {**d.to_dict(), "summary": d.summary(), "checked_at": now.isoformat()}
            for name, d in decisions.items()
        }
        if not design.classic_gate:
            for name, outcome in outcomes.items():
                stored[name] = {**stored[name], **outcome.to_dict(), "summary": outcome.summary()}
        study.sample_info = {
            **study.sample_info,
            "adaptive": stored,
            **_judge_started(study, outcomes),
            # The fixed order the gate sees items in: the next check extends it, never reorders it.
            "adaptive_order": {
                name: [[item, list(raters)] for item, raters in seen.ledger] for name, (seen, _) in observed.items()
            },
        }
        study.save(update_fields=["sample_info"])
    error = ""
    if any(withdrawn.values()) or any(restored.values()) or _argilla_pending(study):
        try:
            with argilla_connection(client) as conn:
                study_argilla_reconcile(study=study, client=conn)
        except ArgillaError as exc:
            error = str(exc)
            logger.warning("%s: adaptive withdrawal not pushed to Argilla yet: %s", study, exc)
    return AdaptiveResult(decisions=decisions, withdrawn=withdrawn, restored=restored, argilla_error=error)
