"""Properties of the assignment draw (pure): raters per item, balanced load, controls in every
batch, determinism, re-assignment and newcomers."""

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from annotation.assignment import controls_needed, draw_assignment, queue_extend, rebalance, receivers


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
