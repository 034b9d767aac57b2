"""Services of human-validation studies: the only code that writes studies, talks to Argilla
(through ``annotation.argilla.client``) and asks the LLM judge for estimates.

Order of a study: create (draft) → lock (sample items and controls; design frozen) → publish
(Argilla workspace, annotator accounts, dataset, records) → sync (submitted responses into
``Rating``) → validate (control check, flags, rejections by rule) → review flags → gate →
approve/reject → export a benchmark config. Every researcher decision is audited.
"""

from __future__ import annotations

import secrets
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from django.contrib.auth.base_user import AbstractBaseUser
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.utils import timezone

from annotation import agreement, config_export
from annotation.argilla import ArgillaError
from annotation.argilla import client as argilla
from annotation.controls import ControlRating, ControlStatus, ItemKind, control_check, control_pairs, expected_value
from annotation.controls import n_controls as controls_needed
from annotation.design import JUDGE_KIND_OF_QUESTION, DesignError, StudyDesign, StudyKind
from annotation.gating import gate_decide
from annotation.models import (
    Annotator,
    Approval,
    BenchmarkConfig,
    Flag,
    GateResult,
    RaterDecision,
    Rating,
    RatingComment,
    RatingRevision,
    Study,
    StudyItem,
)
from annotation.sampling import Unit, stratified_sample
from annotation.validation import RejectionReason, flags_for_rating, llm_estimate, rejection_reason
from core.errors import ShiftlabError
from core.hashing import sha256_json, sha256_text
from core.roles import Role, has_role
from core.services import audit_record
from transforms.models import PromptTemplate, TransformedItem, TransformRun
from transforms.registry import TRANSFORMATIONS, transformation_get

FIELDS = {
    StudyKind.REWRITE: (
        argilla.TextField("original", "Original text"),
        argilla.TextField("transformed", "Rewritten text"),
    ),
    StudyKind.SIMILARITY: (argilla.TextField("original", "Text 1"), argilla.TextField("transformed", "Text 2")),
}
COMMENT_TITLE = "Anything you want to tell the researchers about this pair? (optional)"
DEFAULT_GUIDELINES = {
    StudyKind.REWRITE: (
        "Each task shows an original text and a rewritten version of it. Read both, then answer:\n\n"
        "- **Quality** (1-5): how well does the rewrite keep the meaning of the original? 5 = the "
        "meaning is fully kept, 1 = it is lost or changed. A rewrite may be in another language.\n"
        "- **Fluency** (1-5): how natural and well-formed is the rewrite, as a text of its own "
        "language? 5 = reads like careful human writing, 1 = broken.\n\n"
        "Judge each pair on its own. Use the comment box for anything odd (offensive content, a "
        "text you cannot read). Submit when you are sure; you may come back and change an answer."
    ),
    StudyKind.SIMILARITY: (
        "Each task shows two texts. Rate how similar their meanings are, from 0 (unrelated) to 5 "
        "(they say exactly the same thing). Judge meaning, not wording. Use the comment box for "
        "anything odd. Submit when you are sure; you may come back and change an answer."
    ),
}


def study_design(study: Study) -> StudyDesign:
    return StudyDesign.from_dict(study.design)


def _design_error(exc: DesignError) -> ShiftlabError:
    return ShiftlabError(str(exc))


def _check_runs(runs: Sequence[TransformRun]) -> list[TransformRun]:
    runs = list(dict.fromkeys(runs))
    if not runs:
        raise ShiftlabError("a study needs at least one transformation run: pass the ids of succeeded runs")
    unfinished = [f"{r.pk} ({r.status})" for r in runs if r.status != TransformRun.Status.SUCCEEDED]
    if unfinished:
        raise ShiftlabError(f"only succeeded runs can be validated; not succeeded: {', '.join(unfinished)}")
    return runs


def _check_judges(design: StudyDesign) -> None:
    from transforms.backends import get_backend

    for alias in design.llm_judges:
        try:
            get_backend(alias)
        except ImproperlyConfigured as exc:
            raise ShiftlabError(f"design.llm_judges: {exc}") from exc


def _require_researcher(actor: AbstractBaseUser | None) -> None:
    if actor is not None and not has_role(actor, Role.RESEARCHER, Role.ADMIN):
        raise ShiftlabError(f"{actor.get_username()} is not a researcher: only researchers decide on studies")


# --- design, versions, lock -------------------------------------------------------------------


