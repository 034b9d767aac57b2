"""An LLM as one more annotator of a baseline study: its prompts and strict answer parsers (pure).

The LLM gets what a human gets: the study's instructions and the instance's texts (never the
gold), plus the exact answer format. Parsers are strict on purpose: a reply that is not exactly an
answer in that format is a parse error, stored and counted, never guessed into a value.

Clustering is asked per batch (one request shows every text of the batch and asks for a group
name per text), because a group name only means something next to the other texts of its batch.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

SYSTEM = (
    "You are one of the annotators of a language study that measures how well people perform text "
    "tasks. Follow the instructions, then reply in exactly the format asked for, with no explanation."
)

STS_FORMAT = "Reply with a single number from 0 to 5 (decimals allowed, e.g. 3.5) and nothing else."
LABEL_FORMAT = "Reply with exactly one label from the list above, written as it appears there, and nothing else."
RELEVANCE_FORMAT = "Reply with 1 if the candidate is relevant to the query, 0 if it is not, and nothing else."
CLUSTER_FORMAT = (
    "Reply with one line per text, in order, as `<number>: <group name>`, e.g. `1: weather`. Give texts "
    "that belong together the same short group name. Write nothing else."
)

_THINK = re.compile(r"^\s*<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_WRAPPERS = "`*\"' \t\r\n"
_NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)")
_CLUSTER_LINE = re.compile(r"^\s*(\d+)\s*[:.)\-]\s*(.+?)\s*$")


@dataclass(frozen=True)
class Parsed:
    """A parsed reply: ``value`` when it parsed, else ``error`` says what was wrong."""

    value: Any = None
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error


def _messages(user: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def _numbered(texts: Sequence[str]) -> str:
    return "\n".join(f"{k}. {text}" for k, text in enumerate(texts, start=1))


def sts_messages(instructions: str, texts: Sequence[str]) -> list[dict[str, str]]:
    a, b = texts
    return _messages(f"{instructions.strip()}\n\nSentence 1: {a}\nSentence 2: {b}\n\n{STS_FORMAT}")


def classification_messages(instructions: str, texts: Sequence[str], labels: Sequence[str]) -> list[dict[str, str]]:
    (text,) = texts
    listing = "\n".join(f"- {label}" for label in labels)
    return _messages(f"{instructions.strip()}\n\nLabels:\n{listing}\n\nText: {text}\n\n{LABEL_FORMAT}")


def reranking_messages(instructions: str, texts: Sequence[str]) -> list[dict[str, str]]:
    query, candidate = texts
    return _messages(f"{instructions.strip()}\n\nQuery: {query}\nCandidate: {candidate}\n\n{RELEVANCE_FORMAT}")


def clustering_messages(instructions: str, batch: Sequence[str]) -> list[dict[str, str]]:
    return _messages(f"{instructions.strip()}\n\nTexts:\n{_numbered(batch)}\n\n{CLUSTER_FORMAT}")


def _clean(reply: str) -> str:
    """The reply without a leading reasoning block, surrounding quotes/markup and a final stop."""
    text = _THINK.sub("", reply).strip(_WRAPPERS)
    return text[:-1].strip(_WRAPPERS) if text.endswith(".") else text


def _short(reply: str) -> str:
    return reply if len(reply) <= 80 else reply[:77] + "..."


def parse_sts(reply: str) -> Parsed:
    """A similarity on 0-5: the reply must be one number in range."""
    text = _clean(reply)
    if not _NUMBER.fullmatch(text):
        return Parsed(error=f"expected one number from 0 to 5, got {_short(reply)!r}")
    value = float(text)
    if not 0.0 <= value <= 5.0:
        return Parsed(error=f"{value:g} is outside the scale 0-5")
    return Parsed(value=value)


def normalise_label(label: str) -> str:
    return " ".join(label.replace("_", " ").split()).casefold()


def parse_label(reply: str, labels: Sequence[str]) -> Parsed:
    """One of ``labels``: exactly, or differing only in case, spacing or '_' for ' '."""
    text = _clean(reply)
    if text in labels:
        return Parsed(value=text)
    by_norm = {normalise_label(label): label for label in labels}
    label = by_norm.get(normalise_label(text))
    if label is None:
        return Parsed(error=f"{_short(text)!r} is not one of the {len(labels)} labels")
    return Parsed(value=label)


def parse_relevance(reply: str) -> Parsed:
    """1 (relevant) or 0 (not relevant)."""
    text = _clean(reply)
    if text not in ("0", "1"):
        return Parsed(error=f"expected 1 or 0, got {_short(reply)!r}")
    return Parsed(value=int(text))


def normalise_cluster(name: str) -> str:
    """A cluster id from a group name: case, surrounding quotes/markup and spacing do not matter."""
    return " ".join(name.strip(_WRAPPERS).split()).casefold()


def parse_clusters(reply: str, n: int) -> Parsed:
    """A group name for each of ``n`` texts: lines ``k: name`` for k = 1..n, each exactly once.
    The value is the list of cluster ids in text order."""
    names: dict[int, str] = {}
    for line in _THINK.sub("", reply).strip().splitlines():
        if not line.strip(_WRAPPERS):
            continue
        match = _CLUSTER_LINE.match(line.strip("`*"))
        if match is None:
            return Parsed(error=f"line {_short(line.strip())!r} is not '<number>: <group name>'")
        k, name = int(match.group(1)), normalise_cluster(match.group(2))
        if not 1 <= k <= n or k in names or not name:
            return Parsed(error=f"line {_short(line.strip())!r}: text numbers must be 1..{n}, each once, with a name")
        names[k] = name
    if len(names) != n:
        missing = sorted(set(range(1, n + 1)) - set(names))
        return Parsed(error=f"no group name for text(s) {', '.join(map(str, missing))}")
    return Parsed(value=[names[k] for k in range(1, n + 1)])
