"""Progress of long jobs in the terminal, shared by the management commands."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from core.models import TrackedJob

FINISHED = (TrackedJob.Status.SUCCEEDED, TrackedJob.Status.FAILED)


def progress_bar(done: int, total: int, *, suffix: str = "", width: int = 30) -> str:
    filled = int(width * min(done, total) / total) if total else 0
    return f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total}{' ' + suffix if suffix else ''}"


def follow_job(
    job: TrackedJob,
    write: Callable[..., None],
    *,
    describe: Callable[[TrackedJob], str] | None = None,
    poll_seconds: float = 1.0,
) -> TrackedJob:
    """Redraw ``job``'s progress (one line in a terminal, a new line per change in a log) until it
    has succeeded or failed; return it refreshed. ``write`` is a command's ``self.stdout.write``."""
    describe = describe or (lambda j: progress_bar(j.done, j.total, suffix=j.status))
    interactive = sys.stdout.isatty()
    last = None
    while True:
        job.refresh_from_db()
        line = describe(job)
        if interactive:
            write("\r" + line, ending="")
        elif line != last:
            write(line)
        last = line
        if job.status in FINISHED:
            break
        time.sleep(poll_seconds)
    if interactive:
        write("")
    return job
