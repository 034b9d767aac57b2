"""Run summaries and the generator-selection comparison, on hand-computable cases."""

import numpy as np
import pytest

from core.stats import holm
from transforms.judging import summarize_run, summarize_scores
from transforms.selection import compare_kind


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
