"""Raw rows read from files, the items parsing makes of them, and reading one field of a row
(pure module: no Django, no I/O).

Every problem names the file, the line (or record) and what is wrong; a :class:`Problems`
collects all of a file's problems (up to a limit) so a user can fix them in one pass.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from core.errors import ShiftlabError
from core.hashing import sha256_json

MAX_REPORTED_PROBLEMS = 20
DEFAULT_SPLIT = "test"
CORPUS_SPLIT = "corpus"


@dataclass(frozen=True)
class Problem:
    source: str
    line: int | None
    message: str

    def __str__(self) -> str:
        where = f"{self.source}, line {self.line}" if self.line is not None else self.source
        return f"{where}: {self.message}"


class DatasetFormatError(ShiftlabError):
    """The input cannot be imported; nothing was written."""

    def __init__(self, problems: Sequence[Problem], total: int | None = None):
        self.problems = list(problems)
        self.total = total if total is not None else len(self.problems)
        lines = [str(p) for p in self.problems[:MAX_REPORTED_PROBLEMS]]
        if self.total > len(lines):
            lines.append(f"... and {self.total - len(lines)} more problems")
        super().__init__("\n".join(lines))


@dataclass(frozen=True)
class RawRow:
    source: str
    line: int
    fields: Mapping[str, Any]


@dataclass(frozen=True)
class RawTable:
    """Rows of one file. ``role`` is "rows" for ordinary files, or "corpus"/"queries"/"qrels"
    for the parts of a BEIR retrieval folder; ``split`` comes from the file name when known.
    ``header_line`` is the line a delimited file's column names were read from; without one the
    names are the first record's keys."""

    source: str
    role: str
    split: str | None
    rows: Sequence[RawRow]
    header_line: int | None = None


@dataclass(frozen=True)
class ParsedItem:
    split: str
    kind: str  # "example", or "document" for a retrieval corpus entry
    item_id: str
    payload: dict[str, Any]
    gold: Any
    language: str
    text_hashes: dict[str, str] = field(default_factory=dict)

    @property
    def content_hash(self) -> str:
        return sha256_json(
            {
                "split": self.split,
                "kind": self.kind,
                "item_id": self.item_id,
                "payload": self.payload,
                "gold": self.gold,
                "language": self.language,
            }
        )


class Problems:
    """The problems found so far, the first ``MAX_REPORTED_PROBLEMS`` of them kept."""

    def __init__(self) -> None:
        self.problems: list[Problem] = []
        self.total = 0

    def add(self, row: RawRow | None, message: str, *, source: str | None = None, line: int | None = None) -> None:
        self.total += 1
        if len(self.problems) < MAX_REPORTED_PROBLEMS:
            self.problems.append(
                Problem(row.source if row else (source or "input"), row.line if row else line, message)
            )

    def raise_if_any(self) -> None:
        if self.total:
            raise DatasetFormatError(self.problems, self.total)


def text_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and math.isnan(value):
        return ""
    return str(value).strip()


def required_text(row: RawRow, name: str, problems: Problems) -> str:
    value = row.fields.get(name)
    if value is not None and not isinstance(value, str | int | float):
        problems.add(row, f"'{name}' must be text, found {type(value).__name__}")
        return ""
    text = text_value(value)
    if not text:
        problems.add(row, f"'{name}' is empty")
    return text


def number_value(row: RawRow, name: str, value: Any, problems: Problems) -> float | None:
    if isinstance(value, bool):
        problems.add(row, f"'{name}' must be a number, found {value!r}")
        return None
    if isinstance(value, int | float):
        number = float(value)
    else:
        try:
            number = float(text_value(value))
        except ValueError:
            problems.add(row, f"'{name}' must be a number, found {text_value(value)!r}")
            return None
    if not math.isfinite(number):
        problems.add(row, f"'{name}' must be a finite number, found {value!r}")
        return None
    return number


def binary_label(row: RawRow, value: Any, problems: Problems) -> int | None:
    text = text_value(value).lower()
    mapping = {"0": 0, "1": 1, "0.0": 0, "1.0": 1, "false": 0, "true": 1}
    if text not in mapping:
        problems.add(row, f"'label' must be 0 or 1 for pair classification, found {text_value(value)!r}")
        return None
    return mapping[text]


def list_value(row: RawRow, name: str, problems: Problems) -> list[Any] | None:
    value = row.fields.get(name)
    if value is None:
        problems.add(row, f"'{name}' is missing")
        return None
    if hasattr(value, "tolist"):  # numpy arrays from Parquet files
        value = value.tolist()
    if not isinstance(value, list):
        problems.add(row, f"'{name}' must be a list, found {type(value).__name__}")
        return None
    return value


def text_list(row: RawRow, name: str, problems: Problems, *, allow_empty: bool) -> list[str]:
    values = list_value(row, name, problems)
    if values is None:
        return []
    texts = [text_value(v) if isinstance(v, str) else "" for v in values]
    if any(not t for t in texts):
        problems.add(row, f"'{name}' holds an empty or non-text entry")
    if not texts and not allow_empty:
        problems.add(row, f"'{name}' is an empty list")
    return texts


def number_list(row: RawRow, name: str, problems: Problems) -> list[float] | None:
    values = list_value(row, name, problems)
    if values is None:
        return None
    numbers = [number_value(row, name, v, problems) for v in values]
    if any(n is None for n in numbers):
        return None
    return [float(n) for n in numbers if n is not None]
