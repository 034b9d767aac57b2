"""Annotator onboarding after a study is published (issue 20): where each annotator rates (the
Argilla annotation page of their own dataset), setting or resetting their Argilla password, and
what became of a queued sync.

A password set here is returned to the caller once, to be shown on the response page; it is
never stored in Shiftlab (not in the database, the session, a message or the audit log).
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django_celery_results.models import TaskResult

from annotation.argilla import client as argilla
from annotation.argilla_services import argilla_connection
from annotation.models import Annotator, Study
from annotation.sync_services import sync_summary
from core.errors import ShiftlabError
from core.services import audit_record

SYNC_TASK = "annotation.sync_study"


def annotation_ui_url(dataset_id: UUID | str | None) -> str:
    """The Argilla page where an annotator answers the records of ``dataset_id`` ("" without one).
    ``ARGILLA_UI_URL`` is the address annotators' browsers reach Argilla at (default: the API URL)."""
    if not dataset_id:
        return ""
    base = (getattr(settings, "ARGILLA_UI_URL", "") or settings.ARGILLA_API_URL).rstrip("/")
    return f"{base}/dataset/{dataset_id}/annotation-mode"


def annotator_ui_url(annotator: Annotator) -> str:
    """The annotation page of ``annotator``: their own dataset, or the study's shared one for
    studies published before per-annotator datasets."""
    return annotation_ui_url(annotator.argilla_dataset_id or annotator.study.argilla_dataset_id)


def annotator_password_set(*, annotator: Annotator, actor: AbstractBaseUser, password: str = "", client=None) -> str:
    """Set the Argilla password of ``annotator`` (``password``, or a generated one when empty) and
    return it. Only an active annotator of a published study with an Argilla account; audited
    without the password."""
    if annotator.study.published_at is None:
        raise ShiftlabError(f"{annotator.study} is not published yet: publish it with this annotator first")
    if annotator.status != Annotator.Status.ACTIVE:
        raise ShiftlabError(
            f"{annotator.user.get_username()} is {annotator.status} in {annotator.study}: they no longer rate it"
        )
    if password and len(password) < 8:
        raise ShiftlabError("an Argilla password needs at least 8 characters: type a longer one or leave it empty")
    password = password or secrets.token_urlsafe(12)
    username = annotator.user.get_username()
    with argilla_connection(client) as conn:
        argilla.user_password_set(username, password, client=conn)
    audit_record(actor=actor, verb="annotator.password.set", obj=annotator, payload={"username": username})
    return password


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
    try:
        UUID(task_id)
    except ValueError:
        return None
    row = TaskResult.objects.filter(task_id=task_id).first()
    if row is None:
        return SyncJob(task_id=task_id, state="waiting")
    if row.task_name != SYNC_TASK or not _for_study(row.task_args, study.pk):
        return None
    if row.status == "SUCCESS":
        return SyncJob(task_id, "finished", row.date_done, summary=sync_summary(_result(row.result)))
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
