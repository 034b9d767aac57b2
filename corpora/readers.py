"""Read dataset files from disk into raw tables (I/O; validation happens in ``parsing``).

Supported: CSV, TSV, JSONL and Parquet files; a folder of ``<split>.<ext>`` files (e.g.
train.csv + test.csv); a BEIR retrieval folder (corpus.jsonl, queries.jsonl, qrels/<split>.tsv).
Text must be UTF-8 (a BOM is accepted).
"""

from __future__ import annotations

import csv
import io
import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

from core.nesting import NestingError, nesting_check
from corpora.parsing import OPTION_NAMES, OptionNames
from corpora.rows import DatasetFormatError, Problem, RawRow, RawTable

FORMATS = ("csv", "tsv", "jsonl", "parquet", "beir", "hf")
KNOWN_SPLITS = ("train", "dev", "validation", "test")
_EXTENSIONS = {
    ".csv": "csv",
    ".tsv": "tsv",
    ".txt": "tsv",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".parquet": "parquet",
}

csv.field_size_limit(sys.maxsize)


def read_source(
    path: Path | str,
    *,
    fmt: str | None = None,
    columns: Sequence[str] | None = None,
    split: str | None = None,
    max_uncompressed_bytes: int | None = None,
    option_names: OptionNames = OPTION_NAMES["command"],
) -> list[RawTable]:
    """Read a file or folder into raw tables. ``columns`` names the columns of headerless files.

    ``max_uncompressed_bytes`` bounds what a Parquet file may decode to (``None``: no bound);
    messages name the options as ``option_names`` says.
    """
    path = Path(path)
    if fmt is not None and fmt not in FORMATS:
        raise DatasetFormatError([Problem(str(path), None, f"unknown format {fmt!r}: use one of {', '.join(FORMATS)}")])
    if not path.exists():
        raise DatasetFormatError([Problem(str(path), None, "no such file or folder")])
    if path.is_dir():
        if fmt == "beir" or (path / "corpus.jsonl").exists():
            return read_beir(path)
        return _read_split_folder(
            path, fmt=fmt, columns=columns, max_uncompressed_bytes=max_uncompressed_bytes, option_names=option_names
        )
    return [
        read_table(
            path,
            fmt=fmt or detect_format(path, option_names=option_names),
            columns=columns,
            split=split,
            max_uncompressed_bytes=max_uncompressed_bytes,
        )
    ]


def detect_format(path: Path, *, option_names: OptionNames = OPTION_NAMES["command"]) -> str:
    fmt = _EXTENSIONS.get(path.suffix.lower())
    if fmt is None:
        raise DatasetFormatError(
            [
                Problem(
                    str(path),
                    None,
                    f"cannot tell the format from {path.suffix or 'no extension'!r}: "
                    + option_names.fmt.format(formats="csv, tsv, jsonl or parquet"),
                )
            ]
        )
    return fmt


def read_table(
    path: Path,
    *,
    fmt: str,
    columns: Sequence[str] | None = None,
    split: str | None = None,
    role: str = "rows",
    max_uncompressed_bytes: int | None = None,
) -> RawTable:
    source = str(path)
    header_line = None
    if fmt == "parquet":
        rows = _read_parquet(path, max_uncompressed_bytes=max_uncompressed_bytes)
    else:
        text = decode_utf8(path.read_bytes(), source)
        if fmt == "jsonl":
            rows = _read_jsonl(text, source)
        elif fmt in ("csv", "tsv"):
            rows, header_line = _read_delimited(text, source, delimiter="," if fmt == "csv" else "\t", columns=columns)
        else:
            raise DatasetFormatError([Problem(source, None, f"format {fmt!r} is not a single-file format")])
    return RawTable(source, role, split, rows, header_line)


def read_beir(path: Path) -> list[RawTable]:
    tables = []
    for name, role in (("corpus.jsonl", "corpus"), ("queries.jsonl", "queries")):
        if (path / name).exists():
            tables.append(read_table(path / name, fmt="jsonl", role=role))
    qrels_dir = path / "qrels"
    qrels_files = sorted(qrels_dir.glob("*.tsv")) if qrels_dir.is_dir() else sorted(path.glob("*.tsv"))
    for qrels in qrels_files:
        tables.append(read_table(qrels, fmt="tsv", split=qrels.stem, role="qrels"))
    return tables


