"""Figures of the run and judge pages as inline SVG (matplotlib; no Django, no I/O).

A histogram reads faster than a table of means: whether a run's rewrites are near copies or new
texts, and whether a judge uses its scale or answers one value for everything."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import MaxNLocator

from core.plots import PLOT_RC, svg_of

EDIT_DISTANCE_BINS = 20


def edit_distance_histogram(distances: Sequence[float]) -> str:
    """Histogram of word-level normalised edit distances (0 = same words, 1 = all words changed)
    in :data:`EDIT_DISTANCE_BINS` equal bins over [0, 1], with the mean as a dashed line."""
    values = np.asarray([d for d in distances if d is not None], dtype=float)
    if values.size == 0:
        raise ValueError("an edit-distance histogram needs at least one distance")
    with plt.rc_context(PLOT_RC):
        figure, panel = plt.subplots(figsize=(5.2, 2.6))
        panel.hist(values, bins=np.linspace(0.0, 1.0, EDIT_DISTANCE_BINS + 1), color="tab:blue", edgecolor="white")
        mean = float(values.mean())
        panel.axvline(mean, color="tab:red", linestyle="--", linewidth=0.9, label=f"mean {mean:.2f}")
        panel.set_xlim(0, 1)
        panel.set_xlabel("normalised edit distance (word level)")
        panel.set_ylabel("texts")
        panel.yaxis.set_major_locator(MaxNLocator(integer=True))
        panel.legend(loc="best", fontsize=7)
        panel.grid(axis="y", alpha=0.3)
        return svg_of(figure, title=f"Histogram of edit distances over {values.size} texts, mean {mean:.2f}")


def score_distribution(counts: Mapping[str, Mapping[float, int]], *, kind: str) -> str:
    """Grouped bars: for each judge (key of *counts*), the share of its scored texts that got each
    score. Every score any judge gave has a slot, so a judge that answers one value stands out."""
    if not counts or not any(sum(c.values()) for c in counts.values()):
        raise ValueError("a score distribution needs at least one scored text")
    scores = sorted({float(s) for c in counts.values() for s in c})
    width = 0.8 / len(counts)
    with plt.rc_context(PLOT_RC):
        figure, panel = plt.subplots(figsize=(5.2, 2.6))
        x = np.arange(len(scores))
        for k, (judge, by_score) in enumerate(counts.items()):
            total = sum(by_score.values()) or 1
            shares = [by_score.get(s, 0) / total for s in scores]
            panel.bar(x + (k - (len(counts) - 1) / 2) * width, shares, width, label=f"{judge} (n={total})")
        panel.set_xticks(x, [f"{s:g}" for s in scores])
        panel.set_ylim(0, 1)
        panel.set_xlabel(f"{kind} score")
        panel.set_ylabel("share of texts")
        panel.legend(loc="best", fontsize=7)
        panel.grid(axis="y", alpha=0.3)
        return svg_of(figure, title=f"Distribution of {kind} scores per judge")


def judge_score_figures(result: Mapping, models: Mapping[str, str]) -> list[tuple[str, str]]:
    """(kind, SVG) of a stored judge report's score distributions, one figure per kind, judges
    named by model (alias after it). Reports stored before the counts were kept have none."""
    by_kind: dict[str, dict[str, dict[float, int]]] = {}
    for row in result.get("score_counts", []):
        model = models.get(row["judge"], "")
        label = f"{model} ({row['judge']})" if model and model != row["judge"] else row["judge"]
        counts = {float(score): n for score, n in row["counts"].items()}
        if counts:
            by_kind.setdefault(row["kind"], {})[label] = counts
    return [(kind, score_distribution(counts, kind=kind)) for kind, counts in by_kind.items()]


def intervals_by_version(labels: Sequence[str], panels: Mapping[str, Sequence[Mapping | None]]) -> str:
    """Side-by-side panels, one per metric: a point per prompt version (rows, named by *labels*)
    with its interval as a horizontal bar. A version without a value (None) is left empty."""
    if not labels or not panels:
        raise ValueError("an interval plot needs at least one version and one metric")
    with plt.rc_context(PLOT_RC):
        figure, axes = plt.subplots(
            1, len(panels), figsize=(2.4 * len(panels) + 1.2, 0.45 * len(labels) + 1.1), sharey=True, squeeze=False
        )
        y = np.arange(len(labels))
        for panel, (metric, estimates) in zip(axes[0], panels.items(), strict=True):
            for i, e in enumerate(estimates):
                if not e or e.get("value") is None:
                    continue
                low, high = e.get("ci_low"), e.get("ci_high")
                xerr = None if low is None else [[e["value"] - low], [high - e["value"]]]
                panel.errorbar([e["value"]], [i], xerr=xerr, fmt="o", color="tab:blue", capsize=3)
            panel.set_title(metric, fontsize=8)
            panel.grid(axis="x", alpha=0.3)
        axes[0][0].set_yticks(y, labels)
        axes[0][0].invert_yaxis()
        return svg_of(figure, title=f"Estimates with intervals for {len(labels)} prompt versions")
