"""Thin Celery tasks: transformation runs (start = fan out over chunks, chunk, finalise) and judge
reports."""

from celery import shared_task

from core.sweeper import stuck_job_kind_register
from core.task_policy import TRANSIENT_BACKEND, failure_reason, fan_out
from transforms.backends.base import TransientBackendError
from transforms.chunk_services import transform_run_execute_chunk
from transforms.jobs import REPORTS, RUNS
from transforms.judge_services import JudgeReportResumeRequest, judge_report_execute, judge_report_resume
from transforms.judgement_services import judge_report_fail, judge_report_waiting
from transforms.services import (
    TransformRunResumeRequest,
    transform_run_fail,
    transform_run_finalize,
    transform_run_mark_started,
    transform_run_note_queued,
    transform_run_pending_chunks,
    transform_run_resume,
    transform_run_waiting,
)

# Tasks that wait on an LLM backend catch its TransientBackendError and retry through
# TRANSIENT_BACKEND.retry, which records on the job that it waits (and fails it when retries run out).
_WAITS_ON_BACKEND = TRANSIENT_BACKEND.retry_options()


@shared_task(name="transforms.start_run", acks_late=True, reject_on_worker_lost=True)
def start_run(run_id: int) -> None:
    """Fan the run's missing items out as chunk tasks; finalise when all are done. Also resumes."""
    transform_run_mark_started(run_id=run_id)
    chunks = transform_run_pending_chunks(run_id=run_id)
    transform_run_note_queued(run_id=run_id)
    fan_out(
        [execute_chunk.si(run_id, ids) for ids in chunks], then=finalize_run.si(run_id), on_error=run_failed.s(run_id)
    )


@shared_task(name="transforms.execute_chunk", acks_late=True, reject_on_worker_lost=True, **_WAITS_ON_BACKEND)
def execute_chunk(self, run_id: int, item_ids: list[int]) -> int:
    try:
        return transform_run_execute_chunk(run_id=run_id, item_ids=item_ids)
    except TransientBackendError as exc:
        TRANSIENT_BACKEND.retry(self, exc, job=transform_run_waiting(run_id=run_id))


@shared_task(name="transforms.finalize_run", acks_late=True)
def finalize_run(run_id: int) -> None:
    transform_run_finalize(run_id=run_id)


@shared_task(name="transforms.execute_judge_report", acks_late=True, reject_on_worker_lost=True, **_WAITS_ON_BACKEND)
def execute_judge_report(self, report_id: int) -> None:
    try:
        judge_report_execute(report_id=report_id)
    except TransientBackendError as exc:
        TRANSIENT_BACKEND.retry(self, exc, job=judge_report_waiting(report_id=report_id))


@shared_task(name="transforms.run_failed")
def run_failed(request, exc, traceback, run_id: int) -> None:
    """Errback of a run's tasks: a chunk that failed for good (or the start or final task) fails the run."""
    transform_run_fail(run_id=run_id, reason=f"A task of the run failed: {failure_reason(exc)}")


@shared_task(name="transforms.judge_report_failed")
def judge_report_failed(request, exc, traceback, report_id: int) -> None:
    """Errback of ``execute_judge_report``: an unexpected error fails the report instead of leaving it running."""
    judge_report_fail(report_id=report_id, reason=f"The report's task failed: {failure_reason(exc)}")


stuck_job_kind_register(
    RUNS.stuck(
        "transformation run",
        tasks={"transforms.start_run", "transforms.execute_chunk", "transforms.finalize_run"},
        resume=lambda run: transform_run_resume(request=TransformRunResumeRequest(run=run.pk)),
    )
)
stuck_job_kind_register(
    REPORTS.stuck(
        "judge report",
        tasks={"transforms.execute_judge_report"},
        resume=lambda report: judge_report_resume(request=JudgeReportResumeRequest(report=report.pk)),
    )
)
