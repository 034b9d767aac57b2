"""core.stats against hand-computed values and reference libraries (scipy, statsmodels)."""

from itertools import combinations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as scipy_stats
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.proportion import proportion_confint

from core.stats import (
    bootstrap_ci,
    compact_letters,
    fisher_z_interval,
    hodges_lehmann,
    hodges_lehmann_interval,
    holm,
    kendall_tau,
    paired_bootstrap_test,
    spearman_rho,
    spearman_with_ci,
    wilcoxon_p_value,
    wilson_interval,
)


@pytest.mark.parametrize(
    "data, expected",
    [
        ([1, 2, 3], 2.0),  # Walsh averages 1, 1.5, 2, 2, 2.5, 3
        ([1, 5], 3.0),  # 1, 3, 5
        ([0, 0, 10], 2.5),  # 0, 0, 0, 5, 5, 10
        ([4.0], 4.0),
        ([-2, 1, 1, 7], 1.0),  # -2, -0.5, -0.5, 2.5, 1, 1, 4, 1, 4, 7 -> median of 1, 1
    ],
)
def test_hodges_lehmann_hand_cases(data, expected):
    assert hodges_lehmann(data) == pytest.approx(expected)


@given(st.lists(st.floats(-100, 100), min_size=1, max_size=40), st.floats(-50, 50))
def test_hodges_lehmann_is_shift_equivariant(data, shift):
    assert hodges_lehmann(np.add(data, shift)) == pytest.approx(hodges_lehmann(data) + shift, abs=1e-9)


def test_hodges_lehmann_rejects_empty_and_nan():
    with pytest.raises(ValueError, match="at least 1"):
        hodges_lehmann([])
    with pytest.raises(ValueError, match="NaN"):
        hodges_lehmann([1.0, float("nan")])


@pytest.mark.parametrize("statistic", [np.mean, np.median])
def test_bootstrap_ci_equals_scipy_percentile_bootstrap(statistic):
    data = np.random.default_rng(3).normal(3.2, 0.9, size=57)
    ours = bootstrap_ci(data, statistic, rng=np.random.default_rng(42), n_resamples=999)
    reference = scipy_stats.bootstrap(
        (data,),
        lambda x, axis: statistic(x, axis=axis),
        n_resamples=999,
        method="percentile",
        rng=np.random.default_rng(42),
        vectorized=True,
    )
    assert ours.low == pytest.approx(reference.confidence_interval.low, abs=1e-12)
    assert ours.high == pytest.approx(reference.confidence_interval.high, abs=1e-12)
    assert ours.estimate == pytest.approx(statistic(data))


def test_bootstrap_ci_is_reproducible_from_the_seed():
    data = np.random.default_rng(5).normal(size=30)
    first = bootstrap_ci(data, hodges_lehmann, rng=np.random.default_rng(7))
    again = bootstrap_ci(data, hodges_lehmann, rng=np.random.default_rng(7))
    other = bootstrap_ci(data, hodges_lehmann, rng=np.random.default_rng(8))
    assert first == again
    assert (first.low, first.high) != (other.low, other.high)
    assert first.low <= first.estimate <= first.high


def test_bootstrap_ci_of_a_constant_sample_is_a_point():
    ci = bootstrap_ci([2.0] * 10, rng=np.random.default_rng(0))
    assert (ci.estimate, ci.low, ci.high) == (2.0, 2.0, 2.0)


def test_paired_bootstrap_constant_difference_is_maximally_significant():
    result = paired_bootstrap_test([3, 4, 5, 6], [2, 3, 4, 5], rng=np.random.default_rng(0), n_resamples=999)
    assert result.mean_difference == 1.0
    assert result.p_value == pytest.approx(1 / 1000)
    assert (result.low, result.high) == (1.0, 1.0)


def test_paired_bootstrap_identical_samples_are_not_significant():
    result = paired_bootstrap_test([1, 2, 3], [1, 2, 3], rng=np.random.default_rng(0))
    assert result.mean_difference == 0.0
    assert result.p_value == 1.0


def test_paired_bootstrap_agrees_with_the_paired_t_test_on_a_large_sample():
    rng = np.random.default_rng(11)
    a = rng.normal(3.0, 1.0, 400)
    b = a - 0.1 + rng.normal(0, 1.0, 400)
    ours = paired_bootstrap_test(a, b, rng=np.random.default_rng(1), n_resamples=4000)
    reference = scipy_stats.ttest_rel(a, b).pvalue
    assert ours.p_value == pytest.approx(reference, abs=0.03)


