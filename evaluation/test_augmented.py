"""Pooling of original and variant embeddings, and the paired Spearman difference (pure code)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.stats import spearmanr

from evaluation.augmented import is_unit_norm, pool_embeddings
from evaluation.stats import spearman_difference_with_ci

ORIGINALS = np.array([[1.0, 0.0], [0.0, 1.0], [2.0, 2.0]])
VARIANTS = np.array([[0.0, 1.0], [1.0, 1.0], [3.0, 3.0]])
OWNERS = [0, 0, 1]  # text 0 has two variants, text 1 one, text 2 none


def test_mean_pooling_averages_the_original_with_its_variants():
    pooled = pool_embeddings(ORIGINALS, VARIANTS, OWNERS, pooling="mean")
    # (1,0)+(0,1)+(1,1) over 3; (0,1)+(3,3) over 2; no variant: the original.
    np.testing.assert_allclose(pooled, [[2 / 3, 2 / 3], [1.5, 2.0], [2.0, 2.0]], rtol=1e-6)
    assert pooled.dtype == np.float32


def test_weighted_pooling_gives_the_original_its_share_and_the_variants_the_rest():
    pooled = pool_embeddings(ORIGINALS, VARIANTS, OWNERS, pooling="weighted", weight=0.75)
    # 0.75*(1,0) + 0.25*mean((0,1),(1,1)); 0.75*(0,1) + 0.25*(3,3); the original.
    np.testing.assert_allclose(pooled, [[0.875, 0.25], [0.75, 1.5], [2.0, 2.0]], rtol=1e-6)


def test_weight_one_is_the_plain_encoder_and_one_over_m_plus_one_the_mean():
    np.testing.assert_allclose(pool_embeddings(ORIGINALS, VARIANTS, OWNERS, pooling="weighted", weight=1.0), ORIGINALS)
    one_each = [0, 1, 2]
    mean = pool_embeddings(ORIGINALS, VARIANTS, one_each, pooling="mean")
    np.testing.assert_allclose(pool_embeddings(ORIGINALS, VARIANTS, one_each, pooling="weighted", weight=0.5), mean)


def test_normalise_scales_pooled_rows_to_unit_length():
    pooled = pool_embeddings(ORIGINALS, VARIANTS, OWNERS, pooling="mean", normalise=True)
    np.testing.assert_allclose(np.linalg.norm(pooled, axis=1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(pooled[0], [np.sqrt(0.5), np.sqrt(0.5)], rtol=1e-6)
    assert is_unit_norm(pooled) and not is_unit_norm(ORIGINALS) and is_unit_norm(np.zeros((0, 2)))


def test_no_variants_at_all_returns_the_originals():
    pooled = pool_embeddings(ORIGINALS, np.zeros((0, 2)), [], pooling="mean")
    np.testing.assert_allclose(pooled, ORIGINALS)


def test_max_pooling_takes_each_coordinates_largest_value():
    originals = np.array([[0.5, -1.0, 2.0], [1.0, 1.0, 1.0], [-3.0, 0.0, 4.0]])
    variants = np.array([[1.0, -2.0, 0.0], [0.0, 0.5, 3.0], [2.0, -5.0, 0.5]])
    # Text 0 owns variants 0 and 1: max of (0.5,-1,2), (1,-2,0), (0,0.5,3) is (1, 0.5, 3).
    # Text 1 owns variant 2: max of (1,1,1), (2,-5,0.5) is (2, 1, 1). Text 2 has none: itself.
    pooled = pool_embeddings(originals, variants, [0, 0, 1], pooling="max")
    np.testing.assert_allclose(pooled, [[1.0, 0.5, 3.0], [2.0, 1.0, 1.0], [-3.0, 0.0, 4.0]])


def test_max_pooling_of_unit_rows_is_scaled_back_to_unit_length():
    pooled = pool_embeddings(np.array([[1.0, 0.0]]), np.array([[0.0, 1.0]]), [0], pooling="max", normalise=True)
    np.testing.assert_allclose(pooled, [[np.sqrt(0.5), np.sqrt(0.5)]], rtol=1e-6)


def test_weight_zero_keeps_only_the_variants():
    pooled = pool_embeddings(ORIGINALS, VARIANTS, OWNERS, pooling="weighted", weight=0.0)
    # mean((0,1),(1,1)) = (0.5, 1); (3,3); no variant: the original stays (nothing else represents it).
    np.testing.assert_allclose(pooled, [[0.5, 1.0], [3.0, 3.0], [2.0, 2.0]])


@given(st.integers(1, 4), st.floats(0.0, 1.0))
def test_pooling_is_invariant_to_variant_order(seed, weight):
    rng = np.random.default_rng(seed)
    originals, variants = rng.normal(size=(3, 4)), rng.normal(size=(6, 4))
    owners = rng.integers(0, 3, 6)
    order = rng.permutation(6)
    for pooling, w in (("mean", None), ("weighted", weight), ("max", None)):
        a = pool_embeddings(originals, variants, owners, pooling=pooling, weight=w)
        b = pool_embeddings(originals, variants[order], owners[order], pooling=pooling, weight=w)
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"pooling": "median"}, "pooling must be one of"),
        ({"pooling": "weighted"}, "needs a weight"),
        ({"pooling": "weighted", "weight": -0.1}, "needs a weight"),
        ({"pooling": "weighted", "weight": 1.5}, "needs a weight"),
        ({"pooling": "mean", "weight": 0.5}, "takes no weight"),
        ({"pooling": "max", "weight": 0.5}, "max pooling takes no weight"),
    ],
)
def test_bad_pooling_options_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        pool_embeddings(ORIGINALS, VARIANTS, OWNERS, **kwargs)


def test_owners_must_index_the_originals():
    with pytest.raises(ValueError, match="owners must index"):
        pool_embeddings(ORIGINALS, VARIANTS, [0, 1, 3])
    with pytest.raises(ValueError, match="one entry per variant"):
        pool_embeddings(ORIGINALS, VARIANTS, [0, 1])


def test_spearman_difference_matches_scipy_and_its_interval_covers_it():
    rng = np.random.default_rng(0)
    gold = rng.uniform(0, 5, 200)
    better = gold + rng.normal(0, 0.5, 200)
    worse = gold + rng.normal(0, 2.0, 200)
    result = spearman_difference_with_ci(gold, better, worse, rng=np.random.default_rng(1), n_resamples=300)
    expected = spearmanr(better, gold).statistic - spearmanr(worse, gold).statistic
    assert result.difference == pytest.approx(expected)
    assert result.spearman_a - result.spearman_b == pytest.approx(expected)
    assert result.ci_low < result.difference < result.ci_high and result.ci_low > 0
    again = spearman_difference_with_ci(gold, better, worse, rng=np.random.default_rng(1), n_resamples=300)
    assert (again.ci_low, again.ci_high) == (result.ci_low, result.ci_high)
    same = spearman_difference_with_ci(gold, better, better, rng=np.random.default_rng(1), n_resamples=50)
    assert (same.difference, same.ci_low, same.ci_high) == (0.0, 0.0, 0.0)
