"""Celery tasks and worker hooks shared by every app: the stuck-job sweeper (run by Celery beat)
and the broker heartbeat of each worker."""

from __future__ import annotations

from dataclasses import asdict
from datetime import timedelta

from celery import shared_task
from celery.signals import worker_ready, worker_shutdown
from django.conf import settings
from django.utils import timezone

from core.broker import Heartbeat, live_tasks
from core.sweeper import stuck_job_kinds, stuck_jobs_sweep

_heartbeat: Heartbeat | None = None


@shared_task(name="core.sweep_stuck_jobs", acks_late=True, reject_on_worker_lost=True)
def sweep_stuck_jobs() -> dict:
    """Resume (or fail, after repeated resumes) jobs pending or running for longer than
    ``SHIFTLAB_STUCK_JOB_MINUTES`` with no task queued or held by a worker."""
    from celery import current_app as app  # the project's app; core never imports shiftlab (upwards)

    kinds = stuck_job_kinds()
    age = settings.SHIFTLAB_STUCK_JOB_MINUTES
    # In-process (eager) tasks never wait in a queue: nothing can be live.
    live = (
        set() if app.conf.task_always_eager else live_tasks(app, {name for kind in kinds for name in kind.task_names})
    )
    result = stuck_jobs_sweep(
        kinds, last_activity_before=timezone.now() - timedelta(minutes=age), live=live, age_minutes=age
    )
    return asdict(result)


@worker_ready.connect
def _start_heartbeat(sender, **kwargs) -> None:
    global _heartbeat
    app = sender.app
    interval = settings.SHIFTLAB_BROKER_HEARTBEAT_SECONDS
    if interval and str(app.conf.broker_url or "").startswith(("redis://", "rediss://")):
        _heartbeat = Heartbeat(app, interval=interval)
        _heartbeat.start()


@worker_shutdown.connect
def _stop_heartbeat(**kwargs) -> None:
    if _heartbeat is not None:
        _heartbeat.stopped.set()
