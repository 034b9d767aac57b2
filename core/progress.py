"""Progress of long jobs in the terminal, shared by the management commands."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from django.utils import timezone

from core.models import TrackedJob

FINISHED = (TrackedJob.Status.SUCCEEDED, TrackedJob.Status.FAILED)


def progress_bar(done: int, total: int, *, suffix: str = "", width: int = 30) -> str:
    filled = int(width * min(done, total) / total) if total else 0
    return f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total}{' ' + suffix if suffix else ''}"


def job_status_lines(job: TrackedJob, *, describe: Callable[[TrackedJob], str] | None = None) -> list[str]:
    """What a ``status`` command prints of ``job``: its progress (``describe``, default a bar and
    the status), the backend it waits for, if any, and its error, if any."""
    describe = describe or _bar
    return [line for line in (describe(job), job.waiting_message, job.error) if line]


def follow_job(
    job: TrackedJob,
    write: Callable[..., None],
    *,
    describe: Callable[[TrackedJob], str] | None = None,
    poll_seconds: float = 1.0,
) -> TrackedJob:
    """Redraw ``job``'s progress (one line in a terminal, a new line per change in a log) until it
    has succeeded or failed; return it refreshed. ``write`` is a command's ``self.stdout.write``.
    While the job waits on a backend the line says so; a log gives the next retry's time of day
    rather than a countdown, which would add a line every second."""
    describe = describe or _bar
    interactive = sys.stdout.isatty()
    last = None
    while True:
        job.refresh_from_db()
        line = describe(job)
        waiting = job.waiting_state
        if waiting is not None:
            now, tz = timezone.now(), timezone.get_current_timezone()
            line += f" — {waiting.message(now=now, tz=tz, clock=not interactive)}"
        if interactive:
            write("\r" + line.ljust(len(last or "")), ending="")  # padded: a shorter line covers the last
        elif line != last:
            write(line)
        last = line
        if job.status in FINISHED:
            break
        time.sleep(poll_seconds)
    if interactive:
        write("")
    return job


def _bar(job: TrackedJob) -> str:
    return progress_bar(job.done, job.total, suffix=job.status)
