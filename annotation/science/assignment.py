"""Who rates what (pure module): Shiftlab, not Argilla, draws each annotator's batch.

- ``draw_assignment``: every real item goes to exactly ``raters_per_item`` different annotators,
  loads differ by at most one, and each annotator's queue is cut into batches of ``batch_size``
  real items, each holding ``controls_per_batch`` distinct controls at seeded random places.
- ``queue_extend``: items added to a queue later (re-assigned work) fill its last batch, then
  start new batches that get their own controls.
- ``receivers``: who takes over items taken from someone (the least-loaded annotator who does not
  already hold the item).
- ``rebalance``: which open items move to an annotator who joins later.
- ``pull_items`` and ``next_batch``: the "pull" mode of a design, where nothing is drawn ahead: an
  annotator who finished their released batches gets a new batch of the items closest to
  completion, so items complete in about the common order whatever the annotators' paces.

Items and annotators are opaque integer keys (database ids); randomness comes from an explicit
``numpy.random.Generator``, so the same inputs and seed always give the same assignment.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Slot:
    """One place in an annotator's queue: a real item or a control, in its batch."""

    item: int
    control: bool
    batch: int


def _control_order(positives: Sequence[int], negatives: Sequence[int], rng: np.random.Generator) -> list[int]:
    """Positives and negatives shuffled, then interleaved (starting with a random kind), so that
    any prefix holds about as many of each."""
    pos = [positives[i] for i in rng.permutation(len(positives))]
    neg = [negatives[i] for i in rng.permutation(len(negatives))]
    first, second = (pos, neg) if rng.random() < 0.5 else (neg, pos)
    order = []
    for k in range(max(len(first), len(second))):
        order.extend(x[k] for x in (first, second) if k < len(x))
    return order


def _batches(
    real: Sequence[int],
    controls: Sequence[int],
    *,
    first_batch: int,
    batch_size: int,
    controls_per_batch: int,
    rng: np.random.Generator,
) -> list[Slot]:
    """``real`` cut into batches from index ``first_batch``, each with the next
    ``controls_per_batch`` of ``controls`` placed at seeded random positions."""
    slots: list[Slot] = []
    used = 0
    for start in range(0, len(real), batch_size):
        batch = first_batch + start // batch_size
        chunk = [Slot(item, False, batch) for item in real[start : start + batch_size]]
        take = controls[used : used + controls_per_batch]
        used += len(take)
        chunk.extend(Slot(item, True, batch) for item in take)
        slots.extend(chunk[i] for i in rng.permutation(len(chunk)))
    return slots


