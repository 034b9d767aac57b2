"""Writes shared by every job row (transformation runs, judge reports, benchmark runs, imports):
the status a failed task, an unreachable broker or the stuck-job sweeper leaves behind, and the
backend a job waits for while its tasks retry."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import models, transaction
from django.utils import timezone

from core.models import TrackedJob
from core.waiting import BackendUnavailable, Waiting, gave_up_message

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
        fields = ["status", "error", "finished_at"]
        if isinstance(job, TrackedJob):  # a finished job waits for nothing (nor does a resumed one, yet)
            job.waiting = None
            fields.append("waiting")
        job.save(update_fields=fields)
    return True


def job_note(*, model: type[models.Model], job_id: int, message: str) -> None:
    """Record ``message`` on an unfinished job without changing its status (e.g. "not queued yet")."""
    model.objects.filter(pk=job_id, status__in=UNFINISHED).update(error=message)


@dataclass(frozen=True)
class JobWait:
    """A job whose task retries while a backend cannot answer (``core.task_policy.WaitingJob``):
    each retry is recorded on the job's row, keeping since when it waits; when the task gives up,
    ``fail(reason=...)`` (the app's service, which says how to resume) fails the job."""

    model: type[TrackedJob]
    job_id: int
    fail: Callable[..., None]

    def wait(self, error: BackendUnavailable, *, retry: int, max_retries: int, countdown: float) -> None:
        now = timezone.now()
        with transaction.atomic():
            job = self.model.objects.select_for_update().filter(pk=self.job_id, status__in=UNFINISHED).first()
            if job is None:  # finished meanwhile (failed by another task, or by hand)
                return
            job.waiting = Waiting(
                backend=error.backend,
                reason=error.reason,
                since=self._since(job, now),
                retry=retry,
                max_retries=max_retries,
                next_retry_at=now + timedelta(seconds=countdown),
            ).as_json()
            job.save(update_fields=["waiting"])

    def give_up(self, error: BackendUnavailable, *, retries: int) -> None:
        now = timezone.now()
        job = self.model.objects.filter(pk=self.job_id).first()
        since = self._since(job, now) if job is not None else now
        tz = timezone.get_current_timezone()
        self.fail(
            reason=gave_up_message(
                backend=error.backend, reason=error.reason, since=since, retries=retries, now=now, tz=tz
            )
        )

    @staticmethod
    def _since(job: TrackedJob, now: datetime) -> datetime:
        """When the job began to wait: kept from the first failure of this wait, else ``now``."""
        return Waiting.from_json(job.waiting).since if job.waiting else now
