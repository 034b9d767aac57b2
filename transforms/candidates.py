"""The candidates of a reranking dataset as the work units of a transformation run (pure).

A reranking row keeps its candidates inside itself (``payload["positive"]``,
``payload["negative"]``), and the same text may be a candidate of many queries. A run of
candidates (``TransformRun.item_scope`` "candidates", the document side of a benchmark) rewrites
each distinct candidate text once. Its key is ``candidate_key`` (the first 32 hex digits of the
text's sha256, 128 bits), stored as the ``side`` of the outcome (``TransformedItem.side`` holds
32 characters), under the first row whose lists hold the text (``candidate_units``).
"""

from __future__ import annotations

from collections.abc import Iterable

from core.hashing import sha256_text

CANDIDATE_FIELDS = ("positive", "negative")
KEY_LENGTH = 32


def candidate_key(text: str) -> str:
    """The stable key of a candidate text: the first 32 hex digits of its UTF-8 sha256."""
    return sha256_text(text)[:KEY_LENGTH]


def candidate_units(rows: Iterable[tuple[int, dict]]) -> dict[int, dict[str, str]]:
    """Each distinct candidate of the rows ((DatasetItem pk, payload), in order) once, under the
    first row whose lists hold it: pk -> {key: text}, both in first-seen order."""
    units: dict[int, dict[str, str]] = {}
    seen: set[str] = set()
    for pk, payload in rows:
        for field in CANDIDATE_FIELDS:
            for text in payload[field]:
                key = candidate_key(text)
                if key not in seen:
                    seen.add(key)
                    units.setdefault(pk, {})[key] = text
    return units
