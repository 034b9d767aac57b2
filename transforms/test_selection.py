"""Run summaries and the generator-selection comparison, on hand-computable cases."""

import numpy as np
import pytest
from scipy import stats

from core.stats import holm
from transforms.judging import summarize_run, summarize_scores
from transforms.selection import (
    compare_kind,
    paraphrase_like,
    pool_transformations,
    selection_criteria,
    text_scores,
)


def test_summarize_scores_counts_parse_failures_and_uses_hodges_lehmann():
    summary = summarize_scores([1, 2, 3, None], seed=0, n_resamples=200)
    assert (summary.n, summary.n_parsed, summary.parse_failure_rate) == (4, 3, 0.25)
    assert summary.mean == 2.0
    assert summary.sd == pytest.approx(1.0)
    assert summary.hodges_lehmann == 2.0  # Walsh averages 1, 1.5, 2, 2, 2.5, 3
    assert summary.ci_low <= 2.0 <= summary.ci_high
    assert summarize_scores([1, 2, 3, None], seed=0, n_resamples=200) == summary


def test_summarize_scores_of_only_failures_reports_none():
    summary = summarize_scores([None, None], seed=0)
    assert (summary.n, summary.n_parsed, summary.parse_failure_rate, summary.mean) == (2, 0, 1.0, None)


def test_summarize_run_breaks_down_by_language():
    result = summarize_run(
        judge="j",
        scores={"quality": [5, 4, 2, None], "fluency": [5, 5, 3, 3]},
        languages=["es", "es", "fr", "fr"],
        seed=1,
        n_resamples=100,
    )
    assert result.by_kind["quality"].n_parsed == 3
    assert result.by_language["es"]["quality"].mean == 4.5
    assert result.by_language["fr"]["quality"].n_parsed == 1
    assert result.by_language["fr"]["fluency"].hodges_lehmann == 3.0
    with pytest.raises(ValueError, match="2 scores for 4 texts"):
        summarize_run(judge="j", scores={"quality": [1, 2]}, languages=["es"] * 4, seed=1)


def test_crossover_overall_and_ranking():
    # Two judges, two candidates, four texts. Candidate "big" failed text 3 (absent).
    scores = {
        ("big", "big"): {0: 5, 1: 5, 2: 4},
        ("small", "big"): {0: 4, 1: 5, 2: None},
        ("big", "small"): {0: 2, 1: 3, 2: 2, 3: 1},
        ("small", "small"): {0: 3, 1: 3, 2: 2, 3: 2},
    }
    result = compare_kind(
        kind="quality", candidates=["small", "big"], judges=["big", "small"], scores=scores, seed=0, n_resamples=500
    )
    assert result.crossover["big"]["big"].mean == pytest.approx(14 / 3)
    assert result.crossover["small"]["big"].n == 2  # the parse failure is not scored, but counted
    assert result.crossover["small"]["big"].n_unparsed == 1
    # Per text means over judges: big {0: 4.5, 1: 5, 2: 4}; small {0: 2.5, 1: 3, 2: 2, 3: 1.5}
    assert result.overall["big"].mean == pytest.approx(13.5 / 3)
    assert result.overall["small"].mean == pytest.approx(9 / 4)
    assert result.ranking == ["big", "small"]
    (pair,) = result.pairwise
    assert (pair.first, pair.second, pair.n) == ("big", "small", 3)  # paired on texts 0, 1, 2
    assert pair.mean_difference == pytest.approx((2 + 2 + 2) / 3)
    # A constant difference: every centred resample is 0, so p = 1 / (n_resamples + 1).
    assert pair.p_value == pytest.approx(1 / 501)
    assert pair.significant
    assert result.letters == {"big": "a", "small": "b"}


def test_holm_groups_over_three_candidates():
    rng = np.random.default_rng(0)
    base = rng.normal(3, 0.5, 60)
    scores = {
        ("j", "a"): dict(enumerate(base + 1.0)),
        ("j", "b"): dict(enumerate(base + 1.0 + rng.normal(0, 0.05, 60))),
        ("j", "c"): dict(enumerate(base)),
    }
    result = compare_kind(
        kind="quality", candidates=["c", "b", "a"], judges=["j"], scores=scores, seed=3, n_resamples=999
    )
    by_pair = {frozenset((p.first, p.second)): p for p in result.pairwise}
    assert not by_pair[frozenset("ab")].significant
    assert by_pair[frozenset("ac")].significant and by_pair[frozenset("bc")].significant
    np.testing.assert_allclose([p.p_holm for p in result.pairwise], holm([p.p_value for p in result.pairwise]))
    assert result.letters["c"] == "b" and set(result.letters["a"]) == set(result.letters["b"]) == {"a"}


