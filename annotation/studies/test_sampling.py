"""Seeded stratified sampling of study items."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from annotation.studies.sampling import Unit, allocate, stratified_sample


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
