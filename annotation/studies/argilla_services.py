"""Services that talk to Argilla for human-validation studies and human baselines (through
``annotation.argilla.client``): annotator accounts, publishing a study's dataset and records, and
syncing the submitted responses of a validation study into ``Rating`` rows.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from celery.result import AsyncResult
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from annotation.argilla import client as argilla
from annotation.argilla.client import argilla_connection
from annotation.models import Annotator, Assignment, BaselineStudy, Study
from annotation.science.design import StudyKind
from annotation.studies.assignment_services import study_assign, study_pull, submitted_items
from annotation.studies.design_services import study_design, study_lock
from annotation.studies.sync_services import study_sync
from annotation.studies.webhook_services import argilla_webhook_ensure, sync_task
from core.errors import ShiftlabError
from core.rosters import annotator_audit, roster_require
from core.services import audit_record

FIELDS = {
    StudyKind.REWRITE: (
        argilla.TextField("original", "Original text"),
        argilla.TextField("transformed", "Rewritten text"),
    ),
    StudyKind.SIMILARITY: (argilla.TextField("original", "Text 1"), argilla.TextField("transformed", "Text 2")),
    StudyKind.SENSITIVITY: (
        argilla.TextField("original", "First text"),
        argilla.TextField("transformed", "Second text"),
    ),
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
    StudyKind.SENSITIVITY: (
        "Each task shows two texts. The second one may or may not say something different from the "
        "first. Read both, then answer:\n\n"
        "- **Changed** (1-5): did the second text change the meaning of the first? 1 = no, both say "
        "the same thing (even in other words); 5 = yes, it clearly says something different (a fact, "
        "a number, who did what, or the opposite). A small word can change everything: read closely.\n"
        "- **Fluency** (1-5): how natural and well-formed is the second text? 5 = reads like careful "
        "human writing, 1 = broken.\n\n"
        "Judge each pair on its own. Use the comment box for anything odd. Submit when you are sure; "
        "you may come back and change an answer."
    ),
}


def annotator_roles_check(users: Iterable[AbstractBaseUser], *, client) -> dict[str, str]:
    """Every Argilla user's role, by username, after refusing any of ``users`` whose existing
    account has another role than annotator (an admin's or owner's account is never handed over):
    call it before anything is written."""
    roles = argilla.user_roles(client=client)
    for user in users:
        username = user.get_username()
        if username in roles:
            argilla.user_role_check(username, roles[username], "annotator", client=client)
    return roles


def _unseen_password() -> str:
    """The password of a new Argilla account: random, returned to nobody and stored nowhere."""
    return secrets.token_urlsafe(24)


def annotators_audit_published(
    study: Study | BaselineStudy, users: Iterable[AbstractBaseUser], *, actor: AbstractBaseUser | None
) -> None:
    """Record, in every project whose roster holds them, that ``users`` were published to ``study``."""
    for user in users:
        annotator_audit(actor=actor, verb="annotator.publish", user=user, obj=study, payload={"study": str(study)})


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
    study: Study | BaselineStudy
    dataset_id: str
    records: int
    new_accounts: tuple[str, ...] = ()  # usernames of the Argilla accounts created now (never a password)


# Argilla 2.8 takes any name of 1 to 200 characters for a workspace or a dataset; a workspace name
# is stored on the annotator row (``argilla_workspace``, 200 characters) once it is published.
ARGILLA_NAME_MAX = 200


def annotator_workspace(study: Study | BaselineStudy, user: AbstractBaseUser) -> str:
    """The Argilla workspace that holds only ``user``'s batch of ``study`` (one per study version,
    or baseline study, and annotator: Argilla shows an annotator every record of every dataset in
    their workspaces). Annotators read it in Argilla's breadcrumb, so it names the study, them and
    the project in words ("pilot v1 · anna · project team-a (study 12)"). Workspaces are one
    namespace for the whole deployment and outlive the database rows: the study's number keeps a
    study made again under a deleted one's name (or by another Shiftlab on the same Argilla) out of
    the old workspace and its records. A name past Argilla's limit falls back to the key form of
    earlier releases; a published annotator keeps the workspace stored on their row whatever this
    returns."""
    kind = "baseline" if isinstance(study, BaselineStudy) else "study"
    readable = f"{study} · {user.get_username()} · project {study.project.slug} ({kind} {study.pk})"
    return readable if len(readable) <= ARGILLA_NAME_MAX else _workspace_key(study, user)


def _workspace_key(study: Study | BaselineStudy, user: AbstractBaseUser) -> str:
    """The workspace name of releases before issue 42 (``pilot-v1-s2-anna-11``)."""
    slug = re.sub(r"[^a-z0-9]+", "-", user.get_username().lower()).strip("-")[:40] or "user"
    tag = "b" if isinstance(study, BaselineStudy) else "s"
    return f"{study.argilla_name}-{tag}{study.pk}-{slug}-{user.pk}"


def annotator_dataset_name(study: Study | BaselineStudy, user: AbstractBaseUser) -> str:
    """The title of ``user``'s dataset of ``study`` as Argilla shows it to them ("pilot v1: items
    for anna"); unique within its workspace, which holds only that dataset."""
    return f"{study}: items for {user.get_username()}"[:ARGILLA_NAME_MAX]


