"""How Celery tasks retry and fan out: one home for the options every app's tasks.py shares.

A task retries only for the transient errors it names (never bare ``Exception``), with exponential
backoff. Each policy is a named set of backoff options; ``policy.task_options(SomeError)`` gives the
keyword arguments for ``@shared_task``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from celery import Signature, chord, group

__all__ = ["ARGILLA_UNAVAILABLE", "TRANSIENT_BACKEND", "RetryPolicy", "fan_out"]


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


def fan_out(parts: Sequence[Signature], then: Signature) -> None:
    """Run ``parts`` in parallel, then ``then``; with no parts there is nothing to wait for, so
    ``then`` is queued alone."""
    if not parts:
        then.delay()
        return
    chord(group(parts))(then)
