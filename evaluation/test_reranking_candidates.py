"""The pure document side of reranking: distinct candidates, substitution into every list."""

from __future__ import annotations

import hashlib

from evaluation.reranking_candidates import (
    candidate_key,
    candidate_units,
    distinct_candidates,
    perturbed_candidate_lists,
)


def row(item_id, query, positive, negative, pk=0):
    return (item_id, {"query": query, "positive": positive, "negative": negative}, None, pk)


ROWS = [
    row("q1", "what is a cat", ["cats purr", "cats sleep"], ["dogs bark", "fish swim"], 1),
    row("q2", "what is a dog", ["dogs bark"], ["cats purr", "birds fly"], 2),
    row("q3", "what do fish do", ["fish swim"], ["dogs bark"], 3),
]


def test_the_key_is_the_first_32_hex_digits_of_the_texts_sha256():
    text = "Zellen teilen sich — ✓"
    assert candidate_key(text) == hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]
    assert len(candidate_key(text)) == 32


def test_each_distinct_candidate_is_one_work_unit_in_first_seen_order():
    found = distinct_candidates(ROWS)
    assert list(found.values()) == ["cats purr", "cats sleep", "dogs bark", "fish swim", "birds fly"]
    assert list(found) == [candidate_key(t) for t in found.values()]


def test_each_candidate_is_owned_by_the_first_row_that_lists_it():
    k = candidate_key
    assert candidate_units(ROWS) == {
        1: {
            k("cats purr"): "cats purr",
            k("cats sleep"): "cats sleep",
            k("dogs bark"): "dogs bark",
            k("fish swim"): "fish swim",
        },
        2: {k("birds fly"): "birds fly"},
    }


def test_a_rewrite_replaces_the_candidate_in_every_list_where_it_appears():
    outputs = {candidate_key("dogs bark"): (True, "canines yap"), candidate_key("cats purr"): (True, "felines hum")}
    result = perturbed_candidate_lists(ROWS, outputs)
    assert [p for _, p, _, _ in result.original] == [p for _, p, _, _ in ROWS]
    assert [(p["positive"], p["negative"]) for _, p, _, _ in result.transformed] == [
        (["felines hum", "cats sleep"], ["canines yap", "fish swim"]),
        (["canines yap"], ["felines hum", "birds fly"]),
        (["fish swim"], ["canines yap"]),
    ]
    assert [p["query"] for _, p, _, _ in result.transformed] == [p["query"] for _, p, _, _ in ROWS]
    assert (result.candidates_transformed, result.candidates_left_out, result.queries_left_out) == (2, 0, 0)


def test_a_failed_candidate_leaves_every_list_and_a_query_without_positives_leaves_both_scorings():
    outputs = {candidate_key("dogs bark"): (False, ""), candidate_key("fish swim"): (True, "trout glide")}
    result = perturbed_candidate_lists(ROWS, outputs)
    assert [i for i, _, _, _ in result.original] == [i for i, _, _, _ in result.transformed] == ["q1", "q3"]
    assert [(p["positive"], p["negative"]) for _, p, _, _ in result.original] == [
        (["cats purr", "cats sleep"], ["fish swim"]),
        (["fish swim"], []),
    ]
    assert [(p["positive"], p["negative"]) for _, p, _, _ in result.transformed] == [
        (["cats purr", "cats sleep"], ["trout glide"]),
        (["trout glide"], []),
    ]
    assert [pk for *_, pk in result.transformed] == [1, 3]
    assert (result.candidates_transformed, result.candidates_left_out, result.queries_left_out) == (1, 1, 1)