@dataclass(frozen=True)
class AnnotatorDataset:
    """Where one annotator's own batch of a study lives in Argilla."""

    user_id: UUID
    workspace: str
    dataset_id: UUID


def annotator_dataset_ensure(
    study: Study | BaselineStudy,
    user: AbstractBaseUser,
    *,
    workspace: str,
    dataset_id: UUID | None,
    spec: Mapping[str, Any],
    roles: dict[str, str],
    new_accounts: list[str],
    client,
) -> AnnotatorDataset:
    """Ensure ``user``'s own workspace for ``study`` (``workspace``, or a new one named by
    ``annotator_workspace``), their annotator account as its member, and their dataset of the
    study in it (``dataset_id``, or the one found by name, or a new one titled by
    ``annotator_dataset_name`` and created with ``spec``:
    fields, questions, guidelines, ``min_submitted``). A new account gets a random password that
    nobody is shown (its username is appended to ``new_accounts`` and recorded in ``roles``);
    existing accounts keep theirs.
    Idempotent: an interrupted run is finished by running it again."""
    username = user.get_username()
    workspace = workspace or annotator_workspace(study, user)
    argilla.workspace_ensure(workspace, client=client)
    if username not in roles:
        new_accounts.append(username)
        roles[username] = "annotator"
    user_id = argilla.user_ensure(username, _unseen_password(), "annotator", workspace, client=client)
    name = annotator_dataset_name(study, user)
    # A publish interrupted before issue 42 left a dataset under the study's key name: found, not doubled.
    dataset_id = (
        dataset_id
        or argilla.dataset_find(workspace, name, client=client)
        or argilla.dataset_find(workspace, study.argilla_name, client=client)
    )
    if dataset_id is None:
        dataset_id = argilla.dataset_create(client=client, workspace=workspace, name=name, **spec)
    return AnnotatorDataset(user_id=user_id, workspace=workspace, dataset_id=dataset_id)


def _study_dataset_spec(study: Study) -> dict[str, Any]:
    design = study_design(study)
    return {
        "fields": FIELDS[design.kind],
        "rating_questions": [
            argilla.RatingQuestion(q.name, q.title, q.values, q.description) for q in design.questions
        ],
        "comment_question": COMMENT_TITLE,
        "guidelines": design.guidelines or DEFAULT_GUIDELINES[design.kind],
        # One annotator per dataset: a record is done once its owner submitted it.
        "min_submitted": 1,
    }


def _released(live: list[Assignment], annotator: Annotator, ahead: int) -> list[Assignment]:
    """The active assignments whose records Argilla should hold now: all of them, or with
    ``ahead`` > 0, every batch that holds a record already (never taken back) plus the next
    ``ahead`` batches the annotator has not finished, in queue order."""
    if ahead == 0:
        return live
    done = submitted_items(annotator)
    unfinished = sorted({a.batch for a in live if a.study_item_id not in done})
    shown = {a.batch for a in live if a.argilla_record_id is not None} | set(unfinished[:ahead])
    return [a for a in live if a.batch in shown]


