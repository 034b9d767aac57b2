"""The robustness report of a benchmark run: gathers its rows (and, when a study rated the run's
transformed items, their drift and quality), runs ``evaluation.robustness`` and renders files."""

from __future__ import annotations

import dataclasses
import json
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path

import numpy as np
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from annotation.models import Study, StudyItem
from annotation.studies.selectors import counted_ratings
from core.errors import ShiftlabError
from evaluation.embedding_cache import encode_cached
from evaluation.encoders import get_encoder
from evaluation.figures import FORMATS, report_figures
from evaluation.meaning_change_services import robustness_sensitivity
from evaluation.models import BenchmarkRun
from evaluation.robustness import robustness_analyse
from evaluation.robustness_options import ReportOptions
from evaluation.robustness_results import DriftItem, RobustnessReport
from evaluation.robustness_tables import robustness_csv, robustness_latex, robustness_ranks_latex
from evaluation.selectors import benchmark_result_list, unit_score
from evaluation.stats import embedding_drift

QUALITY_QUESTION = "quality"
REPORT_SEED = 0  # bootstrap and split seed: a report is reproducible from the run alone
CSV_NAME, JSON_NAME, LATEX_NAME = "robustness.csv", "robustness.json", "robustness-axes.tex"
RANKS_LATEX_NAME = "robustness-ranks.tex"
TABLE_NAMES = (CSV_NAME, JSON_NAME, LATEX_NAME, RANKS_LATEX_NAME)


def robustness_options(*, run: BenchmarkRun, values: Mapping[str, object] | None = None) -> ReportOptions:
    """The report options of ``run``: ``values`` (plain data: a query string, a command line;
    None or "" is unset) filled from the run's preset, or the defaults (the paper's protocol)
    when it has none. A value that differs from the run's preset raises ``ReportOptionError``."""
    return ReportOptions.for_preset(run_preset(run), values)


def run_preset(run: BenchmarkRun) -> str:
    """The preset the run was made with ("" for none)."""
    return (run.plan or {}).get("preset") or ""


def robustness_report_get(*, run: BenchmarkRun, options: ReportOptions | None = None) -> RobustnessReport:
    """The report of ``run`` under ``options`` (the statistics' units; default: the run's preset's,
    or the paper's protocol, ``robustness_options``)."""
    if options is None:
        options = robustness_options(run=run)
    results = list(benchmark_result_list(run=run, item_scores=True))
    units = [unit_score(r, item_scores=True) for r in results]
    task_types = {r.dataset.name: r.dataset.task_type for r in results}
    drift_items, drift_note = None, None
    try:
        drift_items = robustness_drift_items(run=run)
    except (ShiftlabError, ImproperlyConfigured, OSError, ValueError) as exc:
        drift_note = f"drift vs quality could not be computed: {exc}"
    report = robustness_analyse(
        units,
        models=run.model_names,
        task_types=task_types,
        seed=REPORT_SEED,
        drift_items=drift_items,
        options=options,
    )
    if drift_note:
        report = dataclasses.replace(report, notes={**report.notes, "drift": drift_note})
    return _with_sensitivity(run, report)


def _with_sensitivity(run: BenchmarkRun, report: RobustnessReport) -> RobustnessReport:
    """The report with its sensitivity section (meaning-changing rewrites on pair tasks), or a
    note saying why it could not be computed."""
    try:
        found = robustness_sensitivity(run=run, report=report, seed=REPORT_SEED)
    except (ShiftlabError, ImproperlyConfigured, OSError, ValueError) as exc:
        return dataclasses.replace(report, notes={**report.notes, "sensitivity": f"could not be computed: {exc}"})
    return dataclasses.replace(report, sensitivity=tuple(found)) if found else report


def robustness_drift_items(*, run: BenchmarkRun) -> list[DriftItem]:
    """Transformed items of the run's transformation runs with counted "quality" ratings: drift
    (1 − cos of the original and transformed text, the run's first model) and mean quality.

    Only the ratings that count for the gate (``annotation.studies.selectors.counted_ratings``: active
    ratings of real items by raters who are not rejected and whose control check passed) enter the
    mean; a rejected rater's ratings would otherwise pull the quality of every item they rated.
    Only studies of the run's project count: another project's ratings are not the run's to show."""
    run_ids = set(benchmark_result_list(run=run).exclude(transform_run=None).values_list("transform_run", flat=True))
    rated_items = StudyItem.objects.filter(transformed_item__ok=True, transformed_item__run__in=run_ids)
    values: dict[int, list[int]] = defaultdict(list)  # study item -> counted quality ratings
    studies = Study.objects.filter(project_id=run.project_id, items__in=rated_items).distinct().order_by("pk")
    for study in studies:
        for rating in counted_ratings(study):
            if rating.question == QUALITY_QUESTION:
                values[rating.item_id].append(rating.value)
    per_item: dict[int, list[int]] = defaultdict(list)  # transformed item -> its ratings in every study
    texts: dict[int, tuple[str, str, str]] = {}
    for study_item, transformed, transformation, source, output in rated_items.filter(pk__in=list(values)).values_list(
        "pk",
        "transformed_item",
        "transformed_item__run__transformation",
        "transformed_item__source_text",
        "transformed_item__output_text",
    ):
        per_item[transformed] += values[study_item]
        texts[transformed] = (transformation, source, output)
    rows = sorted(per_item)
    if not rows or not run.model_names:
        return []
    encoder = get_encoder(run.model_names[0])
    original = encode_cached(encoder, [texts[r][1] for r in rows])
    transformed_vectors = encode_cached(encoder, [texts[r][2] for r in rows])
    drifts = embedding_drift(original, transformed_vectors)
    return [
        DriftItem(transformation=texts[r][0], drift=float(d), quality=float(np.mean(per_item[r])))
        for r, d in zip(rows, drifts, strict=True)
    ]


def robustness_report_files(report: RobustnessReport, *, figures: bool = True) -> dict[str, str | bytes]:
    """File name -> content: the long-form CSV, the JSON, the LaTeX axis table (text) and each
    figure as SVG (text), PNG and PDF (bytes)."""
    files: dict[str, str | bytes] = _table_files(report)
    if figures:
        for fmt in FORMATS:
            files.update({f"{name}.{fmt}": data for name, data in report_figures(report, fmt=fmt).items()})
    return files


def robustness_report_file(report: RobustnessReport, name: str) -> str | bytes | None:
    """One file of ``robustness_report_files`` (rendering only that one), or None if there is none."""
    stem, _, suffix = name.rpartition(".")
    if suffix in FORMATS:
        return report_figures(report, fmt=suffix).get(stem)
    return _table_files(report).get(name)


def _table_files(report: RobustnessReport) -> dict[str, str | bytes]:
    return {
        CSV_NAME: robustness_csv(report),
        JSON_NAME: json.dumps(report.as_dict(), indent=2, default=_json_default),
        LATEX_NAME: robustness_latex(report),
        RANKS_LATEX_NAME: robustness_ranks_latex(report),
    }


def robustness_report_write(
    *, run: BenchmarkRun, out: Path | None = None, options: ReportOptions | None = None
) -> list[Path]:
    """Writes the report's files under ``out`` (default DATA_DIR/reports/<run>/)."""
    directory = Path(out) if out is not None else Path(settings.DATA_DIR) / "reports" / str(run.pk)
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, content in robustness_report_files(robustness_report_get(run=run, options=options)).items():
        path = directory / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
        written.append(path)
    return written


def _json_default(value):
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")
