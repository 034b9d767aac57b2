"""Seeded stratified sampling of study items."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from annotation.science.sampling import Candidate, Unit, allocate, draw_real_items, stratified_sample


@settings(max_examples=80, deadline=None)
@given(
    st.dictionaries(st.text(min_size=1, max_size=3), st.integers(1, 40), min_size=1, max_size=6), st.integers(0, 200)
)
def test_allocation_is_proportional_and_exact(sizes, n):
    alloc = allocate(sizes, n)
    assert sum(alloc.values()) == min(n, sum(sizes.values()))
    assert all(0 <= alloc[s] <= sizes[s] for s in sizes)
    if n < sum(sizes.values()):
        for s, size in sizes.items():
            assert abs(alloc[s] - n * size / sum(sizes.values())) < 1 + 1e-9


def test_sampling_is_seeded_stratified_and_order_free():
    units = [Unit(i, "a" if i < 30 else "b") for i in range(40)]
    first = stratified_sample(units, 10, rng=np.random.default_rng(7))
    again = stratified_sample(list(reversed(units)), 10, rng=np.random.default_rng(7))
    other = stratified_sample(units, 10, rng=np.random.default_rng(8))
    assert first.keys == again.keys and first.keys != other.keys
    assert first.allocation == {"a": 8, "b": 2} and first.shortfall == 0 and len(set(first.keys)) == 10
    everything = stratified_sample(units, 50, rng=np.random.default_rng(7))
    assert len(everything.keys) == 40 and everything.shortfall == 10


def test_real_items_take_each_original_once_while_the_pools_allow():
    originals = [f"text {k}" for k in range(6)]
    pools = {
        name: [Candidate((name, k), "s", text) for k, text in enumerate(originals)]
        for name in ("summary", "paraphrase")
    }
    draw = draw_real_items(pools, 3, seed=1)
    assert [len(draw.keys[name]) for name in ("paraphrase", "summary")] == [3, 3]
    drawn = {name: {originals[k] for _, k in keys} for name, keys in draw.keys.items()}
    assert not drawn["paraphrase"] & drawn["summary"]
    assert draw.info["summary"]["shared_originals"] == 0
    # Four of six: the second transformation in name order tops up with originals drawn already.
    draw = draw_real_items(pools, 4, seed=1)
    assert draw.info["paraphrase"]["shared_originals"] == 0 and draw.info["summary"]["shared_originals"] == 2
    assert draw.info["summary"] == {
        "drawn": 4,
        "allocation": {"s": 4},
        "available": {"s": 6},
        "shortfall": 0,
        "shared_originals": 2,
    }
    shuffled = {name: list(reversed(pool)) for name, pool in pools.items()}
    assert draw_real_items(shuffled, 4, seed=1).keys == draw.keys
