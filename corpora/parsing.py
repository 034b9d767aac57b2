"""Turn raw rows read from files into validated dataset items (pure module: no Django, no I/O).

Every problem names the file, the line (or record) and what is wrong; all problems of a file are
collected (up to a limit) so a user can fix them in one pass.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from core.errors import ShiftlabError
from core.hashing import sha256_json, sha256_text
from corpora.task_types import TaskType, task_spec

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


class _Collector:
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
    problems = _Collector()
    for table in tables:  # PostgreSQL cannot store U+0000 in text: refuse it here, on every database
        for row in table.rows:
            for name, value in row.fields.items():
                if _holds_nul(value):
                    problems.add(row, f"'{name}' holds a NUL character (U+0000), which cannot be stored: remove it")
    if spec.task is TaskType.RETRIEVAL:
        items = _parse_retrieval(tables, language, split, problems)
    else:
        items = _parse_rows(spec.task, tables, language, split, problems, option_names)
    problems.raise_if_any()
    _check_unique_ids(items, tables, problems)
    if spec.task is TaskType.CLASSIFICATION:
        _check_classification_splits(items, tables, problems)
    problems.raise_if_any()
    for item in items:
        item.text_hashes.update(
            {name: sha256_text(item.payload[name]) for name in spec.transformable_fields if name in item.payload}
        )
    return ParsedDataset(spec.task, items, _metadata(spec.task, items))


def _rename(table: RawTable, field_map: Mapping[str, str]) -> RawTable:
    if not field_map:
        return table
    reverse = {column: name for name, column in field_map.items()}
    rows = [RawRow(r.source, r.line, {reverse.get(k, k): v for k, v in r.fields.items()}) for r in table.rows]
    return RawTable(table.source, table.role, table.split, rows, table.header_line)


def _parse_rows(
    task: TaskType,
    tables: Sequence[RawTable],
    language: str,
    split: str | None,
    problems: _Collector,
    option_names: OptionNames,
) -> list[ParsedItem]:
    spec = task_spec(task)
    items: list[ParsedItem] = []
    for table in tables:
        if table.role != "rows":
            problems.add(None, f"a {table.role} file only belongs to a retrieval dataset", source=table.source)
            continue
        first = table.rows[0].fields if table.rows else {}
        missing = [name for name in spec.required_fields if name not in first and not _has_alias(task, name, first)]
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
            row_split = _text(row.fields.get("split")) or table.split or split or DEFAULT_SPLIT
            counters[row_split] += 1
            parsed = _parse_row(task, row, problems)
            if parsed is None:
                continue
            payload, gold = parsed
            raw_id = row.fields.get("id", row.fields.get("_id"))
            item_id = _text(raw_id) if raw_id not in (None, "") else str(counters[row_split])
            row_language = _text(row.fields.get("language") or row.fields.get("lang")) or language
            items.append(ParsedItem(row_split, "example", item_id, payload, gold, row_language))
    return items


def _has_alias(task: TaskType, name: str, fields: Mapping[str, Any]) -> bool:
    # Pair datasets may carry their gold as "score" or "label" (issue contract).
    if task in (TaskType.STS, TaskType.STR) and name == "score":
        return "label" in fields
    if task is TaskType.PAIR_CLASSIFICATION and name == "label":
        return "score" in fields
    return False


def _parse_row(task: TaskType, row: RawRow, problems: _Collector) -> tuple[dict[str, Any], Any] | None:
    f = row.fields
    errors_before = problems.total
    if task in (TaskType.STS, TaskType.STR, TaskType.PAIR_CLASSIFICATION):
        s1 = _required_text(row, "sentence1", problems)
        s2 = _required_text(row, "sentence2", problems)
        raw_gold = (
            f.get("score", f.get("label"))
            if task is not TaskType.PAIR_CLASSIFICATION
            else f.get("label", f.get("score"))
        )
        if task is TaskType.PAIR_CLASSIFICATION:
            gold = _binary_label(row, raw_gold, problems)
        else:
            gold = _number(row, "score", raw_gold, problems)
        payload = {"sentence1": s1, "sentence2": s2}
    elif task in (TaskType.CLASSIFICATION, TaskType.CLUSTERING):
        payload = {"text": _required_text(row, "text", problems)}
        gold = _required_text(row, "label", problems)
    elif task is TaskType.RERANKING:
        payload = {
            "query": _required_text(row, "query", problems),
            "positive": _text_list(row, "positive", problems, allow_empty=False),
            "negative": _text_list(row, "negative", problems, allow_empty=True),
        }
        gold = None
    elif task is TaskType.SUMMARIZATION:
        machine = _text_list(row, "machine_summaries", problems, allow_empty=False)
        payload = {
            "text": _required_text(row, "text", problems),
            "human_summaries": _text_list(row, "human_summaries", problems, allow_empty=False),
            "machine_summaries": machine,
        }
        gold = _number_list(row, "relevance", problems)
        if machine and gold is not None and len(gold) != len(machine):
            problems.add(row, f"'relevance' has {len(gold)} scores but there are {len(machine)} machine summaries")
    else:  # pragma: no cover - retrieval is parsed separately
        raise AssertionError(task)
    if problems.total > errors_before:
        return None
    return payload, gold


def _parse_retrieval(
    tables: Sequence[RawTable], language: str, split: str | None, problems: _Collector
) -> list[ParsedItem]:
    by_role: dict[str, list[RawTable]] = defaultdict(list)
    for table in tables:
        by_role[table.role].append(table)
    for role in ("corpus", "queries", "qrels"):
        if not by_role[role]:
            problems.add(
                None,
                f"a retrieval dataset needs a BEIR folder with corpus.jsonl, queries.jsonl and "
                f"qrels/<split>.tsv; the {role} part is missing",
                source=", ".join(t.source for t in tables),
            )
    if problems.total:
        return []
    documents: dict[str, ParsedItem] = {}
    for row in (r for t in by_role["corpus"] for r in t.rows):
        doc_id = _required_text(row, "_id", problems)
        text = _text(row.fields.get("text"))
        title = _text(row.fields.get("title"))
        if not text and not title:
            problems.add(row, "document has neither 'text' nor 'title'")
            continue
        if doc_id in documents:
            problems.add(row, f"duplicate document id {doc_id!r}")
            continue
        payload = {"title": title, "text": text}
        documents[doc_id] = ParsedItem(CORPUS_SPLIT, "document", doc_id, payload, None, language)
    queries: dict[str, tuple[RawRow, str]] = {}
    for row in (r for t in by_role["queries"] for r in t.rows):
        query_id = _required_text(row, "_id", problems)
        text = _required_text(row, "text", problems)
        if query_id in queries:
            problems.add(row, f"duplicate query id {query_id!r}")
        elif query_id and text:
            queries[query_id] = (row, text)
    relevance: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
    for table in by_role["qrels"]:
        qrels_split = table.split or split or DEFAULT_SPLIT
        for row in table.rows:
            query_id = _text(row.fields.get("query-id"))
            doc_id = _text(row.fields.get("corpus-id"))
            score = _number(row, "score", row.fields.get("score"), problems)
            if query_id not in queries:
                problems.add(row, f"qrels names query {query_id!r}, which is not in queries.jsonl")
            elif doc_id not in documents:
                problems.add(row, f"qrels names document {doc_id!r}, which is not in corpus.jsonl")
            elif score is not None:
                relevance[(qrels_split, query_id)][doc_id] = score
    if not relevance and not problems.total:
        problems.add(
            None,
            "no query has a relevance judgement: the qrels file needs at least one row "
            "query-id, corpus-id, score naming a query and a document",
            source=", ".join(t.source for t in by_role["qrels"]),
        )
    items = list(documents.values())
    for (qrels_split, query_id), gold in sorted(relevance.items()):
        _, text = queries[query_id]
        items.append(ParsedItem(qrels_split, "example", query_id, {"text": text}, gold, language))
    return items


def _check_unique_ids(items: Iterable[ParsedItem], tables: Sequence[RawTable], problems: _Collector) -> None:
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


def _check_classification_splits(items: list[ParsedItem], tables: Sequence[RawTable], problems: _Collector) -> None:
    splits = {i.split for i in items}
    if "train" not in splits or splits == {"train"}:
        problems.add(
            None,
            f"classification needs a 'train' split (the classifier is fit on it) and an evaluation "
            f"split, found {sorted(splits)}: import a folder holding train.csv and test.csv, or add "
            "a 'split' column",
            source=", ".join(t.source for t in tables),
        )


def _metadata(task: TaskType, items: list[ParsedItem]) -> dict[str, Any]:
    examples = [i for i in items if i.kind == "example"]
    meta: dict[str, Any] = {"n_examples": len(examples)}
    if task in (TaskType.STS, TaskType.STR):
        scores = [i.gold for i in examples]
        meta["gold_min"], meta["gold_max"] = min(scores), max(scores)
    elif task in (TaskType.CLASSIFICATION, TaskType.CLUSTERING, TaskType.PAIR_CLASSIFICATION):
        counts = Counter(str(i.gold) for i in examples)
        meta["labels"] = dict(sorted(counts.items()))
    elif task is TaskType.RETRIEVAL:
        meta["n_documents"] = len(items) - len(examples)
        meta["n_queries"] = len(examples)
    elif task is TaskType.RERANKING:
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


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and math.isnan(value):
        return ""
    return str(value).strip()


def _required_text(row: RawRow, name: str, problems: _Collector) -> str:
    value = row.fields.get(name)
    if value is not None and not isinstance(value, str | int | float):
        problems.add(row, f"'{name}' must be text, found {type(value).__name__}")
        return ""
    text = _text(value)
    if not text:
        problems.add(row, f"'{name}' is empty")
    return text


def _number(row: RawRow, name: str, value: Any, problems: _Collector) -> float | None:
    if isinstance(value, bool):
        problems.add(row, f"'{name}' must be a number, found {value!r}")
        return None
    if isinstance(value, int | float):
        number = float(value)
    else:
        try:
            number = float(_text(value))
        except ValueError:
            problems.add(row, f"'{name}' must be a number, found {_text(value)!r}")
            return None
    if not math.isfinite(number):
        problems.add(row, f"'{name}' must be a finite number, found {value!r}")
        return None
    return number


def _binary_label(row: RawRow, value: Any, problems: _Collector) -> int | None:
    text = _text(value).lower()
    mapping = {"0": 0, "1": 1, "0.0": 0, "1.0": 1, "false": 0, "true": 1}
    if text not in mapping:
        problems.add(row, f"'label' must be 0 or 1 for pair classification, found {_text(value)!r}")
        return None
    return mapping[text]


def _as_list(row: RawRow, name: str, problems: _Collector) -> list[Any] | None:
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


def _text_list(row: RawRow, name: str, problems: _Collector, *, allow_empty: bool) -> list[str]:
    values = _as_list(row, name, problems)
    if values is None:
        return []
    texts = [_text(v) if isinstance(v, str) else "" for v in values]
    if any(not t for t in texts):
        problems.add(row, f"'{name}' holds an empty or non-text entry")
    if not texts and not allow_empty:
        problems.add(row, f"'{name}' is an empty list")
    return texts


def _number_list(row: RawRow, name: str, problems: _Collector) -> list[float] | None:
    values = _as_list(row, name, problems)
    if values is None:
        return None
    numbers = [_number(row, name, v, problems) for v in values]
    if any(n is None for n in numbers):
        return None
    return [float(n) for n in numbers if n is not None]
