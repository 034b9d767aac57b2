"""Benchmark runs at work: queue a run's tasks, execute units (one Celery task each), finalise,
fail, resume. Results go to the database (one row per unit, unique); scoring a unit and writing
its MTEB-style result file is ``evaluation.benchmark_scoring``. The tasks (``evaluation.tasks``)
call these; these dispatch the tasks by their registered names."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from annotation.configs.config_export import config_render
from annotation.export_services import benchmark_config_evidence_changes, benchmark_config_verify
from core.errors import ShiftlabError
from core.job_services import JobWait, job_fail
from core.projects import User, project_require_write
from core.services import audit_record
from core.task_policy import dispatch_on_commit, task_named
from evaluation.benchmark_inputs import evidence_refusal
from evaluation.benchmark_plan import QUERY, Unit
from evaluation.benchmark_scoring import benchmark_unit_score
from evaluation.models import BenchmarkResult, BenchmarkRun
from evaluation.report_services import robustness_report_store_queue
from transforms.backends.base import TransientBackendError

MAX_ERROR_LINES = 20


def benchmark_run_evidence_recheck(*, run_id: int) -> bool:
    """Before a run's units start (and on resume): whether the evidence behind its config still
    holds, apart from the changes the researcher already ran anyway. A run whose evidence changed
    since it was created fails, saying what changed."""
    run = BenchmarkRun.objects.get(pk=run_id)
    if run.source != BenchmarkRun.Source.CONFIG or not run.config_document:
        return True
    text = config_render(run.config_document, "json")
    check = benchmark_config_verify(text=text, fmt="json")
    changes = benchmark_config_evidence_changes(check=check, project=run.project)
    accepted = set((run.evidence_override or {}).get("reasons", []))
    new = [change for change in changes if change not in accepted]
    if new:
        job_fail(model=BenchmarkRun, job_id=run_id, message=evidence_refusal(new))
        return False
    return True


def benchmark_run_dispatch(run_id: int) -> None:
    """Queue the run's start task after commit; any task of the run failing for good fails the run."""
    dispatch_on_commit(
        lambda: task_named("evaluation.start_benchmark_run", run_id).apply_async(
            link_error=task_named("evaluation.benchmark_run_failed", run_id)
        ),
        on_broker_down=lambda message: benchmark_run_fail(run_id=run_id, reason=message),
    )


def benchmark_run_fail(*, run_id: int, reason: str) -> None:
    """Fail an unfinished run with ``reason`` and say how to go on (task failures, broker outages, the sweeper)."""
    job_fail(
        model=BenchmarkRun,
        job_id=run_id,
        message=(
            f"{reason}. Results stored so far are kept: fix the cause, then resume the run "
            f"(the Resume button on the run's page; from a terminal: benchmark resume {run_id})."
        ),
    )


def benchmark_run_waiting(*, run_id: int) -> JobWait:
    """How the run's unit tasks record that they wait on an LLM backend (generating a unit's
    transformations), and fail the run when they give up."""
    return JobWait(model=BenchmarkRun, job_id=run_id, fail=partial(benchmark_run_fail, run_id=run_id))


def benchmark_run_mark_started(*, run_id: int) -> None:
    BenchmarkRun.objects.filter(pk=run_id).exclude(status=BenchmarkRun.Status.SUCCEEDED).update(
        status=BenchmarkRun.Status.RUNNING, started_at=timezone.now()
    )


def benchmark_run_pending_units(*, run_id: int) -> list[dict[str, Any]]:
    """Units of the run that have no result yet (all of them at the start; the rest on resume)."""
    run = BenchmarkRun.objects.get(pk=run_id)
    done = set(
        BenchmarkResult.objects.filter(run=run).values_list("model", "dataset__name", "transformation", "seed", "side")
    )
    return [u for u in run.plan["units"] if Unit.from_dict(u).key() not in done]


