"""Read dataset files from disk into raw tables (I/O; validation happens in ``parsing``).

Supported: CSV, TSV, JSONL and Parquet files; a folder of ``<split>.<ext>`` files (e.g.
train.csv + test.csv); a BEIR retrieval folder (corpus.jsonl, queries.jsonl, qrels/<split>.tsv).
Text must be UTF-8 (a BOM is accepted).

Every read is bounded by a :class:`corpora.limits.ReadLimits`: a cell, a row, the rows and the
total are measured as they decode and the input is refused before it becomes Python objects
(docs/configuration.md, "Uploads and import limits").
"""

from __future__ import annotations

import csv
import json
import re
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

from core.nesting import NestingError, loads_json
from corpora.limits import DecodeBudget, DictionarySizes, ReadLimits, arrow_cell_sizes, size_text
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

csv.field_size_limit(sys.maxsize)  # a long cell is refused by the ReadLimits, with its size and row
# Rows decoded at a time from a Parquet file: each batch is measured (from its dictionary indices and
# offsets, a few bytes a row) before its values are decoded and become Python objects.
PARQUET_BATCH_ROWS = 65_536
PARQUET_BATCH_BYTES = 64 * 2**20


def read_source(
    path: Path | str,
    *,
    fmt: str | None = None,
    columns: Sequence[str] | None = None,
    split: str | None = None,
    max_uncompressed_bytes: int | None = None,
    option_names: OptionNames = OPTION_NAMES["command"],
    limits: ReadLimits | None = None,
    label: str | None = None,
) -> list[RawTable]:
    """Read a file or folder into raw tables. ``columns`` names the columns of headerless files.

    ``limits`` bounds what the read may decode (``max_uncompressed_bytes`` alone: the total only;
    neither: no bound); messages name the options as ``option_names`` says, and the input as
    ``label`` says (default: its path; the files of a folder by their names below it, after the
    label if it is not empty), so that an upload's messages never show where the server keeps it.
    """
    path = Path(path)
    name = str(path) if label is None else label
    if fmt is not None and fmt not in FORMATS:
        raise DatasetFormatError([Problem(name, None, f"unknown format {fmt!r}: use one of {', '.join(FORMATS)}")])
    if not path.exists():
        raise DatasetFormatError([Problem(name, None, "no such file or folder")])
    budget = DecodeBudget(limits if limits is not None else ReadLimits(max_total_bytes=max_uncompressed_bytes))
    if path.is_dir():
        if fmt == "beir" or (path / "corpus.jsonl").exists():
            return read_beir(path, budget=budget, label=label)
        return _read_split_folder(path, fmt=fmt, columns=columns, budget=budget, label=label, option_names=option_names)
    return [
        read_table(
            path,
            fmt=fmt or detect_format(path, option_names=option_names, label=name),
            columns=columns,
            split=split,
            budget=budget,
            label=name,
        )
    ]


def _inner_name(folder: Path, path: Path, label: str | None) -> str:
    """How messages name ``path``, a file in the folder read as ``label``."""
    if label is None:
        return str(path)
    inner = path.relative_to(folder).as_posix()
    return f"{label}/{inner}" if label else inner


