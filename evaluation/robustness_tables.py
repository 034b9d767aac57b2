"""A robustness report as tables (pure module): every table in long-form CSV, and the per-axis
model table as booktabs LaTeX. The JSON form is ``RobustnessReport.as_dict``."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence

from evaluation.aggregation import Summary
from evaluation.benchmark_plan import ORIGINAL
from evaluation.robustness import ALL_MODELS, RobustnessReport

SHIFT_STATISTICS = (
    "n",
    "hodges_lehmann",
    "ci_low",
    "ci_high",
    "median_absolute_difference",
    "wilcoxon_statistic",
    "p_value",
    "p_holm",
)


def robustness_csv(report: RobustnessReport) -> str:
    """Every table in long form: one row per (table, unit, scope, label, statistic)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["table", "unit", "scope", "label", "statistic", "value"])

    def write(table: str, unit: str, scope: str, label: str, row: object, statistics: Sequence[str]) -> None:
        for statistic in statistics:
            writer.writerow([table, unit, scope, label, statistic, getattr(row, statistic)])

    for model, agg in report.aggregates.items():
        writer.writerow(["scores", "mean over datasets", model, ORIGINAL, "mean", agg.original])
        for level, summaries in (
            ("transformation", agg.transformations),
            ("axis", agg.axes),
            ("total", {"total": agg.total}),
        ):
            for label, s in summaries.items():
                write(
                    f"scores per {level}",
                    "mean over datasets, SD over seeds",
                    model,
                    label,
                    s,
                    ("mean", "sd", "n_seeds", "delta"),
                )
    for table in report.shifts:
        for row in table.rows:
            write(f"shift per {table.level}", table.description, table.scope, row.label, row, SHIFT_STATISTICS)
    for row in report.comparisons:
        unit = f"unit: dataset × seed; baseline {report.baseline}"
        write("model vs baseline", unit, "", row.label, row, SHIFT_STATISTICS)
    for tau in report.taus:
        unit = "unit: dataset × seed ranking of the models"
        write(f"kendall tau per {tau.level}", unit, ALL_MODELS, tau.label, tau, ("n", "mean", "sd"))
    for rel in report.reliability:
        unit = "dataset × model mean Δ, strata: task type"
        statistics = ("n_datasets", "n_models", "n_splits", "median")
        write("split-half reliability", unit, ALL_MODELS, rel.axis, rel, statistics)
    for d in report.drift:
        scope = report.models[0] if report.models else ""
        statistics = ("n", "spearman", "ci_low", "ci_high")
        write("drift vs quality", "unit: rated transformed item", scope, d.transformation, d.correlation, statistics)
    return out.getvalue()


def robustness_latex(report: RobustnessReport) -> str:
    """The per-axis model table (mean ± SD over seeds) as a booktabs LaTeX table."""
    header = ["Model", "Original", *(_latex_escape(a) for a in report.axes), "Total"]
    lines = [
        r"\begin{table}[t]",
        r"\centering",
        r"\begin{tabular}{l" + "r" * (len(header) - 1) + "}",
        r"\toprule",
        " & ".join(header) + r" \\",
        r"\midrule",
    ]
    for model in report.models:
        agg = report.aggregates.get(model)
        if agg is None:
            continue
        cells = [_latex_escape(model), _latex_number(agg.original)]
        cells += [_latex_summary(agg.axes.get(axis)) for axis in report.axes]
        cells.append(_latex_summary(agg.total))
        lines.append(" & ".join(cells) + r" \\")
    lines += [
        r"\bottomrule",
        r"\end{tabular}",
        r"\caption{Main score per model and axis: mean $\pm$ sample SD over seeds; an axis is the mean "
        r"of its transformations, the total the unweighted mean of the benchmark axes.}",
        r"\end{table}",
    ]
    return "\n".join(lines) + "\n"


_LATEX_SPECIAL = str.maketrans(
    {
        "\\": r"\textbackslash{}",
        "&": r"\&",
        "%": r"\%",
        "$": r"\$",
        "#": r"\#",
        "_": r"\_",
        "{": r"\{",
        "}": r"\}",
        "~": r"\textasciitilde{}",
        "^": r"\textasciicircum{}",
    }
)


def _latex_escape(text: str) -> str:
    return text.translate(_LATEX_SPECIAL)


def _latex_number(value: float | None) -> str:
    return "--" if value is None or math.isnan(value) else f"{value:.4f}"


def _latex_summary(summary: Summary | None) -> str:
    if summary is None or summary.mean is None:
        return "--"
    return _latex_number(summary.mean) + (rf" $\pm$ {summary.sd:.4f}" if summary.sd is not None else "")