def benchmark_unit_execute(*, run_id: int, unit: dict[str, Any]) -> bool:
    """Score one unit and store its result; return whether this call stored it.

    Idempotent: a unit that already has a result is skipped, and the unique constraint on the
    unit key keeps a unit delivered twice (e.g. after its worker was killed) from counting twice.
    Missing transformation outputs are generated here first (idempotent chunks, cached LLM
    calls). Transient LLM errors propagate (the task records that the run waits, and retries);
    any other error is recorded on the run and the unit stays without result until the run is
    resumed. A stored result ends the run's wait.
    """
    u = Unit.from_dict(unit)
    run = BenchmarkRun.objects.get(pk=run_id)
    key = {
        "run": run,
        "model": u.model,
        "dataset__name": u.dataset,
        "transformation": u.transformation,
        "seed": u.seed,
        "side": u.side,
    }
    if BenchmarkResult.objects.filter(**key).exists():
        # Delivered again: its first delivery may have died between storing and finishing the run.
        _finalize_when_complete(run_id)
        return False
    try:
        row = benchmark_unit_score(run=run, unit=u)
    except TransientBackendError:
        raise
    except (ShiftlabError, ImproperlyConfigured, ValueError) as exc:
        _record_failure(run_id, u, exc)
        return False
    stored = False
    try:
        with transaction.atomic():
            BenchmarkResult.objects.create(**row)
            BenchmarkRun.objects.filter(pk=run_id).update(done=F("done") + 1, waiting=None)
            stored = True
    except IntegrityError:  # stored meanwhile by another delivery of this unit
        pass
    _finalize_when_complete(run_id)
    return stored


def _record_failure(run_id: int, u: Unit, exc: Exception) -> None:
    side = "" if u.side == QUERY else f" ({u.side} side)"
    line = f"{u.model} / {u.dataset} / {u.transformation} seed {u.seed}{side}: {exc}"
    with transaction.atomic():
        run = BenchmarkRun.objects.select_for_update().get(pk=run_id)
        lines = [x for x in run.error.splitlines() if x][: MAX_ERROR_LINES - 1]
        run.error = "\n".join([*lines, line])
        run.n_failed = F("n_failed") + 1
        run.save(update_fields=["error", "n_failed"])
    _finalize_when_complete(run_id)


def _finalize_when_complete(run_id: int) -> None:
    # The chord's final task may wait behind other runs' tasks: finish as soon as every unit has
    # an outcome (finalising twice is harmless).
    if BenchmarkRun.objects.filter(pk=run_id, done__gte=F("total") - F("n_failed")).exists():
        benchmark_run_finalize(run_id=run_id)


def benchmark_run_finalize(*, run_id: int) -> BenchmarkRun:
    with transaction.atomic():
        run = BenchmarkRun.objects.select_for_update().get(pk=run_id)
        run.done = BenchmarkResult.objects.filter(run=run).count()
        if run.done >= run.total:
            run.status, run.error = BenchmarkRun.Status.SUCCEEDED, ""
        else:
            run.status = BenchmarkRun.Status.FAILED
            missing = f"{run.total - run.done} units have no result: fix the cause and resume the run"
            run.error = f"{run.error}\n{missing}".strip() if missing not in run.error else run.error
        if run.finished_at is None or run.status == BenchmarkRun.Status.SUCCEEDED:
            run.finished_at = timezone.now()
        run.save(update_fields=["done", "status", "error", "finished_at"])
        if run.status == BenchmarkRun.Status.SUCCEEDED:
            # computed now, so that opening the report is fast (issue 31)
            robustness_report_store_queue(run_id=run_id)
    return run


@dataclass(frozen=True)
class BenchmarkRunResumeRequest:
    """Resume a benchmark run (``benchmark_run_resume``), as the page, the API, the command and
    the sweeper ask for it: the run's id."""

    run: int


def benchmark_run_resume(*, request: BenchmarkRunResumeRequest, actor: User = None) -> BenchmarkRun:
    """Queue the units that have no result (after a crash, a lost task or a fixed failure). The
    one entry of page, API, command and the sweeper: ``actor`` (None: the system) must be able to
    change the run's project (403)."""
    run_id = request.run
    run = BenchmarkRun.objects.select_related("project").get(pk=run_id)
    project_require_write(actor, run.project)
    with transaction.atomic():
        BenchmarkRun.objects.filter(pk=run_id).update(
            status=BenchmarkRun.Status.PENDING, error="", n_failed=0, finished_at=None
        )
        audit_record(actor=actor, verb="benchmark.run.resume", obj=run, payload={"done": run.done, "total": run.total})
        benchmark_run_dispatch(run_id)
    run.refresh_from_db()
    return run
