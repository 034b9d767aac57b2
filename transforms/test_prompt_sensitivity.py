"""The prompt-sensitivity statistics against statsmodels, scipy and exact enumeration."""

from itertools import product

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.contingency_tables import cochrans_q, mcnemar

from transforms.prompt_sensitivity import VersionInput, cochran_q, permutation_range_test, prompt_sensitivity


def test_cochran_q_matches_statsmodels_and_a_hand_computation():
    # 8 texts x 3 prompt versions, 1 = the transformation failed.
    table = np.array([[1, 1, 0], [1, 0, 0], [0, 0, 0], [1, 1, 1], [1, 0, 0], [0, 1, 0], [1, 0, 0], [1, 1, 0]])
    q, p = cochran_q(table)
    # By hand: column totals 6, 4, 1 (N = 11), row totals squared sum to 4+1+0+9+1+1+1+4 = 21;
    # Q = 2 * (3 * (36 + 16 + 1) - 121) / (3 * 11 - 21) = 2 * 38 / 12.
    assert q == pytest.approx(76 / 12)
    reference = cochrans_q(table)
    assert q == pytest.approx(reference.statistic) and p == pytest.approx(reference.pvalue)
    assert p == pytest.approx(stats.chi2.sf(76 / 12, 2))


def test_cochran_q_of_two_versions_is_mcnemar_without_correction():
    table = np.array([[1, 0]] * 7 + [[0, 1]] * 2 + [[1, 1]] * 3 + [[0, 0]] * 10)
    q, p = cochran_q(table)
    reference = mcnemar([[10, 7], [2, 3]], exact=False, correction=False)
    assert q == pytest.approx(reference.statistic) and p == pytest.approx(reference.pvalue)
    assert cochran_q(np.array([[1, 1], [0, 0]])) == (0.0, 1.0)  # no discordant text: nothing to test
    with pytest.raises(ValueError, match="0/1"):
        cochran_q([[0.5, 1]])


def test_permutation_range_test_of_two_versions_matches_exact_sign_flips():
    rng = np.random.default_rng(4)
    a = rng.normal(0.4, 0.1, 10)
    b = a + rng.normal(0.05, 0.08, 10)
    differences = b - a
    observed = abs(differences.mean())
    # Exact: swapping the two versions of a text flips the sign of its difference.
    flips = np.array(list(product([1, -1], repeat=10)))
    exact = float(np.mean(np.abs((flips * differences).mean(axis=1)) >= observed - 1e-12))
    statistic, p = permutation_range_test(np.column_stack([a, b]), rng=np.random.default_rng(0), n_resamples=20000)
    assert statistic == pytest.approx(observed)
    assert p == pytest.approx(exact, abs=0.01)


def test_permutation_range_test_on_binary_outcomes_is_the_exact_mcnemar_test():
    # 9 discordant texts (7 fail only under version A, 2 only under B): the exact McNemar test is a
    # binomial test of 7 of 9 at 1/2.
    table = np.array([[1, 0]] * 7 + [[0, 1]] * 2 + [[0, 0]] * 5)
    _, p = permutation_range_test(table, rng=np.random.default_rng(1), n_resamples=20000)
    assert p == pytest.approx(stats.binomtest(7, 9, 0.5).pvalue, abs=0.01)


def test_identical_versions_get_the_largest_p_value():
    matrix = np.tile(np.arange(6.0)[:, None], (1, 3))
    statistic, p = permutation_range_test(matrix, statistic=np.median, rng=np.random.default_rng(0), n_resamples=200)
    assert statistic == 0.0 and p == 1.0


def test_report_on_a_worked_example():
    keys = [(i, "sentence1") for i in range(6)]
    v1 = VersionInput(
        "paraphrase v1",
        1,
        outcomes=dict(zip(keys, [True, True, True, True, False, True], strict=True)),
        edit_distances=dict(zip([k for j, k in enumerate(keys) if j != 4], [0.1, 0.2, 0.3, 0.4, 0.5], strict=True)),
        judge_scores={"quality": {keys[0]: 5, keys[1]: 4, keys[2]: 4, keys[3]: 3, keys[5]: 4}},
        benchmark_deltas={("m1", "d", 1): -0.02, ("m2", "d", 1): -0.04},
    )
    v2 = VersionInput(
        "paraphrase v2",
        2,
        outcomes=dict(zip(keys, [True, False, False, True, False, True], strict=True)),
        edit_distances={keys[0]: 0.6, keys[3]: 0.8, keys[5]: 0.7},
        judge_scores={"quality": {keys[0]: 3, keys[3]: 2, keys[5]: 3}},
        benchmark_deltas={("m1", "d", 1): -0.06, ("m2", "d", 1): -0.08},
    )
    report = prompt_sensitivity([v1, v2], seed=3, n_resamples=500)
    first, second = report.versions
    assert (first.n_texts, first.error_rate.value, second.error_rate.value) == (6, 1 / 6, 3 / 6)
    assert first.error_rate.ci_low <= 1 / 6 <= first.error_rate.ci_high
    assert (first.edit_distance.median, first.edit_distance.q1, first.edit_distance.q3) == pytest.approx(
        (0.3, 0.2, 0.4)
    )
    assert (second.edit_distance.median, second.edit_distance.q1, second.edit_distance.q3) == pytest.approx(
        (0.7, 0.65, 0.75)
    )
    assert first.judge["quality"].value == pytest.approx(4.0) and second.judge["quality"].value == pytest.approx(8 / 3)
    assert first.benchmark_delta.value == pytest.approx(-0.03) and second.benchmark_delta.value == pytest.approx(-0.07)
    spreads = {s.metric: s for s in report.spreads}
    error = spreads["error rate"]
    assert error.spread == pytest.approx(2 / 6) and error.n_blocks == 6
    reference = mcnemar([[3, 2], [0, 1]], exact=False, correction=False)  # texts 1 and 2 fail only under v2
    assert error.statistic == pytest.approx(reference.statistic) and error.p_value == pytest.approx(reference.pvalue)
    edit = spreads["edit distance (median)"]
    assert edit.spread == pytest.approx(0.4) and edit.n_blocks == 3  # texts 0, 3, 5 succeed under both
    assert edit.statistic == pytest.approx(0.7 - 0.4)  # medians over those texts: 0.4 and 0.7
    quality = spreads["judge quality (mean)"]
    assert quality.n_blocks == 3 and quality.statistic == pytest.approx(4 - 8 / 3)
    delta = spreads["benchmark Δ (mean)"]
    assert delta.n_blocks == 2 and delta.spread == pytest.approx(0.04)
    # Every shuffle of two blocks whose differences are equal gives the observed range or 0:
    # exactly half of the 4 sign patterns reach it.
    assert delta.p_value == pytest.approx(0.5, abs=0.06)
    assert prompt_sensitivity([v1, v2], seed=3, n_resamples=500) == report


def test_report_leaves_out_what_not_every_version_has():
    keys = list(range(4))
    v1 = VersionInput("a", 1, dict.fromkeys(keys, True), dict.fromkeys(keys, 0.5), {"quality": dict.fromkeys(keys, 4)})
    v2 = VersionInput("b", 2, dict.fromkeys(keys, True), dict.fromkeys(keys, 0.5))
    report = prompt_sensitivity([v1, v2], seed=0, n_resamples=100)
    assert [s.metric for s in report.spreads] == ["error rate", "edit distance (median)"]
    assert report.versions[1].benchmark_delta is None and report.versions[1].judge == {}
    with pytest.raises(ValueError, match="at least two"):
        prompt_sensitivity([v1], seed=0)
