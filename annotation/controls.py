"""Control items and the per-rater control check (pure module).

Two kinds of control ("dummy") items, shown in exactly the same two fields as real items:

- **easy positive**: a text against a near-identical copy of itself (only its final punctuation
  differs). Every question's expected answer is the top of its scale.
- **easy negative**: a text against an unrelated text (the transformed output of the item whose
  words overlap least with it). Meaning questions (quality, similarity) expect the bottom of the
  scale; fluency has no expectation, since an unrelated text can be perfectly fluent.

A rater passes when every expected control rating is within ``margin`` of its expected end, and
needs at least ``min_ratings`` such ratings to be checked at all.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from annotation.design import Question


class ItemKind(StrEnum):
    REAL = "real"
    EASY_POSITIVE = "easy_positive"
    EASY_NEGATIVE = "easy_negative"


@dataclass(frozen=True)
class ControlPair:
    kind: ItemKind
    text_a: str
    text_b: str
    source_index: int  # index of the text the control was built from, in the input order


_WORD = re.compile(r"\w+", re.UNICODE)


def near_copy(text: str) -> str:
    """The text with only its final punctuation changed: same words, same meaning."""
    stripped = text.rstrip()
    if stripped.endswith((".", "!", "?", "。")):
        return stripped[:-1].rstrip()
    return stripped + "."


def _words(text: str) -> frozenset[str]:
    return frozenset(w.lower() for w in _WORD.findall(text))


def _overlap(a: frozenset[str], b: frozenset[str]) -> float:
    union = a | b
    return len(a & b) / len(union) if union else 1.0


def control_pairs(
    sources: Sequence[str], outputs: Sequence[str], n: int, *, rng: np.random.Generator
) -> list[ControlPair]:
    """``n`` controls alternating easy positive and easy negative, built from the study's own texts.

    ``sources[i]`` and ``outputs[i]`` are the original and transformed text of sampled item ``i``.
    Positives pair a source with its near copy; negatives pair a source with the output of the
    item least similar to it (by word overlap), so the negative looks like any real item.
    """
    if len(sources) != len(outputs):
        raise ValueError("sources and outputs must have the same length")
    if n == 0:
        return []
    if len(sources) < 2:
        raise ValueError("control items need at least two sampled items (a negative pairs two different texts)")
    order = rng.permutation(len(sources))
    words = [_words(s) for s in sources]
    out_words = [_words(o) for o in outputs]
    pairs = []
    for k in range(n):
        i = int(order[k % len(order)])
        if k % 2 == 0:
            pairs.append(ControlPair(ItemKind.EASY_POSITIVE, sources[i], near_copy(sources[i]), i))
        else:
            others = [j for j in range(len(sources)) if j != i and outputs[j].strip() != sources[i].strip()]
            if not others:
                raise ValueError("no unrelated text available for an easy negative control")
            j = min(others, key=lambda j: (_overlap(words[i], out_words[j]), j))
            pairs.append(ControlPair(ItemKind.EASY_NEGATIVE, sources[i], outputs[j], i))
    return pairs


def n_controls(n_real: int, *, batch_size: int, controls_per_batch: int) -> int:
    """Controls for ``n_real`` real items: ``controls_per_batch`` per started batch."""
    if controls_per_batch == 0 or n_real == 0:
        return 0
    batches = -(-n_real // batch_size)
    return batches * controls_per_batch


def expected_value(kind: ItemKind, question: Question) -> int | None:
    """The expected end of the scale for a control, or None when the question is not checked."""
    if kind == ItemKind.EASY_POSITIVE:
        return question.high
    if kind == ItemKind.EASY_NEGATIVE:
        return question.low if question.meaning else None
    return None


class ControlStatus(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    INSUFFICIENT = "insufficient"  # too few control ratings to decide yet


@dataclass(frozen=True)
class ControlRating:
    expected: int
    value: int


@dataclass(frozen=True)
class ControlCheck:
    status: ControlStatus
    n_checked: int
    n_within: int
    misses: tuple[ControlRating, ...]

    @property
    def pass_rate(self) -> float | None:
        return self.n_within / self.n_checked if self.n_checked else None


def control_check(ratings: Sequence[ControlRating], *, margin: int, min_ratings: int) -> ControlCheck:
    """A rater's control check: any rating further than ``margin`` from its expected end fails."""
    misses = tuple(r for r in ratings if abs(r.value - r.expected) > margin)
    n = len(ratings)
    if misses:
        status = ControlStatus.FAILED
    elif n < min_ratings:
        status = ControlStatus.INSUFFICIENT
    else:
        status = ControlStatus.PASSED
    return ControlCheck(status=status, n_checked=n, n_within=n - len(misses), misses=misses)
