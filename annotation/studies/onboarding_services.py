"""Annotator onboarding after a study is published (issue 20): where each annotator rates (the
Argilla annotation page of their own dataset), annotators setting their own Argilla password, and
what became of a queued sync.

No researcher learns or sets an annotator's password (issue 27): an Argilla account is made at
publishing with a random password nobody is shown, and its annotator sets their own while signed
in to Shiftlab as themselves; operators with shell access may set one by command. A password is
never stored in Shiftlab (not in the database, the session, a message or the audit log).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.db.models import Count, Q
from django_celery_results.models import TaskResult

from annotation.argilla import client as argilla
from annotation.argilla.client import argilla_connection
from annotation.models import Annotator, Assignment, BaselineAnnotator, BaselineAnswer, Rating, Study
from annotation.studies.sync_services import sync_summary
from core.errors import ShiftlabError
from core.login_guard import password_confirm
from core.roles import Role, has_role
from core.rosters import annotator_audit

SYNC_TASK = "annotation.sync_study"
MIN_ARGILLA_PASSWORD = 8  # Argilla refuses shorter ones


def annotation_ui_url(dataset_id: UUID | str | None) -> str:
    """The Argilla page where an annotator answers the records of ``dataset_id`` ("" without one).
    ``ARGILLA_UI_URL`` is the address annotators' browsers reach Argilla at (default: the API URL)."""
    if not dataset_id:
        return ""
    return f"{annotator_argilla_home()}/dataset/{dataset_id}/annotation-mode"


def annotator_argilla_home() -> str:
    """The address annotators' browsers reach Argilla at (``ARGILLA_UI_URL``, default: the API URL)."""
    return (getattr(settings, "ARGILLA_UI_URL", "") or settings.ARGILLA_API_URL).rstrip("/")


def annotator_ui_url(annotator: Annotator) -> str:
    """The annotation page of ``annotator``: their own dataset, or the study's shared one for
    studies published before per-annotator datasets."""
    return annotation_ui_url(annotator.argilla_dataset_id or annotator.study.argilla_dataset_id)


def argilla_password_set(*, user: AbstractBaseUser, password: str, actor: AbstractBaseUser | None, client=None) -> None:
    """Give the Argilla annotator account of ``user`` the password ``password``: what annotators do
    for themselves (:func:`argilla_password_set_own`) and operators with shell access by command
    (``manage.py argilla_password``, ``actor`` None). Never an owner's or admin's Argilla account;
    audited, without the password, in every project whose roster holds ``user``."""
    if not has_role(user, Role.ANNOTATOR) or user.is_superuser:
        raise ShiftlabError(
            f"{user.get_username()} is not an annotator: only annotators' Argilla passwords are set here"
        )
    if len(password) < MIN_ARGILLA_PASSWORD:
        raise ShiftlabError(
            f"an Argilla password needs at least {MIN_ARGILLA_PASSWORD} characters: choose a longer one"
        )
    username = user.get_username()
    with argilla_connection(client) as conn:
        if argilla.user_get_id(username, client=conn) is None:
            raise ShiftlabError(
                f"{username} has no Argilla account yet: it is made when a study is first published to them"
            )
        argilla.user_password_set(username, password, client=conn)
    annotator_audit(
        actor=actor,
        verb="annotator.argilla_password.set",
        user=user,
        payload={"by": "the annotator" if actor is not None and actor.pk == user.pk else "an operator (command)"},
    )


def argilla_password_set_own(
    *, user: AbstractBaseUser, current_password: str, password: str, address: str = "", client=None
) -> None:
    """An annotator, signed in to Shiftlab, sets the password of their own Argilla account; their
    Shiftlab password is asked again, so that a session left open does not hand over the account.
    That check goes through the log-in lockout (``core.login_guard.password_confirm``; ``address``:
    the client's): wrong guesses count as failed log-ins, and a locked account is refused."""
    if not user.is_authenticated or not password_confirm(user=user, password=current_password, address=address):
        raise ShiftlabError("Your Shiftlab password is not right: type the one you sign in here with")
    argilla_password_set(user=user, password=password, actor=user, client=client)


def annotator_studies(user: AbstractBaseUser) -> list[tuple[Annotator, str]]:
    """The studies ``user`` rates now, each with the Argilla page where they answer it."""
    rows = Annotator.objects.filter(user=user, status=Annotator.Status.ACTIVE).select_related("study")
    return [(a, annotator_ui_url(a)) for a in rows.order_by("-study__published_at", "-pk")]


