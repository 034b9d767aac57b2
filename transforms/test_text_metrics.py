"""Tests of word tokens and distances (transforms.text_metrics)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transforms.text_metrics import normalized_edit_distance, word_count


@pytest.mark.parametrize(
    ("text", "count"),
    [
        ("", 0),
        ("   ", 0),
        ("The cat sat.", 3),
        ("The cat sat .", 3),  # a lone punctuation mark is no word
        ("state-of-the-art don't 3.5", 3),
        ("... \u2014 !!", 0),
        ("\u00c7ocuklar parkta oynuyordu.", 3),
        ("\u732b\u304c\u5ea7\u3063\u305f\u3002", 5),  # Japanese: one word per letter, the full stop is none
        ("\u6211\u7231\u4f60", 3),
        ("iPhone\u3092\u8cb7\u3063\u305f", 5),  # a Latin run, then 4 Japanese letters
        ("\u0e41\u0e21\u0e27\u0e19\u0e31\u0e48\u0e07", 5),  # Thai: 5 base letters, 2 marks attach to them
    ],
)
def test_word_count(text, count):
    assert word_count(text) == count


@pytest.mark.parametrize(
    ("a", "b", "distance"),
    [
        ("the cat sat", "the dog sat", 1 / 3),
        ("the cat sat", "the cat sat", 0.0),
        ("", "", 0.0),
        ("", "the cat", 1.0),
        ("the cat sat", "the black cat sat", 1 / 4),  # one insertion
        ("the cat sat", "the cat sat down here", 2 / 5),  # two insertions
        ("the cat sat", "cat sat", 1 / 3),  # one deletion
        ("the cat sat", "The cat sat", 1 / 3),  # case-sensitive
        ("the cat sat", "the cat sat.", 1 / 3),  # punctuation belongs to its word
        ("a b c d", "d c b a", 1.0),
        ("\u732b\u304c\u5ea7\u3063\u305f", "\u72ac\u304c\u5ea7\u3063\u305f", 1 / 5),
    ],
)
def test_normalized_edit_distance(a, b, distance):
    assert normalized_edit_distance(a, b) == pytest.approx(distance)


_WORDS = st.lists(st.sampled_from(["the", "cat", "sat", "on", "mat", "The", "mat.", "\u732b", "..."]), max_size=10)


@settings(max_examples=200, deadline=None)
@given(_WORDS.map(" ".join), _WORDS.map(" ".join))
def test_edit_distance_bounded_and_symmetric(a, b):
    d = normalized_edit_distance(a, b)
    assert 0.0 <= d <= 1.0
    assert d == normalized_edit_distance(b, a)
    assert normalized_edit_distance(a, a) == 0.0


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40), st.text(max_size=40))
def test_edit_distance_properties_on_any_text(a, b):
    d = normalized_edit_distance(a, b)
    assert 0.0 <= d <= 1.0
    assert d == normalized_edit_distance(b, a)
    assert word_count(a) >= 0
