"""Properties of the assignment draw (pure): raters per item, balanced load, controls in every
batch, determinism, re-assignment and newcomers."""

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from annotation.science.assignment import (
    Slot,
    controls_needed,
    draw_assignment,
    next_batch,
    pull_items,
    queue_extend,
    rebalance,
    receivers,
)


def _draw(n_real, n_annotators, r, batch_size, cpb, seed=0):
    real = list(range(n_real))
    n_ctrl = controls_needed(n_real, batch_size=batch_size, controls_per_batch=cpb)
    positives = list(range(1000, 1000 + (n_ctrl + 1) // 2))
    negatives = list(range(2000, 2000 + n_ctrl // 2))
    queues = draw_assignment(
        real,
        positives,
        negatives,
        list(range(n_annotators)),
        raters_per_item=r,
        batch_size=batch_size,
        controls_per_batch=cpb,
        rng=np.random.default_rng(seed),
    )
    return real, set(positives) | set(negatives), queues


@settings(max_examples=60, deadline=None)
@given(
    n_real=st.integers(1, 60),
    extra=st.integers(0, 5),
    r=st.integers(1, 4),
    batch_size=st.integers(1, 12),
    cpb=st.integers(0, 3),
    seed=st.integers(0, 2**16),
)
def test_every_item_gets_r_raters_loads_balance_and_every_batch_holds_its_controls(
    n_real, extra, r, batch_size, cpb, seed
):
    real, controls, queues = _draw(n_real, r + extra, r, batch_size, cpb, seed)
    raters = Counter(s.item for q in queues.values() for s in q if not s.control)
    assert set(raters) == set(real) and set(raters.values()) == {r}
    loads = [sum(1 for s in q if not s.control) for q in queues.values()]
    assert max(loads) - min(loads) <= 1
    for queue in queues.values():
        items = [s.item for s in queue]
        assert len(items) == len(set(items)), "an annotator never sees a record twice"
        for batch in {s.batch for s in queue}:
            slots = [s for s in queue if s.batch == batch]
            assert sum(1 for s in slots if not s.control) <= batch_size
            assert sum(1 for s in slots if s.control) == cpb
            assert all(s.item in controls for s in slots if s.control)


def test_the_same_seed_draws_the_same_queues_and_another_seed_does_not():
    assert _draw(30, 4, 3, 5, 2, seed=7)[2] == _draw(30, 4, 3, 5, 2, seed=7)[2]
    assert _draw(30, 4, 3, 5, 2, seed=7)[2] != _draw(30, 4, 3, 5, 2, seed=8)[2]


def test_controls_sit_at_different_places_and_alternate_kinds():
    _, _, queues = _draw(40, 3, 3, 10, 2, seed=1)
    places = {tuple(i for i, s in enumerate(q) if s.control) for q in queues.values()}
    assert len(places) > 1
    for queue in queues.values():
        kinds = Counter("pos" if s.item < 2000 else "neg" for s in queue if s.control)
        assert abs(kinds["pos"] - kinds["neg"]) <= 1


def test_too_few_annotators_or_controls_is_refused_with_what_is_missing():
    with pytest.raises(ValueError, match="needs 3 different raters, but only 2 annotators given: add at least 1"):
        _draw(10, 2, 3, 5, 1)
    with pytest.raises(ValueError, match="needs 4 distinct controls, but the study has 1"):
        draw_assignment(
            list(range(8)),
            [100],
            [],
            [1],
            raters_per_item=1,
            batch_size=4,
            controls_per_batch=2,
            rng=np.random.default_rng(0),
        )


def test_extending_a_queue_fills_the_last_batch_then_starts_new_batches_with_unused_controls():
    _, _, queues = _draw(7, 1, 1, 5, 2, seed=3)  # batches of 5 and 2 real items
    queue = queues[0]
    tail = queue_extend(
        queue,
        [50, 51, 52, 53, 54],
        [1000, 1001, 1002, 1003],
        [2000, 2001, 2002],
        batch_size=5,
        controls_per_batch=2,
        rng=np.random.default_rng(0),
    )
    assert [s.item for s in tail[:3]] == [50, 51, 52] and {s.batch for s in tail[:3]} == {1}
    new_batch = tail[3:]
    assert {s.batch for s in new_batch} == {2}
    controls = [s.item for s in new_batch if s.control]
    assert len(controls) == 2 and not set(controls) & {s.item for s in queue}


def test_receivers_skip_people_who_already_hold_the_item_and_prefer_the_least_loaded():
    given_to, unplaced = receivers(
        [1, 2, 3], {1: {10}, 2: {10, 11}, 3: {10, 11, 12}}, {10: 0, 11: 5, 12: 1}, rng=np.random.default_rng(0)
    )
    assert given_to == {1: 12, 2: 12} and unplaced == [3]


def test_a_newcomer_takes_a_fair_share_of_the_open_work_without_duplicates():
    open_items = {1: list(range(0, 10)), 2: list(range(5, 15)), 3: [20]}
    moves = rebalance(9, open_items, rng=np.random.default_rng(0))
    moved_items = [item for item, _ in moves]
    assert len(moved_items) == len(set(moved_items))
    left = {a: len(v) - sum(1 for _, src in moves if src == a) for a, v in open_items.items()}
    assert max(left.values()) - len(moves) <= 1


# --- pull mode ------------------------------------------------------------------------------------


def test_pull_takes_items_closest_to_completion_then_the_common_order():
    order = [5, 3, 9, 1, 7, 2]
    raters = {3: 1, 9: 2, 7: 1, 2: 3}  # 2 is complete (3 raters); 9 needs one more
    assert pull_items(order, raters, set(), raters_per_item=3, batch_size=4) == [9, 3, 7, 5]
    # never an item the annotator held, nor one of a settled transformation (closed)
    assert pull_items(order, raters, {9, 5}, raters_per_item=3, batch_size=4, closed={7}) == [3, 1]
    assert pull_items(order, {i: 3 for i in order}, set(), raters_per_item=3, batch_size=4) == []


def test_a_pulled_batch_is_one_new_batch_with_unused_controls():
    queue = [Slot(1, False, 0), Slot(100, True, 0), Slot(2, False, 0), Slot(3, False, 1), Slot(101, True, 1)]
    slots = next_batch(queue, [7, 8], [100, 102], [101, 103], controls_per_batch=2, rng=np.random.default_rng(0))
    assert {s.batch for s in slots} == {2}
    assert sorted(s.item for s in slots if not s.control) == [7, 8]
    assert sorted(s.item for s in slots if s.control) == [102, 103]  # the two it has not had
    with pytest.raises(ValueError, match="needs 3 distinct controls, but only 2 are left"):
        next_batch(queue, [7], [100, 102], [101, 103], controls_per_batch=3, rng=np.random.default_rng(0))


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 40),
    st.integers(2, 6),
    st.integers(1, 3),
    st.integers(1, 6),
    st.lists(st.floats(0.1, 1.0), min_size=6, max_size=6),
    st.integers(0, 2**16),
)
def test_pulling_until_done_gives_every_item_exactly_r_raters(n_items, panel, r, batch_size, speeds, seed):
    """Annotators at any paces pulling one batch whenever they finish theirs: every item ends
    with exactly r distinct raters, and nobody gets an item twice."""
    if r > panel:
        return
    rng = np.random.default_rng(seed)
    order = [int(i) for i in rng.permutation(n_items)]
    raters: dict[int, set[int]] = {}
    queues: dict[int, list[int]] = {a: [] for a in range(panel)}
    held: dict[int, set[int]] = {a: set() for a in range(panel)}

    def pull(a):
        items = pull_items(
            order, {i: len(v) for i, v in raters.items()}, held[a], raters_per_item=r, batch_size=batch_size
        )
        for i in items:
            raters.setdefault(i, set()).add(a)
            held[a].add(i)
        queues[a] = items

    for a in range(panel):
        pull(a)
    weights = np.array(speeds[:panel])
    while any(queues.values()):
        busy = [a for a in range(panel) if queues[a]]
        a = busy[rng.choice(len(busy), p=weights[busy] / weights[busy].sum())]
        queues[a].pop()
        if not queues[a]:
            pull(a)
    assert sorted(raters) == sorted(order)
    assert all(len(v) == r for v in raters.values())


def test_an_annotator_never_gets_controls_met_in_another_study():
    real = list(range(8))
    positives, negatives = [100, 101, 102, 103], [200, 201, 202, 203]
    met = {1: {100, 101, 200, 201}}
    queues = draw_assignment(
        real,
        positives,
        negatives,
        [1, 2],
        raters_per_item=1,
        batch_size=4,
        controls_per_batch=2,
        rng=np.random.default_rng(0),
        met=met,
    )
    mine = {s.item for s in queues[1] if s.control}
    assert len(mine) == 2 and not mine & met[1]
    with pytest.raises(ValueError, match="needs 4 distinct controls, but the study has 8, 6 of which annotator 1"):
        draw_assignment(
            real,
            positives,
            negatives,
            [1],
            raters_per_item=1,
            batch_size=4,
            controls_per_batch=2,
            rng=np.random.default_rng(0),
            met={1: {100, 101, 102, 200, 201, 202}},
        )


def test_pull_items_follows_what_each_item_needs_now():
    # 3 raters per item, the gate on 2: item 1's two raters agreed (needs 2, has 2: done), item 2's
    # disagreed (needs 3: its third rater first, it has the most raters), items 3 and 4 need 2.
    needed = {1: 2, 2: 3, 3: 2, 4: 2}
    raters = {1: 2, 2: 2, 3: 1}
    assert pull_items([1, 2, 3, 4], raters, set(), raters_per_item=3, batch_size=10, needed=needed) == [2, 3, 4]
    # without ``needed`` every item needs all 3
    assert pull_items([1, 2, 3, 4], raters, set(), raters_per_item=3, batch_size=10) == [1, 2, 3, 4]
