"""A researcher's control pool file: accepted pairs and line-numbered problems."""

import json

import pytest

from annotation.kinds import ItemKind
from annotation.studies.control_pool import control_pool_read
from corpora.parsing import DatasetFormatError


def test_jsonl_and_csv_pools_are_read(tmp_path):
    jsonl = tmp_path / "pool.jsonl"
    rows = [
        {"text_a": "Can you call me back later?", "text_b": "Please ring me again later.", "kind": "easy_positive"},
        {
            "text_a": "The bridge opens in May.",
            "text_b": "Die Katze schläft auf dem Sofa.",
            "kind": "easy_negative",
            "language_a": "EN",
            "language_b": "de",
        },
    ]
    jsonl.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    (positive, first), (negative, second) = control_pool_read(jsonl)
    assert (positive, first.text_a, first.language_a, first.origin) == (
        ItemKind.EASY_POSITIVE,
        "Can you call me back later?",
        "",
        "pool",
    )
    assert (negative, second.language_a, second.language_b) == (ItemKind.EASY_NEGATIVE, "en", "de")
    csv = tmp_path / "pool.csv"
    csv.write_text('text_a,text_b,kind\n"Rain, then sun.",Showers followed by sunshine.,easy_positive\n')
    assert control_pool_read(csv)[0][1].text_a == "Rain, then sun."


def test_every_problem_is_reported_with_its_line(tmp_path):
    path = tmp_path / "pool.jsonl"
    lines = [
        {"text_a": "Fine pair here.", "text_b": "A good pair there.", "kind": "easy_positive"},
        {"text_a": "The cat sat.", "text_b": "the cat sat", "kind": "easy_positive"},
        {"text_a": "A", "text_b": "B", "kind": "positive"},
        {"text_a": "", "text_b": "B", "kind": "easy_negative"},
        {"text_a": "One.", "text_b": "Two.", "kind": "easy_negative", "language_a": "en"},
        {"txt_a": "One.", "text_b": "Two.", "kind": "easy_negative"},
        {"text_a": "Fine pair here.", "text_b": "A good pair there.", "kind": "easy_positive"},
    ]
    path.write_text("\n".join(json.dumps(r) for r in lines) + "\nnot json\n")
    with pytest.raises(DatasetFormatError) as raised:
        control_pool_read(path)
    message = str(raised.value)
    assert "line 8: invalid JSON" in message  # the reader stops at unreadable lines first
    path.write_text("\n".join(json.dumps(r) for r in lines) + "\n")
    with pytest.raises(DatasetFormatError) as raised:
        control_pool_read(path)
    problems = {p.line: p.message for p in raised.value.problems}
    assert sorted(problems) == [2, 3, 4, 5, 6, 7]
    assert "only in punctuation or case" in problems[2]
    assert "kind must be easy_positive or easy_negative" in problems[3]
    assert "text_a must not be empty" in problems[4]
    assert "both language_a and language_b" in problems[5]
    assert "unknown column(s) txt_a" in problems[6]
    assert "same pair as line 1" in problems[7]


def test_unusable_files_are_refused(tmp_path):
    with pytest.raises(DatasetFormatError, match="no such control pool file"):
        control_pool_read(tmp_path / "missing.jsonl")
    empty = tmp_path / "empty.csv"
    empty.write_text("text_a,text_b,kind\n")
    with pytest.raises(DatasetFormatError, match="holds no pairs"):
        control_pool_read(empty)
    short = tmp_path / "short.csv"
    short.write_text("text_a,text_b,kind\nonly two,fields\n")
    with pytest.raises(DatasetFormatError, match="line 2: expected 3 fields"):
        control_pool_read(short)