def test_paired_bootstrap_needs_equal_lengths():
    with pytest.raises(ValueError, match="same length"):
        paired_bootstrap_test([1, 2], [1], rng=np.random.default_rng(0))


@given(st.lists(st.floats(0, 1), min_size=1, max_size=30))
@settings(max_examples=25, deadline=None)  # multipletests: ~0.1 s a call here (60 took 6 s, 48 s in CI)
def test_holm_equals_statsmodels(p_values):
    expected = multipletests(p_values, method="holm")[1]
    np.testing.assert_allclose(holm(p_values), expected, atol=1e-12)


def test_holm_hand_case():
    # Sorted 0.01, 0.02, 0.04 times 3, 2, 1 -> 0.03, 0.04, 0.04 (monotone), back in input order.
    np.testing.assert_allclose(holm([0.04, 0.01, 0.02]), [0.04, 0.03, 0.04])


def test_compact_letters_hand_cases():
    # Nothing significant: one letter for all.
    assert compact_letters(["A", "B", "C"], set()) == {"A": "a", "B": "a", "C": "a"}
    # Everything significant: a letter each.
    everything = {frozenset(p) for p in combinations("ABC", 2)}
    assert compact_letters(["A", "B", "C"], everything) == {"A": "a", "B": "b", "C": "c"}
    # Only the extremes differ: the middle one shares with both.
    assert compact_letters(["A", "B", "C"], {frozenset("AC")}) == {"A": "a", "B": "ab", "C": "b"}
    # A mapping of every pair works too.
    assert compact_letters(["A", "B"], {frozenset("AB"): False}) == {"A": "a", "B": "a"}


@given(
    st.integers(1, 7).flatmap(
        lambda n: st.tuples(st.just(n), st.lists(st.booleans(), min_size=n * (n - 1) // 2, max_size=n * (n - 1) // 2))
    )
)
@settings(max_examples=300)
def test_compact_letters_share_a_letter_exactly_when_not_significant(case):
    n, flags = case
    groups = [f"m{i}" for i in range(n)]
    pairs = list(combinations(groups, 2))
    significant = {frozenset(p) for p, flag in zip(pairs, flags, strict=True) if flag}
    letters = compact_letters(groups, significant)
    assert all(letters[g] for g in groups)
    for first, second in pairs:
        share = bool(set(letters[first]) & set(letters[second]))
        assert share == (frozenset((first, second)) not in significant)


def test_wilcoxon_is_undefined_without_nonzero_differences():
    assert wilcoxon_p_value([0.0, 0.0, 0.0]) == (None, None)


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 500).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))),
    st.sampled_from([0.8, 0.9, 0.95, 0.99]),
)
def test_wilson_interval_equals_statsmodels(count_and_n, confidence):
    count, n = count_and_n
    low, high = wilson_interval(count, n, confidence=confidence)
    ref_low, ref_high = proportion_confint(count, n, alpha=1 - confidence, method="wilson")
    assert low == pytest.approx(ref_low, abs=1e-12) and high == pytest.approx(ref_high, abs=1e-12)


def test_wilson_interval_rejects_impossible_counts():
    with pytest.raises(ValueError, match="successes"):
        wilson_interval(6, 5)
    with pytest.raises(ValueError, match="positive"):
        wilson_interval(0, 0)


def test_fisher_z_interval_on_a_hand_computed_example():
    # r = 0.5, n = 28: z = atanh(0.5) = 0.549306, se = 1/sqrt(25) = 0.2, half-width 1.959964 * 0.2.
    assert fisher_z_interval(0.5, 28) == pytest.approx((0.156028, 0.735818), abs=1e-6)
    # Spearman (Bonett & Wright): se = sqrt((1 + 0.25/2) / 25) = 0.212132, so a wider interval.
    assert fisher_z_interval(0.5, 28, method="spearman") == pytest.approx((0.132747, 0.746533), abs=1e-6)
    assert fisher_z_interval(0.5, 3) is None and fisher_z_interval(float("nan"), 30) is None
    assert fisher_z_interval(1.0, 10) == (1.0, 1.0)
    with pytest.raises(ValueError, match="method"):
        fisher_z_interval(0.5, 10, method="kendall")


def test_rank_correlations_equal_scipy():
    a, b = [1.0, 2.0, 3.0, 4.0, 5.0], [2.0, 1.0, 4.0, 3.0, 5.0]
    assert spearman_rho(a, b) == pytest.approx(scipy_stats.spearmanr(a, b).statistic)
    assert kendall_tau(a, b) == pytest.approx(scipy_stats.kendalltau(a, b).statistic)
    assert spearman_rho([1, 1, 1], [1, 2, 3]) is None and spearman_rho([1, 2], [1, 2]) is None


