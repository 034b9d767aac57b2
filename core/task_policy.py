"""How Celery tasks retry and fan out: one home for the options every app's tasks.py shares.

A task retries only for the transient errors it names (never bare ``Exception``), with exponential
backoff. Each policy is a named set of backoff options; ``policy.task_options(SomeError)`` gives the
keyword arguments for ``@shared_task``. A task whose job should say that it waits on a backend is
declared with ``policy.retry_options()``, catches the backend's error itself and calls
``policy.retry(task, exc, job=...)``: exponential backoff too, and the job's row records the wait
(or the failure, once the retries are spent).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn, Protocol

from celery import Signature, Task, chord, group
from django.db import transaction
from kombu.exceptions import OperationalError

from core.waiting import BackendUnavailable

__all__ = [
    "ARGILLA_UNAVAILABLE",
    "TRANSIENT_BACKEND",
    "RetryPolicy",
    "WaitingJob",
    "dispatch_on_commit",
    "failure_reason",
    "fan_out",
    "task_named",
]
logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff for transient errors: ``backoff`` s, doubling up to ``backoff_max`` s,
    at most ``max_retries`` retries."""

    backoff: int
    backoff_max: int
    max_retries: int

    def task_options(self, *transient: type[Exception]) -> dict[str, Any]:
        """``@shared_task`` keyword arguments that retry on exactly the ``transient`` errors."""
        if not transient or any(error is Exception for error in transient):
            raise ValueError("name the transient error classes to retry on (never bare Exception)")
        return {
            "autoretry_for": transient,
            "retry_backoff": self.backoff,
            "retry_backoff_max": self.backoff_max,
            "max_retries": self.max_retries,
        }

    def retry_options(self) -> dict[str, Any]:
        """``@shared_task`` keyword arguments of a task that calls :meth:`retry` itself."""
        return {"bind": True, "max_retries": self.max_retries}

    def countdown(self, retries: int) -> float:
        """Seconds before retry ``retries + 1``: ``backoff`` doubling per retry up to ``backoff_max``,
        jittered into its upper half so that tasks failing together do not retry together, while
        a job can still say roughly when it tries again."""
        ceiling = min(self.backoff_max, self.backoff * 2**retries)
        return ceiling / 2 + random.uniform(0, ceiling / 2)

    def retry(self, task: Task, exc: BackendUnavailable, *, job: WaitingJob) -> NoReturn:
        """Retry ``task`` (bound) after ``exc``, recording on ``job`` that it waits; once the task's
        ``max_retries`` are spent, fail ``job`` and re-raise ``exc``. Call it from the task's
        ``except`` clause of a task declared with :meth:`retry_options`. The task's
        ``max_retries`` counts, so settings that annotate it (eager mode: 0, since in-process
        tasks cannot wait) are obeyed; eager retries, where there are any, run at once."""
        request = task.request
        if request.called_directly:  # a plain function call: nothing can retry it
            raise exc
        if request.retries >= task.max_retries:
            job.give_up(exc, retries=request.retries)
            raise exc
        countdown = self.countdown(request.retries)
        job.wait(exc, retry=request.retries + 1, max_retries=task.max_retries, countdown=countdown)
        raise task.retry(exc=exc, countdown=countdown)


class WaitingJob(Protocol):
    """The job a task works for, as :meth:`RetryPolicy.retry` tells it about the task's retries."""

    def wait(self, error: BackendUnavailable, *, retry: int, max_retries: int, countdown: float) -> None:
        """Retry ``retry`` of ``max_retries`` is due in ``countdown`` seconds."""

    def give_up(self, error: BackendUnavailable, *, retries: int) -> None:
        """The task failed again after ``retries`` retries and stops."""


#: An LLM backend that cannot answer for now (overloaded, restarting, a server not started yet).
TRANSIENT_BACKEND = RetryPolicy(backoff=5, backoff_max=300, max_retries=8)
#: Argilla unreachable (restarting, network trouble): fewer, more widely spaced retries.
ARGILLA_UNAVAILABLE = RetryPolicy(backoff=10, backoff_max=600, max_retries=6)


def fan_out(parts: Sequence[Signature], then: Signature, *, on_error: Signature | None = None) -> None:
    """Run ``parts`` in parallel, then ``then``; with no parts there is nothing to wait for, so
    ``then`` is queued alone.

    ``on_error`` (an errback taking ``request, exc, traceback`` before its own arguments) hears
    when a part fails for good or ``then`` fails: without it a failed part silently stops the chord
    and its job stays "running" forever.
    """
    if on_error is not None:
        then.link_error(on_error)
    if not parts:
        then.delay()
        return
    chord(group(parts))(then)


def dispatch_on_commit(send: Callable[[], object], *, on_broker_down: Callable[[str], None]) -> None:
    """Call ``send`` (which queues a task) once the current transaction commits.

    When the broker cannot be reached the job row is already committed: instead of an error page
    and a job that looks queued forever, ``on_broker_down(message)`` records on the job why it
    was not queued (it keeps whatever it needs to be queued again).
    """

    def send_or_record() -> None:
        try:
            send()
        except OperationalError as exc:
            logger.warning("task not queued, the broker is unreachable: %s", exc)
            on_broker_down(f"The task queue (Celery broker) could not be reached ({exc}), so the work was not queued")

    transaction.on_commit(send_or_record)


def failure_reason(exc: BaseException) -> str:
    """A one-line description of why a task failed, for a job's error message."""
    text = str(exc) or exc.__class__.__name__
    return text if len(text) <= 500 else text[:500] + "…"


def task_named(name: str, *args: Any, **kwargs: Any) -> Signature:
    """A signature of the task registered under ``name`` (its ``@shared_task(name=...)``).

    Services dispatch their tasks by name, so that no service imports a ``tasks`` module (which
    imports the services it calls: an import circle). The signature resolves to the registered
    task, so eager mode and the task's own options apply as with ``task.s(...)``.
    """
    from celery import current_app

    if name not in current_app.tasks:  # a web process imports the apps' tasks modules on first use
        current_app.loader.import_default_modules()
    return current_app.signature(name, args=args, kwargs=kwargs)
