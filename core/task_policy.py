"""How Celery tasks retry and fan out: one home for the options every app's tasks.py shares.

A task retries only for the transient errors it names (never bare ``Exception``), with exponential
backoff. Each policy is a named set of backoff options; ``policy.task_options(SomeError)`` gives the
keyword arguments for ``@shared_task``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from celery import Signature, chord, group
from django.db import transaction
from kombu.exceptions import OperationalError

__all__ = [
    "ARGILLA_UNAVAILABLE",
    "TRANSIENT_BACKEND",
    "RetryPolicy",
    "dispatch_on_commit",
    "failure_reason",
    "fan_out",
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
