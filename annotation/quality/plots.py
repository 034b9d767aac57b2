"""Figures of annotator quality as inline SVG markup (matplotlib, Agg backend; no Django, no I/O).
Rendered CSP-safe by :func:`core.plots.svg_of`."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np

from core.plots import PLOT_RC as _RC
from core.plots import svg_of as _render


def time_vs_deviation(
    names: Sequence[str],
    seconds: Sequence[float | None],
    deviation: Sequence[float | None],
    *,
    min_seconds: float,
) -> str:
    """Scatter of the median seconds per item against the mean absolute deviation from peers,
    with the "too fast" floor as a dashed line."""
    with plt.rc_context(_RC):
        figure, panel = plt.subplots(figsize=(5.2, 3.4))
        for name, x, y in zip(names, seconds, deviation, strict=True):
            if x is None or y is None:
                continue
            panel.scatter([x], [y], color="tab:blue")
            panel.annotate(name, (x, y), textcoords="offset points", xytext=(4, 3), fontsize=8)
        panel.axvline(min_seconds, color="tab:red", linestyle="--", linewidth=0.8, label=f"{min_seconds:g} s floor")
        panel.set_xlim(left=0)
        panel.legend(loc="best", fontsize=7)
        panel.set_xlabel("median seconds per item")
        panel.set_ylabel("mean |rating − peers' mean|")
        panel.grid(alpha=0.3)
        return _render(figure)


def rates_with_intervals(
    names: Sequence[str],
    rates: Sequence[float | None],
    lows: Sequence[float | None],
    highs: Sequence[float | None],
    *,
    xlabel: str,
) -> str:
    """One horizontal point with its interval per annotator (control pass rate, competence)."""
    with plt.rc_context(_RC):
        figure, panel = plt.subplots(figsize=(5.2, 0.35 * len(names) + 1.0))
        y = np.arange(len(names))
        for i, (rate, low, high) in enumerate(zip(rates, lows, highs, strict=True)):
            if rate is None:
                continue
            panel.errorbar([rate], [i], xerr=[[rate - low], [high - rate]], fmt="o", color="tab:blue", capsize=3)
        panel.set_yticks(y, names)
        panel.invert_yaxis()
        panel.set_xlim(-0.02, 1.02)
        panel.set_xlabel(xlabel)
        panel.grid(axis="x", alpha=0.3)
        return _render(figure)


def rating_distributions(names: Sequence[str], shares: Sequence[Sequence[float]], categories: Sequence[int]) -> str:
    """Stacked horizontal bars: each annotator's share of every answer category."""
    with plt.rc_context(_RC):
        figure, panel = plt.subplots(figsize=(5.2, 0.35 * len(names) + 1.2))
        y = np.arange(len(names))
        left = np.zeros(len(names))
        colours = plt.get_cmap("RdYlBu")(np.linspace(0.1, 0.9, len(categories)))
        matrix = np.array(shares, dtype=float).reshape(len(names), len(categories))
        for k, category in enumerate(categories):
            panel.barh(y, matrix[:, k], left=left, color=colours[k], label=str(category), edgecolor="white")
            left += matrix[:, k]
        panel.set_yticks(y, names)
        panel.invert_yaxis()
        panel.set_xlim(0, 1)
        panel.set_xlabel("share of answers")
        panel.legend(title="answer", ncols=len(categories), loc="upper center", bbox_to_anchor=(0.5, -0.25), fontsize=7)
        return _render(figure)
