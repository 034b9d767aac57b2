"""The robustness report computed once, when its run ends, and stored (issue 31): opening the
report page then reads it back instead of recomputing the statistics, the drift encodings and
the figures (9.4 s on a first open before).

A stored report holds for the options it was computed under and the results it was computed from;
other options, or a run that gained results (resumed), are computed when asked for and stored
then. The drift-vs-quality part uses the study ratings counted when it was computed: the report
page says when that was and offers to compute it again.

The report is stored pickled (its classes carry the statistics the page renders) behind an HMAC of
the server's SECRET_KEY: unpickling runs code, so a row that someone with write access to the
database alone forged or altered is never unpickled, only computed again."""

from __future__ import annotations

import hmac
import json
import logging
import pickle
import time

from django.core.exceptions import ImproperlyConfigured
from django.db.models import Count, Max
from django.utils.crypto import salted_hmac

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
        report = _opened(bytes(stored.report))
        if report is not None:
            return report, stored.figures, stored
    if run.status in FINISHED:
        stored = robustness_report_store(run=run, options=options)
        return _opened(bytes(stored.report)), stored.figures, stored
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
            "report": _sealed(report),
            "figures": figures,
            "compute_seconds": time.perf_counter() - started,
        },
    )
    _keep_newest(run)
    return stored


# Options a reader may vary (units, splits up to thousands): each set asked for is stored, so a
# run keeps its own options' report and the newest few others, not one row per set ever asked.
STORED_OTHER_OPTIONS = 8


def _keep_newest(run: BenchmarkRun) -> None:
    own = _options_key(robustness_options(run=run))
    others = StoredRobustnessReport.objects.filter(run=run).exclude(options_key=own).order_by("-computed_at", "-pk")
    stale = list(others.values_list("pk", flat=True)[STORED_OTHER_OPTIONS:])
    if stale:
        StoredRobustnessReport.objects.filter(pk__in=stale).delete()


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


_SEAL_SALT = "shiftlab.evaluation.stored-robustness-report"


def _seal(payload: bytes) -> bytes:
    return salted_hmac(_SEAL_SALT, payload, algorithm="sha256").digest()


def _sealed(report: RobustnessReport) -> bytes:
    payload = pickle.dumps(report, protocol=pickle.HIGHEST_PROTOCOL)
    return _seal(payload) + payload


def _opened(blob: bytes) -> RobustnessReport | None:
    """The stored report, or None when its seal does not match (written under another SECRET_KEY,
    altered in the database) or an older version's classes no longer load: computed again then."""
    mac, payload = blob[:32], blob[32:]
    if len(mac) < 32 or not hmac.compare_digest(mac, _seal(payload)):
        return None
    try:
        return pickle.loads(payload)  # noqa: S301 - sealed with this server's key by _sealed
    except (pickle.UnpicklingError, AttributeError, ImportError, TypeError, EOFError):
        return None


def _options_key(options: ReportOptions) -> str:
    return json.dumps(options.as_dict(), sort_keys=True, default=str)


def _results_key(run: BenchmarkRun) -> str:
    found = BenchmarkResult.objects.filter(run=run).aggregate(n=Count("pk"), newest=Max("pk"))
    return f"{found['n']}:{found['newest'] or 0}"


def _svgs(report: RobustnessReport) -> dict[str, str]:
    return {name: str(svg) for name, svg in report_figures(report).items()}