def test_pairs_without_common_texts_are_not_tested():
    scores = {("j", "a"): {0: 4.0}, ("j", "b"): {1: 2.0}}
    result = compare_kind(kind="quality", candidates=["a", "b"], judges=["j"], scores=scores, seed=0, n_resamples=50)
    (pair,) = result.pairwise
    assert pair.p_value is None and not pair.significant
    assert result.letters == {"a": "a", "b": "a"}


def test_similarity_is_a_criterion_for_paraphrase_like_transformations_only():
    assert selection_criteria(["paraphrase"]) == ("quality", "fluency")
    assert selection_criteria(["paraphrase", "backtranslation", "style_change"], ["similarity", "quality"]) == (
        "similarity",
        "quality",
    )
    assert paraphrase_like("backtranslation") and not paraphrase_like("summarization")
    with pytest.raises(ValueError, match="translation, expansion change length or language"):
        selection_criteria(["paraphrase", "translation", "expansion"], ["similarity"])
    with pytest.raises(ValueError, match="unknown criteria"):
        selection_criteria(["paraphrase"], ["meaning"])


def test_per_text_scores_average_the_judges_that_scored():
    scores = {("j1", "a"): {0: 4, 1: None}, ("j2", "a"): {0: 2, 1: 3}}
    assert text_scores(candidates=["a"], judges=["j1", "j2"], scores=scores) == {"a": {0: 3.0, 1: 3.0}}


def test_pooled_ranking_top_k_and_crossings_on_a_worked_example():
    # Three candidates on two transformations (judged similarity, 0-5).
    per_text = {
        "paraphrase": {"a": {0: 5, 1: 4}, "b": {0: 4, 1: 4, 2: 4}, "c": {0: 1, 1: 2}},
        "style_change": {"a": {0: 2, 1: 3}, "b": {0: 4, 1: 5}, "c": {0: 3, 1: 3, 2: 3}},
    }
    pooled = pool_transformations(kind="similarity", candidates=["a", "b", "c"], per_text=per_text, k=2, seed=0)
    # Means: paraphrase a 4.5, b 4, c 1.5; style_change a 2.5, b 4.5, c 3.
    assert pooled.by_transformation == {
        "paraphrase": {"a": 4.5, "b": 4.0, "c": 1.5},
        "style_change": {"a": 2.5, "b": 4.5, "c": 3.0},
    }
    assert pooled.rankings == {"paraphrase": ["a", "b", "c"], "style_change": ["b", "c", "a"]}
    # Pooled: the mean of the two means, each transformation weighing the same.
    assert {c: cell.mean for c, cell in pooled.overall.items()} == pytest.approx({"a": 3.5, "b": 4.25, "c": 2.25})
    assert pooled.ranking == ["b", "a", "c"]
    assert pooled.top_k == {"paraphrase": ["a", "b"], "style_change": ["b", "c"], "pooled": ["b", "a"]}
    assert pooled.top_k_everywhere == ["b"]
    crossings = {(x.first, x.second): (x.first_ahead_on, x.second_ahead_on) for x in pooled.crossings}
    assert crossings == {
        ("b", "a"): (["style_change"], ["paraphrase"]),
        ("a", "c"): (["paraphrase"], ["style_change"]),
    }  # b is ahead of c on both: no crossing
    assert pooled.overall["b"].n == 5


def test_pooled_interval_matches_scipys_independent_bootstrap():
    rng = np.random.default_rng(7)
    first, second = rng.normal(3.5, 0.8, 40), rng.normal(2.5, 0.5, 25)
    per_text = {"paraphrase": {"a": dict(enumerate(first))}, "style_change": {"a": dict(enumerate(second))}}
    pooled = pool_transformations(kind="quality", candidates=["a"], per_text=per_text, k=1, seed=1, n_resamples=20000)
    reference = stats.bootstrap(
        (first, second),
        lambda x, y, axis=-1: (x.mean(axis=axis) + y.mean(axis=axis)) / 2,
        paired=False,
        n_resamples=20000,
        method="percentile",
        rng=np.random.default_rng(2),
    ).confidence_interval
    cell = pooled.overall["a"]
    assert cell.mean == pytest.approx((first.mean() + second.mean()) / 2)
    assert cell.ci_low == pytest.approx(reference.low, abs=0.02) and cell.ci_high == pytest.approx(
        reference.high, abs=0.02
    )


def test_a_candidate_missing_a_transformation_has_no_pooled_score():
    per_text = {"paraphrase": {"a": {0: 4}, "b": {0: 3}}, "style_change": {"a": {0: 4}}}
    pooled = pool_transformations(kind="quality", candidates=["a", "b"], per_text=per_text, k=1, seed=0)
    assert pooled.overall["b"].mean is None and pooled.ranking == ["a", "b"]
    assert pooled.top_k["style_change"] == ["a"] and pooled.crossings == []
    with pytest.raises(ValueError, match="at least two transformations"):
        pool_transformations(kind="quality", candidates=["a"], per_text={"paraphrase": {"a": {0: 1}}}, seed=0)
