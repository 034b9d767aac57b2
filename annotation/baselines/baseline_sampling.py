"""Seeded draws of human-baseline instances from a dataset's items (pure module).

Every function takes the dataset's items as ``SourceItem`` (a reference, the task payload and the
gold) and a ``numpy.random.Generator``, and returns ``DrawnInstance`` rows in their final order.
Items are sorted by ``ref`` first, so the same items, options and seed always give the same
instances, whatever order the caller read them in.

Keys are ``<prefix>-<position>`` (``sts-0007``): stable, and they tell an annotator nothing about
the gold answer.

- **sts**: ``n`` pairs drawn without replacement.
- **classification**: ``n`` items, uniformly or stratified by gold label (proportional allocation).
- **clustering**: ``n`` items in batches of ``batch_size``; each batch draws from
  ``clusters_per_batch`` gold clusters chosen at random, spread as evenly as their sizes allow, so
  that every batch holds several clusters.
- **reranking**: ``n`` queries; each query's positives and negatives become one instance per
  (query, candidate), capped at ``max_candidates`` with at least one of each kind kept, in a seeded
  shuffled order (positives are not listed first).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from annotation.science.sampling import Unit, stratified_sample
from core.errors import ShiftlabError

# Each sampler's key prefix.
STS_PREFIX, CLASSIFICATION_PREFIX, CLUSTERING_PREFIX, RERANKING_PREFIX = "sts", "cls", "clu", "rr"
DEFAULT_BATCH_SIZE = 10
DEFAULT_CANDIDATES = 10


class SamplingError(ShiftlabError, ValueError):
    """The items cannot give the requested sample; the message says what to change."""


@dataclass(frozen=True)
class SourceItem:
    ref: Hashable  # the dataset item's id
    payload: Mapping[str, Any]
    gold: Any


@dataclass(frozen=True)
class DrawnInstance:
    key: str
    position: int
    ref: Hashable
    texts: tuple[str, ...]
    gold: float | int | str
    group: str = ""


def _sorted(items: Sequence[SourceItem]) -> list[SourceItem]:
    return sorted(items, key=lambda i: repr(i.ref))


def _key(prefix: str, position: int) -> str:
    return f"{prefix}-{position:04d}"


def _text_instance(prefix: str, position: int, item: SourceItem, *, group: str = "") -> DrawnInstance:
    """A text with its gold label (classification, clustering) drawn at ``position``."""
    return DrawnInstance(
        key=_key(prefix, position),
        position=position,
        ref=item.ref,
        texts=(item.payload["text"],),
        gold=str(item.gold),
        group=group,
    )


def _check_n(n: int, available: int, what: str) -> None:
    if n < 1:
        raise SamplingError(f"n must be at least 1, got {n}")
    if n > available:
        raise SamplingError(f"asked for {n} {what} but only {available} are available: lower n")


def sample_sts(items: Sequence[SourceItem], n: int, *, rng: np.random.Generator) -> list[DrawnInstance]:
    """``n`` sentence pairs with their gold similarity, in a seeded random order."""
    pool = _sorted(items)
    _check_n(n, len(pool), "pairs")
    picks = rng.choice(len(pool), size=n, replace=False)
    return [
        DrawnInstance(
            key=_key(STS_PREFIX, pos),
            position=pos,
            ref=pool[int(i)].ref,
            texts=(pool[int(i)].payload["sentence1"], pool[int(i)].payload["sentence2"]),
            gold=float(pool[int(i)].gold),
        )
        for pos, i in enumerate(picks)
    ]


def sample_classification(
    items: Sequence[SourceItem], n: int, *, rng: np.random.Generator, stratify: bool = False
) -> list[DrawnInstance]:
    """``n`` texts with their gold label, uniformly or stratified by label, in a seeded random order."""
    pool = _sorted(items)
    _check_n(n, len(pool), "items")
    if stratify:
        sample = stratified_sample([Unit(k, str(item.gold)) for k, item in enumerate(pool)], n, rng=rng)
        chosen = [pool[k] for k in sample.keys]
        chosen = [chosen[int(i)] for i in rng.permutation(len(chosen))]
    else:
        chosen = [pool[int(i)] for i in rng.choice(len(pool), size=n, replace=False)]
    return [_text_instance(CLASSIFICATION_PREFIX, pos, item) for pos, item in enumerate(chosen)]


def batch_sizes(n: int, batch_size: int) -> list[int]:
    """Sizes of the batches ``n`` clustering items are shown in: full batches, then the rest."""
    if batch_size < 2:
        raise SamplingError(f"batch_size must be at least 2 (a batch is grouped as a whole), got {batch_size}")
    sizes = [batch_size] * (n // batch_size) + ([n % batch_size] if n % batch_size else [])
    if sizes and sizes[-1] < 2:
        raise SamplingError(
            f"n={n} with batch_size={batch_size} leaves a last batch of one text, which cannot "
            "be grouped: choose n so that the last batch has at least two texts"
        )
    return sizes


def default_clusters_per_batch(batch_size: int) -> int:
    """Enough clusters that grouping is a real task, few enough that each has several texts."""
    return max(2, batch_size // 3)


def sample_clustering(
    items: Sequence[SourceItem],
    n: int,
    *,
    rng: np.random.Generator,
    batch_size: int = DEFAULT_BATCH_SIZE,
    clusters_per_batch: int | None = None,
) -> list[DrawnInstance]:
    """``n`` texts in batches of ``batch_size`` (group ``b00``, ``b01`` ...), each batch drawn from
    ``clusters_per_batch`` gold clusters (default: a third of the batch, at least two)."""
    pool = _sorted(items)
    _check_n(n, len(pool), "items")
    sizes = batch_sizes(n, batch_size)
    k = clusters_per_batch or default_clusters_per_batch(batch_size)
    if k < 2:
        raise SamplingError(f"clusters_per_batch must be at least 2, got {k}")
    remaining: dict[str, list[SourceItem]] = defaultdict(list)
    for item in pool:
        remaining[str(item.gold)].append(item)
    if len(remaining) < 2:
        raise SamplingError(f"clustering needs items of at least two gold clusters; the split has {len(remaining)}")
    drawn: list[DrawnInstance] = []
    for batch, size in enumerate(sizes):
        labels = sorted(label for label, left in remaining.items() if left)
        if len(labels) < 2:
            raise SamplingError(
                f"batch {batch + 1} of {len(sizes)}: fewer than two gold clusters have texts left; "
                "lower n or the batch size"
            )
        chosen_labels = [labels[int(i)] for i in rng.choice(len(labels), size=min(k, len(labels), size), replace=False)]
        members: list[SourceItem] = []
        while len(members) < size:
            progressed = False
            for label in chosen_labels:  # round robin: clusters as even as their sizes allow
                left = remaining[label]
                if left and len(members) < size:
                    members.append(left.pop(int(rng.integers(len(left)))))
                    progressed = True
            if not progressed:
                others = [label for label in labels if remaining[label] and label not in chosen_labels]
                if not others:
                    raise SamplingError(f"batch {batch + 1}: not enough texts left to fill it; lower n")
                chosen_labels.append(others[int(rng.integers(len(others)))])
        for j in rng.permutation(len(members)):
            drawn.append(_text_instance(CLUSTERING_PREFIX, len(drawn), members[int(j)], group=f"b{batch:02d}"))
    return drawn


def _cap(n_pos: int, n_neg: int, cap: int | None) -> tuple[int, int]:
    """How many positives and negatives to keep under ``cap``: proportional, at least one of each
    kind that exists."""
    if cap is None or n_pos + n_neg <= cap:
        return n_pos, n_neg
    if n_neg == 0:
        return min(n_pos, cap), 0
    keep_pos = min(n_pos, max(1, round(cap * n_pos / (n_pos + n_neg))))
    keep_pos = min(keep_pos, cap - 1)
    return keep_pos, min(n_neg, cap - keep_pos)


def sample_reranking(
    items: Sequence[SourceItem], n: int, *, rng: np.random.Generator, max_candidates: int | None = DEFAULT_CANDIDATES
) -> list[DrawnInstance]:
    """``n`` queries (group ``q000`` ...), one instance per (query, candidate); gold 1 for a
    positive, 0 for a negative. A text listed as both counts as a positive, once."""
    if max_candidates is not None and max_candidates < 2:
        raise SamplingError(f"candidates must be at least 2 (a ranking needs two texts), got {max_candidates}")
    pool = _sorted(items)
    _check_n(n, len(pool), "queries")
    drawn: list[DrawnInstance] = []
    for q, i in enumerate(rng.choice(len(pool), size=n, replace=False)):
        item = pool[int(i)]
        positives = list(dict.fromkeys(item.payload["positive"]))
        negatives = [t for t in dict.fromkeys(item.payload["negative"]) if t not in set(positives)]
        keep_pos, keep_neg = _cap(len(positives), len(negatives), max_candidates)
        kept = [(positives[int(j)], 1) for j in sorted(rng.choice(len(positives), size=keep_pos, replace=False))] + [
            (negatives[int(j)], 0) for j in sorted(rng.choice(len(negatives), size=keep_neg, replace=False))
        ]
        for j in rng.permutation(len(kept)):
            text, gold = kept[int(j)]
            position = len(drawn)
            drawn.append(
                DrawnInstance(
                    key=_key(RERANKING_PREFIX, position),
                    position=position,
                    ref=item.ref,
                    texts=(item.payload["query"], text),
                    gold=gold,
                    group=f"q{q:03d}",
                )
            )
    return drawn
