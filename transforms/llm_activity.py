"""Live progress of a job's LLM calls, and which job holds an LLM backend.

A task that sends a batch of requests for a job (a run's chunk, a judge report, a validation)
wraps it in :class:`LLMCalls`. While the batch is in flight:

- the job's row counts what is done as answers arrive, not when the batch ends: the task says
  :meth:`LLMCalls.answered` per answer and the row gets one throttled ``UPDATE ... F() + k`` at
  most every ``FLUSH_EVERY_S`` (``core.job_services.progress_tick``), written between answers by
  the backend's tick (``transforms.backends.base.ticking``), so a change shows within a second;
- an ``LLMBackendUse`` row says the job holds the backend, so that another job's batch that
  starts meanwhile shows "Waiting for the LLM backend 'default' (busy with run #7)"; a batch that
  has no answer after ``FIRST_ANSWER_GRACE_S`` shows "Waiting for the first answer of the LLM
  backend 'default'". The first answer ends the wait.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta

from django.apps import apps
from django.db import models
from django.utils import timezone

from core.job_services import UNFINISHED, progress_tick
from core.models import TrackedJob
from core.waiting import Waiting
from transforms.backends.base import ticking
from transforms.models import LLMBackendUse

#: Longest a job's row waits for the counts of answers already in (seconds).
FLUSH_EVERY_S = 0.5
#: How long a batch may go without its first answer before its job says that it waits.
FIRST_ANSWER_GRACE_S = 3.0
#: How often a batch in flight refreshes its ``LLMBackendUse`` row.
HEARTBEAT_EVERY_S = 10.0
#: A use whose heartbeat is older belongs to a worker that died.
USE_STALE_S = 60.0


def backend_label(alias: str) -> str:
    """An LLM backend as a user reads it, the way waits name it: "the LLM backend 'default'"."""
    return f"the LLM backend {alias!r}"


def _model_key(model: type[models.Model]) -> str:
    return model._meta.label


def backend_holder(alias: str, *, model: type[models.Model], job_id: int) -> str | None:
    """The label of the job (other than ``model`` ``job_id``) that has held backend ``alias`` the
    longest among those sending it requests now ("run #7"); None when no other job does."""
    fresh = timezone.now() - timedelta(seconds=USE_STALE_S)
    use = (
        LLMBackendUse.objects.filter(backend_alias=alias, heartbeat_at__gte=fresh)
        .exclude(job_model=_model_key(model), job_id=job_id)
        .order_by("started_at", "id")
        .first()
    )
    return use.label if use else None


def job_note_busy(*, model: type[TrackedJob], job_id: int, alias: str) -> str | None:
    """Say on a job just queued for backend ``alias`` which other job holds it now, if any (its
    task may wait in the worker queue behind that job's); return that job's label. A job that
    already waits keeps its wait."""
    holder = backend_holder(alias, model=model, job_id=job_id)
    if holder:
        wait = Waiting.busy(backend=backend_label(alias), since=timezone.now(), busy_with=holder)
        model.objects.filter(pk=job_id, status__in=UNFINISHED, waiting__isnull=True).update(waiting=wait.as_json())
    return holder


class LLMCalls:
    """One task's batch of LLM calls for one job (see the module's docstring).

    ``flush()`` (optional) stores what the task holds back and returns the counters to add to the
    job's row, e.g. ``{"done": 3}``: the texts it actually stored, so that a redelivered task
    never counts a text twice. ``calls_field`` names the row's counter of LLM calls (a run's
    ``llm_calls``), to which the answers are added. Use as a context manager around the batch;
    the batch's end flushes whatever is left and releases the backend.
    """

    def __init__(
        self,
        *,
        model: type[TrackedJob],
        job_id: int,
        label: str,
        alias: str,
        flush: Callable[[], dict[str, int]] | None = None,
        calls_field: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.model, self.job_id, self.label, self.alias = model, job_id, label, alias
        self._flush, self.calls_field, self.clock = flush, calls_field, clock
        self.unflushed = 0  # answers not yet on the row
        self.answers = 0
        self._use: LLMBackendUse | None = None
        self._started = self._flushed_at = self._beat_at = 0.0
        self._waits = False  # whether this batch wrote a wait on the row
        self._ticking = None

    # --- the batch -----------------------------------------------------------------------------

    def __enter__(self) -> LLMCalls:
        now = timezone.now()
        self._started = self._flushed_at = self._beat_at = self.clock()
        LLMBackendUse.objects.filter(heartbeat_at__lt=now - timedelta(seconds=USE_STALE_S)).delete()
        holder = backend_holder(self.alias, model=self.model, job_id=self.job_id)
        self._use = LLMBackendUse.objects.create(
            backend_alias=self.alias,
            job_model=_model_key(self.model),
            job_id=self.job_id,
            label=self.label,
            started_at=now,
            heartbeat_at=now,
        )
        if holder:
            self._wait(Waiting.busy(backend=backend_label(self.alias), since=now, busy_with=holder))
        self._ticking = ticking(self.tick)
        self._ticking.__enter__()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self._ticking.__exit__(exc_type, exc, tb)
        try:
            if exc_type is None:
                self.flush_now(final=True)
            elif self.unflushed:  # answers already saved by the caller: count them even so
                self._write({}, clear_waiting=False)
        finally:
            self._release()

    # --- what the task tells ---------------------------------------------------------------------

    def answered(self, n: int = 1) -> None:
        """``n`` requests were answered (call from ``on_result``); the row hears it soon."""
        self.answers += n
        self.unflushed += n
        self.tick()

    def tick(self) -> None:
        """Flush when due; say that the batch waits when its first answer is late; keep the use
        fresh. Called per answer and by the backend every ``TICK_S`` while the batch is in flight."""
        now = self.clock()
        if self.unflushed and now - self._flushed_at >= FLUSH_EVERY_S:
            self.flush_now()
        elif not self.answers and not self._waits and now - self._started >= FIRST_ANSWER_GRACE_S:
            holder = backend_holder(self.alias, model=self.model, job_id=self.job_id)
            since = timezone.now() - timedelta(seconds=now - self._started)
            backend = backend_label(self.alias)
            self._wait(
                Waiting.busy(backend=backend, since=since, busy_with=holder)
                if holder
                else Waiting.first_answer(backend=backend, since=since)
            )
        if self._use is not None and now - self._beat_at >= HEARTBEAT_EVERY_S:
            self._beat_at = now
            LLMBackendUse.objects.filter(pk=self._use.pk).update(heartbeat_at=timezone.now())

    def flush_now(self, *, final: bool = False) -> None:
        """Write what is held back now: the caller's ``flush()`` and the answers counted."""
        added = self._flush() if self._flush else {}
        # An answer (or the batch's end) ends the wait; a flush of cache hits alone does not.
        self._write(added, clear_waiting=bool(self.unflushed) or final)

    # --- internals -------------------------------------------------------------------------------

    def _write(self, added: dict[str, int], *, clear_waiting: bool) -> None:
        added = dict(added)
        if self.calls_field and self.unflushed:
            added[self.calls_field] = added.get(self.calls_field, 0) + self.unflushed
        self.unflushed = 0
        self._flushed_at = self.clock()
        # Ends any wait the row shows: this batch's, the busy note made when the job was queued,
        # or a retry's (the backend answers again).
        progress_tick(model=self.model, job_id=self.job_id, clear_waiting=clear_waiting, **added)
        if clear_waiting:
            self._waits = False

    def _wait(self, wait: Waiting) -> None:
        """Show ``wait`` on the job's row, unless it already shows one that began earlier for the
        same job (a retry's wait, or the note made when it was queued), which is kept."""
        rows = self.model.objects.filter(pk=self.job_id, status__in=UNFINISHED)
        current = rows.values_list("waiting", flat=True).first()
        self._waits = True
        if current and Waiting.from_json(current).retrying:
            return  # the task retries after a failure: that wait says more
        if current:
            wait = replace(wait, since=min(wait.since, Waiting.from_json(current).since))
        rows.update(waiting=wait.as_json())

    def _release(self) -> None:
        """Free the backend: jobs whose wait named this one now name the next holder, if any."""
        if self._use is None:
            return
        LLMBackendUse.objects.filter(pk=self._use.pk).delete()
        still = LLMBackendUse.objects.filter(
            job_model=self._use.job_model, job_id=self.job_id, backend_alias=self.alias
        ).exists()
        self._use = None
        if still:  # another batch of this job (a parallel chunk) still holds it
            return
        _repoint_waits(self.alias, released=self.label)