def study_create(
    *,
    name: str,
    runs: Sequence[TransformRun],
    design: StudyDesign,
    project: str = "shiftlab",
    created_by: AbstractBaseUser | None = None,
) -> Study:
    """A draft study (version 1) over succeeded runs. Its design can change until it is locked."""
    runs = _check_runs(runs)
    _check_judges(design)
    if Study.objects.filter(name=name).exists():
        raise ShiftlabError(f"a study named {name!r} exists: revise it (new version) or choose another name")
    study = Study(
        name=name, project=project, design=design.to_dict(), design_hash=design.content_hash, created_by=created_by
    )
    try:
        study.full_clean(exclude=["runs"])
    except Exception as exc:  # ValidationError: report which field is wrong
        raise ShiftlabError(f"invalid study: {exc}") from exc
    with transaction.atomic():
        study.save()
        study.runs.set(runs)
        audit_record(
            actor=created_by,
            verb="study.create",
            obj=study,
            payload={"runs": [r.pk for r in runs], "design": design.to_dict()},
        )
    return study


def study_update_design(*, study: Study, design: StudyDesign, actor: AbstractBaseUser | None = None) -> Study:
    """Change the design of a draft study; a locked study refuses (revise it instead)."""
    _check_judges(design)
    with transaction.atomic():
        study = Study.objects.select_for_update().get(pk=study.pk)
        if study.is_locked:
            raise ShiftlabError(f"{study} is locked: its design cannot change. Revise it to make a new version.")
        study.design, study.design_hash = design.to_dict(), design.content_hash
        study.save(update_fields=["design", "design_hash"])
        audit_record(actor=actor, verb="study.design.update", obj=study, payload=design.to_dict())
    return study


def study_revise(
    *,
    study: Study,
    design: StudyDesign | None = None,
    runs: Sequence[TransformRun] | None = None,
    actor: AbstractBaseUser | None = None,
) -> Study:
    """A new draft version of a study with a changed design and/or runs; the old one is untouched."""
    design = design or study_design(study)
    runs = _check_runs(runs if runs is not None else list(study.runs.all()))
    _check_judges(design)
    with transaction.atomic():
        latest = Study.objects.filter(name=study.name).order_by("-version").first()
        revised = Study.objects.create(
            name=study.name,
            version=latest.version + 1,
            previous=study,
            project=study.project,
            design=design.to_dict(),
            design_hash=design.content_hash,
            created_by=actor,
        )
        revised.runs.set(runs)
        audit_record(
            actor=actor,
            verb="study.revise",
            obj=revised,
            payload={"previous": study.pk, "design": design.to_dict(), "runs": [r.pk for r in runs]},
        )
    return revised


def _stratum(out: TransformedItem) -> str:
    return f"{out.run.dataset.name}|{out.item.language}>{out.target_language}"


def _rng(seed: int, label: str) -> np.random.Generator:
    return np.random.default_rng([seed, int(sha256_text(label)[:12], 16)])


def study_lock(*, study: Study, actor: AbstractBaseUser | None = None) -> Study:
    """Freeze the design and draw the study's items: a seeded stratified sample of successfully
    transformed texts per transformation, plus control items, in a seeded shuffled order.

    Locking a locked study changes nothing.
    """
    with transaction.atomic():
        study = Study.objects.select_for_update().get(pk=study.pk)
        if study.is_locked:
            return study
        design = study_design(study)
        outputs = (
            TransformedItem.objects.filter(run__in=study.runs.all(), ok=True)
            .exclude(output_text="")
            .select_related("run__dataset", "item")
            .order_by("pk")
        )
        by_transformation: dict[str, list[TransformedItem]] = defaultdict(list)
        for out in outputs:
            by_transformation[out.run.transformation].append(out)
        transformations = sorted({r.transformation for r in study.runs.all()})
        empty = [t for t in transformations if not by_transformation[t]]
        if empty:
            raise ShiftlabError(
                f"no successfully transformed texts for {', '.join(empty)} in the study's runs: "
                "nothing to validate there; remove those runs (revise the study) or rerun them"
            )
        chosen: list[TransformedItem] = []
        sample_info = {}
        for name in transformations:
            pool = {o.pk: o for o in by_transformation[name]}
            sample = stratified_sample(
                [Unit(pk, _stratum(o)) for pk, o in pool.items()],
                design.items_per_transformation,
                rng=_rng(design.seed, name),
            )
            chosen.extend(pool[pk] for pk in sample.keys)
            sample_info[name] = {
                "drawn": len(sample.keys),
                "allocation": sample.allocation,
                "available": sample.available,
                "shortfall": sample.shortfall,
            }
        n_ctrl = controls_needed(
            len(chosen), batch_size=design.batch_size, controls_per_batch=design.controls_per_batch
        )
        try:
            controls = control_pairs(
                [o.source_text for o in chosen],
                [o.output_text for o in chosen],
                n_ctrl,
                rng=_rng(design.seed, "controls"),
            )
        except ValueError as exc:
            raise ShiftlabError(f"cannot build control items: {exc}") from exc
        rows = [
            StudyItem(
                study=study,
                position=0,
                kind=ItemKind.REAL,
                transformed_item=o,
                transformation=o.run.transformation,
                stratum=_stratum(o),
                text_a=o.source_text,
                text_b=o.output_text,
                language_a=o.item.language,
                language_b=o.target_language,
            )
            for o in chosen
        ]
        for pair in controls:
            source = chosen[pair.source_index]
            expected = {q.name: v for q in design.questions if (v := expected_value(pair.kind, q)) is not None}
            language_b = source.item.language if pair.kind == ItemKind.EASY_POSITIVE else ""
            rows.append(
                StudyItem(
                    study=study,
                    position=0,
                    kind=pair.kind,
                    text_a=pair.text_a,
                    text_b=pair.text_b,
                    language_a=source.item.language,
                    language_b=language_b,
                    expected=expected,
                )
            )
        order = _rng(design.seed, "order").permutation(len(rows))
        for position, index in enumerate(order):
            rows[int(index)].position = position
        StudyItem.objects.bulk_create(rows)
        sample_info["controls"] = len(controls)
        study.sample_info = sample_info
        study.status, study.locked_at = Study.Status.LOCKED, timezone.now()
        study.save(update_fields=["sample_info", "status", "locked_at"])
        audit_record(
            actor=actor, verb="study.lock", obj=study, payload={"design_hash": study.design_hash, "sample": sample_info}
        )
    return study


