"""Tests of the run and judge page figures (transforms.plots) and the stored score counts."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from transforms.judging import score_counts
from transforms.plots import edit_distance_histogram, judge_score_figures, score_distribution


def _assert_inline_svg(svg: str) -> None:
    """Parses, and carries nothing the page's CSP would block (style attributes or elements)."""
    ET.fromstring(svg.encode())
    assert svg.startswith("<svg") and ' style="' not in svg and "<style" not in svg
    assert 'role="img"' in svg


def test_edit_distance_histogram_names_its_count_and_mean():
    svg = edit_distance_histogram([0.0, 0.25, 0.5, 0.5, 0.25])
    _assert_inline_svg(svg)
    # 1.5 / 5 = 0.30, worked by hand
    assert 'aria-label="Histogram of edit distances over 5 texts, mean 0.30"' in svg
    assert "mean 0.30" in svg  # the legend of the dashed mean line


def test_edit_distance_histogram_is_deterministic_and_refuses_no_data():
    assert edit_distance_histogram([0.1, 0.9]) == edit_distance_histogram([0.1, 0.9])
    with pytest.raises(ValueError, match="at least one distance"):
        edit_distance_histogram([])


def test_score_counts_worked_example():
    rows = score_counts({("default", "quality"): [4.0, 4.0, 5.0, None, 2.5], ("other", "fluency"): [None]})
    assert rows == [
        {"judge": "default", "kind": "quality", "counts": {"2.5": 1, "4": 2, "5": 1}, "n_unparsed": 1},
        {"judge": "other", "kind": "fluency", "counts": {}, "n_unparsed": 1},
    ]


def test_judge_score_figures_one_per_kind_with_judges_by_model():
    result = {
        "score_counts": score_counts(
            {
                ("default", "quality"): [4.0] * 9 + [3.0],
                ("default", "fluency"): [1.0, 2.0, 5.0],
                ("big", "quality"): [1.0, 5.0],
            }
        )
    }
    figures = judge_score_figures(result, {"default": "qwen-judge", "big": "big"})
    assert [kind for kind, _ in figures] == ["quality", "fluency"]
    quality = figures[0][1]
    _assert_inline_svg(quality)
    assert "qwen-judge (default) (n=10)" in quality and "big (n=2)" in quality
    assert "quality score" in quality
    # Every score any judge gave has a slot on the axis: 1, 3, 4 and 5.
    ticks = re.findall(r">([1-5])</text>", quality)
    assert {"1", "3", "4", "5"} <= set(ticks)


def test_reports_stored_before_the_counts_have_no_figures():
    assert judge_score_figures({"judges": []}, {}) == []
    with pytest.raises(ValueError, match="at least one scored text"):
        score_distribution({"a": {}}, kind="quality")