def decode_utf8(data: bytes, source: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise DatasetFormatError(
            [Problem(source, line, f"not valid UTF-8 (byte 0x{data[exc.start]:02x}): re-save the file as UTF-8")]
        ) from None


def _read_split_folder(
    path: Path,
    *,
    fmt: str | None,
    columns: Sequence[str] | None,
    max_uncompressed_bytes: int | None,
    option_names: OptionNames,
) -> list[RawTable]:
    tables = []
    for child in sorted(path.iterdir()):
        if child.is_file() and child.stem in KNOWN_SPLITS and child.suffix.lower() in _EXTENSIONS:
            tables.append(
                read_table(
                    child,
                    fmt=fmt or detect_format(child, option_names=option_names),
                    columns=columns,
                    split=child.stem,
                    max_uncompressed_bytes=max_uncompressed_bytes,
                )
            )
    if not tables:
        raise DatasetFormatError(
            [
                Problem(
                    str(path),
                    None,
                    f"folder holds no split files: expected files named {', '.join(KNOWN_SPLITS)} "
                    "with a .csv/.tsv/.jsonl/.parquet extension, or a BEIR layout",
                )
            ]
        )
    return tables


def _read_delimited(
    text: str, source: str, *, delimiter: str, columns: Sequence[str] | None
) -> tuple[list[RawRow], int | None]:
    """The rows of a CSV/TSV text, and the line of its header (None when ``columns`` names them)."""
    # TSV benchmark files carry bare quote characters inside sentences: never treat them as quoting.
    quoting = csv.QUOTE_MINIMAL if delimiter == "," else csv.QUOTE_NONE
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, quoting=quoting)
    rows: list[RawRow] = []
    header: list[str] | None = list(columns) if columns else None
    header_line: int | None = None
    problems: list[Problem] = []
    previous_end = 0
    try:
        for values in reader:
            line = previous_end + 1
            previous_end = reader.line_num
            if not values or all(not v.strip() for v in values):
                continue
            if header is None:
                header, header_line = [v.strip() for v in values], line
                duplicates = sorted({h for h in header if header.count(h) > 1})
                if duplicates:
                    problems.append(Problem(source, line, f"header repeats column(s) {', '.join(duplicates)}"))
                continue
            if len(values) != len(header):
                problems.append(
                    Problem(source, line, f"expected {len(header)} fields ({', '.join(header)}), found {len(values)}")
                )
                continue
            rows.append(RawRow(source, line, dict(zip(header, values, strict=True))))
    except csv.Error as exc:
        problems.append(Problem(source, reader.line_num, f"malformed {'CSV' if delimiter == ',' else 'TSV'}: {exc}"))
    if problems:
        raise DatasetFormatError(problems)
    return rows, header_line


def _read_jsonl(text: str, source: str) -> list[RawRow]:
    rows: list[RawRow] = []
    problems: list[Problem] = []
    # JSON Lines ends lines with "\n" only: str.splitlines would also split inside strings holding
    # U+2028, U+2029, U+0085 and other characters Unicode counts as line ends.
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.removesuffix("\r")
        if not line.strip():
            continue
        try:
            nesting_check(line, "json")  # before json.loads, which recurses
            value = json.loads(line)
        except NestingError as exc:
            problems.append(Problem(source, number, exc.problem))
            continue
        except json.JSONDecodeError as exc:
            problems.append(Problem(source, number, f"invalid JSON: {exc.msg} (column {exc.colno})"))
            continue
        if not isinstance(value, dict):
            problems.append(Problem(source, number, f"each line must be a JSON object, found {type(value).__name__}"))
            continue
        rows.append(RawRow(source, number, value))
    if problems:
        raise DatasetFormatError(problems)
    return rows


def _read_parquet(path: Path, *, max_uncompressed_bytes: int | None) -> list[RawRow]:
    import pyarrow.parquet as pq  # heavy: loaded only when a Parquet file is read

    source = str(path)
    try:
        parquet = pq.ParquetFile(path)
        metadata = parquet.metadata
    except Exception as exc:  # pyarrow raises several unrelated types for unreadable files
        raise DatasetFormatError([Problem(source, None, f"not a readable Parquet file: {exc}")]) from None
    if max_uncompressed_bytes is not None:
        # Refuse from the metadata before decompressing anything...
        size = sum(metadata.row_group(i).total_byte_size for i in range(metadata.num_row_groups))
        if size > max_uncompressed_bytes:
            raise DatasetFormatError(
                [
                    Problem(
                        source,
                        None,
                        f"holds {megabytes(size)} uncompressed ({metadata.num_rows} rows), over the "
                        f"{megabytes(max_uncompressed_bytes)} limit{_LIMIT_HINT}",
                    )
                ]
            )
    # ...then count while decoding: dictionary and run-length encoding keep repeated values out of
    # the metadata's sizes, so a small file can still decode to far more than they say.
    rows: list[RawRow] = []
    decoded = 0
    for batch in _parquet_batches(parquet, source):
        decoded += batch.nbytes
        if max_uncompressed_bytes is not None and decoded > max_uncompressed_bytes:
            raise DatasetFormatError(
                [
                    Problem(
                        source,
                        None,
                        f"decodes to more than {megabytes(max_uncompressed_bytes)} "
                        f"({metadata.num_rows} rows){_LIMIT_HINT}",
                    )
                ]
            )
        # Parquet has no lines: a row's number (1-based) stands in for it in messages.
        rows += [RawRow(source, number, row) for number, row in enumerate(batch.to_pylist(), start=len(rows) + 1)]
    return rows


def _parquet_batches(parquet, source: str) -> Iterator:
    try:
        yield from parquet.iter_batches()
    except Exception as exc:  # as above: a file whose metadata reads can still hold broken pages
        raise DatasetFormatError([Problem(source, None, f"not a readable Parquet file: {exc}")]) from None


_LIMIT_HINT = ": split it into smaller files, or raise SHIFTLAB_MAX_UNCOMPRESSED_MB if the server has the memory"


def megabytes(n_bytes: int) -> str:
    """``n_bytes`` in MB (2**20 bytes) for messages: "500 MB", "1.5 MB"."""
    megabytes = n_bytes / 2**20
    return f"{megabytes:.0f} MB" if megabytes == int(megabytes) else f"{megabytes:.1f} MB"
