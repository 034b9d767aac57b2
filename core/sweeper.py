"""The stuck-job sweeper: finds jobs left pending or running with no task that will ever finish
them (a lost message, a worker killed before it could report, a broker restarted without its
data) and resumes them, or fails them with a message once resuming has not helped.

Each app describes its kinds of job with a ``StuckJobKind`` and registers it from its
``tasks.py`` (imported by every worker), so this module needs no import of the apps downstream.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import models
from django.db.models.functions import Coalesce

from core.models import AuditEvent
from core.services import audit_record

#: How often the sweeper resumes one job before it fails it instead.
MAX_RESUMES = 3
SWEEP_VERB = "job.sweep.resume"


@dataclass(frozen=True)
class StuckJobKind:
    """A kind of job: its model (with TrackedJob's status, created_at and started_at), the tasks
    whose first argument is its id, and how to queue it again or fail it."""

    label: str
    model: type[models.Model]
    task_names: frozenset[str]
    resume: Callable[[models.Model], None]
    fail: Callable[[int, str], None]


@dataclass
class SweepResult:
    resumed: dict[str, list[int]] = field(default_factory=dict)
    failed: dict[str, list[int]] = field(default_factory=dict)


_KINDS: dict[str, StuckJobKind] = {}


def stuck_job_kind_register(kind: StuckJobKind) -> None:
    _KINDS[kind.label] = kind


def stuck_job_kinds() -> tuple[StuckJobKind, ...]:
    return tuple(_KINDS.values())


def stuck_jobs(kind: StuckJobKind, *, last_activity_before: datetime, live: set[tuple[str, Any]]) -> list:
    """Unfinished jobs of ``kind`` that started (or, never started, were created) before
    ``last_activity_before`` and have no live task."""
    candidates = (
        kind.model.objects.filter(status__in=("pending", "running"))
        .annotate(last_activity=Coalesce("started_at", "created_at"))
        .filter(last_activity__lt=last_activity_before)
        .order_by("pk")
    )
    live_ids = {str(job_id) for name, job_id in live if name in kind.task_names}
    return [job for job in candidates if str(job.pk) not in live_ids]


def stuck_jobs_sweep(
    kinds: Iterable[StuckJobKind], *, last_activity_before: datetime, live: set[tuple[str, Any]], age_minutes: float
) -> SweepResult:
    """Resume every stuck job, or fail it once the sweeper has resumed it ``MAX_RESUMES`` times."""
    result = SweepResult()
    for kind in kinds:
        for job in stuck_jobs(kind, last_activity_before=last_activity_before, live=live):
            sweeps = AuditEvent.objects.filter(
                verb=SWEEP_VERB, object_type=job._meta.label_lower, object_id=str(job.pk)
            ).count()
            if sweeps >= MAX_RESUMES:
                kind.fail(
                    job.pk,
                    f"The {kind.label} was {job.status} for over {age_minutes:g} minutes with no task queued or "
                    f"running for it, and was resumed {sweeps} times without finishing. Check that a worker "
                    "is running (celery -A shiftlab worker) and read its log for the cause",
                )
                result.failed.setdefault(kind.label, []).append(job.pk)
                continue
            audit_record(actor=None, verb=SWEEP_VERB, obj=job, payload={"status": job.status, "sweep": sweeps + 1})
            kind.resume(job)
            result.resumed.setdefault(kind.label, []).append(job.pk)
    return result
