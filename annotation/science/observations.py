"""The observations of the sequential gate in their fixed order (pure).

The gate (``annotation.science.sequential``) needs one observation per fully rated item: the mean
of its first ``raters_per_item`` raters who answered every question. The order in which items
*first* completed is fixed once seen (a ledger kept on the study), so that a rating that arrives
later, or a rater who is rejected, never reorders what the confidence sequence has already seen.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

import numpy as np


class ItemRating(NamedTuple):
    item: int
    rater: int
    question: str
    value: float
    at: datetime


def _full_raters(
    ratings: Iterable[ItemRating], questions: Sequence[str]
) -> dict[int, list[tuple[datetime, int, dict[str, float]]]]:
    """Item -> its raters who answered every question, as (time of their last answer, rater,
    question -> value), earliest first (ties by rater id)."""
    answers: dict[int, dict[int, dict[str, tuple[float, datetime]]]] = defaultdict(lambda: defaultdict(dict))
    for r in ratings:
        answers[r.item][r.rater][r.question] = (r.value, r.at)
    full = {}
    for item, raters in answers.items():
        rows = [
            (max(at for _, at in q.values()), rater, {name: v for name, (v, _) in q.items()})
            for rater, q in raters.items()
            if set(questions) <= set(q)
        ]
        full[item] = sorted(rows, key=lambda row: (row[0], row[1]))
    return full


def item_means(
    ratings: Iterable[ItemRating], *, questions: Sequence[str], raters_per_item: int
) -> tuple[list[int], dict[str, list[float]]]:
    """Complete items in the order they completed, rebuilt from the ratings alone (an overview;
    the gate observes ``fixed_sequence``): items with at least ``raters_per_item`` raters who
    answered every question, each item's mean over its first ``raters_per_item`` such raters (by
    the time of their last answer), items ordered by when that last needed rater answered (ties by
    item id). Returns (item ids, question -> means)."""
    sequence = fixed_sequence(ratings, questions=questions, raters_per_item=raters_per_item)
    return sequence.items, sequence.means


@dataclass(frozen=True)
class FixedSequence:
    """The observations of the gate in their fixed order (see ``fixed_sequence``)."""

    ledger: list[tuple[int, tuple[int, ...]]]  # (item, its counted raters), in observation order
    items: list[int]  # the items observed: the complete prefix of the ledger
    means: dict[str, list[float]]  # question -> per-item means of ``items``, in that order
    waiting: int | None = None  # the ledger item the sequence waits for (no longer complete), if any


def fixed_sequence(
    ratings: Iterable[ItemRating],
    *,
    questions: Sequence[str],
    raters_per_item: int,
    ledger: Sequence[tuple[int, Sequence[int]]] = (),
) -> FixedSequence:
    """The gate's observations in one fixed order: the order items *first* completed.

    ``ledger`` is the order fixed by earlier checks, ``(item, counted raters)`` per position. It is
    kept as it is: an item never moves, and no item is ever inserted before one already there.
    Items completed since (``raters_per_item`` raters who answered every question) are appended, in
    the order their last needed rater answered (ties by item id), with their first
    ``raters_per_item`` such raters. An item of the ledger whose raters no longer all count (a
    rater rejected) takes the first complete raters it has now, in the same position; if it has too
    few, the sequence stops before it (``waiting``) until it completes again, so the observed
    sequence is always a prefix of the ledger. Rebuilding the order from submission times at each
    check would instead insert items in the past (a rater whose ratings start counting late) or
    remove them, which the confidence sequence's guarantee does not cover.
    """
    full = _full_raters(ratings, questions)
    new_ledger: list[tuple[int, tuple[int, ...]]] = []
    seen = set()
    for item, raters in ledger:
        item = int(item)
        seen.add(item)
        rows = full.get(item, [])
        by_rater = {rater for _, rater, _ in rows}
        if not set(raters) <= by_rater or len(raters) != raters_per_item:
            raters = tuple(rater for _, rater, _ in rows[:raters_per_item])
        new_ledger.append((item, tuple(int(r) for r in raters)))
    fresh = sorted(
        (rows[raters_per_item - 1][0], item, tuple(rater for _, rater, _ in rows[:raters_per_item]))
        for item, rows in full.items()
        if item not in seen and len(rows) >= raters_per_item
    )
    new_ledger += [(item, raters) for _, item, raters in fresh]
    items: list[int] = []
    means: dict[str, list[float]] = {name: [] for name in questions}
    waiting = None
    for item, raters in new_ledger:
        values = {rater: q for _, rater, q in full.get(item, [])}
        if len(raters) < raters_per_item or not set(raters) <= set(values):
            waiting = item
            break
        items.append(item)
        for name in questions:
            means[name].append(float(np.mean([values[r][name] for r in raters])))
    return FixedSequence(new_ledger, items, means, waiting)
