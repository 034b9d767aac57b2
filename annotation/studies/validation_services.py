"""Validation services of human-validation studies: LLM judge estimates, the control check per
annotator, flags and rejections by the declared rules, the review of flags, manual rejections
and English translations for reviewers. Every researcher decision is audited.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from django.contrib.auth.base_user import AbstractBaseUser
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.utils import timezone

from annotation.argilla import ArgillaError
from annotation.argilla.client import argilla_connection
from annotation.kinds import ItemKind, RejectionReason
from annotation.models import Annotator, Flag, RaterDecision, Rating, Study, StudyItem
from annotation.science.control_check import ControlCheck, ControlStatus
from annotation.science.design import JUDGE_KIND_OF_QUESTION, StudyDesign
from annotation.science.validation import (
    ANNOTATOR_RULES,
    flags_for_rating,
    llm_estimate,
    rejection_reason,
)
from annotation.studies.argilla_services import (
    annotators_cut,
    study_argilla_reconcile,
)
from annotation.studies.assignment_services import ReleaseResult, annotator_release
from annotation.studies.design_services import study_design
from annotation.studies.quality_services import annotator_flags_apply
from annotation.studies.selectors import control_checks
from core.errors import ConflictError, ShiftlabError
from core.roles import Role, has_role
from core.rosters import annotator_audit, roster_require
from core.services import audit_record
from transforms.backends import get_backend
from transforms.backends.base import ChatFailure, ChatRequest
from transforms.judgement_services import judge_pairs
from transforms.judging import SCALES, JudgeKind
from transforms.languages import language_name


def require_researcher(actor: AbstractBaseUser | None) -> None:
    """Refuse an actor who is neither a researcher nor an admin (``None``, no user recorded, passes)."""
    if actor is not None and not has_role(actor, Role.RESEARCHER, Role.ADMIN):
        raise ShiftlabError(f"{actor.get_username()} is not a researcher: only researchers decide on studies")


ESTIMATE_CHUNK = 8  # rated items per judge call between two saves / progress updates


def _judged_questions(design: StudyDesign) -> list:
    """The questions a judge scale fits (the inverse "changed" of sensitivity studies gets none)."""
    return [q for q in design.questions if q.name in JUDGE_KIND_OF_QUESTION]


def study_estimate_calls(*, study: Study) -> int:
    """The judge calls ``study_estimate`` settles: real items × judged questions × judges."""
    design = study_design(study)
    if not design.llm_judges:
        return 0
    return study.items.filter(kind=ItemKind.REAL).count() * len(_judged_questions(design)) * len(design.llm_judges)


def study_estimate(*, study: Study, on_progress: Callable[[int], None] | None = None) -> int:
    """LLM judge estimates for the real items that lack them, per question and judge; returns the
    number of items updated. Items are estimated a few at a time and saved as they go, and the
    judgements are cached by the judge, so this is cheap to repeat and an interrupted call resumes
    where it stopped. ``on_progress(n)`` hears each ``n`` judge calls settled (those of items
    estimated before count at once)."""
    design = study_design(study)
    if not design.llm_judges:
        return 0
    judged = _judged_questions(design)
    real = list(study.items.filter(kind=ItemKind.REAL).order_by("position"))
    items = [i for i in real if any(q.name not in i.llm_estimates for q in judged)]
    per_item = len(judged) * len(design.llm_judges)
    if on_progress and len(real) > len(items):
        on_progress((len(real) - len(items)) * per_item)
    for start in range(0, len(items), ESTIMATE_CHUNK):
        chunk = items[start : start + ESTIMATE_CHUNK]
        pairs = [(i.text_a, i.text_b) for i in chunk]
        estimates: list[dict] = [{} for _ in chunk]
        for question in judged:
            kind = JudgeKind(JUDGE_KIND_OF_QUESTION[question.name])
            per_judge = {}
            for alias in design.llm_judges:
                per_judge[alias] = judge_pairs(kind=kind, pairs=pairs, backend_alias=alias, seed=design.seed)
                if on_progress:
                    on_progress(len(chunk))
            for n, _ in enumerate(chunk):
                scores = {alias: judgements[n].score for alias, judgements in per_judge.items()}
                estimate = llm_estimate(
                    list(scores.values()), judge_scale=SCALES[kind], question_scale=(question.low, question.high)
                )
                estimates[n][question.name] = {"scores": scores, "estimate": estimate}
        with transaction.atomic():
            for item, values in zip(chunk, estimates, strict=True):
                item.llm_estimates = {**item.llm_estimates, **values}
                item.save(update_fields=["llm_estimates"])
    return len(items)


# A check that cannot decide yet waits for its annotator's control answers: "insufficient"
# right after publishing read as a verdict on someone who had not rated anything.
CHECK_WORDS = {ControlStatus.INSUFFICIENT.value: "waiting for ratings"}


@dataclass(frozen=True)
class ValidationResult:
    estimated_items: int
    control_status: dict[str, str]  # username -> passed/failed/insufficient
    flags_created: int
    flags_removed: int
    rejected: dict[str, str]  # username -> reason

    def summary(self) -> str:
        """What the validation did, as one sentence for the page."""
        checks = Counter(self.control_status.values())
        rejected = ", ".join(f"{name} ({reason.replace('_', ' ')})" for name, reason in sorted(self.rejected.items()))
        return (
            f"Validated: {self.flags_created} flags raised, {self.flags_removed} removed; "
            f"raters rejected: {rejected or 'none'}; control checks: "
            + (
                ", ".join(f"{n} {CHECK_WORDS.get(status, status)}" for status, n in sorted(checks.items()))
                or "no rater yet"
            )
            + f"; LLM estimates for {self.estimated_items} items."
        )


def _rating_flags_update(study: Study, design: StudyDesign) -> tuple[int, int]:
    """Raise the LLM and low-rating flags each real rating breaks, update open ones, and withdraw
    open flags whose rating no longer breaks their rule; returns (created, removed)."""
    created = removed = 0
    ratings = Rating.objects.filter(study_item__study=study, study_item__kind=ItemKind.REAL).select_related(
        "study_item"
    )
    flags = defaultdict(dict)
    for flag in Flag.objects.filter(rating__study_item__study=study).exclude(rule__in=ANNOTATOR_RULES):
        flags[flag.rating_id][flag.rule] = flag
    for rating in ratings:
        question = design.question(rating.question)
        estimate_value = (rating.study_item.llm_estimates.get(question.name) or {}).get("estimate")
        hits = (
            {}
            if not rating.active
            else {
                h.rule: h
                for h in flags_for_rating(
                    rating.value,
                    estimate=estimate_value,
                    max_deviation=design.llm_flag_deviation,
                    low_rating_max=design.low_rating_max,
                )
            }
        )
        for rule, hit in hits.items():
            flag = flags[rating.pk].get(rule)
            if flag is None:
                Flag.objects.create(
                    rating=rating, rule=rule, value=rating.value, estimate=hit.estimate, deviation=hit.deviation
                )
                created += 1
            elif flag.status == Flag.Status.OPEN and flag.value != rating.value:
                flag.value, flag.estimate, flag.deviation = rating.value, hit.estimate, hit.deviation
                flag.save(update_fields=["value", "estimate", "deviation"])
        for rule, flag in flags[rating.pk].items():
            # A flag nobody reviewed yet disappears when its rating no longer breaks the rule.
            if rule not in hits and flag.status == Flag.Status.OPEN:
                flag.delete()
                removed += 1
    return created, removed


def _rejections_due(
    study: Study, design: StudyDesign, annotators: list[Annotator], checks: dict[int, ControlCheck]
) -> list[tuple[Annotator, RejectionReason, str]]:
    """The active annotators the design's rules reject (failed controls, too many confirmed
    flags), each with the reason and what it rests on."""
    to_reject: list[tuple[Annotator, RejectionReason, str]] = []
    confirmed = defaultdict(int)
    for flag in Flag.objects.filter(rating__study_item__study=study, status=Flag.Status.CONFIRMED):
        confirmed[flag.rating.annotator_id] += 1
    for annotator in annotators:
        if annotator.status != Annotator.Status.ACTIVE:
            continue
        check = checks[annotator.pk]
        reason = rejection_reason(
            control_status=check.status,
            confirmed_flags=confirmed[annotator.pk],
            max_confirmed_flags=design.max_confirmed_flags,
        )
        if reason == RejectionReason.FAILED_CONTROLS:
            misses = ", ".join(f"rated {m.value} where {m.expected} was expected" for m in check.misses)
            detail = (
                f"{len(check.misses)} of {check.n_checked} control ratings outside ±{design.control_margin} "
                f"of the expected end of the scale ({misses})"
            )
            to_reject.append((annotator, reason, detail))
        elif reason == RejectionReason.CONFIRMED_DEVIANT:
            detail = (
                f"{confirmed[annotator.pk]} flags confirmed by reviewers "
                f"(the design allows fewer than {design.max_confirmed_flags})"
            )
            to_reject.append((annotator, reason, detail))
    return to_reject


def study_validate_check(study: Study) -> Study:
    """The study (fresh), once it can be validated: published, so that it has ratings."""
    study = Study.objects.get(pk=study.pk)
    if study.published_at is None:
        raise ShiftlabError(f"{study} is not published: there are no ratings to validate")
    return study


def study_validate(
    *,
    study: Study,
    actor: AbstractBaseUser | None = None,
    estimate: bool = True,
    client=None,
    on_progress: Callable[[int], None] | None = None,
) -> ValidationResult:
    """Apply the declared validation pipeline: judge estimates, control check per rater, LLM and
    low-rating flags, and rejections by rule (failed controls; too many confirmed flags).
    ``on_progress`` hears the judge calls settled (``study_estimate``). Pages, the API and the
    command run it as a job (``validation_jobs.study_validation_start``)."""
    study = study_validate_check(study)
    design = study_design(study)
    estimated = study_estimate(study=study, on_progress=on_progress) if estimate else 0
    to_reject: list[tuple[Annotator, RejectionReason, str]] = []
    with transaction.atomic():
        study = Study.objects.select_for_update().get(pk=study.pk)
        checks = control_checks(study)
        annotators = {a.pk: a for a in study.annotators.select_related("user")}
        for annotator in annotators.values():
            annotator.control_status = checks[annotator.pk].status
            annotator.save(update_fields=["control_status"])
        created, removed = _rating_flags_update(study, design)
        annotator_created, annotator_removed = annotator_flags_apply(study=study)
        created, removed = created + annotator_created, removed + annotator_removed
        to_reject = _rejections_due(study, design, list(annotators.values()), checks)
        for annotator, reason, detail in to_reject:
            _reject(annotator, reason=reason, detail=detail, actor=actor)
        study.validated_at = timezone.now()
        study.save(update_fields=["validated_at"])
        result = ValidationResult(
            estimated_items=estimated,
            control_status={a.user.get_username(): checks[a.pk].status.value for a in annotators.values()},
            flags_created=created,
            flags_removed=removed,
            rejected={a.user.get_username(): r.value for a, r, _ in to_reject},
        )
        audit_record(
            actor=actor,
            verb="study.validate",
            obj=study,
            payload={
                "control_status": result.control_status,
                "flags_created": created,
                "flags_removed": removed,
                "rejected": result.rejected,
                "design_hash": study.design_hash,
            },
        )
    for annotator, _, _ in to_reject:
        _deactivate_in_argilla(annotator, client=client)
    return result


@dataclass(frozen=True)
class RejectResult:
    decision: RaterDecision
    release: ReleaseResult | None  # where their items went (None: they had no assignment)


def _freeze(annotator: Annotator, status: str) -> None:
    """Give a leaving annotator ``status`` and freeze them from now (a rejected leaver stays frozen
    from their withdrawal): the sync ignores, and audits, any later change to their responses, and
    ``study_argilla_reconcile`` cuts their access in Argilla."""
    annotator.status = status
    annotator.frozen_at = annotator.frozen_at or timezone.now()
    annotator.save(update_fields=["status", "frozen_at"])


def _reject(annotator: Annotator, *, reason: RejectionReason, detail: str, actor) -> RejectResult:
    _freeze(annotator, Annotator.Status.REJECTED)
    decision = RaterDecision.objects.create(annotator=annotator, reason=reason, detail=detail, decided_by=actor)
    audit_record(
        actor=actor,
        verb="study.annotator.reject",
        obj=annotator,
        payload={"reason": reason.value, "detail": detail, "study": annotator.study_id},
    )
    annotator_audit(
        actor=actor,
        verb="annotator.reject",
        user=annotator.user,
        obj=annotator.study,
        payload={"study": str(annotator.study), "reason": reason.value},
    )
    release = None
    if annotator.assignments.exists():  # every item of theirs needs another rater now
        release = annotator_release(annotator=annotator, reason=f"rejected ({reason.value})", actor=actor)
    return RejectResult(decision=decision, release=release)


def _deactivate_in_argilla(annotator: Annotator, *, client=None) -> bool:
    """Take a rejected annotator out of their Argilla workspace for this study (other studies are
    untouched) and publish the items they lost to their new raters; False if Argilla failed (the
    rejection stands in Django, and publishing the study again finishes the job)."""
    annotator = Annotator.objects.select_related("user", "study").get(pk=annotator.pk)
    workspace = annotator.argilla_workspace or annotator.study.workspace
    try:
        with argilla_connection(client) as conn:
            if annotator.argilla_workspace:
                study_argilla_reconcile(study=annotator.study, client=conn)
            else:  # a study published before per-annotator batches: the study's shared workspace
                annotators_cut(annotator.study, [annotator], client=conn)
    except ArgillaError as exc:
        audit_record(actor=None, verb="study.annotator.deactivate.failed", obj=annotator, payload={"error": str(exc)})
        return False
    audit_record(actor=None, verb="study.annotator.deactivate", obj=annotator, payload={"workspace": workspace})
    return True


def annotator_reject(*, annotator: Annotator, detail: str, actor: AbstractBaseUser, client=None) -> RejectResult:
    """A researcher rejects an annotator by hand, with a reason; their ratings stop counting and
    their items go to others (``RejectResult.release``); they lose access to this study only."""
    require_researcher(actor)
    if not detail.strip():
        raise ShiftlabError("give a reason for rejecting the annotator")
    with transaction.atomic():
        annotator = Annotator.objects.select_for_update().select_related("user", "study").get(pk=annotator.pk)
        if annotator.status == Annotator.Status.REJECTED:
            raise ConflictError(f"{annotator} is already rejected")
        result = _reject(annotator, reason=RejectionReason.MANUAL, detail=detail.strip(), actor=actor)
    _deactivate_in_argilla(annotator, client=client)
    return result


@dataclass(frozen=True)
class ReplaceResult:
    release: ReleaseResult
    new_accounts: tuple[str, ...]  # usernames of the Argilla accounts created now (no password: nobody sees it)


def annotator_replace(
    *, annotator: Annotator, user: AbstractBaseUser, reason: str, actor: AbstractBaseUser, client=None
) -> ReplaceResult:
    """Replace an annotator who leaves a study (not for bad work: reject them for that) by
    ``user``: the leaver is withdrawn (their submitted ratings still count, they lose access to
    this study only) and every item they have not submitted goes to ``user``, who must be on the
    roster of the study's project, with controls."""
    require_researcher(actor)
    if not reason.strip():
        raise ShiftlabError("give a reason for replacing the annotator")
    with transaction.atomic():
        annotator = Annotator.objects.select_for_update().select_related("user", "study__project").get(pk=annotator.pk)
        study = annotator.study
        roster_require(study.project, [user])
        if annotator.status != Annotator.Status.ACTIVE:
            raise ConflictError(f"{annotator} is {annotator.status} already: only an active annotator can be replaced")
        if not annotator.assignments.exists():
            raise ShiftlabError(f"{study} has no assignment yet: publish it with the annotators you want instead")
        if Annotator.objects.filter(study=study, user=user).exists():
            raise ConflictError(f"{user.get_username()} is already an annotator of {study}")
        _freeze(annotator, Annotator.Status.WITHDRAWN)
        RaterDecision.objects.create(
            annotator=annotator, decision="withdraw", reason=RejectionReason.MANUAL, detail=reason, decided_by=actor
        )
        newcomer = Annotator.objects.create(study=study, user=user)
        result = annotator_release(
            annotator=annotator,
            reason=f"replaced by {user.get_username()}: {reason.strip()}"[:200],
            actor=actor,
            to=newcomer,
        )
        audit_record(
            actor=actor,
            verb="study.annotator.replace",
            obj=annotator,
            payload={"by": user.get_username(), "reason": reason.strip(), "moved": result.given},
        )
        detail = {"study": str(study), "reason": reason.strip()}
        annotator_audit(
            actor=actor, verb="annotator.withdraw", user=annotator.user, obj=study, payload={**detail, "by": str(user)}
        )
        annotator_audit(
            actor=actor,
            verb="annotator.publish",
            user=user,
            obj=study,
            payload={**detail, "replaces": annotator.user.get_username()},
        )
    with argilla_connection(client) as conn:
        _, new_accounts = study_argilla_reconcile(study=study, client=conn)
    return ReplaceResult(release=result, new_accounts=new_accounts)