@given(st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1)), min_size=2, max_size=15))
@settings(max_examples=100)
def test_kendall_tau_equals_scipy(pairs):
    a, b = zip(*pairs, strict=True)
    ours = kendall_tau(a, b)
    if ours is None:
        assert len(set(a)) < 2 or len(set(b)) < 2
    else:
        assert ours == pytest.approx(scipy_stats.kendalltau(a, b).statistic)


def test_spearman_with_ci_matches_scipy_and_brackets_it():
    rng = np.random.default_rng(2)
    x = rng.normal(size=60)
    y = -0.5 * x + rng.normal(size=60)
    result = spearman_with_ci(x, y, rng=np.random.default_rng(0), n_resamples=400)
    assert result.spearman == pytest.approx(scipy_stats.spearmanr(x, y).statistic)
    assert result.ci_low < result.spearman < result.ci_high < 0
    assert spearman_with_ci([1, 1, 1], [1, 2, 3], rng=np.random.default_rng(0)).spearman is None


# --- Walsh-average interval of the Hodges–Lehmann estimate (issue 29) ---


def _signed_rank_lower_tail_by_enumeration(n: int) -> dict[int, float]:
    """P(T+ <= t) from all 2**n sign patterns of the ranks 1..n (independent of core.stats)."""
    from itertools import product

    sums = [
        sum(rank for rank, sign in zip(range(1, n + 1), signs, strict=True) if sign)
        for signs in product((0, 1), repeat=n)
    ]
    total = len(sums)
    return {t: sum(s <= t for s in sums) / total for t in range(n * (n + 1) // 2 + 1)}


def test_walsh_interval_worked_example_against_enumeration():
    data = [0.12, -0.31, 0.05, 0.44, -0.08, 0.27, 0.19, -0.02]
    walsh = sorted((data[i] + data[j]) / 2 for i in range(8) for j in range(i, 8))
    assert len(walsh) == 36
    tail = _signed_rank_lower_tail_by_enumeration(8)
    k = max(t + 1 for t, p in tail.items() if p <= 0.025)  # largest order with P(T+ <= k-1) <= 2.5%
    assert k == 4 and tail[3] == pytest.approx(5 / 256)  # T+ in {0,1,2,3}: 1+1+1+2 patterns
    found = hodges_lehmann_interval(data)
    assert (found.low, found.high) == (pytest.approx(walsh[k - 1]), pytest.approx(walsh[36 - k]))
    assert found.estimate == pytest.approx(hodges_lehmann(data))
    assert found.confidence == pytest.approx(1 - 2 * 5 / 256)  # 96.1% achieved, nominal 95%
    assert (found.order, found.method, found.nominal) == (4, "exact", 0.95)


@pytest.mark.parametrize("n", [6, 7, 10, 12])
def test_walsh_interval_order_matches_enumeration(n):
    tail = _signed_rank_lower_tail_by_enumeration(n)
    k = max(t + 1 for t, p in tail.items() if p <= 0.025)
    found = hodges_lehmann_interval(np.arange(n, dtype=float) ** 1.5)
    assert found.order == k and found.confidence == pytest.approx(1 - 2 * tail[k - 1])


def test_walsh_interval_too_few_values_is_the_range_with_its_lower_confidence():
    found = hodges_lehmann_interval([0.3, -0.1, 0.2, 0.5, 0.0])
    assert (found.low, found.high, found.order) == (-0.1, 0.5, 1)
    assert found.confidence == pytest.approx(1 - 2 / 32)  # 93.75% < 95%: reported, not hidden


def test_walsh_interval_covers_the_shift_at_n8():
    # 2000 samples of 8 from a logistic distribution centred on 0.3 (symmetric): the exact interval
    # covers 0.3 at least 94% of the time (its achieved level is 96.1%).
    rng = np.random.default_rng(29)
    covered = 0
    for _ in range(2000):
        found = hodges_lehmann_interval(rng.logistic(0.3, 0.05, size=8))
        covered += found.low <= 0.3 <= found.high
    assert covered / 2000 >= 0.94


def test_walsh_interval_large_n_uses_the_normal_approximation():
    x = np.random.default_rng(1).normal(size=500)
    found = hodges_lehmann_interval(x)
    m = 500 * 501 / 2
    sd = np.sqrt(500 * 501 * 1001 / 24)
    assert found.method == "normal"
    assert abs(found.order - (m / 2 - 1.959964 * sd)) < 2
    assert found.confidence == pytest.approx(0.95, abs=0.001) and found.low < found.estimate < found.high
