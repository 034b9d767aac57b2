"""The robustness report computed once, when its run ends, and stored (issue 31): opening the
report page then reads it back instead of recomputing the statistics, the drift encodings and
the figures (9.4 s on a first open before).

A stored report holds for the options it was computed under and the results it was computed from;
other options, or a run that gained results (resumed), are computed when asked for and stored
then. The drift-vs-quality part uses the study ratings counted when it was computed: the report
page says when that was and offers to compute it again.

The report and its SVG figures are stored pickled (the report's classes carry the statistics the
page renders) behind an HMAC of the server's SECRET_KEY that also covers the row's run, options and
results and a digest of the code that computes it (this package and ``core``): unpickling runs
code, so a row that someone with write access to the database alone forged, altered or copied
from another run is never unpickled (nor its figures shown), only computed again; and a report
stored by other code (a fix, an upgrade) is computed again rather than shown with the old
figures."""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import logging
import pickle
import time
from pathlib import Path

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
        opened = _opened(stored)
        if opened is not None:
            return (*opened, stored)
    if run.status in FINISHED:
        stored = robustness_report_store(run=run, options=options)
        return (*_opened(stored), stored)
    report = robustness_report_get(run=run, options=options)
    return report, _svgs(report), None


def robustness_report_store(*, run: BenchmarkRun, options: ReportOptions | None = None) -> StoredRobustnessReport:
    """Compute the report of ``run`` (default: the run's own options) and its figures, and store
    them, replacing a stored one of the same options."""
    options = options or robustness_options(run=run)
    started = time.perf_counter()
    report = robustness_report_get(run=run, options=options)
    figures = _svgs(report)
    options_key, results_key = _options_key(options), _results_key(run)
    stored, _ = StoredRobustnessReport.objects.update_or_create(
        run=run,
        options_key=options_key,
        defaults={
            "results_key": results_key,
            "report": _sealed((report, figures), _context(run.pk, options_key, results_key)),
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


@functools.cache
def _code_version() -> str:
    """A digest of the modules the report is computed with (tests left out): this package's, and
    ``core``'s, whose statistics (``core.stats``) and figure helpers (``core.plots``) it calls; so a
    stored report of other code is computed again."""
    digest = hashlib.sha256()
    root = Path(__file__).resolve().parent.parent
    for package in ("evaluation", "core"):
        for path in sorted((root / package).glob("*.py")):
            if not path.name.startswith("test_"):
                digest.update(f"{package}/{path.name}".encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _context(run_id: int, options_key: str, results_key: str) -> bytes:
    """What a sealed row is valid for: its run, options and results, and the code that computed it."""
    return json.dumps([run_id, options_key, results_key, _code_version()]).encode() + b"\0"


def _seal(context: bytes, payload: bytes) -> bytes:
    return salted_hmac(_SEAL_SALT, context + payload, algorithm="sha256").digest()


def _sealed(content: tuple[RobustnessReport, dict[str, str]], context: bytes) -> bytes:
    payload = pickle.dumps(content, protocol=pickle.HIGHEST_PROTOCOL)
    return _seal(context, payload) + payload


def _opened(stored: StoredRobustnessReport) -> tuple[RobustnessReport, dict[str, str]] | None:
    """The stored report and figures, or None when the seal does not match the row (written under
    another SECRET_KEY or by other code, altered or copied in the database) or the pickle does not
    load: computed again then."""
    blob = bytes(stored.report)
    mac, payload = blob[:32], blob[32:]
    context = _context(stored.run_id, stored.options_key, stored.results_key)
    if len(mac) < 32 or not hmac.compare_digest(mac, _seal(context, payload)):
        return None
    try:
        report, figures = pickle.loads(payload)  # noqa: S301 - sealed with this server's key by _sealed
    except (pickle.UnpicklingError, AttributeError, ImportError, TypeError, ValueError, EOFError):
        return None
    return report, figures


def _options_key(options: ReportOptions) -> str:
    return json.dumps(options.as_dict(), sort_keys=True, default=str)


def _results_key(run: BenchmarkRun) -> str:
    found = BenchmarkResult.objects.filter(run=run).aggregate(n=Count("pk"), newest=Max("pk"))
    return f"{found['n']}:{found['newest'] or 0}"


def _svgs(report: RobustnessReport) -> dict[str, str]:
    return {name: str(svg) for name, svg in report_figures(report).items()}
