"""How the rows of each file layout a task type names (``TaskSpec.layout``) become items (pure
module: no Django, no I/O).

``ROW_LAYOUTS`` reads one row of a "pair", "text", "reranking" or "summarization" file into its
payload and gold; :func:`parse_beir` reads a retrieval dataset's corpus, queries and qrels.
Problems go to the :class:`~corpora.rows.Problems` given, naming the file and line.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from corpora.rows import (
    CORPUS_SPLIT,
    DEFAULT_SPLIT,
    ParsedItem,
    Problems,
    RawRow,
    RawTable,
    binary_label,
    number_list,
    number_value,
    required_text,
    text_list,
    text_value,
)
from corpora.task_types import TaskSpec

BEIR = "beir"
RowReader = Callable[[TaskSpec, RawRow, Problems], tuple[dict[str, Any], Any]]


def gold_value(spec: TaskSpec, fields: Mapping[str, Any]) -> Any:
    """The raw gold of a row: its gold column, else the first alias it holds."""
    for name in (spec.gold_field, *spec.gold_aliases):
        if name in fields:
            return fields[name]
    return None


def has_alias(spec: TaskSpec, name: str, fields: Mapping[str, Any]) -> bool:
    """Whether ``fields`` hold the required ``name`` under another name (pair datasets may carry
    their gold as "score" or "label")."""
    return name == spec.gold_field and any(alias in fields for alias in spec.gold_aliases)


def _pair_row(spec: TaskSpec, row: RawRow, problems: Problems) -> tuple[dict[str, Any], Any]:
    s1 = required_text(row, "sentence1", problems)
    s2 = required_text(row, "sentence2", problems)
    raw_gold = gold_value(spec, row.fields)
    if spec.gold_kind == "binary":
        gold = binary_label(row, raw_gold, problems)
    else:
        gold = number_value(row, spec.gold_field, raw_gold, problems)
    return {"sentence1": s1, "sentence2": s2}, gold


def _text_row(spec: TaskSpec, row: RawRow, problems: Problems) -> tuple[dict[str, Any], Any]:
    payload = {"text": required_text(row, "text", problems)}
    return payload, required_text(row, spec.gold_field, problems)


def _reranking_row(spec: TaskSpec, row: RawRow, problems: Problems) -> tuple[dict[str, Any], Any]:
    payload = {
        "query": required_text(row, "query", problems),
        "positive": text_list(row, "positive", problems, allow_empty=False),
        "negative": text_list(row, "negative", problems, allow_empty=True),
    }
    return payload, None


def _summarization_row(spec: TaskSpec, row: RawRow, problems: Problems) -> tuple[dict[str, Any], Any]:
    machine = text_list(row, "machine_summaries", problems, allow_empty=False)
    payload = {
        "text": required_text(row, "text", problems),
        "human_summaries": text_list(row, "human_summaries", problems, allow_empty=False),
        "machine_summaries": machine,
    }
    gold = number_list(row, spec.gold_field, problems)
    if machine and gold is not None and len(gold) != len(machine):
        problems.add(row, f"'relevance' has {len(gold)} scores but there are {len(machine)} machine summaries")
    return payload, gold


ROW_LAYOUTS: dict[str, RowReader] = {
    "pair": _pair_row,
    "text": _text_row,
    "reranking": _reranking_row,
    "summarization": _summarization_row,
}


def parse_beir(tables: Sequence[RawTable], language: str, split: str | None, problems: Problems) -> list[ParsedItem]:
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
        doc_id = required_text(row, "_id", problems)
        text = text_value(row.fields.get("text"))
        title = text_value(row.fields.get("title"))
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
        query_id = required_text(row, "_id", problems)
        text = required_text(row, "text", problems)
        if query_id in queries:
            problems.add(row, f"duplicate query id {query_id!r}")
        elif query_id and text:
            queries[query_id] = (row, text)
    relevance: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
    for table in by_role["qrels"]:
        qrels_split = table.split or split or DEFAULT_SPLIT
        for row in table.rows:
            query_id = text_value(row.fields.get("query-id"))
            doc_id = text_value(row.fields.get("corpus-id"))
            score = number_value(row, "score", row.fields.get("score"), problems)
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
