"""Thin Celery tasks of studies: syncing responses from Argilla (retried while it is unreachable),
then the adaptive check of adaptive designs (``adaptive_services``)."""

from dataclasses import asdict

from celery import shared_task

from annotation.adaptive_services import study_adaptive_check
from annotation.argilla import ArgillaUnavailable
from annotation.argilla_services import study_release_batches
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
    """Sync one study's submitted responses, then (adaptive designs) withdraw the open items of
    transformations the sequential gate has settled, and (designs releasing batches one by one)
    give annotators their next batches; idempotent, so a redelivered task is harmless."""
    study = Study.objects.get(pk=study_id)
    result = asdict(study_sync(study=study))
    study_adaptive_check(study=study)
    study_release_batches(study=study)
    return result
