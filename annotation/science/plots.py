"""Figures of annotator quality as inline SVG markup, written directly (no matplotlib, no Django, no I/O).

The annotators page is opened often and its three figures are simple (points, intervals, stacked
bars), so they are drawn here as plain SVG elements: matplotlib's SVG writer cost about 0.13 s of CPU
per figure, more than the rest of the page (``benchmarks/page_speed.py``). Only presentation
attributes are used (no ``style``), so the pages' Content-Security-Policy holds; each figure has
``role="img"`` and an accessible name. Output is deterministic.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

WIDTH = 520
LABEL_W = 110  # left margin for annotator names
ROW_H = 24
BLUE, RED, GRID, INK = "#1f77b4", "#d62728", "#d9d9d9", "#222222"
# Ten answer colours from red through yellow to blue, like matplotlib's RdYlBu (picked evenly).
PALETTE = ["#c2383a", "#e0603d", "#f3934f", "#fbc077", "#fde7a2", "#eaf5d7", "#bde0ec", "#8ac0db", "#5b93c3", "#3f62a8"]


def _text(
    x: float, y: float, text: str, *, anchor: str = "start", size: int = 11, fill: str = INK, extra: str = ""
) -> str:
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" font-family="DejaVu Sans, Arial, sans-serif" '
        f'font-size="{size}" fill="{fill}"{extra}>{escape(text)}</text>'
    )


def _svg(width: float, height: float, title: str, body: list[str]) -> str:
    label = escape(title, quote=True)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{label}" width="{width:.0f}" '
        f'height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}"><title>{escape(title)}</title>'
        + "".join(body)
        + "</svg>"
    )


def _nice_ticks(high: float, count: int = 5) -> list[float]:
    """Round tick values from 0 to at least ``high``."""
    if high <= 0:
        return [0.0, 1.0]
    raw = high / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    return [i * step for i in range(int(math.ceil(high / step - 1e-9)) + 1)]


def _label(value: float) -> str:
    return f"{value:g}" if abs(value) >= 0.01 or value == 0 else f"{value:.1e}"


def _x_axis(
    left: float, right: float, bottom: float, top: float, ticks: Sequence[float], scale, label: str
) -> list[str]:
    parts = [f'<line x1="{left:.1f}" y1="{bottom:.1f}" x2="{right:.1f}" y2="{bottom:.1f}" stroke="{INK}"/>']
    for tick in ticks:
        x = scale(tick)
        parts.append(f'<line x1="{x:.1f}" y1="{top:.1f}" x2="{x:.1f}" y2="{bottom:.1f}" stroke="{GRID}"/>')
        parts.append(_text(x, bottom + 14, _label(tick), anchor="middle", size=10))
    parts.append(_text((left + right) / 2, bottom + 30, label, anchor="middle"))
    return parts


def time_vs_deviation(
    names: Sequence[str],
    seconds: Sequence[float | None],
    deviation: Sequence[float | None],
    *,
    min_seconds: float,
) -> str:
    """Scatter of the median seconds per item against the mean absolute deviation from peers,
    with the "too fast" floor as a dashed line."""
    points = [(n, x, y) for n, x, y in zip(names, seconds, deviation, strict=True) if x is not None and y is not None]
    left, right, top, bottom = 56.0, WIDTH - 16.0, 14.0, 250.0
    x_ticks = _nice_ticks(max([min_seconds * 1.2] + [x * 1.1 for _, x, _ in points]))
    y_ticks = _nice_ticks(max([0.1] + [y * 1.1 for _, _, y in points]))

    def sx(v):
        return left + (right - left) * v / x_ticks[-1]

    def sy(v):
        return bottom - (bottom - top) * v / y_ticks[-1]

    body = _x_axis(left, right, bottom, top, x_ticks, sx, "median seconds per item")
    body.append(f'<line x1="{left:.1f}" y1="{top:.1f}" x2="{left:.1f}" y2="{bottom:.1f}" stroke="{INK}"/>')
    for tick in y_ticks:
        y = sy(tick)
        body.append(f'<line x1="{left:.1f}" y1="{y:.1f}" x2="{right:.1f}" y2="{y:.1f}" stroke="{GRID}"/>')
        body.append(_text(left - 5, y + 3.5, _label(tick), anchor="end", size=10))
    body.append(
        _text(
            14,
            (top + bottom) / 2,
            "mean |rating − peers' mean|",
            anchor="middle",
            extra=f' transform="rotate(-90 14 {(top + bottom) / 2:.1f})"',
        )
    )
    floor = sx(min_seconds)
    body.append(
        f'<line x1="{floor:.1f}" y1="{top:.1f}" x2="{floor:.1f}" y2="{bottom:.1f}" stroke="{RED}" '
        'stroke-dasharray="5 3"/>'
    )
    body.append(_text(floor + 4, top + 10, f"{min_seconds:g} s floor", size=10, fill=RED))
    for name, x, y in points:
        body.append(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="4" fill="{BLUE}"/>')
        body.append(_text(sx(x) + 6, sy(y) - 5, name, size=10))
    return _svg(WIDTH, bottom + 40, "Median seconds per item against deviation from peers, per annotator", body)


def rates_with_intervals(
    names: Sequence[str],
    rates: Sequence[float | None],
    lows: Sequence[float | None],
    highs: Sequence[float | None],
    *,
    xlabel: str,
) -> str:
    """One horizontal point with its interval per annotator (control pass rate, competence)."""
    left, right, top = LABEL_W, WIDTH - 16.0, 8.0
    bottom = top + ROW_H * len(names) + 6

    def sx(v):
        return left + (right - left) * v

    body = _x_axis(left, right, bottom, top, [0, 0.2, 0.4, 0.6, 0.8, 1.0], sx, xlabel)
    for i, (name, rate, low, high) in enumerate(zip(names, rates, lows, highs, strict=True)):
        y = top + ROW_H * i + ROW_H / 2
        body.append(_text(left - 6, y + 4, name, anchor="end"))
        if rate is None:
            continue
        lo, hi = sx(low if low is not None else rate), sx(high if high is not None else rate)
        body.append(f'<line x1="{lo:.1f}" y1="{y:.1f}" x2="{hi:.1f}" y2="{y:.1f}" stroke="{BLUE}" stroke-width="1.5"/>')
        for end in (lo, hi):
            body.append(f'<line x1="{end:.1f}" y1="{y - 4:.1f}" x2="{end:.1f}" y2="{y + 4:.1f}" stroke="{BLUE}"/>')
        body.append(f'<circle cx="{sx(rate):.1f}" cy="{y:.1f}" r="4" fill="{BLUE}"/>')
    return _svg(WIDTH, bottom + 40, f"{xlabel}, per annotator", body)


def rating_distributions(names: Sequence[str], shares: Sequence[Sequence[float]], categories: Sequence[int]) -> str:
    """Stacked horizontal bars: each annotator's share of every answer category."""
    left, right, top = LABEL_W, WIDTH - 16.0, 8.0
    bottom = top + ROW_H * len(names) + 6
    n = len(categories)
    colours = [PALETTE[round(k * (len(PALETTE) - 1) / max(n - 1, 1))] for k in range(n)]

    def sx(v):
        return left + (right - left) * v

    body = _x_axis(left, right, bottom, top, [0, 0.2, 0.4, 0.6, 0.8, 1.0], sx, "share of answers")
    for i, (name, row) in enumerate(zip(names, shares, strict=True)):
        y = top + ROW_H * i + 3
        body.append(_text(left - 6, y + ROW_H / 2 + 1, name, anchor="end"))
        start = 0.0
        for k, share in enumerate(row):
            if share > 0:
                body.append(
                    f'<rect x="{sx(start):.1f}" y="{y:.1f}" width="{sx(start + share) - sx(start):.1f}" '
                    f'height="{ROW_H - 6}" fill="{colours[k]}" stroke="#ffffff"><title>{escape(name)}: answer '
                    f"{categories[k]}, {share:.0%}</title></rect>"
                )
            start += share
    legend_y = bottom + 46
    body.append(_text(left, legend_y, "answer:", anchor="end"))
    spacing = min(34.0, (right - left - 6) / max(n, 1))
    for k, category in enumerate(categories):
        x = left + 6 + k * spacing
        body.append(f'<rect x="{x:.1f}" y="{legend_y - 9:.1f}" width="12" height="10" fill="{colours[k]}"/>')
        body.append(_text(x + 15, legend_y, str(category), size=10))
    return _svg(WIDTH, legend_y + 10, "Share of each answer per annotator, all questions", body)
