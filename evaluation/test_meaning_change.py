"""Sensitivity scoring checked against independent code: scipy's bootstrap, a brute-force ranking
and worked examples (issue 30)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from evaluation.meaning_change import (
    RankShift,
    invariance_sensitivity,
    model_sensitivity,
    query_rank_shift,
    rank_loss,
    rank_shift,
    retention,
    similarity_drop,
)


def _scipy_percentile(data: np.ndarray, seed: int, n: int) -> tuple[float, float]:
    result = stats.bootstrap(
        (data,), np.mean, n_resamples=n, method="percentile", random_state=np.random.default_rng(seed), vectorized=False
    )
    return result.confidence_interval.low, result.confidence_interval.high


def test_similarity_drop_matches_scipy_and_a_hand_count():
    rng = np.random.default_rng(4)
    before = rng.uniform(0.5, 1.0, 40)
    after = before - rng.normal(0.1, 0.15, 40)
    drop = similarity_drop(before, after, seed=11, n_resamples=500)
    drops = before - after
    assert drop.n == 40
    assert drop.mean_drop.estimate == pytest.approx(drops.mean(), abs=1e-12)
    assert drop.share_dropped.estimate == pytest.approx(np.count_nonzero(after < before) / 40, abs=1e-12)
    low, high = _scipy_percentile(drops, 11, 500)
    assert (drop.mean_drop.low, drop.mean_drop.high) == pytest.approx((low, high), abs=1e-12)
    low, high = _scipy_percentile((after < before).astype(float), 11, 500)
    assert (drop.share_dropped.low, drop.share_dropped.high) == pytest.approx((low, high), abs=1e-12)


def test_similarity_drop_needs_paired_values():
    with pytest.raises(ValueError, match="as many"):
        similarity_drop([0.9, 0.8], [0.1])


def _brute_ranks(query, corpus, relevant, changed):
    """Independent: sort every document by cosine (descending); a document's rank is its place
    among the documents with a strictly higher score, plus one."""
    docs = list(corpus) + [changed]
    cos = [float(np.dot(query, d) / (np.linalg.norm(query) * np.linalg.norm(d))) for d in docs]
    ranks = [1 + sum(other > mine for j, other in enumerate(cos) if j != i) for i, mine in enumerate(cos)]
    return ranks[relevant], ranks[-1]


def test_rank_shift_matches_a_brute_force_ranking():
    rng = np.random.default_rng(0)
    for _ in range(50):
        corpus = rng.normal(size=(12, 5))
        query = rng.normal(size=5)
        relevant = int(rng.integers(12))
        changed = corpus[relevant] + rng.normal(scale=0.8, size=5)
        shift = rank_shift(query, corpus, relevant, changed)
        assert (shift.original_rank, shift.changed_rank) == _brute_ranks(query, corpus, relevant, changed)


def test_a_worked_rank_shift():
    # Query along x; the relevant document is the second; its changed version points away.
    corpus = np.array([[0.0, 1.0], [1.0, 0.1], [0.7, 0.7]])
    shift = rank_shift(np.array([1.0, 0.0]), corpus, 1, np.array([0.1, 1.0]))
    assert (shift.original_rank, shift.changed_rank, shift.shift, shift.lost) == (1, 3, 2, True)
    # An unchanged copy ties with its original: nobody loses.
    same = rank_shift(np.array([1.0, 0.0]), corpus, 1, corpus[1])
    assert (same.original_rank, same.changed_rank, same.lost) == (1, 1, False)


def test_rank_loss_matches_scipy():
    shifts = [RankShift(1, 1 + k % 4) for k in range(30)]
    loss = rank_loss(shifts, seed=3, n_resamples=400)
    moved = np.array([k % 4 for k in range(30)], dtype=float)
    assert loss.share_lost.estimate == pytest.approx(np.mean(moved > 0))
    assert loss.mean_shift.estimate == pytest.approx(moved.mean())
    low, high = _scipy_percentile(moved, 3, 400)
    assert (loss.mean_shift.low, loss.mean_shift.high) == pytest.approx((low, high), abs=1e-12)


@pytest.mark.parametrize(
    ("inv", "sens", "expected"),
    [(1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (1.0, 1.0, 1.0), (0.9, 0.6, 2 * 0.9 * 0.6 / 1.5), (0.5, None, None)],
)
def test_the_summary_is_the_harmonic_mean(inv, sens, expected):
    result = invariance_sensitivity(inv, sens)
    if expected is None:
        assert result is None
    else:
        assert result == pytest.approx(expected)
        if inv and sens:
            assert result == pytest.approx(stats.hmean([inv, sens]))


def test_the_summary_refuses_values_outside_the_unit_interval():
    with pytest.raises(ValueError, match="sensitivity must lie"):
        invariance_sensitivity(0.5, 1.5)


def test_retention_is_clipped_and_needs_a_positive_original():
    assert retention(0.4, 0.8) == 0.5 and retention(0.9, 0.8) == 1.0 and retention(-0.1, 0.8) == 0.0
    assert retention(0.5, 0.0) is None


def test_a_blind_model_scores_low_however_invariant():
    before = np.array([0.9, 0.8, 0.85, 0.95])
    blind = similarity_drop(before, before, seed=0, n_resamples=50)  # nothing moved apart
    sharp = similarity_drop(before, before - 0.3, seed=0, n_resamples=50)
    losses = [RankShift(1, 2), RankShift(2, 2)]
    blind_model = model_sensitivity("blind", drops=[("sts", "negation", blind)], retentions=[1.0, 1.0])
    sharp_model = model_sensitivity(
        "sharp",
        drops=[("sts", "negation", sharp)],
        rank_losses=[("scifact", "negation", rank_loss(losses, n_resamples=50))],
        retentions=[0.9, 0.7, None],
    )
    assert (blind_model.invariance, blind_model.sensitivity, blind_model.summary) == (1.0, 0.0, 0.0)
    # Sharp: 4 of 4 pairs dropped and 1 of 2 documents lost rank = 5/6; invariance (0.9 + 0.7) / 2.
    assert sharp_model.sensitivity == pytest.approx(5 / 6) and sharp_model.invariance == pytest.approx(0.8)
    assert sharp_model.summary == pytest.approx(stats.hmean([0.8, 5 / 6]))


def _brute_query_rank(q, corpus, relevant):
    cos = [float(np.dot(q, d) / (np.linalg.norm(q) * np.linalg.norm(d))) for d in corpus]
    return 1 + sum(c > cos[relevant] for j, c in enumerate(cos) if j != relevant)


def test_query_rank_shift_matches_a_brute_force_ranking():
    rng = np.random.default_rng(2)
    for _ in range(50):
        corpus = rng.normal(size=(10, 4))
        query, changed = rng.normal(size=4), rng.normal(size=4)
        relevant = int(rng.integers(10))
        shift = query_rank_shift(query, changed, corpus, relevant)
        expected = (_brute_query_rank(query, corpus, relevant), _brute_query_rank(changed, corpus, relevant))
        assert (shift.original_rank, shift.changed_rank) == expected
