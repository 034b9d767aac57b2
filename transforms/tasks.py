"""Thin Celery tasks: transformation runs (start = fan out over chunks, chunk, finalise) and judge
reports."""

from celery import shared_task

from core.task_policy import TRANSIENT_BACKEND, fan_out
from transforms.chunk_services import transform_run_execute_chunk
from transforms.judge_services import judge_report_execute
from transforms.services import (
    TransientBackendError,
    transform_run_finalize,
    transform_run_mark_started,
    transform_run_pending_chunks,
)

_RETRY_TRANSIENT_BACKEND = TRANSIENT_BACKEND.task_options(TransientBackendError)


@shared_task(name="transforms.start_run", acks_late=True, reject_on_worker_lost=True)
def start_run(run_id: int) -> None:
    """Fan the run's missing items out as chunk tasks; finalise when all are done. Also resumes."""
    transform_run_mark_started(run_id=run_id)
    chunks = transform_run_pending_chunks(run_id=run_id)
    fan_out([execute_chunk.si(run_id, ids) for ids in chunks], then=finalize_run.si(run_id))


@shared_task(name="transforms.execute_chunk", acks_late=True, reject_on_worker_lost=True, **_RETRY_TRANSIENT_BACKEND)
def execute_chunk(run_id: int, item_ids: list[int]) -> int:
    return transform_run_execute_chunk(run_id=run_id, item_ids=item_ids)


@shared_task(name="transforms.finalize_run", acks_late=True)
def finalize_run(run_id: int) -> None:
    transform_run_finalize(run_id=run_id)


@shared_task(
    name="transforms.execute_judge_report", acks_late=True, reject_on_worker_lost=True, **_RETRY_TRANSIENT_BACKEND
)
def execute_judge_report(report_id: int) -> None:
    judge_report_execute(report_id=report_id)