# --- Argilla: publish, annotators, sync ------------------------------------------------------


@contextmanager
def argilla_connection(client):
    """The given Argilla connection, or a new owner connection closed afterwards."""
    if client is not None:
        yield client
        return
    with closing(argilla.client_get()) as owned:
        yield owned


def require_annotators(users: Iterable[AbstractBaseUser]) -> None:
    """Only members of the annotator group may be given Argilla annotator accounts."""
    for user in users:
        if not has_role(user, Role.ANNOTATOR):
            raise ShiftlabError(f"{user.get_username()} is not in the 'annotator' group: add them there first")


def annotator_accounts_ensure(
    *, users: Sequence[AbstractBaseUser], workspace: str, client
) -> tuple[dict[Any, Any], dict[str, str]]:
    """Ensure ``workspace`` and an Argilla annotator account in it for each user (a connection from
    ``argilla_connection``). Returns (user pk -> Argilla user id, username -> initial password of each account
    created now). Existing accounts keep their password."""
    argilla.workspace_ensure(workspace, client=client)
    user_ids, new_accounts = {}, {}
    for user in users:
        username = user.get_username()
        password = None
        if argilla.user_get_id(username, client=client) is None:
            password = secrets.token_urlsafe(12)
            new_accounts[username] = password
        user_ids[user.pk] = argilla.user_ensure(
            username, password or secrets.token_urlsafe(12), "annotator", workspace, client=client
        )
    return user_ids, new_accounts


def mark_published(study, *, actor: AbstractBaseUser | None, verb: str, payload: dict):
    """Mark a study (validation or baseline) published, under a row lock; audited as ``verb`` the
    first time and ``verb.again`` on a later publish. Returns the fresh row."""
    with transaction.atomic():
        study = type(study).objects.select_for_update().get(pk=study.pk)
        first = study.published_at is None
        study.status = type(study).Status.PUBLISHED
        study.published_at = study.published_at or timezone.now()
        study.save(update_fields=["status", "published_at"])
        audit_record(actor=actor, verb=verb if first else f"{verb}.again", obj=study, payload=payload)
    return study


@dataclass(frozen=True)
class PublishResult:
    study: Study
    dataset_id: str
    records: int
    new_accounts: dict[str, str] = field(default_factory=dict)  # username -> initial Argilla password


