"""Figures for the pages as inline SVG markup (matplotlib, Agg backend; no Django, no I/O).

The pages run under a strict Content-Security-Policy (``style-src 'self'``), which blocks the
``style`` attributes and the ``<style>`` element matplotlib writes. :func:`csp_safe_svg` turns
each declaration into the equivalent SVG presentation attribute, so the figure looks the same
inline. Output is deterministic (no date, fixed hash salt). The apps' own figure modules
(``transforms/plots.py``) draw with :data:`PLOT_RC` and finish with :func:`svg_of`; the annotators
page writes its simple figures as SVG itself (``annotation/science/plots.py``).
"""

from __future__ import annotations

import io
import re

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402  (the backend is chosen first)

PLOT_RC = {"svg.hashsalt": "shiftlab", "svg.fonttype": "none", "font.size": 9}
_STYLE_ATTRIBUTE = re.compile(r'\sstyle="([^"]*)"')
_STYLE_ELEMENT = re.compile(r"<style[^>]*>.*?</style>", re.DOTALL)
_FONT = re.compile(
    r"^(?:(?P<style>italic|oblique|normal)\s+)?(?:(?P<weight>\d{3}|bold|normal)\s+)?(?P<size>[\d.]+px)\s+(?P<family>.+)$"
)


def csp_safe_svg(svg: str) -> str:
    """SVG text without its XML prologue, ``<style>`` elements or ``style`` attributes."""
    svg = _STYLE_ELEMENT.sub("", svg[svg.index("<svg") :])
    return _STYLE_ATTRIBUTE.sub(lambda m: _attributes(m.group(1)), svg)


def _attributes(style: str) -> str:
    out = []
    for declaration in style.split(";"):
        name, _, value = declaration.partition(":")
        name, value = name.strip(), value.strip()
        if not name:
            continue
        if name == "font" and (font := _FONT.match(value)):
            out.append(f'font-size="{font["size"]}"')
            out.append(f'font-family="{font["family"].replace(chr(34), chr(39))}"')
            if font["weight"]:
                out.append(f'font-weight="{font["weight"]}"')
            if font["style"]:
                out.append(f'font-style="{font["style"]}"')
        else:
            out.append(f'{name}="{value.replace(chr(34), chr(39))}"')
    return " " + " ".join(out) if out else ""


def svg_of(figure, *, title: str | None = None) -> str:
    """The figure as CSP-safe inline SVG (the figure is closed). With *title*, the SVG gets
    ``role="img"`` and that text as its accessible name, for screen readers."""
    out = io.BytesIO()
    figure.savefig(out, format="svg", metadata={"Date": None}, bbox_inches="tight")
    plt.close(figure)
    svg = csp_safe_svg(out.getvalue().decode("utf-8"))
    if title is not None:
        label = title.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")
        svg = svg.replace("<svg ", f'<svg role="img" aria-label="{label}" ', 1)
    return svg
