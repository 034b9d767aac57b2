"""The judge's pure parts: score parsing, bins, evaluation checked against scipy, degenerate judges."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from transforms.judging import (
    JUDGE_PROMPTS,
    SCALES,
    JudgeSpread,
    degenerate_judges,
    evaluate_judge,
    gold_bucket,
    judge_spread,
    parse_score,
    word_bin,
)


@pytest.mark.parametrize(
    "text,expected",
    [
        ("3.4", 3.4),
        ("Score: 4.5/5", 4.5),
        ("Similarity: 2.8 out of 5", 2.8),
        ("On a scale of 0 to 5, I'd give 3.", 3.0),
        ("On a 0-5 scale: 1.5", 1.5),
        ("4,5", 4.5),
        ("**5**", 5.0),
        ("0", 0.0),
        ("I'd rate it 7", None),
        ("five", None),
        ("", None),
        ("-2 then 3", 3.0),
    ],
)
def test_parse_score_takes_the_first_number_in_range(text, expected):
    assert parse_score(text, low=0, high=5) == expected


def test_parse_score_respects_the_lower_bound_of_quality():
    assert parse_score("0 then 4", low=1, high=5) == 4.0
    assert parse_score("0", low=1, high=5) is None


@given(st.floats(0, 5).map(lambda x: round(x, 1)))
def test_any_formatted_score_parses_back(value):
    assert parse_score(f"{value:.1f}", low=0, high=5) == pytest.approx(value)


def test_bins_follow_the_longer_sentence_and_gold_buckets():
    assert [word_bin(n) for n in (0, 4, 5, 9, 14, 19, 20, 80)] == [
        "[0,5)",
        "[0,5)",
        "[5,10)",
        "[5,10)",
        "[10,15)",
        "[15,20)",
        "20+",
        "20+",
    ]
    assert [gold_bucket(s) for s in (0, 0.99, 1, 3.5, 4, 5)] == ["[0,1)", "[0,1)", "[1,2)", "[3,4)", "[4,5]", "[4,5]"]


def test_prompts_cover_each_kind_and_name_both_texts():
    assert set(JUDGE_PROMPTS) == set(SCALES)
    for system, user in JUDGE_PROMPTS.values():
        assert "{text_a}" in user and "{text_b}" in user and system


def test_evaluation_matches_scipy_and_hand_computed_mae():
    rng = np.random.default_rng(0)
    gold = rng.uniform(0, 5, 60).round(1)
    predicted = (gold + rng.normal(0, 0.8, 60)).clip(0, 5).round(1)
    lengths = rng.integers(1, 30, 60)
    with_failures = [None if i % 10 == 0 else float(p) for i, p in enumerate(predicted)]
    result = evaluate_judge(list(gold), with_failures, list(lengths))
    kept = [i for i in range(60) if i % 10]
    assert result.n == 60 and result.n_parsed == 54 and result.parse_failure_rate == pytest.approx(0.1)
    assert result.spearman == pytest.approx(stats.spearmanr(gold[kept], predicted[kept]).statistic)
    short = [i for i in kept if lengths[i] < 5]
    if len(short) >= 3:
        assert result.by_length["[0,5)"].value == pytest.approx(
            stats.spearmanr(gold[short], predicted[short]).statistic
        )
    top = [i for i in kept if gold[i] >= 4]
    assert result.mae_by_gold["[4,5]"].n == len(top)
    assert result.mae_by_gold["[4,5]"].value == pytest.approx(np.mean(np.abs(gold[top] - predicted[top])))
    assert sum(b.n for b in result.by_length.values()) == 54


def test_undefined_correlations_are_none_not_nan():
    result = evaluate_judge([1.0, 2.0], [1.0, 2.0], [3, 3])
    assert result.spearman is None and result.by_length["[0,5)"] == type(result.by_length["[0,5)"])(2, None)
    constant = evaluate_judge([1.0, 2.0, 3.0], [2.0, 2.0, 2.0], [3, 3, 3])
    assert constant.spearman is None
    assert not any(isinstance(b.value, float) and math.isnan(b.value) for b in constant.by_length.values())


def test_a_judge_giving_one_score_to_every_text_is_degenerate_with_zero_variance():
    spread = judge_spread([4.0] * 12 + [None])
    assert spread == JudgeSpread(n=12, modal_score=4.0, modal_share=1.0, zero_variance=True, degenerate=True)


def test_a_modal_share_of_nine_tenths_is_degenerate_and_less_is_not():
    nearly = judge_spread([4, 4, 4, 4, 4, 4, 4, 4, 4, 3])
    assert nearly.degenerate and not nearly.zero_variance and nearly.modal_share == pytest.approx(0.9)
    assert not judge_spread([4, 4, 4, 4, 4, 4, 4, 4, 3, 5]).degenerate  # 80 %
    assert not judge_spread([1, 2, 3, 4, 5]).degenerate


def test_fewer_than_two_scores_are_never_degenerate():
    assert judge_spread([]) == JudgeSpread(0, None, None, False, False)
    assert judge_spread([None, None]).n == 0
    one = judge_spread([5.0])
    assert one.n == 1 and one.modal_share == 1.0 and not one.degenerate and not one.zero_variance


def test_degenerate_judges_lists_only_the_flagged_groups_with_their_n():
    rows = degenerate_judges({("default", "quality"): [4.0] * 5, ("default", "fluency"): [1.0, 3.0, 5.0, None]})
    assert rows == [
        {"judge": "default", "kind": "quality", "n": 5, "modal_score": 4.0, "modal_share": 1.0, "zero_variance": True}
    ]