def study_publish(
    *,
    study: Study,
    annotators: Iterable[AbstractBaseUser] = (),
    actor: AbstractBaseUser | None = None,
    client=None,
) -> PublishResult:
    """Publish the study to Argilla (locking it first if it is a draft) and provision annotators.

    Idempotent: the workspace, accounts and dataset are reused when they exist and records are
    upserted by their opaque id, so an interrupted publish can simply be run again, and running it
    with more annotators adds them. New Argilla accounts get a random password, returned once in
    ``new_accounts`` for the researcher to hand over; existing accounts keep theirs.
    """
    if not study.is_locked:
        study = study_lock(study=study, actor=actor)
    design = study_design(study)
    users = list(dict.fromkeys(annotators))
    require_annotators(users)
    for user in users:
        existing = Annotator.objects.filter(study=study, user=user, status=Annotator.Status.REJECTED).first()
        if existing:
            raise ShiftlabError(f"{user.get_username()} was rejected in {study}: they cannot rate it again")
    items = list(study.items.order_by("position"))
    with argilla_connection(client) as conn:
        user_ids, new_accounts = annotator_accounts_ensure(users=users, workspace=study.project, client=conn)
        for user in users:
            Annotator.objects.update_or_create(study=study, user=user, defaults={"argilla_user_id": user_ids[user.pk]})
        dataset_id = study.argilla_dataset_id or argilla.dataset_find(study.project, study.argilla_name, client=conn)
        if dataset_id is None:
            questions = [argilla.RatingQuestion(q.name, q.title, q.values, q.description) for q in design.questions]
            dataset_id = argilla.dataset_create(
                client=conn,
                workspace=study.project,
                name=study.argilla_name,
                fields=FIELDS[design.kind],
                rating_questions=questions,
                comment_question=COMMENT_TITLE,
                guidelines=design.guidelines or DEFAULT_GUIDELINES[design.kind],
                min_submitted=design.raters_per_item,
            )
        Study.objects.filter(pk=study.pk).update(argilla_dataset_id=dataset_id)
        field_a, field_b = (f.name for f in FIELDS[design.kind])
        # Opaque id and the two texts only: kind, expected answers and estimates stay in Django.
        records = [
            argilla.RecordIn(external_id=i.external_id, fields={field_a: i.text_a, field_b: i.text_b}) for i in items
        ]
        argilla.records_log(dataset_id, records, client=conn)
    study = mark_published(
        study,
        actor=actor,
        verb="study.publish",
        payload={
            "dataset_id": str(dataset_id),
            "records": len(records),
            "annotators": [u.get_username() for u in users],
        },
    )
    return PublishResult(study=study, dataset_id=str(dataset_id), records=len(records), new_accounts=new_accounts)


@dataclass(frozen=True)
class SyncResult:
    created: int = 0
    updated: int = 0
    withdrawn: int = 0
    unchanged: int = 0
    ignored_users: int = 0
    ignored_records: int = 0

    @property
    def changed(self) -> int:
        return self.created + self.updated + self.withdrawn


def study_sync(*, study: Study, client=None) -> SyncResult:
    """Bring the submitted responses of the study's Argilla dataset into ``Rating`` rows.

    Idempotent: a rating exists once per (item, annotator, question); re-syncing unchanged
    responses writes nothing. Only submitted responses count: a response that is a draft or
    discarded, or was deleted, makes the matching ratings inactive. A changed value updates the
    rating, increments ``edits`` and adds a ``RatingRevision``.
    """
    study = Study.objects.get(pk=study.pk)
    if study.argilla_dataset_id is None:
        raise ShiftlabError(f"{study} is not published yet: publish it before syncing responses")
    design = study_design(study)
    question_names = {q.name: q for q in design.questions}
    with argilla_connection(client) as conn:
        rows = list(argilla.responses_fetch(study.argilla_dataset_id, client=conn))
    responses: dict[tuple[str, Any], dict] = {}
    for row in rows:
        entry = responses.setdefault(
            (row.record_external_id, row.user_id), {"status": row.status, "at": row.updated_at, "values": {}}
        )
        if row.question is not None:
            entry["values"][row.question] = row.value
    counts = defaultdict(int)
    now = timezone.now()
    with transaction.atomic():
        study = Study.objects.select_for_update().get(pk=study.pk)
        items = {i.external_id: i for i in study.items.all()}
        annotators = {a.argilla_user_id: a for a in study.annotators.select_related("user")}
        existing = {
            (r.study_item_id, r.annotator_id, r.question): r for r in Rating.objects.filter(study_item__study=study)
        }
        items_by_pk = {i.pk: i for i in items.values()}
        annotators_by_pk = {a.pk: a for a in annotators.values()}
        seen: set[tuple[int, int, str]] = set()
        for (external_id, user_id), response in responses.items():
            item, annotator = items.get(external_id), annotators.get(user_id)
            if item is None:
                counts["ignored_records"] += 1
                continue
            if annotator is None:
                counts["ignored_users"] += 1
                continue
            if response["status"] != "submitted":
                continue  # handled below: its ratings, if any, become inactive
            for question, value in response["values"].items():
                if question == "comment":
                    RatingComment.objects.update_or_create(
                        study_item=item, annotator=annotator, defaults={"text": str(value or "")}
                    )
                    continue
                spec = question_names.get(question)
                if spec is None or not isinstance(value, int) or not spec.low <= value <= spec.high:
                    continue
                key = (item.pk, annotator.pk, question)
                seen.add(key)
                rating = existing.get(key)
                if rating is None:
                    rating = Rating.objects.create(
                        study_item=item,
                        annotator=annotator,
                        question=question,
                        value=value,
                        submitted_at=response["at"],
                    )
                    RatingRevision.objects.create(
                        rating=rating, value=value, status="submitted", argilla_updated_at=response["at"]
                    )
                    counts["created"] += 1
                elif rating.value != value or not rating.active:
                    rating.edits += 1
                    rating.value, rating.active, rating.submitted_at = value, True, response["at"]
                    rating.save(update_fields=["value", "active", "submitted_at", "edits", "updated_at"])
                    RatingRevision.objects.create(
                        rating=rating, value=value, status="submitted", argilla_updated_at=response["at"]
                    )
                    counts["updated"] += 1
                else:
                    counts["unchanged"] += 1
        for key, rating in existing.items():
            if key in seen or not rating.active:
                continue
            item, annotator = items_by_pk[key[0]], annotators_by_pk[key[1]]
            status = responses.get((item.external_id, annotator.argilla_user_id), {}).get("status", "missing")
            rating.active = False
            rating.save(update_fields=["active", "updated_at"])
            RatingRevision.objects.create(rating=rating, value=None, status=status)
            counts["withdrawn"] += 1
        result = SyncResult(**counts)
        study.synced_at = now
        fields = ["synced_at"]
        if result.changed:
            study.ratings_changed_at = now
            fields.append("ratings_changed_at")
        study.save(update_fields=fields)
        if result.changed:
            audit_record(actor=None, verb="study.sync", obj=study, payload=dict(counts))
    return result


