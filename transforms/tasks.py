"""Thin Celery tasks: transformation runs (start = fan out over chunks, chunk, finalise) and judge
reports."""

from celery import chord, group, shared_task

from transforms.judge_services import judge_report_execute
from transforms.services import (
    TransientBackendError,
    transform_run_execute_chunk,
    transform_run_finalize,
    transform_run_mark_started,
    transform_run_pending_chunks,
)


@shared_task(name="transforms.start_run", acks_late=True, reject_on_worker_lost=True)
def start_run(run_id: int) -> None:
    """Fan the run's missing items out as chunk tasks; finalise when all are done. Also resumes."""
    transform_run_mark_started(run_id=run_id)
    chunks = transform_run_pending_chunks(run_id=run_id)
    if not chunks:
        finalize_run.delay(run_id)
        return
    chord(group(execute_chunk.si(run_id, ids) for ids in chunks))(finalize_run.si(run_id))


@shared_task(
    name="transforms.execute_chunk",
    acks_late=True,
    reject_on_worker_lost=True,
    autoretry_for=(TransientBackendError,),
    retry_backoff=5,
    retry_backoff_max=300,
    max_retries=8,
)
def execute_chunk(run_id: int, item_ids: list[int]) -> int:
    return transform_run_execute_chunk(run_id=run_id, item_ids=item_ids)


@shared_task(name="transforms.finalize_run", acks_late=True)
def finalize_run(run_id: int) -> None:
    transform_run_finalize(run_id=run_id)


@shared_task(
    name="transforms.execute_judge_report",
    acks_late=True,
    reject_on_worker_lost=True,
    autoretry_for=(TransientBackendError,),
    retry_backoff=5,
    retry_backoff_max=300,
    max_retries=8,
)
def execute_judge_report(report_id: int) -> None:
    judge_report_execute(report_id=report_id)
