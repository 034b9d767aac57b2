"""Severity curves: points, bands and the normalised area against hand values, numpy's trapezoid
and scipy's bootstrap."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from evaluation.aggregation import UnitScore
from evaluation.figures import report_figures
from evaluation.robustness import robustness_analyse
from evaluation.robustness_tables import robustness_csv
from evaluation.severity import normalised_area, severity_curves

# Hand values: model "a", typos, two datasets x one seed; Δ at 2/5/10/20 %.
HAND = {
    ("d1", 2): -0.01,
    ("d1", 5): -0.02,
    ("d1", 10): -0.05,
    ("d1", 20): -0.10,
    ("d2", 2): 0.00,
    ("d2", 5): -0.02,
    ("d2", 10): -0.03,
    ("d2", 20): -0.08,
}


def _units(values, model="a", kind="typos", original=0.8):
    return [
        UnitScore(model, dataset, f"{kind}_{s}", "noise", 1, original + delta, original)
        for (dataset, s), delta in values.items()
    ]


def test_area_by_hand_and_by_numpy():
    # Mean Δ: 2% -0.005, 5% -0.02, 10% -0.04, 20% -0.09. Trapezoids from (0, 0):
    # 2·(0 − 0.005)/2 + 3·(−0.005 − 0.02)/2 + 5·(−0.02 − 0.04)/2 + 10·(−0.04 − 0.09)/2
    # = −0.005 − 0.0375 − 0.15 − 0.65 = −0.8425; / 20 = −0.042125.
    (curve,) = severity_curves(_units(HAND), models=["a"], n_resamples=200)
    assert curve.area == pytest.approx(-0.042125, abs=1e-12)
    xs, ys = [0, 2, 5, 10, 20], [0, -0.005, -0.02, -0.04, -0.09]
    assert curve.area == pytest.approx(np.trapezoid(ys, xs) / 20, abs=1e-12)
    assert [p.severity for p in curve.points] == [0, 2, 5, 10, 20]
    assert [p.delta for p in curve.points] == pytest.approx(ys)
    assert curve.points[4].score == pytest.approx(0.8 - 0.09)
    assert curve.n_units == 2
    assert normalised_area([1, 2], [-1, -1]) == pytest.approx(-0.75)  # (0.5 + 1) / 2


def test_bands_are_scipys_percentile_bootstrap_of_the_units():
    rng = np.random.default_rng(3)
    values = {(f"d{i:02d}", s): float(-s / 200 + rng.normal(0, 0.01)) for i in range(12) for s in (2, 5, 10, 20)}
    (curve,) = severity_curves(_units(values), models=["a"], seed=7, n_resamples=500)
    for point in curve.points[1:]:
        sample = np.array([values[(f"d{i:02d}", point.severity)] for i in range(12)])
        reference = stats.bootstrap(
            (sample,),
            lambda x, axis: np.mean(x, axis=axis),
            n_resamples=500,
            method="percentile",
            vectorized=True,
            rng=np.random.default_rng(7),
        ).confidence_interval
        assert (point.low, point.high) == pytest.approx((reference.low, reference.high), abs=1e-12)
        assert point.low <= point.delta <= point.high
    # The area's band: the same resamples of units, the area of each resample's mean curve.
    draws = np.random.default_rng(7).integers(0, 12, (500, 12))
    table = np.array([[values[(f"d{i:02d}", s)] for s in (2, 5, 10, 20)] for i in range(12)])
    areas = [np.trapezoid([0, *table[row].mean(axis=0)], [0, 2, 5, 10, 20]) / 20 for row in draws]
    assert (curve.area_low, curve.area_high) == pytest.approx(tuple(np.percentile(areas, [2.5, 97.5])), abs=1e-12)


def test_only_units_at_every_severity_count_and_other_axes_are_ignored():
    values = dict(HAND)
    values[("d3", 2)] = -0.5  # d3 lacks the other levels: left out of the curve
    units = [*_units(values), UnitScore("a", "d1", "paraphrase", "lexical", 1, 0.7, 0.8)]
    units += _units({("d1", 5): -0.2}, kind="casing")
    curves = severity_curves(units, models=["a"], n_resamples=50)
    assert [(c.kind, c.n_units) for c in curves] == [("casing", 1), ("typos", 2)]
    assert curves[1].points[1].delta == pytest.approx(-0.005)


def test_the_report_carries_the_curves_in_json_csv_and_a_figure():
    originals = [UnitScore("a", d, "original", "", 0, 0.8) for d in ("d1", "d2")]
    report = robustness_analyse([*originals, *_units(HAND)], models=["a"], task_types={"d1": "sts", "d2": "sts"})
    assert report.axes == ("noise",)
    (curve,) = report.severity_curves
    assert report.as_dict()["severity_curves"][0]["area"] == pytest.approx(-0.042125)
    assert "severity curve area,unit: dataset × seed at every severity,a,typos,area,-0.042125" in robustness_csv(report)
    svg = report_figures(report)["severity"]
    assert "typos" in svg and svg == report_figures(report)["severity"]  # same report, same bytes