# --- validation: estimates, control check, flags, rejections ---------------------------------


def study_estimate(*, study: Study) -> int:
    """LLM judge estimates for the real items that lack them, per question and judge; returns the
    number of items updated. Judgements are cached by the judge, so this is cheap to repeat."""
    from transforms.judge_services import judge_pairs
    from transforms.judging import SCALES, JudgeKind

    design = study_design(study)
    if not design.llm_judges:
        return 0
    items = [
        i
        for i in study.items.filter(kind=ItemKind.REAL).order_by("position")
        if any(q.name not in i.llm_estimates for q in design.questions)
    ]
    if not items:
        return 0
    pairs = [(i.text_a, i.text_b) for i in items]
    estimates: list[dict] = [{} for _ in items]
    for question in design.questions:
        kind = JudgeKind(JUDGE_KIND_OF_QUESTION[question.name])
        per_judge = {
            alias: judge_pairs(kind=kind, pairs=pairs, backend_alias=alias, seed=design.seed)
            for alias in design.llm_judges
        }
        for n, _ in enumerate(items):
            scores = {alias: judgements[n].score for alias, judgements in per_judge.items()}
            estimate = llm_estimate(
                list(scores.values()), judge_scale=SCALES[kind], question_scale=(question.low, question.high)
            )
            estimates[n][question.name] = {"scores": scores, "estimate": estimate}
    with transaction.atomic():
        for item, values in zip(items, estimates, strict=True):
            item.llm_estimates = {**item.llm_estimates, **values}
            item.save(update_fields=["llm_estimates"])
    return len(items)


def control_checks(study: Study) -> dict[int, Any]:
    """Annotator id -> ControlCheck over their active ratings of control items (pure rule)."""
    design = study_design(study)
    per_annotator: dict[int, list[ControlRating]] = defaultdict(list)
    ratings = Rating.objects.filter(study_item__study=study, active=True).exclude(study_item__kind=ItemKind.REAL)
    for rating in ratings.select_related("study_item"):
        expected = rating.study_item.expected.get(rating.question)
        if expected is not None:
            per_annotator[rating.annotator_id].append(ControlRating(expected=expected, value=rating.value))
    return {
        a.pk: control_check(
            per_annotator.get(a.pk, []), margin=design.control_margin, min_ratings=design.min_control_ratings
        )
        for a in study.annotators.all()
    }


@dataclass(frozen=True)
class ValidationResult:
    estimated_items: int
    control_status: dict[str, str]  # username -> passed/failed/insufficient
    flags_created: int
    flags_removed: int
    rejected: dict[str, str]  # username -> reason