def _behind(annotator: Annotator, ahead: int) -> bool:
    """Whether Argilla lacks a record ``annotator`` should see now, or holds one they lost."""
    rows = list(annotator.assignments.only("active", "batch", "study_item_id", "argilla_record_id"))
    live = _released([a for a in rows if a.active], annotator, ahead)
    return any(a.argilla_record_id is None for a in live) or any(
        not a.active and a.argilla_record_id is not None for a in rows
    )


def annotators_cut(study: Study, leavers: Sequence[Annotator], *, client) -> None:
    """Cut the access of withdrawn and rejected annotators (frozen in Django already) to their
    batch of ``study``: out of their own workspace, or the study's shared one for a study published
    before per-annotator batches (no reading, no new answers); then, once a sync has brought
    everything they submitted before the cut into Django, their responses are deleted (their own
    dataset, or their responses in the shared one), since Argilla lets a user edit a response of
    their own by id whatever their workspaces (``argilla.client``). Their account and other studies
    are untouched. A study never marked published (an interrupted first publish) keeps the
    responses until the next reconcile."""

    for annotator in leavers:
        workspace = annotator.argilla_workspace or study.workspace
        argilla.user_deactivate(annotator.user.get_username(), workspace, client=client)
    study = Study.objects.get(pk=study.pk)
    published = study.published_at is not None
    if published and (study.argilla_dataset_id or any(a.argilla_dataset_id for a in leavers)):
        study_sync(study=study, client=client)  # changes after the cut are ignored, not stored
    for annotator in leavers:
        deleted: dict[str, Any] = {}
        if annotator.argilla_dataset_id is not None or study.argilla_dataset_id is not None:
            if not published:
                continue
            if annotator.argilla_dataset_id is not None:
                argilla.dataset_delete(annotator.argilla_dataset_id, client=client)
                Assignment.objects.filter(annotator=annotator).update(argilla_record_id=None)
                deleted["dataset_deleted"] = str(annotator.argilla_dataset_id)
            user_id = annotator.argilla_user_id or argilla.user_get_id(annotator.user.get_username(), client=client)
            if study.argilla_dataset_id is not None and user_id is not None:
                count = argilla.responses_delete(study.argilla_dataset_id, user_id, client=client)
                deleted["shared_responses_deleted"] = count
        Annotator.objects.filter(pk=annotator.pk).update(argilla_deactivated=True)
        audit_record(
            actor=None,
            verb="study.annotator.cut",
            obj=annotator,
            payload={
                "workspace": annotator.argilla_workspace or study.workspace,
                **deleted,
                "frozen_at": annotator.frozen_at.isoformat() if annotator.frozen_at else None,
            },
        )


def _records_send(dataset_id: UUID, live: list[Assignment], fields: tuple[str, str], *, client) -> None:
    """Send the records of ``live`` assignments that have none yet, and keep their record ids."""
    field_a, field_b = fields
    # Only records not sent yet go out (a record's texts never change); an interrupted run
    # left them without a record id, so running again sends them.
    pending = [a for a in live if a.argilla_record_id is None]
    if pending:
        # Opaque id and the two texts only: kind, expected answers and estimates stay in Django.
        argilla.records_log(
            dataset_id,
            [
                argilla.RecordIn(
                    external_id=a.study_item.external_id,
                    fields={field_a: a.study_item.text_a, field_b: a.study_item.text_b},
                )
                for a in pending
            ],
            client=client,
        )
        ids = argilla.record_ids(dataset_id, client=client)
        for a in pending:
            if (record_id := ids.get(a.study_item.external_id)) is not None:
                Assignment.objects.filter(pk=a.pk).update(argilla_record_id=record_id)


def _records_withdraw(
    dataset_id: UUID, user_id: UUID, rows: list[Assignment], live: list[Assignment], *, client
) -> None:
    """Delete the records of assignments that ended from an annotator's dataset."""
    live_items = {a.study_item.external_id for a in live}
    gone = [a for a in rows if not a.active and a.argilla_record_id is not None]
    gone = [a for a in gone if a.study_item.external_id not in live_items]
    if gone:
        # An answer submitted after the move was decided is kept, never deleted: the record
        # stays and the assignment comes back (that item then has one rater more).
        answered = {
            r.record_external_id
            for r in argilla.responses_fetch(dataset_id, client=client)
            if r.user_id == user_id and r.status == "submitted"
        }
        kept = [a for a in gone if a.study_item.external_id in answered]
        Assignment.objects.filter(pk__in=[a.pk for a in kept]).update(
            active=True, ended_at=None, end_reason="kept: answered before the move reached Argilla"
        )
        gone = [a for a in gone if a.study_item.external_id not in answered]
        if gone:
            argilla.records_delete(dataset_id, [a.argilla_record_id for a in gone], client=client)
            Assignment.objects.filter(pk__in=[a.pk for a in gone]).update(argilla_record_id=None)


