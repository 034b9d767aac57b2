"""A robustness report as tables (pure module): every table in long-form CSV, and the per-axis
model table and the rankings as booktabs LaTeX. The JSON form is ``RobustnessReport.as_dict``.
Each file records the report options (the statistics' units) it was computed with."""

from __future__ import annotations

import io
import math
from collections.abc import Sequence

from core.spreadsheet import spreadsheet_writer
from evaluation.aggregation import Summary
from evaluation.benchmark_plan import ORIGINAL
from evaluation.robustness_results import ALL_MODELS, RobustnessReport

SHIFT_STATISTICS = (
    "n",
    "hodges_lehmann",
    "ci_low",
    "ci_high",
    "ci_confidence",
    "median_absolute_difference",
    "wilcoxon_statistic",
    "p_value",
    "p_holm",
)


def robustness_csv(report: RobustnessReport) -> str:
    """Every table in long form: one row per (table, unit, scope, label, statistic)."""
    out = io.StringIO()
    writer = spreadsheet_writer(out, lineterminator="\n")
    writer.writerow(["table", "unit", "scope", "label", "statistic", "value"])
    for name, value in report.options.as_dict().items():
        writer.writerow(["options", "", "", name, "value", value])

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
    options = report.options
    for row in report.comparisons:
        write("model vs baseline", options.comparison_text(report.baseline), "", row.label, row, SHIFT_STATISTICS)
    for tau in report.taus:
        unit = options.tau_unit_text(tau.level)
        write(f"kendall tau per {tau.level}", unit, ALL_MODELS, tau.label, tau, ("n", "mean", "sd"))
    for rel in report.reliability:
        statistics = ("n_datasets", "n_models", "n_splits", "median")
        write("split-half reliability", options.split_half_text(), ALL_MODELS, rel.axis, rel, statistics)
    for d in report.drift:
        scope = report.models[0] if report.models else ""
        statistics = ("n", "spearman", "ci_low", "ci_high")
        write("drift vs quality", "unit: rated transformed item", scope, d.transformation, d.correlation, statistics)
    for curve in report.severity_curves:
        unit = "unit: dataset × seed at every severity"
        write("severity curve area", unit, curve.model, curve.kind, curve, ("n_units", "area", "area_low", "area_high"))
        for point in curve.points[1:]:
            label = f"{curve.kind} {point.severity}%"
            write("severity curve", unit, curve.model, label, point, ("delta", "low", "high", "score"))
    for ranking in report.rankings:
        for rank in ranking.rows:
            statistics = ("score", "rank", "rank_low", "rank_high", "letters")
            write("rank", ranking.unit, ranking.scope, rank.model, rank, statistics)
        for pair in ranking.pairs:
            statistics = ("n", "mean_difference", "wilcoxon_statistic", "p_value", "p_holm", "significant")
            write("rank pair test", ranking.unit, ranking.scope, f"{pair.first} vs {pair.second}", pair, statistics)
    return out.getvalue()


def robustness_latex(report: RobustnessReport) -> str:
    """The per-axis model table (mean ± SD over seeds) as a booktabs LaTeX table."""
    header = ["Model", "Original", *(_latex_escape(a) for a in report.axes), "Total"]
    lines = [
        _latex_options(report),
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


def robustness_ranks_latex(report: RobustnessReport) -> str:
    """The rankings as a booktabs LaTeX table: per model and ranking, rank, its bootstrap interval
    and the significance letters."""
    rankings = report.rankings
    lines = [
        _latex_options(report),
        r"\begin{table}[t]",
        r"\centering",
        r"\begin{tabular}{l" + "c" * len(rankings) + "}",
        r"\toprule",
        " & ".join(["Model", *(_latex_escape(r.scope) for r in rankings)]) + r" \\",
        r"\midrule",
    ]
    of = [{row.model: row for row in r.rows} for r in rankings]
    for model in report.models:
        cells = [_latex_escape(model)]
        for ranks in of:
            row = ranks.get(model)
            cells.append(
                "--"
                if row is None
                else f"{row.rank} [{row.rank_low}, {row.rank_high}] \\textsuperscript{{{row.letters}}}"
            )
        lines.append(" & ".join(cells) + r" \\")
    first = rankings[0] if rankings else None
    detail = (
        f"{first.n_resamples} resamples of the datasets (and of the seeds within each), central "
        f"{first.confidence:.0%} interval; letters: two-sided Wilcoxon signed-rank tests over datasets, Holm over "
        f"all pairs of a column, $\\alpha = {first.alpha}$"
        if first
        else "no ranking: see the report's notes"
    )
    lines += [
        r"\bottomrule",
        r"\end{tabular}",
        r"\caption{Rank of each model (1 = best) on the mean score over datasets, with its bootstrap rank "
        r"interval (" + _latex_escape_text(detail) + r"). Models sharing a letter are not significantly "
        r"different.}",
        r"\end{table}",
    ]
    return "\n".join(lines) + "\n"


def _latex_options(report: RobustnessReport) -> str:
    options = ", ".join(f"{k}={v}" for k, v in report.options.as_dict().items())
    return f"% Shiftlab robustness report, seed {report.seed}; options: {options}"


def _latex_escape_text(text: str) -> str:
    """Escape a caption fragment that may carry inline maths ($...$) written by this module."""
    parts = text.split("$")
    return "$".join(_latex_escape(part) if i % 2 == 0 else part for i, part in enumerate(parts))


def _latex_escape(text: str) -> str:
    return text.translate(_LATEX_SPECIAL)


def _latex_number(value: float | None) -> str:
    return "--" if value is None or math.isnan(value) else f"{value:.4f}"


def _latex_summary(summary: Summary | None) -> str:
    if summary is None or summary.mean is None:
        return "--"
    return _latex_number(summary.mean) + (rf" $\pm$ {summary.sd:.4f}" if summary.sd is not None else "")