def study_validate(
    *, study: Study, actor: AbstractBaseUser | None = None, estimate: bool = True, client=None
) -> ValidationResult:
    """Apply the declared validation pipeline: judge estimates, control check per rater, LLM and
    low-rating flags, and rejections by rule (failed controls; too many confirmed flags)."""
    study = Study.objects.get(pk=study.pk)
    if study.published_at is None:
        raise ShiftlabError(f"{study} is not published: there are no ratings to validate")
    design = study_design(study)
    estimated = study_estimate(study=study) if estimate else 0
    created = removed = 0
    to_reject: list[tuple[Annotator, RejectionReason, str]] = []
    with transaction.atomic():
        study = Study.objects.select_for_update().get(pk=study.pk)
        checks = control_checks(study)
        annotators = {a.pk: a for a in study.annotators.select_related("user")}
        for annotator in annotators.values():
            annotator.control_status = checks[annotator.pk].status
            annotator.save(update_fields=["control_status"])
        ratings = Rating.objects.filter(study_item__study=study, study_item__kind=ItemKind.REAL).select_related(
            "study_item"
        )
        flags = defaultdict(dict)
        for flag in Flag.objects.filter(rating__study_item__study=study):
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
        confirmed = defaultdict(int)
        for flag in Flag.objects.filter(rating__study_item__study=study, status=Flag.Status.CONFIRMED):
            confirmed[flag.rating.annotator_id] += 1
        for annotator in annotators.values():
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


def _reject(annotator: Annotator, *, reason: RejectionReason, detail: str, actor) -> RaterDecision:
    annotator.status = Annotator.Status.REJECTED
    annotator.save(update_fields=["status"])
    decision = RaterDecision.objects.create(annotator=annotator, reason=reason, detail=detail, decided_by=actor)
    audit_record(
        actor=actor,
        verb="study.annotator.reject",
        obj=annotator,
        payload={"reason": reason.value, "detail": detail, "study": annotator.study_id},
    )
    return decision


def _deactivate_in_argilla(annotator: Annotator, *, client=None) -> bool:
    """Take a rejected annotator out of the project's Argilla workspace; False if Argilla failed
    (the rejection stands in Django and the page offers to retry)."""
    try:
        with argilla_connection(client) as conn:
            argilla.user_deactivate(annotator.user.get_username(), annotator.study.project, client=conn)
    except ArgillaError as exc:
        audit_record(actor=None, verb="study.annotator.deactivate.failed", obj=annotator, payload={"error": str(exc)})
        return False
    Annotator.objects.filter(pk=annotator.pk).update(argilla_deactivated=True)
    audit_record(
        actor=None, verb="study.annotator.deactivate", obj=annotator, payload={"project": annotator.study.project}
    )
    return True


def annotator_reject(*, annotator: Annotator, detail: str, actor: AbstractBaseUser, client=None) -> RaterDecision:
    """A researcher rejects an annotator by hand, with a reason; their ratings stop counting."""
    _require_researcher(actor)
    if not detail.strip():
        raise ShiftlabError("give a reason for rejecting the annotator")
    with transaction.atomic():
        annotator = Annotator.objects.select_for_update().select_related("user", "study").get(pk=annotator.pk)
        if annotator.status == Annotator.Status.REJECTED:
            raise ShiftlabError(f"{annotator} is already rejected")
        decision = _reject(annotator, reason=RejectionReason.MANUAL, detail=detail.strip(), actor=actor)
    _deactivate_in_argilla(annotator, client=client)
    return decision


def flag_review(*, flag: Flag, decision: str, actor: AbstractBaseUser, note: str = "", client=None) -> Flag:
    """Confirm or dismiss an open flag. Confirming can reject the rater under the declared
    "repeatedly deviant" rule, applied at once."""
    _require_researcher(actor)
    if decision not in (Flag.Status.CONFIRMED, Flag.Status.DISMISSED):
        raise ShiftlabError(f"decision must be 'confirmed' or 'dismissed', got {decision!r}")
    rejected = None
    with transaction.atomic():
        flag = Flag.objects.select_for_update().select_related("rating__annotator__study").get(pk=flag.pk)
        if flag.status != Flag.Status.OPEN:
            raise ShiftlabError(f"flag {flag.pk} was already {flag.status} by a reviewer")
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
    from transforms.backends import get_backend
    from transforms.backends.base import ChatFailure, ChatRequest
    from transforms.registry import LANGUAGE_NAMES

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
                    "content": TRANSLATION_USER.format(language=LANGUAGE_NAMES.get(lang, lang), text=text),
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


# --- agreement, gate, approval ---------------------------------------------------------------


@dataclass(frozen=True)
class CountedRating:
    item_id: int
    annotator_id: int
    question: str
    value: int
    transformation: str