def _repoint_waits(alias: str, *, released: str) -> None:
    """Jobs that wait "busy with ``released``" on ``alias``: name the job that holds it now, or,
    when none does, wait for their own first answer (their task is about to send it)."""
    backend = backend_label(alias)
    for key in set(LLMBackendUse.objects.values_list("job_model", flat=True)) | _JOB_MODELS:
        try:
            model = apps.get_model(key)
        except LookupError:
            continue
        rows = model.objects.filter(status__in=UNFINISHED, waiting__busy_with=released)
        for job_id, waiting in rows.values_list("pk", "waiting"):
            wait = Waiting.from_json(waiting)
            if wait.backend != backend:
                continue
            holder = backend_holder(alias, model=model, job_id=job_id)
            new = Waiting.busy(backend=backend, since=wait.since, busy_with=holder) if holder else None
            new = new or Waiting.first_answer(backend=backend, since=wait.since)
            model.objects.filter(pk=job_id, status__in=UNFINISHED).update(waiting=new.as_json())


#: Job models whose waits may name a holder even when none of them holds a backend now.
_JOB_MODELS = {"transforms.TransformRun", "transforms.JudgeReport"}


def register_job_model(model: type[TrackedJob]) -> None:
    """Let jobs of ``model`` (another app's, e.g. validations) have their busy waits re-pointed
    when the job they wait behind releases the backend."""
    _JOB_MODELS.add(_model_key(model))