def flag_review(*, flag: Flag, decision: str, actor: AbstractBaseUser, note: str = "", client=None) -> Flag:
    """Confirm or dismiss an open flag. Confirming can reject the rater under the declared
    "repeatedly deviant" rule, applied at once."""
    require_researcher(actor)
    if decision not in (Flag.Status.CONFIRMED, Flag.Status.DISMISSED):
        raise ShiftlabError(f"decision must be 'confirmed' or 'dismissed', got {decision!r}")
    rejected = None
    with transaction.atomic():
        flag = Flag.objects.select_for_update().select_related("rating__annotator__study").get(pk=flag.pk)
        if flag.status != Flag.Status.OPEN:
            raise ConflictError(f"flag {flag.pk} was already {flag.status} by a reviewer")
        flag.status, flag.note, flag.reviewed_by, flag.reviewed_at = decision, note, actor, timezone.now()
        flag.save(update_fields=["status", "note", "reviewed_by", "reviewed_at"])
        annotator = flag.rating.annotator
        audit_record(
            actor=actor,
            verb=f"study.flag.{decision}",
            obj=flag,
            payload={
                "rule": flag.rule,
                "value": flag.value,
                "estimate": flag.estimate,
                "note": note,
                "annotator": annotator.user_id,
                "study": annotator.study_id,
            },
        )
        design = study_design(annotator.study)
        n_confirmed = Flag.objects.filter(rating__annotator=annotator, status=Flag.Status.CONFIRMED).count()
        if annotator.status == Annotator.Status.ACTIVE and decision == Flag.Status.CONFIRMED:
            reason = rejection_reason(
                control_status=ControlStatus.PASSED,
                confirmed_flags=n_confirmed,
                max_confirmed_flags=design.max_confirmed_flags,
            )
            if reason is not None:
                detail = (
                    f"{n_confirmed} flags confirmed by reviewers "
                    f"(the design allows fewer than {design.max_confirmed_flags})"
                )
                _reject(annotator, reason=reason, detail=detail, actor=actor)
                rejected = annotator
    if rejected is not None:
        _deactivate_in_argilla(rejected, client=client)
    return flag