def study_argilla_reconcile(
    *, study: Study, client, roles: dict[str, str] | None = None
) -> tuple[int, tuple[str, ...]]:
    """Make Argilla hold exactly what Django says each annotator of ``study`` should see.

    For each active annotator: their own workspace (they are its only annotator), their account,
    a dataset with the study's fields and questions, and one record per active assignment (upserted
    by the item's opaque id); records of assignments that ended are deleted (a record taken from
    someone must leave their queue). Rejected and withdrawn annotators are removed from their
    workspace and their dataset is deleted once their answers are synced (``annotators_cut``).
    Records already sent are not sent again. Idempotent: an interrupted run is repaired
    by running it again. Returns (records the annotators' datasets hold now, usernames of the
    accounts created now, whose random password nobody is shown).
    """
    design = study_design(study)
    field_a, field_b = (f.name for f in FIELDS[design.kind])
    roles = dict(argilla.user_roles(client=client) if roles is None else roles)
    new_accounts: list[str] = []
    held = 0
    annotators = list(study.annotators.select_related("user").order_by("pk"))
    leavers = [
        a
        for a in annotators
        if a.status != Annotator.Status.ACTIVE and a.argilla_workspace and not a.argilla_deactivated
    ]
    if leavers:
        annotators_cut(study, leavers, client=client)
    for annotator in annotators:
        if annotator.status != Annotator.Status.ACTIVE:
            continue
        placed = annotator_dataset_ensure(
            study,
            annotator.user,
            workspace=annotator.argilla_workspace,
            dataset_id=annotator.argilla_dataset_id,
            spec=_study_dataset_spec(study),
            roles=roles,
            new_accounts=new_accounts,
            client=client,
        )
        user_id, dataset_id = placed.user_id, placed.dataset_id
        Annotator.objects.filter(pk=annotator.pk).update(
            argilla_user_id=user_id, argilla_workspace=placed.workspace, argilla_dataset_id=dataset_id
        )
        rows = list(annotator.assignments.select_related("study_item").order_by("position"))
        live = _released([a for a in rows if a.active], annotator, design.batches_released)
        held += len(live)
        _records_send(dataset_id, live, (field_a, field_b), client=client)
        _records_withdraw(dataset_id, user_id, rows, live, client=client)
    return held, tuple(new_accounts)


def study_argilla_texts_resend(*, study: Study, actor: AbstractBaseUser | None = None, client=None) -> int:
    """Send again the texts of every record that ``study``'s active annotators hold in Argilla, as
    ``client`` writes texts now (``display.for_argilla``). For studies published before texts were
    encoded for Argilla's web app, which showed them as HTML: a publish sends a record only once.
    An upsert by external id: records, ids and responses stay. Audited; returns the records sent."""
    design = study_design(study)
    field_a, field_b = (f.name for f in FIELDS[design.kind])
    sent, names = 0, []
    annotators = study.annotators.filter(status=Annotator.Status.ACTIVE).exclude(argilla_dataset_id=None)
    with argilla_connection(client) as conn:
        if study.argilla_dataset_id:  # published before per-annotator datasets: one shared dataset
            there = argilla.record_ids(study.argilla_dataset_id, client=conn)
            items = study.items.filter(external_id__in=list(there)).order_by("position")
            records = [argilla.RecordIn(i.external_id, {field_a: i.text_a, field_b: i.text_b}) for i in items]
            sent += argilla.records_log(study.argilla_dataset_id, records, client=conn)
        for annotator in annotators.select_related("user").order_by("pk"):
            held = annotator.assignments.exclude(argilla_record_id=None).select_related("study_item")
            records = [
                argilla.RecordIn(
                    external_id=a.study_item.external_id,
                    fields={field_a: a.study_item.text_a, field_b: a.study_item.text_b},
                )
                for a in held.order_by("position")
            ]
            if records:
                sent += argilla.records_log(annotator.argilla_dataset_id, records, client=conn)
                names.append(annotator.user.get_username())
    audit_record(
        actor=actor, verb="study.argilla.texts_resend", obj=study, payload={"records": sent, "annotators": names}
    )
    return sent