def controls_needed(n_real: int, *, batch_size: int, controls_per_batch: int) -> int:
    """Controls in a queue of ``n_real`` real items: ``controls_per_batch`` per started batch."""
    return -(-n_real // batch_size) * controls_per_batch if n_real else 0


def check_panel(annotators: Sequence[int], raters_per_item: int, batch_size: int) -> None:
    """Raises ``ValueError`` when the panel cannot give every item ``raters_per_item`` raters."""
    if len(set(annotators)) != len(annotators):
        raise ValueError("each annotator may appear only once")
    if raters_per_item < 1 or batch_size < 1:
        raise ValueError("raters_per_item and batch_size must be at least 1")
    if len(annotators) < raters_per_item:
        missing = raters_per_item - len(annotators)
        raise ValueError(
            f"each item needs {raters_per_item} different raters, but only {len(annotators)} "
            f"annotator{'s' if len(annotators) != 1 else ''} given: add at least {missing} more"
        )


def draw_assignment(
    real: Sequence[int],
    positives: Sequence[int],
    negatives: Sequence[int],
    annotators: Sequence[int],
    *,
    raters_per_item: int,
    batch_size: int,
    controls_per_batch: int,
    rng: np.random.Generator,
    met: Mapping[int, Collection[int]] | None = None,
) -> dict[int, list[Slot]]:
    """Each annotator's queue, in the order they should see it.

    ``met`` (annotator -> controls) keeps from an annotator the controls whose texts they met before
    (in another study's control, or as a real item).

    Real items are taken in a seeded order and each goes to the ``raters_per_item`` annotators
    with the fewest items so far (ties broken at random), so loads differ by at most one. Each
    queue follows that order, is cut into batches of ``batch_size`` real items (shuffled inside
    the batch), and each batch receives
    ``controls_per_batch`` controls no other batch of that annotator has (alternating easy
    positives and easy negatives where both exist). Raises ``ValueError`` when there are fewer
    annotators than ``raters_per_item`` or too few controls for the largest queue.
    """
    check_panel(annotators, raters_per_item, batch_size)
    load = {a: 0 for a in annotators}
    tiebreak = {a: float(x) for a, x in zip(annotators, rng.random(len(annotators)), strict=True)}
    mine: dict[int, list[int]] = {a: [] for a in annotators}
    for index in rng.permutation(len(real)):
        chosen = sorted(annotators, key=lambda a: (load[a], tiebreak[a]))[:raters_per_item]
        for a in chosen:
            mine[a].append(real[int(index)])
            load[a] += 1
        for a in chosen:  # fresh tie-breaks, so equal loads do not always favour the same people
            tiebreak[a] = float(rng.random())
    met = met or {}
    usable = {
        a: (
            [c for c in positives if c not in met.get(a, ())],
            [c for c in negatives if c not in met.get(a, ())],
        )
        for a in annotators
    }
    for a in annotators:
        need = controls_needed(len(mine[a]), batch_size=batch_size, controls_per_batch=controls_per_batch)
        have = len(usable[a][0]) + len(usable[a][1])
        if need > have:
            seen = len(positives) + len(negatives) - have
            raise ValueError(
                f"a queue of {len(mine[a])} items needs {need} distinct controls, but the study has "
                f"{len(positives) + len(negatives)}"
                + (
                    f", {seen} of which annotator {a} already met (in another study's control or as a real item)"
                    if seen
                    else ""
                )
            )
    queues = {}
    for a in annotators:
        # Each queue keeps the common (seeded) item order across batches, shuffled only inside a
        # batch: annotators working at a similar pace then complete the same items about together,
        # which is what lets a sequential gate settle before every item is rated.
        queues[a] = _batches(
            mine[a],
            _control_order(*usable[a], rng),
            first_batch=0,
            batch_size=batch_size,
            controls_per_batch=controls_per_batch,
            rng=rng,
        )
    return queues


def queue_extend(
    queue: Sequence[Slot],
    new_items: Sequence[int],
    positives: Sequence[int],
    negatives: Sequence[int],
    *,
    batch_size: int,
    controls_per_batch: int,
    rng: np.random.Generator,
) -> list[Slot]:
    """The slots to append to ``queue`` for ``new_items``: they first fill its last batch (whose
    controls are already placed), then start new batches, each with controls the queue does not
    hold yet. Raises ``ValueError`` when the study has too few unused controls."""
    held = {s.item for s in queue}
    new_items = [i for i in new_items if i not in held]
    real_in_last = 0
    last = max((s.batch for s in queue), default=-1)
    if last >= 0:
        real_in_last = sum(1 for s in queue if s.batch == last and not s.control)
    room = batch_size - real_in_last if last >= 0 else 0
    fill = [Slot(item, False, last) for item in new_items[:room]]
    rest = new_items[room:]
    unused_pos = [c for c in positives if c not in held]
    unused_neg = [c for c in negatives if c not in held]
    need = controls_needed(len(rest), batch_size=batch_size, controls_per_batch=controls_per_batch)
    if need > len(unused_pos) + len(unused_neg):
        raise ValueError(
            f"{need} more distinct controls are needed, but only {len(unused_pos) + len(unused_neg)} are left"
        )
    tail = _batches(
        rest,
        _control_order(unused_pos, unused_neg, rng),
        first_batch=last + 1,
        batch_size=batch_size,
        controls_per_batch=controls_per_batch,
        rng=rng,
    )
    return fill + tail


def receivers(
    items: Sequence[int],
    holders: Mapping[int, set[int]],
    loads: Mapping[int, int],
    *,
    rng: np.random.Generator,
) -> tuple[dict[int, int], list[int]]:
    """Who takes over each of ``items``: the candidate (a key of ``loads``, their open work) with
    the least load who is not among ``holders[item]``; ties at random. Returns (item -> annotator,
    items nobody can take because every candidate already holds them)."""
    load = dict(loads)
    tiebreak = {a: float(x) for a, x in zip(load, rng.random(len(load)), strict=True)}
    given, unplaced = {}, []
    for item in items:
        free = [a for a in load if a not in holders.get(item, set())]
        if not free:
            unplaced.append(item)
            continue
        a = min(free, key=lambda a: (load[a], tiebreak[a]))
        given[item] = a
        load[a] += 1
    return given, unplaced


def rebalance(
    newcomer: int, open_items: Mapping[int, Sequence[int]], *, rng: np.random.Generator
) -> list[tuple[int, int]]:
    """(item, from annotator) pairs to move so that ``newcomer`` takes a fair share of the open
    work: items move one at a time from whoever has most open items while that is at least two
    more than the newcomer has. ``open_items`` maps each current annotator to their open real
    items (not submitted yet)."""
    pools = {a: [items[i] for i in rng.permutation(len(items))] for a, items in open_items.items() if a != newcomer}
    moved: list[tuple[int, int]] = []
    taken: set[int] = set()
    while pools:
        source = max(sorted(pools), key=lambda a: len(pools[a]))
        if len(pools[source]) - len(moved) < 2:
            break
        item = next((i for i in pools[source] if i not in taken), None)
        if item is None:
            break
        pools[source].remove(item)
        taken.add(item)
        moved.append((item, source))
    return moved


def pull_items(
    order: Sequence[int],
    raters: Mapping[int, int],
    held: set[int] | frozenset[int],
    *,
    raters_per_item: int,
    batch_size: int,
    closed: set[int] | frozenset[int] = frozenset(),
    needed: Mapping[int, int] | None = None,
) -> list[int]:
    """The real items of an annotator's next batch in pull mode: items that still need raters
    (``raters[item]`` < ``raters_per_item``: raters holding or having answered it), that this
    annotator never held (``held``) and that are not ``closed`` (a settled transformation's),
    those with the most raters first, then in the study's common ``order``. Finishing items that
    others started first is what lets a sequential gate settle before every item is rated.
    ``needed`` (item -> raters it needs now, see ``raters_needed``) lowers an item's need below
    ``raters_per_item``."""
    rank = {item: k for k, item in enumerate(order)}
    need = {} if needed is None else needed
    open_ = [
        i
        for i in order
        if i not in held and i not in closed and raters.get(i, 0) < min(need.get(i, raters_per_item), raters_per_item)
    ]
    return sorted(open_, key=lambda i: (-raters.get(i, 0), rank[i]))[:batch_size]


# Two answers "agree" when they lie within this share of the question's scale (1 point on 1-5).
AGREE_WITHIN = 0.25


def raters_needed(
    answers: Sequence[Mapping[str, float]],
    scales: Mapping[str, tuple[float, float]],
    *,
    gate_raters: int,
    raters_per_item: int,
) -> int:
    """How many raters an item needs, given its counted raters' ``answers`` so far (question ->
    value each, earliest first), when the design's gate observes the first ``gate_raters`` of them
    (``design.adaptive_gate_raters``): ``gate_raters`` until they all answered; then
    ``gate_raters`` again if they agree on every question (within ``AGREE_WITHIN`` of its scale),
    else ``raters_per_item`` (a contested item gets its further raters).

    >>> raters_needed([{"q": 4}, {"q": 5}], {"q": (1, 5)}, gate_raters=2, raters_per_item=3)
    2
    >>> raters_needed([{"q": 2}, {"q": 5}], {"q": (1, 5)}, gate_raters=2, raters_per_item=3)
    3
    """
    if len(answers) < gate_raters:
        return gate_raters
    first = answers[:gate_raters]
    for question, (low, high) in scales.items():
        values = [a[question] for a in first]
        if max(values) - min(values) > AGREE_WITHIN * (high - low) + 1e-9:
            return raters_per_item
    return gate_raters


def overlap_items(items: Sequence[int], share: float, rng: np.random.Generator) -> set[int]:
    """The items rated by every rater in a design whose gate observes one rating per item: the first
    ``ceil(share * len(items))`` of a seeded random order (at least 2 when ``share`` > 0 and there are
    2 items, so that agreement has something to measure). Drawn before any rating, so which items
    get several raters never depends on how they were rated.

    >>> sorted(overlap_items([10, 11, 12, 13], 0.5, np.random.default_rng(0)))
    [11, 12]
    """
    if not share or not items:
        return set()
    count = min(len(items), max(2, int(np.ceil(share * len(items) - 1e-9))))
    order = rng.permutation(len(items))
    return {items[int(k)] for k in order[:count]}


def next_batch(
    queue: Sequence[Slot],
    items: Sequence[int],
    positives: Sequence[int],
    negatives: Sequence[int],
    *,
    controls_per_batch: int,
    rng: np.random.Generator,
) -> list[Slot]:
    """``items`` as a new batch after the last of ``queue``, with ``controls_per_batch`` controls
    the queue does not hold yet, at seeded random places. Raises ``ValueError`` when the study has
    too few unused controls (the annotator has then done as much as the controls allow)."""
    held = {s.item for s in queue}
    unused_pos = [c for c in positives if c not in held]
    unused_neg = [c for c in negatives if c not in held]
    if controls_per_batch > len(unused_pos) + len(unused_neg):
        raise ValueError(
            f"a new batch needs {controls_per_batch} distinct controls, but only "
            f"{len(unused_pos) + len(unused_neg)} are left"
        )
    last = max((s.batch for s in queue), default=-1)
    return _batches(
        list(items),
        _control_order(unused_pos, unused_neg, rng),
        first_batch=last + 1,
        batch_size=max(len(items), 1),
        controls_per_batch=controls_per_batch,
        rng=rng,
    )
