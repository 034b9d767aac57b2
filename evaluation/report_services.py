"""The robustness report computed once, when its run ends, and stored (issue 31): opening the
report page then reads it back instead of recomputing the statistics, the drift encodings and
the figures (9.4 s on a first open before).

A stored report holds for the options it was computed under and the results it was computed from;
other options, or a run that gained results (resumed), are computed when asked for and stored
then. The drift-vs-quality part uses the study ratings counted when it was computed: the report
page says when that was and offers to compute it again."""

from __future__ import annotations

import json
import logging
import pickle
import time

from django.core.exceptions import ImproperlyConfigured
from django.db.models import Count, Max

from core.errors import ShiftlabError
from core.task_policy import dispatch_on_commit, task_named
from evaluation.figures import report_figures
from evaluation.models import BenchmarkResult, BenchmarkRun, StoredRobustnessReport
from evaluation.report_robustness import robustness_options, robustness_report_get
from evaluation.robustness_options import ReportOptions
from evaluation.robustness_results import RobustnessReport

logger = logging.getLogger(__name__)
FINISHED = (BenchmarkRun.Status.SUCCEEDED, BenchmarkRun.Status.FAILED)


def robustness_report_read(
    *, run: BenchmarkRun, options: ReportOptions
) -> tuple[RobustnessReport, dict[str, str], StoredRobustnessReport | None]:
    """The report of ``run`` under ``options`` with its SVG figures, and the stored row it came
    from (None: computed now, for a run still going). A finished run's report is stored on first
    computation."""
    stored = StoredRobustnessReport.objects.filter(
        run=run, options_key=_options_key(options), results_key=_results_key(run)
    ).first()
    if stored is not None:
        try:
            return pickle.loads(stored.report), stored.figures, stored  # noqa: S301 - written by robustness_report_store
        except (pickle.UnpicklingError, AttributeError, ImportError, TypeError, EOFError):
            pass  # stored by an older version whose report classes differ: computed again below
    if run.status in FINISHED:
        stored = robustness_report_store(run=run, options=options)
        return pickle.loads(stored.report), stored.figures, stored  # noqa: S301 - written just now
    report = robustness_report_get(run=run, options=options)
    return report, _svgs(report), None


def robustness_report_store(*, run: BenchmarkRun, options: ReportOptions | None = None) -> StoredRobustnessReport:
    """Compute the report of ``run`` (default: the run's own options) and its figures, and store
    them, replacing a stored one of the same options."""
    options = options or robustness_options(run=run)
    started = time.perf_counter()
    report = robustness_report_get(run=run, options=options)
    figures = _svgs(report)
    stored, _ = StoredRobustnessReport.objects.update_or_create(
        run=run,
        options_key=_options_key(options),
        defaults={
            "results_key": _results_key(run),
            "report": pickle.dumps(report, protocol=pickle.HIGHEST_PROTOCOL),
            "figures": figures,
            "compute_seconds": time.perf_counter() - started,
        },
    )
    return stored


def robustness_report_store_queue(*, run_id: int) -> None:
    """Queue the computation of a finished run's report (its own options) after commit."""
    dispatch_on_commit(
        lambda: task_named("evaluation.store_robustness_report", run_id).apply_async(),
        on_broker_down=lambda message: logger.warning("report of run %s not queued: %s", run_id, message),
    )


def robustness_report_store_for_run(*, run_id: int) -> None:
    """The task's work: store the report of a finished run; a report that cannot be computed is
    logged and left to the page, which computes it (and shows why) when opened."""
    run = BenchmarkRun.objects.get(pk=run_id)
    options = robustness_options(run=run)
    if StoredRobustnessReport.objects.filter(
        run=run, options_key=_options_key(options), results_key=_results_key(run)
    ).exists():
        return  # a run finalised twice (a unit delivered again)
    try:
        robustness_report_store(run=run, options=options)
    except (ShiftlabError, ImproperlyConfigured, ValueError, OSError) as exc:
        logger.warning("the robustness report of run %s was not stored: %s", run_id, exc)


def _options_key(options: ReportOptions) -> str:
    return json.dumps(options.as_dict(), sort_keys=True, default=str)


def _results_key(run: BenchmarkRun) -> str:
    found = BenchmarkResult.objects.filter(run=run).aggregate(n=Count("pk"), newest=Max("pk"))
    return f"{found['n']}:{found['newest'] or 0}"


def _svgs(report: RobustnessReport) -> dict[str, str]:
    return {name: str(svg) for name, svg in report_figures(report).items()}