def study_sync_queue(*, study: Study) -> AsyncResult:
    """The one entry that starts a sync of a study's submitted responses for the page and the API:
    queue the ``annotation.sync_study`` task (in the single-machine default it runs at once, in
    this call). A study not published yet is refused, as ``study_sync`` refuses it."""
    if study.published_at is None:  # per-annotator datasets: the study itself holds no dataset id
        raise ShiftlabError(f"{study} is not published yet: publish it before syncing responses")
    return sync_task().delay(study.pk)


def study_release_batches(*, study: Study, client=None) -> int:
    """Give annotators their next batches (designs declaring ``batches_released``): after a sync,
    each annotator who finished a released batch gets the next one in their Argilla queue, so
    queues advance in the common item order. Returns the records the queues hold; 0 when the design
    releases everything at publish, or the study is not published with per-annotator batches."""
    study = Study.objects.get(pk=study.pk)
    ahead = study_design(study).batches_released
    if ahead == 0 or study.published_at is None or study.argilla_dataset_id:
        return 0
    study_pull(study=study)  # pull designs: who finished their batches draws the next ones first
    if not any(_behind(a, ahead) for a in study.annotators.filter(status=Annotator.Status.ACTIVE)):
        return 0  # nothing to send or delete: no Argilla call
    with argilla_connection(client) as conn:
        held, _ = study_argilla_reconcile(study=study, client=conn)
    return held


def study_publish(
    *,
    study: Study,
    annotators: Iterable[AbstractBaseUser] = (),
    actor: AbstractBaseUser | None = None,
    client=None,
) -> PublishResult:
    """Publish the study to Argilla (locking it first if it is a draft): each annotator gets
    their own workspace and dataset holding only their batch (``assignment_services``).

    The annotators must be on the roster of the study's project (``core.rosters``). The first
    publish draws the assignment over them (at least ``raters_per_item``); publishing again with
    new annotators moves a fair share of the open work to them (after a sync, so that only
    unsubmitted items move). Idempotent: workspaces, accounts
    and datasets are reused and records upserted by their opaque id, so an interrupted publish can
    simply be run again. New Argilla accounts get a random password that nobody is shown
    (``new_accounts`` names them): each annotator sets their own on Shiftlab's "My Argilla
    account" page; existing accounts keep theirs. Each annotator published to for the first time is
    audited in every project whose roster holds them.
    """

    users = list(dict.fromkeys(annotators))
    roster_require(study.project, users)  # before anything is written, the lock included
    if not study.is_locked:
        study = study_lock(study=study, actor=actor)
    for user in users:
        existing = Annotator.objects.filter(study=study, user=user).exclude(status=Annotator.Status.ACTIVE).first()
        if existing:
            raise ShiftlabError(f"{user.get_username()} was {existing.status} in {study}: they cannot rate it again")
    with argilla_connection(client) as conn:
        roles = annotator_roles_check(users, client=conn)
        known = set(study.annotators.values_list("user_id", flat=True))
        newcomers = [u for u in users if u.pk not in known]
        if study.published_at is not None and any(u.pk not in known for u in users):
            study_sync(study=study, client=conn)  # only work nobody submitted may move to newcomers
        assigned = study_assign(study=study, users=users, actor=actor)
        records, new_accounts = study_argilla_reconcile(study=study, client=conn, roles=roles)
        live = argilla_webhook_ensure(client=conn, actor=actor)  # never raises: sync is the fallback
    payload = {"records": records, "queues": assigned.queues, "moved": assigned.moved, "live_responses": live.detail}
    study = mark_published(study, actor=actor, verb="study.publish", payload=payload)
    annotators_audit_published(study, newcomers, actor=actor)
    return PublishResult(study=study, dataset_id="", records=records, new_accounts=new_accounts)
