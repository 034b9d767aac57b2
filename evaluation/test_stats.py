"""Robustness statistics against scipy/statsmodels and hand-computed values."""

import numpy as np
import pytest
from scipy import stats as scipy_stats
from statsmodels.stats.multitest import multipletests

from evaluation.stats import (
    aggregate_runs,
    embedding_drift,
    paired_shift,
    paired_shifts,
    split_half_reliability,
)


def test_paired_shift_hand_case_and_scipy_wilcoxon():
    before = [0.80, 0.70, 0.60, 0.90, 0.75]
    after = [0.78, 0.66, 0.61, 0.84, 0.70]
    result = paired_shift(before, after, label="paraphrase", rng=np.random.default_rng(0), n_resamples=500)
    d = np.subtract(after, before)  # -0.02, -0.04, 0.01, -0.06, -0.05
    walsh = [(d[i] + d[j]) / 2 for i in range(5) for j in range(i, 5)]
    assert result.hodges_lehmann == pytest.approx(np.median(walsh))
    assert result.median_absolute_difference == pytest.approx(0.04)
    reference = scipy_stats.wilcoxon(d)
    assert result.p_value == pytest.approx(reference.pvalue) and result.wilcoxon_statistic == reference.statistic
    assert result.ci_low <= result.hodges_lehmann <= result.ci_high


def test_paired_shifts_apply_holm_like_statsmodels():
    rng = np.random.default_rng(4)
    pairs = {}
    for label, shift in [("a", -0.05), ("b", 0.0), ("c", -0.01), ("d", 0.02)]:
        base = rng.uniform(0.5, 0.9, 20)
        pairs[label] = (base, base + shift + rng.normal(0, 0.02, 20))
    results = paired_shifts(pairs, seed=1, n_resamples=200)
    raw = [r.p_value for r in results]
    np.testing.assert_allclose([r.p_holm for r in results], multipletests(raw, method="holm")[1])
    again = paired_shifts({"c": pairs["c"]}, seed=1, n_resamples=200)[0]
    assert (again.ci_low, again.ci_high) == (results[2].ci_low, results[2].ci_high)  # independent of other labels


def test_aggregate_runs_averages_seeds_per_dataset():
    values = {("sts", 1): 0.8, ("sts", 2): 0.6, ("sick", 1): 0.5}
    assert aggregate_runs(values) == {"sick": 0.5, "sts": pytest.approx(0.7)}


def test_split_half_reliability_of_a_consistent_profile_is_one():
    # Every dataset ranks the four models the same way: every split correlates perfectly.
    scores = np.array([[0.1, 0.2, 0.3, 0.4]] * 6) + np.arange(6)[:, None] * 0.01
    result = split_half_reliability(scores, ["sts"] * 3 + ["clf"] * 3, n_splits=20, rng=np.random.default_rng(0))
    assert result.median == pytest.approx(1.0) and len(result.spearmans) == 20


def test_split_half_keeps_strata_apart_and_is_seeded():
    rng = np.random.default_rng(9)
    scores = rng.normal(size=(8, 5))
    strata = ["a", "a", "b", "b", "b", "c", "c", "c"]
    first = split_half_reliability(scores, strata, n_splits=30, rng=np.random.default_rng(3))
    again = split_half_reliability(scores, strata, n_splits=30, rng=np.random.default_rng(3))
    assert first == again and -1 <= first.median <= 1
    with pytest.raises(ValueError, match="3 models"):
        split_half_reliability(scores[:, :2], strata, rng=np.random.default_rng(0))


def test_embedding_drift_is_one_minus_cosine():
    a = np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 2.0]])
    b = np.array([[1.0, 0.0], [-1.0, -1.0], [3.0, 0.0]])
    np.testing.assert_allclose(embedding_drift(a, b), [0.0, 2.0, 1.0])
    with pytest.raises(ValueError, match="all zeros"):
        embedding_drift(np.zeros((1, 2)), np.ones((1, 2)))


def test_paired_shift_interval_covers_the_true_shift_at_n8():
    # Issue 29: the percentile bootstrap covered the true shift 89% of the time at n = 8; the
    # default interval (Walsh averages, signed-rank order) must cover it at least 94% of the time.
    rng = np.random.default_rng(8)
    covered, draws = 0, 2000
    for _ in range(draws):
        before = rng.uniform(0.5, 0.9, 8)
        after = before - 0.02 + rng.normal(0, 0.03, 8)  # true shift -0.02, symmetric noise
        result = paired_shift(before, after, rng=np.random.default_rng(0), n_resamples=1000)
        covered += result.ci_low <= -0.02 <= result.ci_high
    assert covered / draws >= 0.94, f"coverage {covered / draws:.3f}"


def test_paired_shift_keeps_the_percentile_bootstrap_as_an_option():
    before = [0.80, 0.70, 0.60, 0.90, 0.75, 0.66, 0.71, 0.83]
    after = [0.78, 0.66, 0.61, 0.84, 0.70, 0.60, 0.72, 0.80]
    d = np.subtract(after, before)
    found = paired_shift(before, after, rng=np.random.default_rng(3), n_resamples=400, interval="bootstrap")
    reference = np.random.default_rng(3).integers(0, 8, (400, 8))  # the bootstrap's own recipe, by hand
    replicates = [np.median([(d[r][i] + d[r][j]) / 2 for i in range(8) for j in range(i, 8)]) for r in reference]
    assert (found.ci_low, found.ci_high) == pytest.approx(tuple(np.percentile(replicates, [2.5, 97.5])))
    assert (found.ci_method, found.ci_confidence) == ("bootstrap", 0.95)
    walsh = paired_shift(before, after)
    assert walsh.ci_method == "walsh" and walsh.ci_confidence == pytest.approx(1 - 2 * 5 / 256)
    with pytest.raises(ValueError, match="walsh, bootstrap"):
        paired_shift(before, after, interval="percentile")
