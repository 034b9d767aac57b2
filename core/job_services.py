"""Writes shared by every job row (transformation runs, judge reports, benchmark runs, imports):
the status a failed task, an unreachable broker or the stuck-job sweeper leaves behind, and the
backend a job waits for while its tasks retry."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import models, transaction
from django.db.models import F
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


def progress_tick(*, model: type[models.Model], job_id: int, clear_waiting: bool = True, **added: int) -> None:
    """Add ``added`` (e.g. ``done=3, llm_calls=3``) to an unfinished job's counters in one
    ``UPDATE ... SET done = done + 3`` (``F()``: no read, no lock, no transaction of its own), and,
    with ``clear_waiting``, end the wait it shows (an answer came). The live progress of runs,
    judge reports and validations: callers throttle it (:class:`transforms.llm_activity.LLMCalls`
    flushes at most every ``FLUSH_EVERY_S``) and keep ``done`` exact themselves, e.g. by adding
    only the texts they actually stored."""
    changes: dict = {name: F(name) + n for name, n in added.items() if n}
    if clear_waiting and issubclass(model, TrackedJob):
        changes["waiting"] = None
    if changes:
        model.objects.filter(pk=job_id, status__in=UNFINISHED).update(**changes)


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
        """When the job began to wait: kept from the first failure of this wait, else ``now`` (a
        busy wait before it, :meth:`Waiting.busy`, is another wait)."""
        previous = Waiting.from_json(job.waiting) if job.waiting else None
        return previous.since if previous is not None and previous.retrying else now
