"""Thin Celery tasks of benchmark runs: start (fan out one task per unit), unit, finalise."""

from celery import shared_task

from core.task_policy import TRANSIENT_BACKEND, fan_out
from evaluation.benchmark_services import (
    benchmark_run_finalize,
    benchmark_run_mark_started,
    benchmark_run_pending_units,
    benchmark_unit_execute,
)
from transforms.services import TransientBackendError


@shared_task(name="evaluation.start_benchmark_run", acks_late=True, reject_on_worker_lost=True)
def start_benchmark_run(run_id: int) -> None:
    """Fan the run's units without a result out as unit tasks; finalise when all are done. Also resumes."""
    benchmark_run_mark_started(run_id=run_id)
    units = benchmark_run_pending_units(run_id=run_id)
    fan_out([execute_benchmark_unit.si(run_id, unit) for unit in units], then=finalize_benchmark_run.si(run_id))


@shared_task(
    name="evaluation.execute_benchmark_unit",
    acks_late=True,
    reject_on_worker_lost=True,
    **TRANSIENT_BACKEND.task_options(TransientBackendError),
)
def execute_benchmark_unit(run_id: int, unit: dict) -> bool:
    return benchmark_unit_execute(run_id=run_id, unit=unit)


@shared_task(name="evaluation.finalize_benchmark_run", acks_late=True)
def finalize_benchmark_run(run_id: int) -> None:
    benchmark_run_finalize(run_id=run_id)
