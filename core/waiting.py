"""A job that waits on a backend: which backend, since when, why, and when its task tries again.

Pure: a task that meets a backend it cannot reach raises a :class:`BackendUnavailable`; the retry
policy (``core.task_policy``) turns it into a :class:`Waiting` kept on the job's row, which the
pages, the API and the commands render with :meth:`Waiting.message`.

A job can also wait on a backend that answers, but not yet for it: another job holds it
(:meth:`Waiting.busy`, "busy with run #7") or its first request has not been answered after a few
seconds (:meth:`Waiting.first_answer`). Such a wait has no retry (``next_retry_at`` is None); the
job's first answer ends it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, tzinfo
from functools import partial
from typing import Any

from core.errors import ShiftlabError

#: Longest reason kept: a backend's error can quote a whole reply.
MAX_REASON = 300


class BackendUnavailable(ShiftlabError):
    """A backend that cannot answer for now; its task retries. ``backend`` names it the way a
    user reads it ("the LLM backend 'default'"), ``reason`` is the last error it gave."""

    def __init__(self, message: str, *, backend: str, reason: str):
        super().__init__(message)
        self.backend = backend
        self.reason = reason if len(reason) <= MAX_REASON else reason[:MAX_REASON] + "…"

    def __reduce__(self):
        # Pickled between processes (Celery's prefork pool) with its keyword-only arguments.
        return partial(type(self), backend=self.backend, reason=self.reason), self.args


@dataclass(frozen=True)
class Waiting:
    """A job's wait: ``retry`` of ``max_retries`` is due at ``next_retry_at``; ``since`` is the
    first failure of this wait (times are timezone-aware). A wait for a backend that is busy
    rather than down has no retry (``next_retry_at`` None) and names the job that holds the
    backend in ``busy_with`` ("run #7"), or none while the job waits for its first answer."""

    backend: str
    reason: str
    since: datetime
    retry: int = 0
    max_retries: int = 0
    next_retry_at: datetime | None = None
    busy_with: str = ""

    @classmethod
    def busy(cls, *, backend: str, since: datetime, busy_with: str) -> Waiting:
        """Waiting behind another job that holds the backend (``busy_with``, e.g. "run #7")."""
        return cls(backend=backend, reason="", since=since, busy_with=busy_with)

    @classmethod
    def first_answer(cls, *, backend: str, since: datetime, reason: str = "") -> Waiting:
        """Requests sent and none answered yet, no other job known to hold the backend."""
        return cls(backend=backend, reason=reason, since=since)

    @property
    def retrying(self) -> bool:
        """Whether this is a wait on a backend that failed (its task retries), not a busy one."""
        return self.next_retry_at is not None

    def as_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "backend": self.backend,
            "reason": self.reason,
            "since": self.since.isoformat(),
            "retry": self.retry,
            "max_retries": self.max_retries,
            "next_retry_at": self.next_retry_at.isoformat() if self.next_retry_at else None,
        }
        if self.busy_with:
            data["busy_with"] = self.busy_with
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Waiting:
        next_retry_at = data.get("next_retry_at")
        return cls(
            backend=str(data["backend"]),
            reason=str(data.get("reason") or ""),
            since=datetime.fromisoformat(data["since"]),
            retry=int(data.get("retry") or 0),
            max_retries=int(data.get("max_retries") or 0),
            next_retry_at=datetime.fromisoformat(next_retry_at) if next_retry_at else None,
            busy_with=str(data.get("busy_with") or ""),
        )

    def message(self, *, now: datetime, tz: tzinfo, clock: bool = False) -> str:
        """E.g. "Waiting for the LLM backend 'default' since 05:09: connection refused; retry 3 of
        8, next in 40 s" ("due now" once past). ``clock``: the next retry as a time of day
        instead, for logs that print a line per change. A busy wait: "Waiting for the LLM backend
        'default' (busy with run #7) since 05:09", or "Waiting for the first answer of the LLM
        backend 'default' since 05:09" when no other job is known to hold it."""
        since = _when(self.since, now=now, tz=tz)
        if self.next_retry_at is None:
            if self.busy_with:
                text = f"Waiting for {self.backend} (busy with {self.busy_with}) since {since}"
            else:
                text = f"Waiting for the first answer of {self.backend} since {since}"
            return f"{text}: {self.reason}" if self.reason else text
        if self.next_retry_at <= now:
            due = "due now"
        elif clock:
            due = f"next at {self.next_retry_at.astimezone(tz):%H:%M:%S}"
        else:
            due = f"next in {math.ceil((self.next_retry_at - now).total_seconds())} s"
        return (
            f"Waiting for {self.backend} since {since}: {self.reason}; retry {self.retry} of {self.max_retries}, {due}"
        )


def gave_up_message(*, backend: str, reason: str, since: datetime, retries: int, now: datetime, tz: tzinfo) -> str:
    """Why a job failed once its task stopped retrying, e.g. "Gave up after 8 retries: the LLM
    backend 'default' did not answer since 05:09 (connection refused)"."""
    after = "at once, without retrying" if retries == 0 else f"after {retries} {'retry' if retries == 1 else 'retries'}"
    return f"Gave up {after}: {backend} did not answer since {_when(since, now=now, tz=tz)} ({reason})"


def _when(moment: datetime, *, now: datetime, tz: tzinfo) -> str:
    """A time of day, with its date when it is not today's (in ``tz``)."""
    local = moment.astimezone(tz)
    return f"{local:%H:%M}" if local.date() == now.astimezone(tz).date() else f"{local:%Y-%m-%d %H:%M}"
