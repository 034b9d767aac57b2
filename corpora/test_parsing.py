"""Unit tests of the pure parser and the file readers (no database)."""

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from corpora.parsing import DatasetFormatError, RawRow, RawTable, parse_tables
from corpora.readers import read_source


def table(rows, source="f.csv", role="rows", split=None):
    return RawTable(source, role, split, [RawRow(source, i + 2, r) for i, r in enumerate(rows)])


def problems_of(exc_info) -> str:
    return str(exc_info.value)


def test_sts_rows_become_items_with_float_gold_and_hashes():
    parsed = parse_tables([table([{"sentence1": "A cat.", "sentence2": "A dog.", "score": "1.5"}])], task="sts")
    (item,) = parsed.items
    assert item.payload == {"sentence1": "A cat.", "sentence2": "A dog."}
    assert item.gold == 1.5 and item.split == "test" and item.item_id == "1" and item.language == "en"
    assert set(item.text_hashes) == {"sentence1", "sentence2"}
    assert parsed.metadata["gold_min"] == parsed.metadata["gold_max"] == 1.5


def test_every_problem_names_file_and_line():
    rows = [
        {"sentence1": "ok", "sentence2": "fine", "score": "3"},
        {"sentence1": "", "sentence2": "x", "score": "2"},
        {"sentence1": "y", "sentence2": "z", "score": "nan"},
        {"sentence1": "y", "sentence2": "z", "score": "five"},
    ]
    with pytest.raises(DatasetFormatError) as exc:
        parse_tables([table(rows)], task="sts")
    message = problems_of(exc)
    assert "f.csv, line 3: 'sentence1' is empty" in message
    assert "f.csv, line 4: 'score' must be a finite number" in message
    assert "f.csv, line 5: 'score' must be a number, found 'five'" in message
    assert exc.value.total == 3


def test_missing_column_says_how_to_fix_it():
    with pytest.raises(DatasetFormatError) as exc:
        parse_tables([table([{"s1": "a", "s2": "b", "score": "1"}])], task="sts")
    assert "missing column(s) sentence1, sentence2" in problems_of(exc)
    assert "--columns" in problems_of(exc) and "--map" in problems_of(exc)


def test_field_map_reads_fields_from_other_columns():
    parsed = parse_tables(
        [
            table(
                [
                    {"text": "lost my card", "category": "card_lost", "split": "train"},
                    {"text": "card is gone", "category": "card_lost", "split": "test"},
                ]
            )
        ],
        task="classification",
        field_map={"label": "category"},
    )
    assert [i.gold for i in parsed.items] == ["card_lost", "card_lost"]
    assert parsed.splits == {"test": 1, "train": 1}


def test_duplicate_ids_are_rejected():
    rows = [{"id": "a", "sentence1": "x", "sentence2": "y", "score": "1"}] * 2
    with pytest.raises(DatasetFormatError, match="id 'a' appears 2 times"):
        parse_tables([table(rows)], task="sts")


def test_pair_classification_needs_binary_labels():
    with pytest.raises(DatasetFormatError, match="must be 0 or 1"):
        parse_tables([table([{"sentence1": "x", "sentence2": "y", "label": "2"}])], task="pair_classification")
    parsed = parse_tables([table([{"sentence1": "x", "sentence2": "y", "label": "true"}])], task="pair_classification")
    assert parsed.items[0].gold == 1


def test_pairs_accept_label_column_for_sts_and_score_column_for_pair_classification():
    sts = parse_tables([table([{"sentence1": "x", "sentence2": "y", "label": "4.2"}])], task="sts")
    assert sts.items[0].gold == 4.2
    pc = parse_tables([table([{"sentence1": "x", "sentence2": "y", "score": "0"}])], task="pair_classification")
    assert pc.items[0].gold == 0


def test_classification_without_train_split_is_refused():
    with pytest.raises(DatasetFormatError, match="needs a 'train' split"):
        parse_tables([table([{"text": "a", "label": "x"}])], task="classification")


def test_reranking_and_summarization_shapes():
    rr = parse_tables([table([{"query": "q", "positive": ["p"], "negative": ["n1", "n2"]}])], task="reranking")
    assert rr.items[0].payload["negative"] == ["n1", "n2"] and rr.metadata["n_candidates"] == 3
    with pytest.raises(DatasetFormatError, match="'positive' is an empty list"):
        parse_tables([table([{"query": "q", "positive": [], "negative": ["n"]}])], task="reranking")
    good = {"text": "t", "human_summaries": ["h"], "machine_summaries": ["m1", "m2"], "relevance": [1, 4.5]}
    assert parse_tables([table([good])], task="summarization").items[0].gold == [1.0, 4.5]
    with pytest.raises(DatasetFormatError, match="'relevance' has 1 scores but there are 2 machine summaries"):
        parse_tables([table([good | {"relevance": [3]}])], task="summarization")


def test_retrieval_checks_qrels_against_corpus_and_queries():
    corpus = table([{"_id": "d1", "title": "T", "text": "doc"}], "corpus.jsonl", "corpus")
    queries = table([{"_id": "q1", "text": "what?"}, {"_id": "q2", "text": "unjudged"}], "queries.jsonl", "queries")
    qrels = table([{"query-id": "q1", "corpus-id": "d1", "score": "1"}], "test.tsv", "qrels", split="test")
    parsed = parse_tables([corpus, queries, qrels], task="retrieval")
    kinds = sorted((i.kind, i.item_id, i.split) for i in parsed.items)
    assert kinds == [("document", "d1", "corpus"), ("example", "q1", "test")]
    assert [i.gold for i in parsed.items if i.kind == "example"] == [{"d1": 1.0}]
    bad = table([{"query-id": "q1", "corpus-id": "d9", "score": "1"}], "test.tsv", "qrels", split="test")
    with pytest.raises(DatasetFormatError, match="test.tsv, line 2: qrels names document 'd9'"):
        parse_tables([corpus, queries, bad], task="retrieval")
    # A qrels file with no usable row would import a corpus with no query at all.
    empty = table([], "test.tsv", "qrels", split="test")
    with pytest.raises(DatasetFormatError, match="test.tsv: no query has a relevance judgement"):
        parse_tables([corpus, queries, empty], task="retrieval")


