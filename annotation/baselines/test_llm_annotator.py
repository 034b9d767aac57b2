"""An LLM as annotator: prompts without gold, strict answer parsers."""

from __future__ import annotations

import pytest

from annotation.baselines import llm_annotator as llm


def test_prompts_carry_instructions_texts_and_format_but_no_gold():
    messages = llm.sts_messages("Rate the pairs.", ("A cat sits.", "A cat is sitting."))
    assert messages[0]["role"] == "system"
    user = messages[1]["content"]
    assert "Rate the pairs." in user and "A cat sits." in user and "A cat is sitting." in user
    assert "0 to 5" in user
    labels = ["card_arrival", "lost_or_stolen_card"]
    user = llm.classification_messages("Pick a label.", ("Where is my card?",), labels)[1]["content"]
    assert "- card_arrival" in user and "- lost_or_stolen_card" in user
    user = llm.clustering_messages("Group them.", ["x", "y", "z"])[1]["content"]
    assert "1. x\n2. y\n3. z" in user
    user = llm.reranking_messages("Judge.", ("query", "cand"))[1]["content"]
    assert "Query: query" in user and "Candidate: cand" in user


@pytest.mark.parametrize(
    ("reply", "value"),
    [("3", 3.0), (" 4.5\n", 4.5), ("2.", 2.0), ("**5**", 5.0), ("`0.0`", 0.0), ("<think>hmm 9</think> 1.5", 1.5)],
)
def test_parse_sts_accepts_a_lone_number_on_the_scale(reply, value):
    assert llm.parse_sts(reply) == llm.Parsed(value=value)


@pytest.mark.parametrize("reply", ["", "5.5", "-1", "The score is 3", "3/5", "3 or 4", "three", "3.5 because"])
def test_parse_sts_rejects_anything_else(reply):
    parsed = llm.parse_sts(reply)
    assert not parsed.ok and parsed.value is None and parsed.error


def test_parse_label_is_exact_up_to_case_spacing_and_underscores():
    labels = ["card_arrival", "lost_or_stolen_card", "Refund"]
    assert llm.parse_label("card_arrival", labels).value == "card_arrival"
    assert llm.parse_label("Lost or stolen card.", labels).value == "lost_or_stolen_card"
    assert llm.parse_label("'refund'", labels).value == "Refund"
    for reply in ("card", "The label is card_arrival", "card_arrival, refund", ""):
        parsed = llm.parse_label(reply, labels)
        assert not parsed.ok and "not one of the 3 labels" in parsed.error


def test_parse_relevance():
    assert llm.parse_relevance("1").value == 1 and llm.parse_relevance(" 0.\n").value == 0
    for reply in ("yes", "2", "1 0", "relevant"):
        assert not llm.parse_relevance(reply).ok


def test_parse_clusters_needs_each_text_once():
    reply = "1: Weather\n2: sports\n\n3:  weather \n4) Food"
    assert llm.parse_clusters(reply, 4).value == ["weather", "sports", "weather", "food"]
    assert "no group name for text(s) 4" in llm.parse_clusters("1: a\n2: b\n3: a", 4).error
    assert not llm.parse_clusters("1: a\n1: b\n2: c", 3).ok
    assert not llm.parse_clusters("1: a\n5: b", 2).ok
    assert not llm.parse_clusters("Here are the groups:\n1: a\n2: b", 2).ok
