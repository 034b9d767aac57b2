"""Agreement coefficients against published reference values, and their properties."""

import csv

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from irrCAC.datasets import raw_4raters
from scipy import stats as scipy_stats
from statsmodels.stats.inter_rater import fleiss_kappa as statsmodels_fleiss_kappa

from annotation.science.agreement import (
    agreement_summary,
    fleiss_kappa,
    gwet_ac,
    krippendorff_alpha,
    pairwise_agreement,
    ratings_matrix,
)
from core.stats import spearman_rho

SCALE = (1, 2, 3, 4, 5)


@pytest.fixture(scope="module")
def gwet_example() -> np.ndarray:
    return raw_4raters().to_numpy(dtype=float)


def test_reproduces_gwet_four_rater_example(gwet_example):
    # Gwet (2014), 12 items x 4 raters with gaps; values as published with irrCAC.
    assert gwet_ac(gwet_example, categories=SCALE, weights="identity").coefficient == pytest.approx(0.7754, abs=5e-5)
    ordinal = gwet_ac(gwet_example, categories=SCALE, weights="ordinal")
    assert ordinal.coefficient == pytest.approx(0.8989, abs=5e-5)
    assert gwet_ac(gwet_example, categories=SCALE, weights="quadratic").coefficient == pytest.approx(0.9140, abs=5e-5)
    assert ordinal.se == pytest.approx(0.1069, abs=5e-4)
    assert ordinal.ci_low < ordinal.coefficient <= ordinal.ci_high <= 1
    assert krippendorff_alpha(gwet_example, categories=SCALE) == pytest.approx(0.815, abs=5e-4)
    assert krippendorff_alpha(gwet_example, categories=SCALE, level="nominal") == pytest.approx(0.743, abs=5e-4)
    assert krippendorff_alpha(gwet_example, categories=SCALE, level="interval") == pytest.approx(0.849, abs=5e-4)
    summary = agreement_summary(gwet_example, categories=SCALE)
    assert summary.ac2.coefficient == ordinal.coefficient and summary.n_items == 12 and summary.n_raters == 4
    values = gwet_example[~np.isnan(gwet_example)]
    assert summary.n_ratings == values.size == 41
    assert summary.mean == pytest.approx(values.mean()) and summary.sd == pytest.approx(values.std(ddof=1))


def test_runs_on_biosses_five_raters(shared_data):
    path = shared_data / "biosses" / "biosses.tsv"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    matrix = np.array([[float(row[r]) for r in "ABCDE"] for row in rows])
    assert matrix.shape == (100, 5)
    summary = agreement_summary(matrix, categories=(0, 1, 2, 3, 4))
    assert summary.n_items == 100 and summary.n_raters == 5 and summary.n_ratings == 500
    # BIOSSES's raters agree well (the dataset paper reports a Pearson of 0.50-0.85 between pairs).
    assert 0.5 < summary.ac2.coefficient < 1 and 0.3 < summary.alpha < 1
    assert summary.ac2.se > 0
    print(
        f"BIOSSES: AC2 ordinal {summary.ac2.coefficient:.4f} (SE {summary.ac2.se:.4f}), "
        f"alpha ordinal {summary.alpha:.4f}, mean {summary.mean:.3f} ± {summary.sd:.3f}"
    )


def test_undefined_cases_give_none_not_a_number():
    assert gwet_ac([[1.0, np.nan], [2.0, np.nan]], categories=SCALE) is None  # no item rated twice
    assert krippendorff_alpha([[3, 3], [3, 3]], categories=SCALE) is None  # no variation at all
    with pytest.raises(ValueError, match="not among the categories"):
        gwet_ac([[1, 7], [2, 2]], categories=SCALE)


def test_ratings_matrix_from_triples():
    matrix, items, raters = ratings_matrix([("i1", "a", 3), ("i1", "b", 4), ("i2", "b", 5)])
    assert items == ["i1", "i2"] and raters == ["a", "b"]
    assert np.array_equal(matrix, np.array([[3, 4], [np.nan, 5]]), equal_nan=True)
    with pytest.raises(ValueError, match="twice"):
        ratings_matrix([("i1", "a", 3), ("i1", "a", 4)])


ratings_strategy = st.integers(min_value=2, max_value=5).flatmap(
    lambda n_raters: st.lists(
        st.lists(st.one_of(st.none(), st.integers(min_value=1, max_value=5)), min_size=n_raters, max_size=n_raters),
        min_size=2,
        max_size=15,
    )
)


def _array(rows) -> np.ndarray:
    return np.array([[np.nan if v is None else v for v in row] for row in rows], dtype=float)