def detect_format(path: Path, *, option_names: OptionNames = OPTION_NAMES["command"], label: str | None = None) -> str:
    fmt = _EXTENSIONS.get(path.suffix.lower())
    if fmt is None:
        raise DatasetFormatError(
            [
                Problem(
                    str(path) if label is None else label,
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
    limits: ReadLimits | None = None,
    budget: DecodeBudget | None = None,
    label: str | None = None,
) -> RawTable:
    """One file's rows. ``budget`` (shared by the files of one read), else ``limits``, else
    ``max_uncompressed_bytes`` bounds what it may decode; messages name it ``label`` (default: its path)."""
    source = str(path) if label is None else label
    if budget is None:
        budget = DecodeBudget(limits if limits is not None else ReadLimits(max_total_bytes=max_uncompressed_bytes))
    header_line = None
    if fmt == "parquet":
        rows = _read_parquet(path, source=source, budget=budget)
    else:
        text = decode_utf8(_read_text_bytes(path, source, budget), source)
        if fmt == "jsonl":
            rows = _read_jsonl(text, source, budget)
        elif fmt in ("csv", "tsv"):
            rows, header_line = _read_delimited(
                text, source, delimiter="," if fmt == "csv" else "\t", columns=columns, budget=budget
            )
        else:
            raise DatasetFormatError([Problem(source, None, f"format {fmt!r} is not a single-file format")])
    return RawTable(source, role, split, rows, header_line)


def read_beir(path: Path, *, budget: DecodeBudget | None = None, label: str | None = None) -> list[RawTable]:
    budget = budget or DecodeBudget(None)
    tables = []
    for name, role in (("corpus.jsonl", "corpus"), ("queries.jsonl", "queries")):
        if (path / name).exists():
            tables.append(
                read_table(
                    path / name, fmt="jsonl", role=role, budget=budget, label=_inner_name(path, path / name, label)
                )
            )
    qrels_dir = path / "qrels"
    qrels_files = sorted(qrels_dir.glob("*.tsv")) if qrels_dir.is_dir() else sorted(path.glob("*.tsv"))
    for qrels in qrels_files:
        tables.append(
            read_table(
                qrels,
                fmt="tsv",
                split=qrels.stem,
                role="qrels",
                budget=budget,
                label=_inner_name(path, qrels, label),
            )
        )
    return tables


def _read_text_bytes(path: Path, source: str, budget: DecodeBudget) -> bytes:
    """The bytes of a text file, refused by its size before it is read when they alone pass what
    is left of the read's total."""
    limit = budget.limits.max_total_bytes
    if limit is not None:
        size = path.stat().st_size
        if budget.total + size > limit:
            raise DatasetFormatError(
                [Problem(source, None, f"the file has {size_text(size)}: {budget.total_message(at_row=False)}")]
            )
    return path.read_bytes()


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
    budget: DecodeBudget,
    label: str | None,
    option_names: OptionNames,
) -> list[RawTable]:
    tables = []
    for child in sorted(path.iterdir()):
        if child.is_file() and child.stem in KNOWN_SPLITS and child.suffix.lower() in _EXTENSIONS:
            name = _inner_name(path, child, label)
            tables.append(
                read_table(
                    child,
                    fmt=fmt or detect_format(child, option_names=option_names, label=name),
                    columns=columns,
                    split=child.stem,
                    budget=budget,
                    label=name,
                )
            )
    if not tables:
        raise DatasetFormatError(
            [
                Problem(
                    str(path) if label is None else (label or "the upload"),
                    None,
                    f"folder holds no split files: expected files named {', '.join(KNOWN_SPLITS)} "
                    "with a .csv/.tsv/.jsonl/.parquet extension, or a BEIR layout",
                )
            ]
        )
    return tables


def _read_delimited(
    text: str, source: str, *, delimiter: str, columns: Sequence[str] | None, budget: DecodeBudget | None = None
) -> tuple[list[RawRow], int | None]:
    """The rows of a CSV/TSV text, and the line of its header (None when ``columns`` names them)."""
    # TSV benchmark files carry bare quote characters inside sentences: never treat them as quoting.
    quoting = csv.QUOTE_MINIMAL if delimiter == "," else csv.QUOTE_NONE
    lines = _RecordLines(text, budget)
    reader = csv.reader(lines, delimiter=delimiter, quoting=quoting)
    rows: list[RawRow] = []
    header: list[str] | None = list(columns) if columns else None
    header_line: int | None = None
    problems: list[Problem] = []
    previous_end = 0
    try:
        for values in reader:
            lines.pending = 0
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
            fields = dict(zip(header, values, strict=True))
            if budget is not None:
                budget.charge_row(source, line, fields)
            rows.append(RawRow(source, line, fields))
    except csv.Error as exc:
        problems.append(Problem(source, reader.line_num, f"malformed {'CSV' if delimiter == ',' else 'TSV'}: {exc}"))
    except _RecordTooLong as exc:
        assert budget is not None  # only a budget's row limit stops a record
        raise DatasetFormatError(
            [Problem(source, previous_end + 1, budget.row_message(exc.characters // 2, at_least=True))]
        ) from None
    if problems:
        raise DatasetFormatError(problems)
    return rows, header_line


class _RecordLines:
    """The lines of a delimited text for ``csv.reader`` (split as a file opened with ``newline=""``
    splits them), refusing a record whose text alone shows it passes the row limit before the csv
    module builds its fields (it holds a field being read at four bytes a character). Every two
    characters of a record decode to at least one byte (a doubled quote is one; a delimiter starts a
    field that counts 8), so a record of more than twice the limit's characters is over it."""

    _LINE_END = re.compile(r"\r\n|\r|\n")

    def __init__(self, text: str, budget: DecodeBudget | None) -> None:
        self.text = text
        limit = budget.limits.max_row_bytes if budget is not None else None
        self.most = None if limit is None else 2 * limit + 2
        self.pending = 0  # characters handed over since the last record came out

    def __iter__(self) -> Iterator[str]:
        text, start = self.text, 0
        for match in self._LINE_END.finditer(text):
            yield self._line(start, match.end())
            start = match.end()
        if start < len(text):
            yield self._line(start, len(text))

    def _line(self, start: int, end: int) -> str:
        self.pending += end - start
        if self.most is not None and self.pending > self.most:
            raise _RecordTooLong(self.pending)
        return self.text[start:end]


class _RecordTooLong(Exception):
    def __init__(self, characters: int) -> None:
        super().__init__(characters)
        self.characters = characters


def _read_jsonl(text: str, source: str, budget: DecodeBudget | None = None) -> list[RawRow]:
    rows: list[RawRow] = []
    problems: list[Problem] = []
    # JSON Lines ends lines with "\n" only: str.splitlines would also split inside strings holding
    # U+2028, U+2029, U+0085 and other characters Unicode counts as line ends.
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.removesuffix("\r")
        if not line.strip():
            continue
        try:
            value = loads_json(line)  # nesting checked before json.loads, which recurses
        except NestingError as exc:
            problems.append(Problem(source, number, exc.problem))
            continue
        except json.JSONDecodeError as exc:
            problems.append(Problem(source, number, f"invalid JSON: {exc.msg} (column {exc.colno})"))
            continue
        if not isinstance(value, dict):
            problems.append(Problem(source, number, f"each line must be a JSON object, found {type(value).__name__}"))
            continue
        if budget is not None:
            budget.charge_row(source, number, value)
        rows.append(RawRow(source, number, value))
    if problems:
        raise DatasetFormatError(problems)
    return rows


def _read_parquet(path: Path, *, source: str, budget: DecodeBudget) -> list[RawRow]:
    """The rows of a Parquet file, measured batch by batch before they become Python objects.

    Text and binary columns are read as dictionaries (a value stored once stays once in memory, as
    in the file), and each batch's cells are sized from their offsets and dictionary indices:
    dictionary, run-length and compression bombs are refused after decoding a batch's indices,
    never its values. The metadata's sizes are the writer's claims and only refuse early."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute  # noqa: F401 (pa.compute)
    import pyarrow.parquet as pq  # heavy: loaded only when a Parquet file is read

    limits = budget.limits
    try:
        schema = pq.ParquetFile(path).schema
        text_columns = [
            schema.column(i).path for i in range(len(schema)) if schema.column(i).physical_type == "BYTE_ARRAY"
        ]
        parquet = pq.ParquetFile(path, read_dictionary=text_columns)
        metadata = parquet.metadata
    except MemoryError:
        raise  # not the file's fault alone: the caller names the memory ceiling
    except Exception as exc:  # pyarrow raises several unrelated types for unreadable files
        raise DatasetFormatError(
            [Problem(source, None, f"not a readable Parquet file: {_scrubbed(exc, path, source)}")]
        ) from None
    if limits.max_total_bytes is not None:
        # Refuse from the metadata before decompressing anything...
        size = sum(metadata.row_group(i).total_byte_size for i in range(metadata.num_row_groups))
        if budget.total + size > limits.max_total_bytes:
            raise DatasetFormatError(
                [
                    Problem(
                        source,
                        None,
                        f"holds {megabytes(size)} uncompressed ({metadata.num_rows} rows), over the "
                        f"{megabytes(limits.max_total_bytes)} limit{_LIMIT_HINT}",
                    )
                ]
            )
    if limits.max_rows is not None and budget.rows + metadata.num_rows > limits.max_rows:
        raise DatasetFormatError([Problem(source, None, f"holds {metadata.num_rows} rows: {budget.rows_message()}")])
    _check_parquet_chunks(metadata, source, budget)
    # ...then measure while decoding: dictionary and run-length encoding keep repeated values out
    # of the metadata's sizes, so a small file can still decode to far more than they say.
    rows: list[RawRow] = []
    dictionaries = DictionarySizes()
    for batch in _parquet_batches(parquet, path, source):
        dictionaries.next_batch()
        try:
            sizes = [arrow_cell_sizes(column, dictionaries) for column in batch.columns]
        except TypeError as exc:
            raise DatasetFormatError([Problem(source, None, str(exc))]) from None
        if sizes:
            budget.charge_sizes(source, len(rows) + 1, batch.schema.names, np.stack(sizes))
        # Within the bounds: decoding the batch's own values (faster to turn into Python than a dictionary).
        columns = [
            pa.compute.cast(c, c.type.value_type) if pa.types.is_dictionary(c.type) else c for c in batch.columns
        ]
        values = pa.RecordBatch.from_arrays(columns, names=batch.schema.names).to_pylist()
        # Parquet has no lines: a row's number (1-based) stands in for it in messages.
        rows += [RawRow(source, number, row) for number, row in enumerate(values, start=len(rows) + 1)]
    return rows


def _check_parquet_chunks(metadata, source: str, budget: DecodeBudget) -> None:
    """Refuse, from the metadata, a file whose sizes prove a cell or a row over its bound: a column
    chunk holding more bytes than its values could if each were within the cell limit (4 bytes of
    each value's length prefix allowed for), or a row group more than its rows could. A page is
    decompressed whole before any of its values can be measured, so this is the only check that
    comes before a compressed page of one huge value is inflated (a lying writer meets the
    decoding checks and the import's memory ceiling instead)."""
    limits = budget.limits
    remedies = limits.remedies
    for group in range(metadata.num_row_groups):
        info = metadata.row_group(group)
        if limits.max_row_bytes is not None and info.total_byte_size > info.num_rows * limits.max_row_bytes + 2**16:
            message = (
                f"{info.num_rows} rows hold {size_text(info.total_byte_size)}, so at least one is over the "
                f"{size_text(limits.max_row_bytes)} limit per row: {remedies.get('row', '')}"
            )
            raise DatasetFormatError([Problem(source, None, message)])
        if limits.max_cell_bytes is None:
            continue
        for index in range(info.num_columns):
            chunk = info.column(index)
            if chunk.total_uncompressed_size > chunk.num_values * (limits.max_cell_bytes + 4) + 2**16:
                message = (
                    f"column {chunk.path_in_schema.split('.')[0]!r} holds {size_text(chunk.total_uncompressed_size)} "
                    f"in {chunk.num_values} values, so at least one is over the {size_text(limits.max_cell_bytes)} "
                    f"limit per cell: {remedies.get('cell', '')}"
                )
                raise DatasetFormatError([Problem(source, None, message)])


def _parquet_batches(parquet, path: Path, source: str) -> Iterator:
    """The file's rows, batch by batch. A row group whose metadata says its rows are large is read
    a few rows at a time, so that the pages decompressed for one batch stay near
    ``PARQUET_BATCH_BYTES`` (pages are decompressed whole, before any value can be measured)."""
    metadata = parquet.metadata
    try:
        for group in range(metadata.num_row_groups):
            info = metadata.row_group(group)
            row_bytes = max(1, info.total_byte_size // max(1, info.num_rows))
            batch_rows = max(1, min(PARQUET_BATCH_ROWS, PARQUET_BATCH_BYTES // row_bytes))
            yield from parquet.iter_batches(batch_size=batch_rows, row_groups=[group], use_threads=False)
    except MemoryError:
        raise
    except Exception as exc:  # as above: a file whose metadata reads can still hold broken pages
        raise DatasetFormatError(
            [Problem(source, None, f"not a readable Parquet file: {_scrubbed(exc, path, source)}")]
        ) from None


def _scrubbed(exc: Exception, path: Path, source: str) -> str:
    """pyarrow's message for ``exc`` with the file's path on the server replaced by its name."""
    text = str(exc)
    for where in (str(path.resolve()), str(path)):
        text = text.replace(where, source)
    return text


_LIMIT_HINT = ": split it into smaller files, or raise SHIFTLAB_MAX_UNCOMPRESSED_MB if the server has the memory"


def megabytes(n_bytes: int) -> str:
    """``n_bytes`` in MB (2**20 bytes) for messages: "500 MB", "1.5 MB"."""
    megabytes = n_bytes / 2**20
    return f"{megabytes:.0f} MB" if megabytes == int(megabytes) else f"{megabytes:.1f} MB"
