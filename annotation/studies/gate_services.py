"""Gate services of human-validation studies: agreement over the ratings that count, the gate of
each transformation with its stored evidence, and the researcher's approval or rejection of it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction

from annotation.kinds import ItemKind
from annotation.models import Annotator, Approval, GateResult, RaterDecision, Rating, Study
from annotation.science.control_check import ControlStatus
from annotation.science.design import GateDirection, StudyDesign
from annotation.science.gating import GateDecision, GateState, gate_decide, gate_state_of, rating_coverage
from annotation.science.sampling import sample_summary
from annotation.science.sequential import (
    Settled,
)
from annotation.studies.design_services import study_design
from annotation.studies.selectors import (
    CountedRating,
    counted_ratings,
    sequential_outcome,
    study_agreement,
)
from annotation.studies.validation_services import require_researcher
from core.errors import ConflictError, ShiftlabError
from core.hashing import sha256_json
from core.services import audit_record
from transforms.registry import transformation_get


def _transformation_gate(
    study: Study,
    design: StudyDesign,
    name: str,
    mine: list[CountedRating],
    per_question: dict[str, dict],
    drawn: int,
    rejections: list[dict],
    unchecked: list[str],
) -> tuple[GateDecision, dict]:
    """The gate decision of one transformation from its counted ratings, and its evidence."""
    # A sample that fell short of the declared items per transformation needs ratings of
    # the items it holds only.
    coverage = rating_coverage(
        {q.name: Counter(r.item_id for r in mine if r.question == q.name).values() for q in design.questions},
        items=min(design.items_per_transformation, drawn),
        raters_per_item=design.gate_raters,
        completed_only=design.adaptive,
    )
    if design.adaptive_gate_raters == 1:
        # One rating per item by design: no item is "thin"; what must hold is that several people
        # are behind the ratings (design.min_raters), checked below.
        coverage = replace(coverage, thin_items=0)
    raters = len({r.annotator_id for r in mine})
    too_few_raters = (
        f"only {raters} distinct rater{'s' if raters != 1 else ''} behind the ratings; the design asks for at "
        f"least {design.min_raters} (adaptive_min_raters) so that no one person decides the gate"
        if design.adaptive_gate_raters == 1 and raters < design.min_raters
        else ""
    )
    outcome = sequential_outcome(study, design, mine, name)[1] if design.adaptive else None
    sequential = outcome.decision if outcome is not None else None
    decision = gate_decide(
        {q: s["mean"] for q, s in per_question.items()},
        threshold=design.acceptance_threshold,
        coverage=coverage,
        settled=None
        if sequential is None or sequential.state is Settled.UNDECIDED
        else sequential.state is Settled.PASS,
        single_rater_pilot=design.single_rater_pilot,
        min_ac2_lower=design.min_ac2_lower,
        ac2_lower={q: (s["ac2"] or {}).get("ci_low") for q, s in per_question.items()},
        too_few_raters=too_few_raters,
    )
    evidence = {
        "study": {
            "id": study.pk,
            "name": study.name,
            "version": study.version,
            "design_hash": study.design_hash,
        },
        "transformation": name,
        "axis": transformation_get(name).axis.value,
        "threshold": design.acceptance_threshold,
        "passed": decision.passed,
        "state": decision.state.value,
        "reasons": list(decision.reasons),
        "ratings_required": coverage.required,
        "ratings_items": coverage.items,
        "ratings_raters_per_item": coverage.raters_per_item,
        "ratings_counted": coverage.counted,
        "ratings_missing": coverage.missing,
        "items_with_fewer_than_2_raters": coverage.thin_items,
        "min_ac2_lower": design.min_ac2_lower,
        "n_items": len({r.item_id for r in mine}),
        "n_ratings": len(mine),
        "n_raters": len({r.annotator_id for r in mine}),
        "questions": per_question,
        "rejections": rejections,
        "raters_not_counted_unchecked_controls": unchecked,
        "sample": sample_summary(study.sample_info.get(name, {})),
    }
    if design.passes_on is GateDirection.MEANING_CHANGED:
        # A sensitivity study's gate passes when raters found the meaning changed (issue 30).
        evidence["passes_on"] = design.passes_on.value
    if decision.single_rater_pilot:
        # Passed only because the design declared a single-rater pilot: the config says so.
        evidence["single_rater_pilot"] = True
    if outcome is not None and design.classic_gate:
        # Designs without the options of issue 40 keep the evidence they always had (same hash).
        evidence["sequential"] = {**outcome.decision.to_dict(), "summary": outcome.decision.summary()}
    elif outcome is not None:
        evidence["sequential"] = {**outcome.to_dict(), "summary": outcome.summary()}
        evidence["gate_basis"] = outcome.basis()
    return decision, evidence


def study_gate(*, study: Study, actor: AbstractBaseUser | None = None) -> list[GateResult]:
    """Evaluate the gate of every transformation of the study and store its evidence.

    Needs a validation run after the last change of ratings, so that rejections are applied.
    """
    study = Study.objects.get(pk=study.pk)
    design = study_design(study)
    if study.validated_at is None:
        if not Rating.objects.filter(study_item__study=study, active=True).exists():
            raise ShiftlabError(
                f"{study} has no ratings yet: wait for annotators to submit in Argilla, sync the responses, "
                "validate, then gate it"
            )
        raise ShiftlabError(f"{study} is not validated yet: validate the study, then gate it")
    if study.ratings_changed_at and study.ratings_changed_at > study.validated_at:
        raise ShiftlabError(f"{study}: ratings changed since the last validation; validate the study, then gate it")
    ratings = counted_ratings(study)
    report = study_agreement(study, ratings)
    rejections = [
        {
            "annotator": d.annotator.user.get_username(),
            "reason": d.reason,
            "detail": d.detail,
            "at": d.decided_at.isoformat(),
        }
        for d in RaterDecision.objects.filter(annotator__study=study, decision="reject").select_related(
            "annotator__user"
        )
    ]
    unchecked = [
        a.user.get_username()
        for a in study.annotators.select_related("user")
        if a.status != Annotator.Status.REJECTED and a.control_status != ControlStatus.PASSED
    ]
    drawn = Counter(study.items.filter(kind=ItemKind.REAL).values_list("transformation", flat=True))
    results = []
    with transaction.atomic():
        for name in sorted({r.transformation for r in study.runs.all()}):
            mine = [r for r in ratings if r.transformation == name]
            decision, evidence = _transformation_gate(
                study, design, name, mine, report[f"transformation:{name}"], drawn[name], rejections, unchecked
            )
            result = GateResult.objects.create(
                study=study,
                transformation=name,
                passed=decision.passed,
                evidence=evidence,
                evidence_hash=sha256_json(evidence),
                created_by=actor,
            )
            audit_record(
                actor=actor,
                verb="study.gate",
                obj=result,
                payload={
                    "passed": decision.passed,
                    "state": decision.state.value,
                    "reasons": list(decision.reasons),
                    "evidence_hash": result.evidence_hash,
                },
            )
            results.append(result)
    return results


def gate_result_current(*, study: Study, transformation: str) -> GateResult | None:
    return GateResult.objects.filter(study=study, transformation=transformation).order_by("-created_at", "-id").first()


def approval_decide(*, gate_result: GateResult, decision: str, comment: str, actor: AbstractBaseUser) -> Approval:
    """Approve or reject a transformation on its current gate result. A failed gate cannot be
    approved, a passed one may still be rejected, and a gate without enough ratings cannot be
    decided on. One decision per gate result."""
    require_researcher(actor)
    if decision not in Approval.Decision.values:
        raise ShiftlabError(f"decision must be 'approve' or 'reject', got {decision!r}")
    if not comment.strip():
        raise ShiftlabError("give a comment with the decision: it goes into the audit log and the exported config")
    with transaction.atomic():
        gate_result = GateResult.objects.select_for_update().get(pk=gate_result.pk)
        current = gate_result_current(study=gate_result.study, transformation=gate_result.transformation)
        if current.pk != gate_result.pk:
            raise ConflictError(f"gate result {gate_result.pk} is outdated: decide on the current one ({current.pk})")
        if Approval.objects.filter(gate_result=gate_result).exists():
            raise ConflictError(
                f"{gate_result.transformation} in {gate_result.study} was already decided on "
                "for this gate result; gate the study again to decide anew"
            )
        if gate_state_of(gate_result.evidence) is GateState.NOT_ENOUGH_RATINGS:
            reasons = "; ".join(gate_result.evidence.get("reasons", []))
            raise ShiftlabError(
                f"{gate_result.transformation} has not enough ratings to decide on ({reasons}): "
                "sync the missing ratings, validate and gate the study again"
            )
        if decision == Approval.Decision.APPROVE and not gate_result.passed:
            reasons = "; ".join(gate_result.evidence.get("reasons", []))
            raise ShiftlabError(f"{gate_result.transformation} failed the gate ({reasons}): it cannot be approved")
        approval = Approval.objects.create(
            gate_result=gate_result, decision=decision, comment=comment.strip(), decided_by=actor
        )
        audit_record(
            actor=actor,
            verb=f"study.transformation.{decision}",
            obj=approval,
            payload={
                "gate_result": gate_result.pk,
                "transformation": gate_result.transformation,
                "study": gate_result.study_id,
                "comment": comment.strip(),
                "evidence_hash": gate_result.evidence_hash,
            },
        )
    return approval
