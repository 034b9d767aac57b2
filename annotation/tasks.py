"""Thin Celery tasks of studies: syncing responses from Argilla (retried while it is unreachable)."""

from dataclasses import asdict

from celery import shared_task

from annotation.argilla import ArgillaUnavailable
from annotation.models import Study
from annotation.sync_services import study_sync
from core.task_policy import ARGILLA_UNAVAILABLE


@shared_task(
    name="annotation.sync_study",
    acks_late=True,
    reject_on_worker_lost=True,
    **ARGILLA_UNAVAILABLE.task_options(ArgillaUnavailable),
)
def sync_study(study_id: int) -> dict:
    """Sync one study's submitted responses; idempotent, so a redelivered task is harmless."""
    return asdict(study_sync(study=Study.objects.get(pk=study_id)))