def test_empty_input_is_an_error():
    with pytest.raises(DatasetFormatError, match="no rows found"):
        parse_tables([table([])], task="sts")


def test_unknown_task_lists_choices():
    with pytest.raises(ValueError, match="choose one of sts, str"):
        parse_tables([table([{"text": "x"}])], task="translation")


@given(st.permutations([f"sentence number {i}" for i in range(6)]))
def test_content_hash_ignores_row_order_but_not_content(order):
    rows = [{"id": s, "sentence1": s, "sentence2": s + "!", "score": "2"} for s in order]
    reference = [{"id": s, "sentence1": s, "sentence2": s + "!", "score": "2"} for s in sorted(order)]
    assert (
        parse_tables([table(rows)], task="sts").content_hash
        == parse_tables([table(reference)], task="sts").content_hash
    )
    changed = [dict(r) for r in reference]
    changed[0]["score"] = "2.5"
    assert (
        parse_tables([table(changed)], task="sts").content_hash
        != parse_tables([table(reference)], task="sts").content_hash
    )


# --- readers -----------------------------------------------------------------------------------


def test_headerless_csv_with_columns(tmp_path):
    path = tmp_path / "pairs.csv"
    path.write_text('"A man, a plan.",B,4.0\nC,"D ""quoted""",1\n', encoding="utf-8")
    (t,) = read_source(path, columns=["sentence1", "sentence2", "score"])
    assert [r.fields["sentence1"] for r in t.rows] == ["A man, a plan.", "C"]
    assert t.rows[1].fields["sentence2"] == 'D "quoted"' and t.rows[1].line == 2


def test_csv_with_wrong_field_count_names_the_line(tmp_path):
    path = tmp_path / "pairs.csv"
    path.write_text("sentence1,sentence2,score\na,b,1\nc,d\n", encoding="utf-8")
    with pytest.raises(DatasetFormatError, match=r"pairs.csv, line 3: expected 3 fields .* found 2"):
        read_source(path)


def test_multiline_csv_record_reports_its_first_line(tmp_path):
    path = tmp_path / "pairs.csv"
    path.write_text('sentence1,sentence2,score\n"a\nb",c,1\nd,e\n', encoding="utf-8")
    with pytest.raises(DatasetFormatError, match="line 4: expected 3 fields"):
        read_source(path)


def test_tsv_keeps_bare_quotes_inside_text(tmp_path):
    path = tmp_path / "pairs.tsv"
    path.write_text('sentence1\tsentence2\tscore\n"Hi," he said\tShe said "bye\t3\n', encoding="utf-8")
    (t,) = read_source(path)
    assert t.rows[0].fields == {"sentence1": '"Hi," he said', "sentence2": 'She said "bye', "score": "3"}


def test_non_utf8_file_names_the_line(tmp_path):
    path = tmp_path / "latin1.csv"
    path.write_bytes("sentence1,sentence2,score\nok,fine,1\ncaf\xe9,bar,2\n".encode("latin-1"))
    with pytest.raises(DatasetFormatError, match=r"latin1.csv, line 3: not valid UTF-8 \(byte 0xe9\)"):
        read_source(path)


def test_utf8_bom_is_accepted(tmp_path):
    path = tmp_path / "bom.csv"
    path.write_bytes("\ufeffsentence1,sentence2,score\na,b,1\n".encode())
    assert list(read_source(path)[0].rows[0].fields) == ["sentence1", "sentence2", "score"]


def test_jsonl_errors_name_the_line(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text('{"text": "a", "label": "x"}\n\n{"text": \n[1]\n', encoding="utf-8")
    with pytest.raises(DatasetFormatError) as exc:
        read_source(path)
    assert "x.jsonl, line 3: invalid JSON" in str(exc.value)
    assert "x.jsonl, line 4: each line must be a JSON object" in str(exc.value)


def test_parquet_rows_keep_lists(tmp_path):
    path = tmp_path / "rr.parquet"
    pq.write_table(pa.table({"query": ["q"], "positive": [["p"]], "negative": [["n1", "n2"]]}), path)
    parsed = parse_tables(read_source(path), task="reranking")
    assert parsed.items[0].payload == {"query": "q", "positive": ["p"], "negative": ["n1", "n2"]}


def test_split_folder_and_unknown_extension(tmp_path):
    (tmp_path / "train.jsonl").write_text(json.dumps({"text": "a", "label": "x"}) + "\n", encoding="utf-8")
    (tmp_path / "test.jsonl").write_text(json.dumps({"text": "b", "label": "x"}) + "\n", encoding="utf-8")
    (tmp_path / "notes.md").write_text("ignored", encoding="utf-8")
    assert sorted(t.split for t in read_source(tmp_path)) == ["test", "train"]
    odd = tmp_path / "data.xlsx"
    odd.write_text("x", encoding="utf-8")
    with pytest.raises(DatasetFormatError, match="pass --format"):
        read_source(odd)
    with pytest.raises(DatasetFormatError, match="no such file"):
        read_source(tmp_path / "missing.csv")
