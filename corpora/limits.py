"""Bounds on what reading an input may decode (pure module: no Django, no I/O).

A file's size says little about what it turns into: a Parquet file stores a repeated value once
(dictionary and run-length encoding) and compresses its pages, so a few kilobytes can describe
terabytes. The readers therefore measure every cell's *decoded* size from the encoded data (for
Parquet, from Arrow's offsets and dictionary indices, never from Python objects) and refuse the
input before turning it into Python objects when one cell, one row, the rows or the total pass the
bounds of a :class:`ReadLimits`.

A value's decoded size is the UTF-8 bytes of a text (the bytes of a binary value), the sum of its
members for a list or record (a record's keys included), and 8 bytes for anything else (a number,
a boolean, a date, a null); a cell counts at least 8 bytes, so a billion empty cells cannot pass
for nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from corpora.rows import DatasetFormatError, Problem

MIN_CELL_BYTES = 8

# What to do about each limit, for imports (the settings an administrator can raise).
IMPORT_REMEDIES = {
    "cell": "shorten that value (split a long document into passages), or ask an administrator to raise "
    "SHIFTLAB_MAX_CELL_KB",
    "row": "shorten that row's values, or ask an administrator to raise SHIFTLAB_MAX_ROW_KB",
    "rows": "split the data into smaller files, or ask an administrator to raise SHIFTLAB_MAX_ROWS",
    "total": "split it into smaller files, or raise SHIFTLAB_MAX_UNCOMPRESSED_MB if the server has the memory",
}


@dataclass(frozen=True)
class ReadLimits:
    """The most one read may decode (``None``: no bound): bytes of one cell, of one row, of every
    file of the read together, and how many rows. ``remedies`` says, per limit ("cell", "row",
    "rows", "total"), what the user can do about it."""

    max_cell_bytes: int | None = None
    max_row_bytes: int | None = None
    max_total_bytes: int | None = None
    max_rows: int | None = None
    remedies: Mapping[str, str] = field(default_factory=lambda: IMPORT_REMEDIES)

    def as_dict(self) -> dict[str, Any]:
        return {
            "max_cell_bytes": self.max_cell_bytes,
            "max_row_bytes": self.max_row_bytes,
            "max_total_bytes": self.max_total_bytes,
            "max_rows": self.max_rows,
            "remedies": dict(self.remedies),
        }


NO_LIMITS = ReadLimits()


def size_text(n_bytes: float) -> str:
    """``n_bytes`` for messages: "8.0 MB", "512 MB", "64 KB", "1.3 GB"."""
    if n_bytes >= 2**30:
        value, unit = n_bytes / 2**30, "GB"
    elif n_bytes >= 2**20:
        value, unit = n_bytes / 2**20, "MB"
    else:
        value, unit = n_bytes / 2**10, "KB"
    return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"


def value_size(value: Any) -> int:
    """The decoded size of a Python value (see the module docstring), without copying it."""
    if isinstance(value, str):
        return len(value) if value.isascii() else len(value.encode("utf-8", "surrogatepass"))
    if isinstance(value, bytes | bytearray):
        return len(value)
    if isinstance(value, list | tuple):
        return sum(value_size(v) for v in value)
    if isinstance(value, dict):
        return sum(value_size(k) + value_size(v) for k, v in value.items())
    return MIN_CELL_BYTES


class DecodeBudget:
    """What one read has decoded so far, checked against its :class:`ReadLimits`. One budget spans
    every file of a read (a folder of splits shares the total and the row count)."""

    def __init__(self, limits: ReadLimits | None) -> None:
        self.limits = limits or NO_LIMITS
        self.total = 0
        self.rows = 0

    def charge_row(self, source: str, line: int, fields: Mapping[str, Any]) -> None:
        """Count one row already parsed from text (CSV, JSON Lines, a hub record); raises
        ``DatasetFormatError`` naming the row and the cell when it passes a bound."""
        limits = self.limits
        row_bytes = 0
        for name, value in fields.items():
            size = max(value_size(value), MIN_CELL_BYTES)
            if limits.max_cell_bytes is not None and size > limits.max_cell_bytes:
                self._refuse(source, line, self.cell_message(name, size))
            row_bytes += size
        self._charge(source, line, row_bytes, 1)

    def charge_sizes(self, source: str, first_line: int, names: Sequence[str], sizes: Any) -> None:
        """Count a batch of rows from their cells' decoded sizes (a numpy array, one row per
        column name, one column per row) before they are materialised."""
        import numpy as np  # only Parquet files (pyarrow) use this

        limits = self.limits
        if sizes.size == 0:
            return
        sizes = np.maximum(sizes, MIN_CELL_BYTES)
        if limits.max_cell_bytes is not None:
            over = np.argwhere(sizes > limits.max_cell_bytes)
            if len(over):
                column, row = over[int(np.argmin(over[:, 1]))]
                self._refuse(source, first_line + int(row), self.cell_message(names[column], int(sizes[column, row])))
        row_sums = sizes.sum(axis=0)
        if limits.max_row_bytes is not None:
            over = np.flatnonzero(row_sums > limits.max_row_bytes)
            if len(over):
                row = int(over[0])
                self._refuse(source, first_line + row, self.row_message(int(row_sums[row])))
        if limits.max_rows is not None and self.rows + sizes.shape[1] > limits.max_rows:
            self._refuse(source, first_line + (limits.max_rows - self.rows), self.rows_message())
        if limits.max_total_bytes is not None:
            running = self.total + np.cumsum(row_sums)
            over = np.flatnonzero(running > limits.max_total_bytes)
            if len(over):
                self._refuse(source, first_line + int(over[0]), self.total_message())
        self.total += int(row_sums.sum())
        self.rows += sizes.shape[1]

    def _charge(self, source: str, line: int, row_bytes: int, rows: int) -> None:
        limits = self.limits
        if limits.max_row_bytes is not None and row_bytes > limits.max_row_bytes:
            self._refuse(source, line, self.row_message(row_bytes))
        self.rows += rows
        if limits.max_rows is not None and self.rows > limits.max_rows:
            self._refuse(source, line, self.rows_message())
        self.total += row_bytes
        if limits.max_total_bytes is not None and self.total > limits.max_total_bytes:
            self._refuse(source, line, self.total_message())

    def cell_message(self, column: Any, size: int) -> str:
        return (
            f"the value of column {str(column)!r} decodes to {size_text(size)}, over the "
            f"{size_text(self.limits.max_cell_bytes or 0)} limit per cell: {self._remedy('cell')}"
        )

    def row_message(self, size: int, *, at_least: bool = False) -> str:
        return (
            f"the row decodes to {'more than ' if at_least else ''}{size_text(size)}, over the "
            f"{size_text(self.limits.max_row_bytes or 0)} limit per row: {self._remedy('row')}"
        )

    def rows_message(self) -> str:
        return f"more than {self.limits.max_rows} rows, the most one read may hold: {self._remedy('rows')}"

    def total_message(self, *, at_row: bool = True) -> str:
        return (
            f"the data decode to more than {size_text(self.limits.max_total_bytes or 0)}"
            f"{' by this row' if at_row else ''}, the most one read may decode to: {self._remedy('total')}"
        )

    def _remedy(self, limit: str) -> str:
        return self.limits.remedies.get(limit, "")

    @staticmethod
    def _refuse(source: str, line: int | None, message: str) -> None:
        # A bomb is refused at its first excess: reading on to list more problems is what it wants.
        raise DatasetFormatError([Problem(source, line, message)])


class DictionarySizes:
    """The sizes of the dictionaries of the current and the previous batch of a file: a Parquet
    reader hands the same dictionary with every batch of a row group. Holding each dictionary keeps
    its buffers' addresses (the key) from being reused by another while it is remembered; older
    dictionaries are let go."""

    def __init__(self) -> None:
        self._previous: dict[tuple, tuple[Any, Any]] = {}
        self._current: dict[tuple, tuple[Any, Any]] = {}

    def sizes(self, dictionary: Any) -> Any:
        key = (
            tuple(buffer.address if buffer is not None else 0 for buffer in dictionary.buffers()),
            dictionary.offset,
            len(dictionary),
        )
        known = self._current.get(key) or self._previous.get(key)
        if known is None:
            known = (dictionary, arrow_cell_sizes(dictionary, self))
        self._current[key] = known
        return known[1]

    def next_batch(self) -> None:
        self._previous, self._current = self._current, {}


def arrow_cell_sizes(array: Any, dictionaries: DictionarySizes | None = None) -> Any:
    """The decoded size of each value of a pyarrow array (a numpy int64 array), computed from its
    offsets, list structure and dictionary indices: no value is copied or turned into Python.
    ``dictionaries`` remembers the sizes of dictionaries from one batch to the next."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = array.type
    n = len(array)
    if isinstance(array, pa.ChunkedArray):
        chunks = [arrow_cell_sizes(chunk, dictionaries) for chunk in array.chunks]
        return np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.int64)
    if isinstance(kind, pa.ExtensionType):
        return arrow_cell_sizes(array.storage, dictionaries)
    if pa.types.is_dictionary(kind):
        values = (
            dictionaries.sizes(array.dictionary) if dictionaries is not None else arrow_cell_sizes(array.dictionary)
        )
        if len(values) == 0:
            return np.zeros(n, dtype=np.int64)
        indices = array.indices
        if indices.null_count:
            indices = pc.fill_null(indices, 0)
        positions = np.asarray(indices.to_numpy(zero_copy_only=False), dtype=np.int64)
        sizes = values[np.clip(positions, 0, len(values) - 1)]
        if array.null_count:
            sizes[~np.asarray(array.is_valid().to_numpy(zero_copy_only=False), dtype=bool)] = 0
        return sizes
    if (
        pa.types.is_string(kind)
        or pa.types.is_binary(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_large_binary(kind)
    ):
        # Straight from the offsets buffer: a null's slot spans no bytes in what Arrow's readers build
        # (and would only be counted too high otherwise).
        width = np.int64 if pa.types.is_large_string(kind) or pa.types.is_large_binary(kind) else np.int32
        offsets = np.frombuffer(array.buffers()[1], dtype=width)[array.offset : array.offset + n + 1]
        return np.diff(offsets).astype(np.int64) if n else np.zeros(0, dtype=np.int64)
    if pa.types.is_fixed_size_binary(kind):
        return np.full(n, kind.byte_width, dtype=np.int64)
    if (
        pa.types.is_list(kind)
        or pa.types.is_large_list(kind)
        or pa.types.is_fixed_size_list(kind)
        or pa.types.is_map(kind)
    ):
        children = arrow_cell_sizes(pc.list_flatten(array), dictionaries)
        if len(children) == 0:
            return np.zeros(n, dtype=np.int64)
        parents = np.asarray(pc.list_parent_indices(array).to_numpy(zero_copy_only=False), dtype=np.int64)
        return np.bincount(parents, weights=children, minlength=n).astype(np.int64)
    if pa.types.is_struct(kind):
        sizes = np.zeros(n, dtype=np.int64)
        for index, child in enumerate(array.flatten()):
            sizes += arrow_cell_sizes(child, dictionaries) + len(kind.field(index).name.encode())
        return sizes
    if pa.types.is_union(kind):
        raise TypeError(f"a {kind} column cannot be imported")
    return np.full(n, MIN_CELL_BYTES, dtype=np.int64)
