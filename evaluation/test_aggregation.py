"""Benchmark aggregates against hand-computed cases."""

import math

import pytest

from evaluation.aggregation import UnitScore, aggregate, mean_sd


def u(transformation, axis, seed, score, original=None, dataset="d1", model="m"):
    return UnitScore(model, dataset, transformation, axis, seed, score, original)


def test_mean_sd_is_the_sample_sd():
    assert mean_sd([]) == (None, None)
    assert mean_sd([0.5]) == (0.5, None)
    mean, sd = mean_sd([1.0, 2.0, 3.0, 4.0])
    assert mean == 2.5 and sd == pytest.approx(math.sqrt(5 / 3))


def test_per_transformation_axis_total_and_original_by_hand():
    units = [
        u("original", "", 0, 0.80),
        u("original", "", 0, 0.60, dataset="d2"),
        # paraphrase (lexical): seed 1 -> mean over datasets (0.70 + 0.50) / 2 = 0.60; seed 2 -> 0.70
        u("paraphrase", "lexical", 1, 0.70, 0.80),
        u("paraphrase", "lexical", 1, 0.50, 0.60, dataset="d2"),
        u("paraphrase", "lexical", 2, 0.75, 0.80),
        u("paraphrase", "lexical", 2, 0.65, 0.60, dataset="d2"),
        # backtranslation (lexical): 0.50 and 0.60
        u("backtranslation", "lexical", 1, 0.50),
        u("backtranslation", "lexical", 2, 0.60),
        # expansion (length): 0.40, 0.40; translation (language): 0.20, 0.30
        u("expansion", "length", 1, 0.40),
        u("expansion", "length", 2, 0.40),
        u("translation", "language", 1, 0.20),
        u("translation", "language", 2, 0.30),
        # the extra axis never enters the total
        u("keywords", "extra", 1, 0.0),
        u("keywords", "extra", 2, 0.0),
    ]
    agg = aggregate(units)["m"]
    assert agg.original == pytest.approx(0.70)
    para = agg.transformations["paraphrase"]
    assert para.mean == pytest.approx(0.65) and para.sd == pytest.approx(math.sqrt(0.005)) and para.n_seeds == 2
    # Δ per unit: -0.10, -0.10, -0.05, +0.05 -> mean -0.05
    assert para.delta == pytest.approx(-0.05)
    assert agg.transformations["backtranslation"].delta is None
    lexical = agg.axes["lexical"]
    assert lexical.mean == pytest.approx((0.65 + 0.55) / 2)
    # per-seed lexical: seed 1 (0.60 + 0.50) / 2 = 0.55, seed 2 (0.70 + 0.60) / 2 = 0.65
    assert lexical.sd == pytest.approx(math.sqrt(0.005))
    assert agg.axes["length"].mean == pytest.approx(0.40) and agg.axes["length"].sd == pytest.approx(0.0)
    assert agg.total.mean == pytest.approx((0.60 + 0.40 + 0.25) / 3)
    # per-seed totals: (0.55 + 0.40 + 0.20) / 3 and (0.65 + 0.40 + 0.30) / 3
    assert agg.total.sd == pytest.approx(mean_sd([(0.55 + 0.40 + 0.20) / 3, (0.65 + 0.40 + 0.30) / 3])[1])
    assert agg.complete and "extra" in agg.axes


def test_missing_axis_is_partial_and_single_seed_has_no_sd():
    agg = aggregate([u("paraphrase", "lexical", 1, 0.5), u("original", "", 0, 0.9)])["m"]
    assert not agg.complete
    assert agg.total.mean == pytest.approx(0.5) and agg.total.sd is None
    assert agg.transformations["paraphrase"].sd is None


def test_models_are_aggregated_separately():
    found = aggregate([u("original", "", 0, 0.9, model="a"), u("original", "", 0, 0.1, model="b")])
    assert found["a"].original == 0.9 and found["b"].original == 0.1
