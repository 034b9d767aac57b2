"""Turn raw rows read from files into validated dataset items (pure module: no Django, no I/O).

Every problem names the file, the line (or record) and what is wrong; all problems of a file are
collected (up to a limit) so a user can fix them in one pass.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core.hashing import sha256_json, sha256_text
from corpora.layouts import BEIR, ROW_LAYOUTS, has_alias, parse_beir
from corpora.rows import (
    DEFAULT_SPLIT,
    DatasetFormatError,
    ParsedItem,
    Problem,
    Problems,
    RawRow,
    RawTable,
    text_value,
)
from corpora.task_types import TaskSpec, TaskType, task_spec


@dataclass(frozen=True)
class OptionNames:
    """What the interface running an import calls its options (and deleting a dataset), so that a
    message says what to change where the user is: a flag of the command, a field of the page or
    of the API."""

    columns: str
    field_map: str
    fmt: str  # "{formats}" stands for the formats to choose from
    delete: str  # "{name}" stands for the dataset's name


OPTION_NAMES = {
    "command": OptionNames(
        columns="--columns",
        field_map="--map FIELD=COLUMN",
        fmt="pass --format {formats}",
        delete="python manage.py corpora delete {name}",
    ),
    "page": OptionNames(
        columns="the Columns field",
        field_map="the Column mapping field (FIELD=COLUMN)",
        fmt="choose {formats} in the Format field",
        delete="with the Delete link on its page",
    ),
    "api": OptionNames(
        columns='"columns"',
        field_map='"field_map" ({"FIELD": "COLUMN"})',
        fmt='give "format": {formats}',
        delete="DELETE /api/datasets/{name}/",
    ),
}


@dataclass(frozen=True)
class ParsedDataset:
    task: TaskType
    items: list[ParsedItem]
    metadata: dict[str, Any]

    @property
    def splits(self) -> dict[str, int]:
        return dict(sorted(Counter(i.split for i in self.items).items()))

    @property
    def languages(self) -> list[str]:
        return sorted({i.language for i in self.items})

    @property
    def content_hash(self) -> str:
        """Depends on the task type and every item's content, not on the order of the file."""
        item_hashes = sorted(i.content_hash for i in self.items)
        return sha256_json({"task": self.task.value, "items": item_hashes})


def parse_tables(
    tables: Sequence[RawTable],
    *,
    task: TaskType | str,
    language: str = "en",
    split: str | None = None,
    field_map: Mapping[str, str] | None = None,
    option_names: OptionNames = OPTION_NAMES["command"],
) -> ParsedDataset:
    """Validate raw tables for ``task`` and return the items to store.

    ``field_map`` maps an expected field to the column that holds it (``{"label": "category"}``);
    messages name the options as ``option_names`` says.
    The split of a row is its ``split`` column, else its file's split, else ``split``, else
    "test". Raises :class:`DatasetFormatError` listing every problem found.
    """
    spec = task_spec(task)
    if not tables or all(not t.rows for t in tables):
        headed = [t for t in tables if t.header_line is not None]
        if headed:
            raise DatasetFormatError(
                [
                    Problem(
                        t.source,
                        t.header_line,
                        f"no rows below the header line; if this line is data, name the columns with "
                        f"{option_names.columns}",
                    )
                    for t in headed
                ]
            )
        names = ", ".join(t.source for t in tables) or "input"
        raise DatasetFormatError([Problem(names, None, "no rows found: the file is empty")])
    tables = [_rename(t, field_map or {}) for t in tables]
    problems = Problems()
    for table in tables:  # PostgreSQL cannot store U+0000 in text: refuse it here, on every database
        for row in table.rows:
            for name, value in row.fields.items():
                if _holds_nul(value):
                    problems.add(row, f"'{name}' holds a NUL character (U+0000), which cannot be stored: remove it")
    if spec.layout == BEIR:
        items = parse_beir(tables, language, split, problems)
    else:
        items = _parse_rows(spec, tables, language, split, problems, option_names)
    problems.raise_if_any()
    _check_unique_ids(items, tables, problems)
    if spec.trains_on_train_split:
        _check_train_split(items, tables, problems)
    problems.raise_if_any()
    for item in items:
        item.text_hashes.update(
            {name: sha256_text(item.payload[name]) for name in spec.transformable_fields if name in item.payload}
        )
    return ParsedDataset(spec.task, items, _metadata(spec, items))


