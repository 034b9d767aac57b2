"""Writes shared by every job row (transformation runs, judge reports, benchmark runs, imports):
the status a failed task, an unreachable broker or the stuck-job sweeper leaves behind."""

from __future__ import annotations

from django.db import models, transaction
from django.utils import timezone

UNFINISHED = ("pending", "running")


def job_fail(*, model: type[models.Model], job_id: int, message: str) -> bool:
    """Mark the job failed with ``message`` (added to the error it already has) unless it has
    finished meanwhile; return whether it was changed. ``model`` has TrackedJob's status, error and
    finished_at fields."""
    with transaction.atomic():
        job = model.objects.select_for_update().filter(pk=job_id, status__in=UNFINISHED).first()
        if job is None:
            return False
        job.error = f"{job.error}\n{message}".strip() if message not in job.error else job.error
        job.status, job.finished_at = "failed", timezone.now()
        job.save(update_fields=["status", "error", "finished_at"])
    return True


def job_note(*, model: type[models.Model], job_id: int, message: str) -> None:
    """Record ``message`` on an unfinished job without changing its status (e.g. "not queued yet")."""
    model.objects.filter(pk=job_id, status__in=UNFINISHED).update(error=message)
