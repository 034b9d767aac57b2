"""The invariance–sensitivity scatter keeps its labels readable (issue 30): models at the same or
nearly the same point share one label, and no two labels' text boxes overlap, as measured by
matplotlib's own renderer; the figure stays byte-identical from one rendering to the next."""

from __future__ import annotations

import itertools

import matplotlib.pyplot as plt
import pytest

from evaluation.figures import _RC, _render, invariance_sensitivity_figure
from evaluation.meaning_change import ModelSensitivity


def row(model: str, invariance: float, sensitivity: float) -> ModelSensitivity:
    return ModelSensitivity(model=model, drops=(), rank_losses=(), invariance=invariance, sensitivity=sensitivity)


# Three models at one point, a fourth 0.004 away from them, and a lone one 0.03 away: the lone
# label is long enough that it would run into the crowd's label at the default offset.
CROWDED = [
    row("sentence-transformers/all-MiniLM-L6-v2", 0.80, 0.60),
    row("intfloat/multilingual-e5-small", 0.80, 0.60),
    row("BAAI/bge-small-en-v1.5", 0.80, 0.60),
    row("thenlper/gte-small", 0.803, 0.603),
    row("sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2", 0.78, 0.62),
]


def labels_of(figure) -> list:
    (ax,) = figure.axes
    return [t for t in ax.texts if t.get_text()]


def overlapping(figure) -> list[tuple[str, str]]:
    renderer = figure.canvas.get_renderer()
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in labels_of(figure)]
    return [(a, b) for (a, box_a), (b, box_b) in itertools.combinations(boxes, 2) if box_a.overlaps(box_b)]


@pytest.mark.parametrize("rows", [CROWDED[:4], CROWDED])
def test_no_two_labels_overlap_and_every_model_is_named_once(rows):
    with plt.rc_context(_RC):
        figure = invariance_sensitivity_figure(rows)
        figure.canvas.draw()
        assert overlapping(figure) == []
        texts = "\n".join(t.get_text() for t in labels_of(figure))
        for r in rows:
            assert texts.count(r.model) == 1, texts
        plt.close(figure)


def test_models_within_the_tolerance_share_one_label_listing_them():
    with plt.rc_context(_RC):
        figure = invariance_sensitivity_figure(CROWDED[:4])
        (label,) = labels_of(figure)
        plt.close(figure)
    assert label.get_text().splitlines() == [
        "BAAI/bge-small-en-v1.5 (0.69)",
        "intfloat/multilingual-e5-small (0.69)",
        "sentence-transformers/all-MiniLM-L6-v2 (0.69)",
        "thenlper/gte-small (0.69)",
    ]


def test_the_figure_is_the_same_bytes_whatever_the_order_of_the_rows():
    with plt.rc_context(_RC):
        svgs = {_render(invariance_sensitivity_figure(rows), "svg") for rows in (CROWDED, CROWDED[::-1], CROWDED)}
    assert len(svgs) == 1
