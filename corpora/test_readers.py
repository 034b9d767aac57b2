"""Unit tests of the file readers on real files: line splitting of JSONL, size limits of Parquet."""

import json
import re

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from corpora.parsing import OPTION_NAMES, DatasetFormatError, parse_tables
from corpora.readers import read_source

MB = 1024 * 1024


def test_jsonl_strings_with_unicode_line_separators_stay_whole(tmp_path):
    texts = ["A line\u2028separator.", "A paragraph\u2029separator.", "A next\u0085line."]
    path = tmp_path / "pairs.jsonl"
    body = "".join(json.dumps({"sentence1": t, "sentence2": "x", "score": 1}, ensure_ascii=False) + "\n" for t in texts)
    path.write_bytes((body + "{not json}\n").encode("utf-8"))
    with pytest.raises(DatasetFormatError) as exc:
        read_source(path)
    # The broken object is on line 4: the separators inside strings did not start new lines.
    assert str(exc.value).startswith(f"{path}, line 4: invalid JSON")
    path.write_bytes(body.encode("utf-8"))
    (table,) = read_source(path)
    assert [row.fields["sentence1"] for row in table.rows] == texts
    assert [row.line for row in table.rows] == [1, 2, 3]


def test_jsonl_with_crlf_line_ends_reads_clean_values(tmp_path):
    path = tmp_path / "pairs.jsonl"
    path.write_bytes(b'{"sentence1": "a", "score": 1}\r\n\r\n{"sentence1": "b", "score": 2}\r\n')
    (table,) = read_source(path)
    assert [(row.line, row.fields["sentence1"]) for row in table.rows] == [(1, "a"), (3, "b")]


def _compressible_parquet(path, *, rows: int, dictionary: bool) -> None:
    texts = pa.array(["The same long sentence, over and over again. " * 2] * rows)
    pq.write_table(pa.table({"sentence1": texts, "sentence2": texts}), path, use_dictionary=dictionary)


def test_parquet_over_the_limit_is_refused_from_its_metadata(tmp_path):
    path = tmp_path / "bomb.parquet"
    _compressible_parquet(path, rows=50_000, dictionary=False)
    assert path.stat().st_size < MB  # about 9 MB once decompressed
    with pytest.raises(DatasetFormatError) as exc:
        read_source(path, max_uncompressed_bytes=MB)
    message = str(exc.value)
    assert "holds 9.0 MB uncompressed (50000 rows), over the 1 MB limit" in message
    assert "SHIFTLAB_MAX_UNCOMPRESSED_MB" in message


def test_dictionary_encoded_parquet_is_stopped_while_decoding(tmp_path):
    # Dictionary encoding hides the repetition from the metadata's sizes: the decoded size counts.
    path = tmp_path / "dictionary.parquet"
    _compressible_parquet(path, rows=50_000, dictionary=True)
    assert pq.ParquetFile(path).metadata.row_group(0).total_byte_size < MB
    with pytest.raises(DatasetFormatError, match=r"decode to more than 1 MB .*SHIFTLAB_MAX_UNCOMPRESSED_MB"):
        read_source(path, max_uncompressed_bytes=MB)


def test_parquet_under_the_limit_reads_every_row(tmp_path):
    path = tmp_path / "small.parquet"
    _compressible_parquet(path, rows=3_000, dictionary=True)
    (table,) = read_source(path, max_uncompressed_bytes=MB)
    assert len(table.rows) == 3_000 and [r.line for r in table.rows[:2]] == [1, 2]
    assert table.rows[-1].line == 3_000 and table.rows[-1].fields["sentence2"].startswith("The same")


def test_headerless_file_names_the_line_it_quotes(tmp_path):
    # A headerless STS file read without column names: its first line is taken for the header.
    lines = ["A girl is styling her hair.,A girl is brushing her hair.,2.5", "A man plays.,A man sings.,1.0"]
    path = tmp_path / "stsb.csv"
    path.write_text("\n" + "\n".join(lines) + "\n", encoding="utf-8")  # a blank first line, too
    with pytest.raises(DatasetFormatError) as exc:
        parse_tables(read_source(path), task="sts")
    message = str(exc.value)
    match = re.fullmatch(rf"{re.escape(str(path))}, line (\d+): missing column\(s\) .* \(found: (.*)\)\. .*", message)
    named, quoted = int(match[1]), match[2]
    assert named == 2 and path.read_text(encoding="utf-8").split("\n")[named - 1] == quoted.replace(", ", ",")
    assert "--columns" in message and "--map FIELD=COLUMN" in message


def test_import_messages_speak_the_interface_s_language(tmp_path):
    path = tmp_path / "stsb.csv"
    path.write_text("a,b,1\n", encoding="utf-8")
    with pytest.raises(DatasetFormatError, match=r"stsb.csv, line 1: no rows below .* with the Columns field$"):
        parse_tables(read_source(path), task="sts", option_names=OPTION_NAMES["page"])
    path.write_text("a,b,1\nc,d,2\n", encoding="utf-8")
    with pytest.raises(DatasetFormatError) as exc:
        parse_tables(read_source(path), task="sts", option_names=OPTION_NAMES["page"])
    message = str(exc.value)
    assert "the Columns field" in message and "the Column mapping field (FIELD=COLUMN)" in message
    assert "--" not in message
    odd = tmp_path / "data.xlsx"
    odd.write_text("x", encoding="utf-8")
    with pytest.raises(DatasetFormatError, match="choose csv, tsv, jsonl or parquet in the Format field"):
        read_source(odd, option_names=OPTION_NAMES["page"])
