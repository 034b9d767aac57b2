"""Thin Celery tasks of studies: syncing responses from Argilla (retried while it is unreachable)."""

from celery import shared_task

from annotation.argilla import ArgillaUnavailable


@shared_task(
    name="annotation.sync_study",
    acks_late=True,
    reject_on_worker_lost=True,
    autoretry_for=(ArgillaUnavailable,),
    retry_backoff=10,
    retry_backoff_max=600,
    max_retries=6,
)
def sync_study(study_id: int) -> dict:
    """Sync one study's submitted responses; idempotent, so a redelivered task is harmless."""
    from dataclasses import asdict

    from annotation.models import Study
    from annotation.services import study_sync

    return asdict(study_sync(study=Study.objects.get(pk=study_id)))
