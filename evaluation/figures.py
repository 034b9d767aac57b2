"""Figures of a robustness report as SVG text (matplotlib, Agg backend; no Django, no I/O).

SVG output is deterministic: no creation date in the metadata and a fixed ``svg.hashsalt``, so
the same report gives byte-identical files."""

from __future__ import annotations

import io
from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402  (the backend is chosen first)
import numpy as np  # noqa: E402
from matplotlib.transforms import Bbox  # noqa: E402

from evaluation.meaning_change import ModelSensitivity  # noqa: E402
from evaluation.robustness_options import ReportOptions  # noqa: E402
from evaluation.robustness_results import (  # noqa: E402
    ALL_MODELS,
    SHIFT_FIGURE_UNITS,
    UNIT_DESCRIPTIONS,
    RobustnessReport,
)

ALPHA = 0.05
# text.parse_math off: labels are model, dataset and transformation names as written ("$" in a
# folder name is not mathematics; an unparsable "$...$" would fail every figure).
_RC = {"svg.hashsalt": "shiftlab", "svg.fonttype": "none", "font.size": 9, "text.parse_math": False}

# figure name -> (title, unit of observation and aggregation); the page and the files use these.
FIGURES = {
    "dumbbell": (
        "Original vs transformed score per axis",
        "unit: model; points are means over datasets, transformations and seeds of the axis, "
        "original = the original data on the same items",
    ),
    "shifts": (
        "Hodges–Lehmann shift per transformation (95% CI)",
        "{unit}; with several models, the all-models table (models averaged per unit unless the report "
        "counts each model's result apart); ★ = significant after Holm across transformations",
    ),
    "heatmap": (
        "Mean Δ per model and transformation",
        "cell: mean over datasets and seeds of transformed − original on the same items",
    ),
    "drift": (
        "Embedding drift vs human quality",
        "unit: rated transformed item; drift = 1 − cos(original, transformed) with the run's first model",
    ),
    "severity": (
        "Severity curves of the noise axis (95% bootstrap bands)",
        "per model and noise kind; point = mean over datasets × seeds of transformed − original on the same "
        "items, severity 0 = the original (Δ = 0); band = percentile bootstrap of the dataset × seed units "
        "present at every severity; area = trapezoid area / largest severity (in the legend)",
    ),
    "ranks": (
        "Model ranks with 95% bootstrap intervals and significance letters",
        "unit: dataset (datasets and their seeds resampled); dot = rank on the mean score, bar = central 95% "
        "of the bootstrap ranks; models sharing a letter are not significantly different (Wilcoxon over "
        "datasets, Holm)",
    ),
    "invariance_sensitivity": (
        "Invariance vs sensitivity",
        "unit: model; invariance = mean retention of the main score under the meaning-preserving "
        "transformations, sensitivity = share of human-validated meaning changes the model moved apart; "
        "the label is their harmonic mean (evaluation.meaning_change)",
    ),
}


FORMATS = ("svg", "png", "pdf")
PNG_DPI = 200
# Metadata that would change with each rendering (dates) is left out: same report, same bytes.
_METADATA = {"svg": {"Date": None}, "png": {"Software": None}, "pdf": {"CreationDate": None, "ModDate": None}}


def figure_titles(options: ReportOptions) -> dict[str, tuple[str, str]]:
    """Name -> (title, unit) of every figure, the shifts figure's unit the one ``options`` chose."""
    unit = SHIFT_FIGURE_UNITS[options.shift_figure_unit]
    title, text = FIGURES["shifts"]
    shifts = text.format(unit=UNIT_DESCRIPTIONS[(unit, "transformation")])
    return {**FIGURES, "shifts": (title, shifts)}