@dataclass(frozen=True)
class AnnotatorTask:
    """One study or baseline as its annotator sees it on their home page: what it is called, how
    much of their own work they submitted (as Shiftlab last synced it), and where they rate. Only
    counts of their own records: never which records are controls, what anything is expected to
    be, what an LLM estimated or what anyone else answered."""

    kind: str  # "study" or "baseline"
    name: str
    project: str
    submitted: int
    assigned: int
    batches: int  # batches of their queue released to them (studies); 0 for baselines
    url: str  # their Argilla annotation page ("" before they have a dataset)
    open: bool  # they may still answer (False: a closed baseline)

    @property
    def left(self) -> int:
        return max(self.assigned - self.submitted, 0)

    @property
    def finished(self) -> bool:
        """They submitted every record given to them (Argilla then says the task is complete)."""
        return self.assigned > 0 and self.left == 0


def annotator_work(user: AbstractBaseUser) -> list[AnnotatorTask]:
    """What ``user`` rates now, studies first (newest first), then human baselines: their active
    seats only, counted from their own assignments and their own submitted answers."""
    seats = Annotator.objects.filter(user=user, status=Annotator.Status.ACTIVE).select_related("study__project")
    queues = {
        row["annotator_id"]: row
        for row in Assignment.objects.filter(annotator__in=seats, active=True)
        .values("annotator_id")
        .annotate(n=Count("id"), batches=Count("batch", distinct=True))
    }
    done = {
        row["annotator_id"]: row["n"]
        for row in Rating.objects.filter(annotator__in=seats, active=True)
        .values("annotator_id")
        .annotate(n=Count("study_item", distinct=True))
    }
    rows = [
        AnnotatorTask(
            kind="study",
            name=f"{a.study.name} v{a.study.version}",
            project=a.study.project.slug,
            submitted=done.get(a.pk, 0),
            assigned=queues.get(a.pk, {}).get("n", 0),
            batches=queues.get(a.pk, {}).get("batches", 0),
            url=annotator_ui_url(a),
            open=True,
        )
        for a in seats.order_by("-study__published_at", "-pk")
    ]
    answered = Count("instance", filter=Q(user=user, active=True, source=BaselineAnswer.Source.HUMAN), distinct=True)
    per_study = {
        row["instance__study"]: row["n"]
        for row in BaselineAnswer.objects.filter(user=user).values("instance__study").annotate(n=answered)
    }
    for seat in BaselineAnnotator.objects.filter(user=user).select_related("study__project").order_by("-pk"):
        rows.append(
            AnnotatorTask(
                kind="baseline",
                name=seat.study.name,
                project=seat.study.project.slug,
                submitted=per_study.get(seat.study_id, 0),
                assigned=len(seat.keys),
                batches=0,
                url=annotation_ui_url(seat.argilla_dataset_id),
                open=seat.study.status == seat.study.Status.PUBLISHED,
            )
        )
    return rows


@dataclass(frozen=True)
class SyncJob:
    """A queued sync as the result backend sees it: ``state`` is waiting (no worker took it yet),
    running, finished or failed; ``summary`` says what a finished sync found."""

    task_id: str
    state: str
    finished_at: datetime | None = None
    summary: str = ""
    error: str = ""

    @property
    def unfinished(self) -> bool:
        return self.state in ("waiting", "running")


def study_sync_job(*, study: Study, task_id: str) -> SyncJob | None:
    """The state and outcome of the sync task ``task_id`` of ``study`` (None when ``task_id`` is
    no sync of this study that the result backend knows or could still run)."""
    return sync_job_state(task_id=task_id, task_name=SYNC_TASK, pk=study.pk, summary=sync_summary)


def sync_job_state(
    *, task_id: str, task_name: str, pk: int, summary: Callable[[dict[str, Any]], str]
) -> SyncJob | None:
    """The state of the queued sync ``task_id``, a run of ``task_name`` for the object ``pk``, as the
    result backend records it (studies and human baselines); ``summary`` words a finished one's result."""
    try:
        UUID(task_id)
    except ValueError:
        return None
    row = TaskResult.objects.filter(task_id=task_id).first()
    if row is None:
        return SyncJob(task_id=task_id, state="waiting")
    if row.task_name != task_name or not _for_study(row.task_args, pk):
        return None
    if row.status == "SUCCESS":
        return SyncJob(task_id, "finished", row.date_done, summary=summary(_result(row.result)))
    if row.status in ("FAILURE", "REVOKED"):
        return SyncJob(task_id, "failed", row.date_done, error=_error(row.result))
    return SyncJob(task_id, "running")


def _for_study(task_args: str | None, pk: int) -> bool:
    # The extended result stores the arguments as the repr of the tuple: "(5,)" or "[5]".
    return (task_args or "").strip("()[] ,'\"").split(",")[0].strip() == str(pk)


def _result(raw: Any) -> dict[str, Any]:
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _error(raw: Any) -> str:
    value = _result(raw)
    if not value:
        return str(raw or "")[:500]
    message = value.get("exc_message", "")
    message = " ".join(map(str, message)) if isinstance(message, list | tuple) else str(message)
    return f"{value.get('exc_type', 'Error')}: {message}"[:500]