TRANSLATION_SYSTEM = (
    "You translate short texts into English for a reviewer. Render the meaning faithfully, keep "
    "errors and odd wording visible rather than fixing them, and reply with the translation only."
)
TRANSLATION_USER = "Translate this {language} text into English:\n\n{text}"


def study_item_translate(
    *, item: StudyItem, actor: AbstractBaseUser | None = None, backend_alias: str = "default"
) -> dict[str, str]:
    """English translations of a non-English item's texts for reviewers, from the LLM backend
    (cached on the item). Texts already in English are left as they are."""
    todo = {
        side: (text, lang)
        for side, text, lang in (("a", item.text_a, item.language_a), ("b", item.text_b, item.language_b))
        if lang and lang != "en" and side not in item.translations
    }
    if not todo:
        return item.translations
    try:
        backend = get_backend(backend_alias)
    except ImproperlyConfigured as exc:
        raise ShiftlabError(str(exc)) from exc
    requests = [
        ChatRequest(
            messages=[
                {"role": "system", "content": TRANSLATION_SYSTEM},
                {
                    "role": "user",
                    "content": TRANSLATION_USER.format(language=language_name(lang, default=lang), text=text),
                },
            ],
            seed=0,
            temperature=0.0,
            top_p=1.0,
            max_tokens=256,
        )
        for text, lang in todo.values()
    ]
    results = backend.generate(requests)
    translations = dict(item.translations)
    for side, result in zip(todo, results, strict=True):
        if isinstance(result, ChatFailure):
            raise ShiftlabError(f"the LLM backend {backend_alias!r} could not translate: {result.message}")
        translations[side] = result.text.strip()
    with transaction.atomic():
        StudyItem.objects.filter(pk=item.pk).update(translations=translations)
        audit_record(actor=actor, verb="study.item.translate", obj=item, payload={"backend": backend_alias})
    item.translations = translations
    return translations