def report_figures(report: RobustnessReport, *, fmt: str = "svg") -> dict[str, str | bytes]:
    """Name -> figure of every figure the report has data for: SVG text, or PNG/PDF bytes."""
    if fmt not in FORMATS:
        raise ValueError(f"figure format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    builders = {}
    if report.axes and report.models:
        builders["dumbbell"] = lambda: _dumbbell(report)
    table = (
        report.shift_table(
            scope=ALL_MODELS if len(report.models) > 1 else report.models[0],
            unit=SHIFT_FIGURE_UNITS[report.options.shift_figure_unit],
            level="transformation",
        )
        if report.models
        else None
    )
    if table and table.rows:
        builders["shifts"] = lambda: _shifts(table.rows)
    if report.transformations and report.models:
        builders["heatmap"] = lambda: _heatmap(report)
    if report.drift:
        builders["drift"] = lambda: _drift(report)
    if report.severity_curves:
        builders["severity"] = lambda: _severity(report)
    if report.rankings:
        builders["ranks"] = lambda: _ranks(report)
    if any(s.invariance is not None and s.sensitivity is not None for s in report.sensitivity):
        builders["invariance_sensitivity"] = lambda: invariance_sensitivity_figure(report.sensitivity)
    with plt.rc_context(_RC):
        return {name: _render(build(), fmt) for name, build in builders.items()}


def _render(figure, fmt: str) -> str | bytes:
    out = io.BytesIO()
    figure.savefig(out, format=fmt, metadata=_METADATA[fmt], bbox_inches="tight", dpi=PNG_DPI)
    plt.close(figure)
    data = out.getvalue()
    return data.decode("utf-8") if fmt == "svg" else data


def _dumbbell(report: RobustnessReport):
    axes = report.axes
    figure, panels = plt.subplots(
        1, len(axes), figsize=(3.2 * len(axes), 0.45 * len(report.models) + 1.4), squeeze=False, sharey=True
    )
    y = np.arange(len(report.models))
    for panel, axis in zip(panels[0], axes, strict=True):
        for i, model in enumerate(report.models):
            summary = report.aggregates[model].axes.get(axis) if model in report.aggregates else None
            if summary is None or summary.mean is None or summary.delta is None:
                continue
            original = summary.mean - summary.delta
            panel.plot([original, summary.mean], [i, i], color="0.6", zorder=1)
            panel.scatter([original], [i], color="tab:blue", zorder=2, label="original" if i == 0 else None)
            panel.scatter([summary.mean], [i], color="tab:red", zorder=2, label=axis if i == 0 else None)
        panel.set_title(axis)
        panel.set_xlabel("main score")
        panel.grid(axis="x", alpha=0.3)
    panels[0][0].set_yticks(y, report.models)
    panels[0][0].invert_yaxis()
    panels[0][-1].legend(loc="best", fontsize=7)
    return figure


def _shifts(rows):
    figure, panel = plt.subplots(figsize=(6, 0.4 * len(rows) + 1.2))
    y = np.arange(len(rows))
    estimates = np.array([r.hodges_lehmann for r in rows])
    errors = np.array([[r.hodges_lehmann - r.ci_low for r in rows], [r.ci_high - r.hodges_lehmann for r in rows]])
    panel.errorbar(estimates, y, xerr=errors, fmt="o", color="tab:blue", capsize=3)
    panel.axvline(0, color="0.5", linewidth=0.8)
    labels = [r.label + (" ★" if r.p_holm is not None and r.p_holm < ALPHA else "") for r in rows]
    panel.set_yticks(y, labels)
    panel.invert_yaxis()
    panel.set_xlabel("HL shift, transformed − original (95% CI)")
    return figure


def _heatmap(report: RobustnessReport):
    matrix = np.array([[np.nan if v is None else v for v in row] for row in report.delta_matrix()], dtype=float)
    figure, panel = plt.subplots(figsize=(1.1 * len(report.transformations) + 2.5, 0.5 * len(report.models) + 1.6))
    bound = float(np.nanmax(np.abs(matrix))) if np.any(np.isfinite(matrix)) else 1.0
    image = panel.imshow(matrix, cmap="RdBu", vmin=-bound or -1, vmax=bound or 1, aspect="auto")
    panel.set_xticks(np.arange(len(report.transformations)), report.transformations, rotation=45, ha="right")
    panel.set_yticks(np.arange(len(report.models)), report.models)
    for (i, j), value in np.ndenumerate(matrix):
        if np.isfinite(value):  # white on the darkest cells, black elsewhere
            colour = "white" if abs(value) > 0.6 * bound else "black"
            panel.text(j, i, f"{value:+.3f}", ha="center", va="center", fontsize=7, color=colour)
    figure.colorbar(image, ax=panel, label="Δ main score")
    return figure


def _drift(report: RobustnessReport):
    figure, panels = plt.subplots(
        1,
        len(report.drift),
        figsize=(2.8 * len(report.drift) + 0.6, 3),
        squeeze=False,
        sharey=True,
        layout="constrained",
    )
    for panel, summary in zip(panels[0], report.drift, strict=True):
        panel.scatter(summary.drifts, summary.qualities, s=10, alpha=0.7)
        rho = summary.correlation.spearman
        panel.set_title(summary.transformation + (f" (ρ = {rho:+.2f})" if rho is not None else ""))
        panel.set_xlabel("drift 1 − cos")
    panels[0][0].set_ylabel("mean quality")
    return figure


def _ranks(report: RobustnessReport):
    rankings = report.rankings
    figure, panels = plt.subplots(
        1,
        len(rankings),
        figsize=(2.6 * len(rankings) + 1.0, 0.45 * len(report.models) + 1.4),
        squeeze=False,
        sharey=True,
    )
    y = {model: i for i, model in enumerate(report.models)}
    n_models = len(report.models)
    for panel, ranking in zip(panels[0], rankings, strict=True):
        for row in ranking.rows:
            i = y[row.model]
            panel.plot([row.rank_low, row.rank_high], [i, i], color="tab:blue", linewidth=2, alpha=0.5)
            panel.scatter([row.rank], [i], color="tab:blue", zorder=2)
            panel.annotate(row.letters, (row.rank_high, i), xytext=(6, 0), textcoords="offset points", va="center")
        panel.set_title(ranking.scope)
        panel.set_xlim(0.5, n_models + 0.9)
        panel.set_xticks(range(1, n_models + 1))
        panel.set_xlabel("rank (1 = best)")
        panel.grid(axis="x", alpha=0.3)
    panels[0][0].set_yticks(list(y.values()), list(y))
    panels[0][0].invert_yaxis()
    return figure


def invariance_sensitivity_figure(rows: Sequence[ModelSensitivity]):
    """One point per model: invariance (x) against sensitivity (y), both in [0, 1]; the top right
    corner is a model robust to paraphrase and sensitive to meaning changes. Models within
    ``LABEL_TOLERANCE`` of each other share one label listing them; labels are placed so that no two
    text boxes overlap (``_place_labels``). The output depends on the rows, not on their order."""
    figure, ax = plt.subplots(figsize=(4.2, 3.8))
    ax.set_xlim(0, 1.05)
    ax.set_ylim(0, 1.05)
    groups = _label_groups(rows)
    for group in groups:
        ax.scatter([r.invariance for r in group], [r.sensitivity for r in group], s=28, color="#1f77b4", zorder=3)
    _place_labels(figure, ax, groups)
    ax.set_xlabel("invariance (retention under meaning-preserving rewrites)")
    ax.set_ylabel("sensitivity\n(share of meaning changes moved apart)")
    ax.grid(alpha=0.3)
    return figure


# Models closer than this on both axes (chained: a close to b close to c) share one label.
LABEL_TOLERANCE = 0.01
# Where a label may go relative to its point, tried in this order: directions, at growing distances
# (points); the first place whose text box overlaps no label placed before and no point is taken.
_DIRECTIONS = ((1, 1), (1, -1), (-1, 1), (-1, -1), (0, 1), (0, -1), (1, 0), (-1, 0))
_DISTANCES = (4, 10, 18, 28, 40, 54, 70, 88, 108, 130)


def _label_groups(rows: Sequence[ModelSensitivity]) -> list[list[ModelSensitivity]]:
    """The rows with both values in groups of (nearly) the same point, each sorted by model; groups
    in the order of their first member (invariance, sensitivity, model)."""
    known = sorted(
        (r for r in rows if r.invariance is not None and r.sensitivity is not None),
        key=lambda r: (r.invariance, r.sensitivity, r.model),
    )
    groups: list[list[ModelSensitivity]] = []
    for row in known:
        near = [
            g
            for g in groups
            if any(
                abs(m.invariance - row.invariance) <= LABEL_TOLERANCE
                and abs(m.sensitivity - row.sensitivity) <= LABEL_TOLERANCE
                for m in g
            )
        ]
        merged = [row, *(m for g in near for m in g)]
        groups = [g for g in groups if not any(g is n for n in near)] + [merged]
    groups = [sorted(g, key=lambda r: r.model) for g in groups]
    return sorted(groups, key=lambda g: min((r.invariance, r.sensitivity, r.model) for r in g))


def _place_labels(figure, ax, groups: list[list[ModelSensitivity]]) -> None:
    """One label per group near the group's mean point, at the first offset (``_DIRECTIONS`` x
    ``_DISTANCES``) where its text box, as the renderer draws it, overlaps no label already placed
    and no point; a label away from its point gets a thin leader line. Where every offset is taken,
    the label goes straight below the lowest one placed."""
    renderer = figure.canvas.get_renderer()
    to_display = ax.transData.transform
    taken = [_point_box(to_display((r.invariance, r.sensitivity))) for g in groups for r in g]
    for group in groups:
        anchor = (float(np.mean([r.invariance for r in group])), float(np.mean([r.sensitivity for r in group])))
        text = "\n".join(f"{r.model} ({r.summary:.2f})" for r in group)
        label = None
        for distance, (dx, dy) in ((d, v) for d in _DISTANCES for v in _DIRECTIONS):
            if label is not None:
                label.remove()
            label = _label(ax, text, anchor, (dx * distance, dy * distance), (dx, dy))
            box = label.get_window_extent(renderer)
            if not any(box.overlaps(other) for other in taken):
                break
        else:
            label.remove()
            lowest = min(other.y0 for other in taken) - to_display(anchor)[1]  # display units (pixels)
            offset = (0, lowest * 72 / figure.dpi - 4)
            label = _label(ax, text, anchor, offset, (0, -1))
            box = label.get_window_extent(renderer)
            distance = _DISTANCES[-1]
        taken.append(box)
        if distance > _DISTANCES[0]:
            ax.annotate(
                "",
                anchor,
                xytext=label.xyann,
                textcoords="offset points",
                arrowprops={"arrowstyle": "-", "color": "0.55", "linewidth": 0.6, "shrinkA": 0, "shrinkB": 3},
            )


def _label(ax, text: str, anchor: tuple[float, float], offset: tuple[float, float], direction: tuple[int, int]):
    horizontal = {1: "left", 0: "center", -1: "right"}[direction[0]]
    vertical = {1: "bottom", 0: "center", -1: "top"}[direction[1]]
    return ax.annotate(text, anchor, xytext=offset, textcoords="offset points", fontsize=8, ha=horizontal, va=vertical)


def _point_box(centre) -> Bbox:
    """The display box of a scatter point (a little larger than its marker)."""
    x, y = centre
    return Bbox.from_extents(x - 4, y - 4, x + 4, y + 4)


def _severity(report: RobustnessReport):
    kinds = list(dict.fromkeys(c.kind for c in report.severity_curves))
    figure, panels = plt.subplots(
        1, len(kinds), figsize=(3.4 * len(kinds) + 0.6, 3.2), squeeze=False, sharey=True, layout="constrained"
    )
    colours = {model: f"C{i}" for i, model in enumerate(report.models)}
    for panel, kind in zip(panels[0], kinds, strict=True):
        for curve in (c for c in report.severity_curves if c.kind == kind):
            x = [p.severity for p in curve.points]
            colour = colours.get(curve.model, "0.3")
            panel.fill_between(
                x, [p.low for p in curve.points], [p.high for p in curve.points], color=colour, alpha=0.2
            )
            label = f"{curve.model} (area {curve.area:+.3f})"
            panel.plot(x, [p.delta for p in curve.points], marker="o", color=colour, label=label)
        panel.axhline(0, color="0.5", linewidth=0.8)
        panel.set_title(kind)
        panel.set_xlabel("severity (% of units changed)")
        panel.grid(alpha=0.3)
        panel.legend(loc="lower left", fontsize=7)
    panels[0][0].set_ylabel("Δ main score")
    return figure