def _rename(table: RawTable, field_map: Mapping[str, str]) -> RawTable:
    if not field_map:
        return table
    reverse = {column: name for name, column in field_map.items()}
    rows = [RawRow(r.source, r.line, {reverse.get(k, k): v for k, v in r.fields.items()}) for r in table.rows]
    return RawTable(table.source, table.role, table.split, rows, table.header_line)


def _parse_rows(
    spec: TaskSpec,
    tables: Sequence[RawTable],
    language: str,
    split: str | None,
    problems: Problems,
    option_names: OptionNames,
) -> list[ParsedItem]:
    items: list[ParsedItem] = []
    for table in tables:
        if table.role != "rows":
            problems.add(None, f"a {table.role} file only belongs to a retrieval dataset", source=table.source)
            continue
        first = table.rows[0].fields if table.rows else {}
        missing = [name for name in spec.required_fields if name not in first and not has_alias(spec, name, first)]
        if missing:
            present = ", ".join(map(str, first)) or "none"
            # The names found come from the header line, or else from the first record.
            line = table.header_line if table.header_line is not None else (table.rows[0].line if table.rows else None)
            problems.add(
                None,
                f"missing column(s) {', '.join(missing)} (found: {present}). Name the columns of a "
                f"headerless file with {option_names.columns}, or map a column with {option_names.field_map}.",
                source=table.source,
                line=line,
            )
            continue
        counters: Counter[str] = Counter()
        for row in table.rows:
            row_split = text_value(row.fields.get("split")) or table.split or split or DEFAULT_SPLIT
            counters[row_split] += 1
            errors_before = problems.total
            payload, gold = ROW_LAYOUTS[spec.layout](spec, row, problems)
            if problems.total > errors_before:
                continue
            raw_id = row.fields.get("id", row.fields.get("_id"))
            item_id = text_value(raw_id) if raw_id not in (None, "") else str(counters[row_split])
            row_language = text_value(row.fields.get("language") or row.fields.get("lang")) or language
            items.append(ParsedItem(row_split, "example", item_id, payload, gold, row_language))
    return items


def _check_unique_ids(items: Iterable[ParsedItem], tables: Sequence[RawTable], problems: Problems) -> None:
    seen: dict[tuple[str, str, str], int] = {}
    for item in items:
        key = (item.split, item.kind, item.item_id)
        seen[key] = seen.get(key, 0) + 1
    for (split_name, _, item_id), count in sorted(seen.items()):
        if count > 1:
            problems.add(
                None,
                f"id {item_id!r} appears {count} times in split {split_name!r}: ids must be unique",
                source=", ".join(t.source for t in tables),
            )


def _check_train_split(items: list[ParsedItem], tables: Sequence[RawTable], problems: Problems) -> None:
    splits = {i.split for i in items}
    if "train" not in splits or splits == {"train"}:
        problems.add(
            None,
            f"classification needs a 'train' split (the classifier is fit on it) and an evaluation "
            f"split, found {sorted(splits)}: import a folder holding train.csv and test.csv, or add "
            "a 'split' column",
            source=", ".join(t.source for t in tables),
        )


def _metadata(spec: TaskSpec, items: list[ParsedItem]) -> dict[str, Any]:
    examples = [i for i in items if i.kind == "example"]
    meta: dict[str, Any] = {"n_examples": len(examples)}
    if spec.summary == "gold_range":
        scores = [i.gold for i in examples]
        meta["gold_min"], meta["gold_max"] = min(scores), max(scores)
    elif spec.summary == "labels":
        counts = Counter(str(i.gold) for i in examples)
        meta["labels"] = dict(sorted(counts.items()))
    elif spec.summary == "documents":
        meta["n_documents"] = len(items) - len(examples)
        meta["n_queries"] = len(examples)
    elif spec.summary == "candidates":
        meta["n_candidates"] = sum(len(i.payload["positive"]) + len(i.payload["negative"]) for i in examples)
    return meta


def _holds_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, list | tuple):
        return any(_holds_nul(v) for v in value)
    if isinstance(value, dict):
        return any(_holds_nul(k) or _holds_nul(v) for k, v in value.items())
    return False