@settings(max_examples=60, deadline=None)
@given(ratings_strategy, st.randoms(use_true_random=False))
def test_bounded_and_invariant_to_rater_order(rows, random):
    x = _array(rows)
    order = list(range(x.shape[1]))
    random.shuffle(order)
    result, shuffled = gwet_ac(x, categories=SCALE), gwet_ac(x[:, order], categories=SCALE)
    alpha, alpha_shuffled = krippendorff_alpha(x, categories=SCALE), krippendorff_alpha(x[:, order], categories=SCALE)
    assert (result is None) == (shuffled is None) and (alpha is None) == (alpha_shuffled is None)
    if result is not None:
        assert np.isfinite(result.coefficient) and result.coefficient <= 1 + 1e-9
        assert 0 <= result.percent_agreement <= 1 + 1e-9 and 0 <= result.chance_agreement < 1
        assert result.se >= 0 and result.ci_low <= result.coefficient <= result.ci_high + 1e-9
        assert shuffled.coefficient == pytest.approx(result.coefficient, abs=1e-9)
    if alpha is not None:
        assert alpha <= 1 + 1e-9
        assert alpha_shuffled == pytest.approx(alpha, abs=1e-9)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(min_value=1, max_value=5), min_size=2, max_size=15).filter(lambda v: len(set(v)) > 1),
    st.integers(min_value=2, max_value=6),
)
def test_identical_raters_agree_perfectly(values, n_raters):
    x = np.repeat(np.array(values, dtype=float)[:, None], n_raters, axis=1)
    assert gwet_ac(x, categories=SCALE).coefficient == pytest.approx(1.0)
    assert gwet_ac(x, categories=SCALE, weights="identity").coefficient == pytest.approx(1.0)
    assert krippendorff_alpha(x, categories=SCALE) == pytest.approx(1.0)
    summary = agreement_summary(x, categories=SCALE)
    assert summary.mean == pytest.approx(np.mean(values))


@settings(max_examples=100, deadline=None)
@given(st.integers(2, 6), st.integers(2, 4), st.integers(2, 25), st.integers(0, 2**32 - 1))
def test_fleiss_kappa_equals_statsmodels_for_a_fixed_number_of_raters(raters, categories, subjects, seed):
    rng = np.random.default_rng(seed)
    table = np.array([rng.multinomial(raters, rng.dirichlet(np.ones(categories))) for _ in range(subjects)])
    ours = fleiss_kappa(table)
    shares = table.sum(axis=0) / table.sum()
    if np.isclose(np.sum(shares**2), 1.0):
        assert ours is None
    else:
        assert ours == pytest.approx(statsmodels_fleiss_kappa(table, method="fleiss"), abs=1e-10)


def test_fleiss_kappa_with_unequal_raters_per_subject_on_a_hand_case():
    # Subject 1: 3 raters, all "a" (agreement 1); subject 2: 2 raters, split (0); subject 3: one
    # rater only (dropped). Shares over the 5 kept ratings: a 4/5, b 1/5, chance 0.68.
    kappa = fleiss_kappa([[3, 0], [1, 1], [1, 0]])
    assert kappa == pytest.approx((0.5 - 0.68) / (1 - 0.68))
    assert fleiss_kappa([[2, 0], [3, 0]]) is None  # one category only: chance agreement is 1
    assert fleiss_kappa([[1, 0]]) is None


def test_pairwise_agreement_uses_common_items_and_skips_undefined_pairs():
    ratings = {"b": {"x": 1, "y": 2, "z": 3}, "a": {"x": 1, "y": 3, "z": 2, "w": 5}, "c": {"x": 4}}
    values = pairwise_agreement(ratings, spearman_rho, min_common=3)
    assert values == (pytest.approx(scipy_stats.spearmanr([1, 3, 2], [1, 2, 3]).statistic),)


def test_agreement_warnings_say_where_the_coefficients_can_mislead():
    from annotation.science.agreement import agreement_warnings

    scale = [1, 2, 3, 4, 5]
    varied = np.array([[1 + (i % 5), 1 + ((i + (i % 2)) % 5)] for i in range(40)], dtype=float)
    assert agreement_warnings(varied, categories=scale) == ()
    single = np.array([[4.0], [3.0], [5.0]])
    assert agreement_warnings(single, categories=scale) == (
        "no item has 2 or more raters: AC2 and α are undefined (one rater per item measures no agreement)",
    )
    few = varied[:10]
    assert agreement_warnings(few, categories=scale) == (
        "only 10 items with 2 or more raters (fewer than 30): AC2 and α rest on few items and their intervals are wide",
    )
    same = np.full((40, 2), 4.0)
    assert agreement_warnings(same, categories=scale) == (
        "every rating is 4: AC2 and α are undefined or degenerate (there is no variation to agree on)",
    )
    skewed = np.full((40, 2), 4.0)
    skewed[:6, 0] = 3.0
    assert agreement_warnings(skewed, categories=scale) == (
        "92% of ratings are 4 (more than 80%): with ratings this concentrated AC2 and α can disagree and "
        "both can mislead (the prevalence paradox); read them beside the mean and the share",
    )