def counted_ratings(study: Study) -> list[CountedRating]:
    """Ratings that enter agreement and the gate: active ratings of real items by annotators who
    are not rejected and whose control check passed (so unchecked raters do not count yet)."""
    checks = control_checks(study)
    ok = {
        a.pk
        for a in study.annotators.all()
        if a.status == Annotator.Status.ACTIVE and checks[a.pk].status == ControlStatus.PASSED
    }
    ratings = Rating.objects.filter(
        study_item__study=study, study_item__kind=ItemKind.REAL, active=True, annotator_id__in=ok
    ).select_related("study_item")
    return [
        CountedRating(r.study_item_id, r.annotator_id, r.question, r.value, r.study_item.transformation)
        for r in ratings.order_by("study_item__position", "annotator_id", "question")
    ]


def study_agreement(study: Study, ratings: Sequence[CountedRating] | None = None) -> dict[str, dict]:
    """Agreement per transformation, per axis and overall, each per question."""
    design = study_design(study)
    ratings = counted_ratings(study) if ratings is None else ratings
    groups: dict[str, Callable[[CountedRating], bool]] = {"overall": lambda r: True}
    transformations = sorted({r.transformation for r in study.runs.all()})
    for name in sorted({transformation_get(t).axis.value for t in transformations}):
        groups[f"axis:{name}"] = lambda r, name=name: transformation_get(r.transformation).axis.value == name
    for name in transformations:
        groups[f"transformation:{name}"] = lambda r, name=name: r.transformation == name
    report = {}
    for group, keep in groups.items():
        report[group] = {}
        for question in design.questions:
            triples = [(r.item_id, r.annotator_id, r.value) for r in ratings if r.question == question.name and keep(r)]
            matrix, _, _ = agreement.ratings_matrix(triples)
            report[group][question.name] = agreement.agreement_summary(matrix, categories=question.values).to_dict()
    return report


