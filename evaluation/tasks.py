"""Thin Celery tasks of benchmark runs: start (fan out one task per unit), unit, finalise; and of
models scored on a human-baseline study (``baseline_services.baseline_score_job_run``)."""

from celery import shared_task

from core.sweeper import StuckJobKind, stuck_job_kind_register
from core.task_policy import TRANSIENT_BACKEND, failure_reason, fan_out
from evaluation.baseline_services import (
    SCORE_JOB_TASK,
    baseline_score_job_dispatch,
    baseline_score_job_fail,
    baseline_score_job_run,
)
from evaluation.benchmark_execution import (
    BenchmarkRunResumeRequest,
    benchmark_run_evidence_recheck,
    benchmark_run_fail,
    benchmark_run_finalize,
    benchmark_run_mark_started,
    benchmark_run_pending_units,
    benchmark_run_resume,
    benchmark_run_waiting,
    benchmark_unit_execute,
)
from evaluation.models import BaselineScoreJob, BenchmarkRun
from evaluation.report_services import robustness_report_store_for_run
from transforms.backends.base import TransientBackendError


@shared_task(name="evaluation.start_benchmark_run", acks_late=True, reject_on_worker_lost=True)
def start_benchmark_run(run_id: int) -> None:
    """Fan the run's units without a result out as unit tasks; finalise when all are done. Also
    resumes. A run whose config's evidence changed since it was created fails instead."""
    if not benchmark_run_evidence_recheck(run_id=run_id):
        return
    benchmark_run_mark_started(run_id=run_id)
    units = benchmark_run_pending_units(run_id=run_id)
    fan_out(
        [execute_benchmark_unit.si(run_id, unit) for unit in units],
        then=finalize_benchmark_run.si(run_id),
        on_error=benchmark_run_failed.s(run_id),
    )


@shared_task(
    name="evaluation.execute_benchmark_unit",
    acks_late=True,
    reject_on_worker_lost=True,
    **TRANSIENT_BACKEND.retry_options(),
)
def execute_benchmark_unit(self, run_id: int, unit: dict) -> bool:
    try:
        return benchmark_unit_execute(run_id=run_id, unit=unit)
    except TransientBackendError as exc:  # generating the unit's transformations: the run waits and retries
        TRANSIENT_BACKEND.retry(self, exc, job=benchmark_run_waiting(run_id=run_id))


@shared_task(name="evaluation.finalize_benchmark_run", acks_late=True)
def finalize_benchmark_run(run_id: int) -> None:
    benchmark_run_finalize(run_id=run_id)


@shared_task(name="evaluation.store_robustness_report", acks_late=True)
def store_robustness_report(run_id: int) -> None:
    robustness_report_store_for_run(run_id=run_id)


@shared_task(name="evaluation.benchmark_run_failed")
def benchmark_run_failed(request, exc, traceback, run_id: int) -> None:
    """Errback of a run's tasks: a unit that failed for good (or the start or final task) fails the run."""
    benchmark_run_fail(run_id=run_id, reason=f"A task of the run failed: {failure_reason(exc)}")


stuck_job_kind_register(
    StuckJobKind(
        label="benchmark run",
        model=BenchmarkRun,
        task_names=frozenset(
            {"evaluation.start_benchmark_run", "evaluation.execute_benchmark_unit", "evaluation.finalize_benchmark_run"}
        ),
        resume=lambda run: benchmark_run_resume(request=BenchmarkRunResumeRequest(run=run.pk)),
        fail=lambda run_id, reason: benchmark_run_fail(run_id=run_id, reason=reason),
    )
)


@shared_task(name=SCORE_JOB_TASK, acks_late=True, reject_on_worker_lost=True)
def baseline_score_models(job_id: int) -> str:
    """Score models on a baseline study's instances (``baseline_score_job_run``); resumable, so a
    redelivered task scores only the models still missing."""
    return baseline_score_job_run(job_id=job_id).status


stuck_job_kind_register(
    StuckJobKind(
        label="baseline model scores",
        model=BaselineScoreJob,
        task_names=frozenset({SCORE_JOB_TASK}),
        resume=lambda job: baseline_score_job_dispatch(job_id=job.pk),
        fail=lambda job_id, reason: baseline_score_job_fail(job_id=job_id, reason=reason),
    )
)