def study_gate(*, study: Study, actor: AbstractBaseUser | None = None) -> list[GateResult]:
    """Evaluate the gate of every transformation of the study and store its evidence.

    Needs a validation run after the last change of ratings, so that rejections are applied.
    """
    study = Study.objects.get(pk=study.pk)
    design = study_design(study)
    if study.validated_at is None or (study.ratings_changed_at and study.ratings_changed_at > study.validated_at):
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
        for d in RaterDecision.objects.filter(annotator__study=study).select_related("annotator__user")
    ]
    unchecked = [
        a.user.get_username()
        for a in study.annotators.select_related("user")
        if a.status == Annotator.Status.ACTIVE and a.control_status != ControlStatus.PASSED
    ]
    results = []
    with transaction.atomic():
        for name in sorted({r.transformation for r in study.runs.all()}):
            per_question = report[f"transformation:{name}"]
            decision = gate_decide(
                {q: s["mean"] for q, s in per_question.items()}, threshold=design.acceptance_threshold
            )
            mine = [r for r in ratings if r.transformation == name]
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
                "reasons": list(decision.reasons),
                "n_items": len({r.item_id for r in mine}),
                "n_ratings": len(mine),
                "n_raters": len({r.annotator_id for r in mine}),
                "questions": per_question,
                "rejections": rejections,
                "raters_not_counted_unchecked_controls": unchecked,
                "sample": study.sample_info.get(name, {}),
            }
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
    approved; a passed one may still be rejected. One decision per gate result."""
    _require_researcher(actor)
    if decision not in Approval.Decision.values:
        raise ShiftlabError(f"decision must be 'approve' or 'reject', got {decision!r}")
    if not comment.strip():
        raise ShiftlabError("give a comment with the decision: it goes into the audit log and the exported config")
    with transaction.atomic():
        gate_result = GateResult.objects.select_for_update().get(pk=gate_result.pk)
        current = gate_result_current(study=gate_result.study, transformation=gate_result.transformation)
        if current.pk != gate_result.pk:
            raise ShiftlabError(f"gate result {gate_result.pk} is outdated: decide on the current one ({current.pk})")
        if Approval.objects.filter(gate_result=gate_result).exists():
            raise ShiftlabError(
                f"{gate_result.transformation} in {gate_result.study} was already decided on "
                "for this gate result; gate the study again to decide anew"
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


# --- export ----------------------------------------------------------------------------------


def approved_gate_results(studies: Sequence[Study] | None = None) -> list[GateResult]:
    """The current gate result of each (study, transformation) when it carries an approval."""
    candidates = GateResult.objects.select_related("study", "approval").order_by(
        "study_id", "transformation", "-created_at", "-id"
    )
    if studies is not None:
        candidates = candidates.filter(study__in=studies)
    current: dict[tuple[int, str], GateResult] = {}
    for result in candidates:
        current.setdefault((result.study_id, result.transformation), result)
    return [r for r in current.values() if hasattr(r, "approval") and r.approval.decision == Approval.Decision.APPROVE]


def _run_entry(run: TransformRun) -> dict:
    prompts = []
    for key, digest in sorted(run.prompt_hashes.items()):
        template = PromptTemplate.objects.filter(key=key, content_hash=digest).first()
        if template is None:
            raise ShiftlabError(f"run {run.pk}: prompt {key} with hash {digest[:12]} is missing; cannot export it")
        prompts.append(
            {"key": key, "version": template.version, "hash": digest, "system": template.system, "user": template.user}
        )
    generator = run.generator
    return {
        "run_id": run.pk,
        "run_hash": run.run_hash,
        "seed": run.seed,
        "dataset": {
            "name": run.dataset.name,
            "content_hash": run.dataset.content_hash,
            "task_type": run.dataset.task_type,
            "languages": run.dataset.languages,
        },
        "generator": {
            "backend_alias": generator.backend_alias,
            "model": generator.model,
            "params": generator.params,
            "hash": generator.content_hash,
        },
        "prompts": prompts,
        "target_languages": run.languages,
        "run_language": run.run_language,
        "item_limit": run.item_limit,
    }


def benchmark_config_export(
    *, actor: AbstractBaseUser | None = None, studies: Sequence[Study] | None = None, name: str = ""
) -> BenchmarkConfig:
    """Write the validated benchmark config of every approved transformation (of ``studies``, or
    of all studies): prompts with hashes, generator, seeds, languages, datasets with content hashes
    and the evidence behind each approval; it carries its own hash."""
    approved = approved_gate_results(studies)
    if not approved:
        raise ShiftlabError("no approved transformation to export: gate a study and approve a transformation first")
    transformations = []
    datasets = {}
    for result in sorted(approved, key=lambda r: (r.transformation, r.study.name, r.study.version)):
        runs = [
            _run_entry(run)
            for run in result.study.runs.filter(transformation=result.transformation)
            .select_related("dataset", "generator")
            .order_by("pk")
        ]
        for run in runs:
            datasets[run["dataset"]["name"]] = run["dataset"]
        spec = TRANSFORMATIONS[result.transformation]
        approval = result.approval
        transformations.append(
            {
                "transformation": result.transformation,
                "axis": spec.axis.value,
                "study": {
                    "name": result.study.name,
                    "version": result.study.version,
                    "design_hash": result.study.design_hash,
                    "design": result.study.design,
                },
                "runs": runs,
                "approval": {
                    "decision": approval.decision,
                    "by": approval.decided_by.get_username(),
                    "at": approval.decided_at.isoformat(),
                    "comment": approval.comment,
                },
                "gate": {
                    "id": result.pk,
                    "passed": result.passed,
                    "evidence_hash": result.evidence_hash,
                    "evidence": result.evidence,
                },
            }
        )
    document = config_export.config_seal(
        {
            "name": name,
            "exported_at": timezone.now().isoformat(),
            "exported_by": actor.get_username() if actor is not None else "",
            "transformations": transformations,
            "datasets": [datasets[k] for k in sorted(datasets)],
        }
    )
    with transaction.atomic():
        config = BenchmarkConfig.objects.create(
            name=name,
            document=document,
            config_hash=document[config_export.HASH_KEY],
            json_text=config_export.config_render(document, "json"),
            yaml_text=config_export.config_render(document, "yaml"),
            created_by=actor,
        )
        audit_record(
            actor=actor,
            verb="benchmark_config.export",
            obj=config,
            payload={
                "config_hash": config.config_hash,
                "transformations": [
                    (t["transformation"], t["study"]["name"], t["study"]["version"]) for t in transformations
                ],
            },
        )
    return config


@dataclass(frozen=True)
class ConfigCheck:
    verification: config_export.Verification
    known: BenchmarkConfig | None  # the exported row with this hash, if this platform made it

    @property
    def ok(self) -> bool:
        return self.verification.ok


def benchmark_config_verify(*, text: str, fmt: config_export.Format) -> ConfigCheck:
    """Verify an exported config file (hash and canonical form) and look it up among exports."""
    verification = config_export.config_verify(text, fmt)
    known = None
    if verification.declared_hash:
        known = BenchmarkConfig.objects.filter(config_hash=verification.declared_hash).first()
    return ConfigCheck(verification=verification, known=known)
