"""Seeded draws of human-baseline instances."""

from __future__ import annotations

from collections import Counter, defaultdict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from annotation.baselines import baseline_sampling as sampling
from annotation.baselines.baseline_sampling import SamplingError, SourceItem


def sts_items(n: int) -> list[SourceItem]:
    return [SourceItem(ref=i, payload={"sentence1": f"a{i}", "sentence2": f"b{i}"}, gold=i % 6) for i in range(n)]


def labelled(sizes: dict[str, int]) -> list[SourceItem]:
    return [
        SourceItem(ref=f"{label}-{k}", payload={"text": f"{label} text {k}"}, gold=label)
        for label, size in sizes.items()
        for k in range(size)
    ]


def rng(seed: int = 7) -> np.random.Generator:
    return np.random.default_rng(seed)


def test_sts_sample_is_seeded_keyed_and_independent_of_input_order():
    items = sts_items(50)
    first = sampling.sample_sts(items, 10, rng=rng())
    assert first == sampling.sample_sts(list(reversed(items)), 10, rng=rng())
    assert first != sampling.sample_sts(items, 10, rng=rng(8))
    assert [d.key for d in first] == [f"sts-{k:04d}" for k in range(10)]
    assert [d.position for d in first] == list(range(10))
    assert len({d.ref for d in first}) == 10
    for d in first:
        assert d.texts == (f"a{d.ref}", f"b{d.ref}") and d.gold == float(d.ref % 6) and isinstance(d.gold, float)


def test_n_above_available_is_a_clear_error():
    with pytest.raises(SamplingError, match="asked for 11 pairs but only 10 are available"):
        sampling.sample_sts(sts_items(10), 11, rng=rng())
    with pytest.raises(SamplingError, match="at least 1"):
        sampling.sample_sts(sts_items(10), 0, rng=rng())


def test_classification_stratified_spreads_labels_proportionally():
    items = labelled({"a": 30, "b": 20, "c": 10})
    drawn = sampling.sample_classification(items, 12, rng=rng(), stratify=True)
    assert Counter(d.gold for d in drawn) == {"a": 6, "b": 4, "c": 2}
    assert [d.key for d in drawn][:2] == ["cls-0000", "cls-0001"]
    # The order is shuffled, not grouped by label.
    assert [d.gold for d in drawn] != sorted(d.gold for d in drawn)


@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 12), min_size=2, max_size=8),
    batch_size=st.integers(2, 12),
    seed=st.integers(0, 2**32 - 1),
    data=st.data(),
)
def test_clustering_batches_hold_several_gold_clusters(sizes, batch_size, seed, data):
    items = labelled({f"l{k}": size for k, size in enumerate(sizes)})
    n = data.draw(st.integers(2, len(items)))
    if n % batch_size == 1:
        with pytest.raises(SamplingError, match="last batch of one text"):
            sampling.sample_clustering(items, n, rng=rng(seed), batch_size=batch_size)
        return
    try:
        drawn = sampling.sample_clustering(items, n, rng=rng(seed), batch_size=batch_size)
    except SamplingError as exc:
        # Only a tight pool may run out of clusters; with twice n spread over the clusters it never does.
        assert min(sizes) * len(sizes) < 2 * n, exc
        assert "fewer than two gold clusters have texts left" in str(exc)
        return
    assert len(drawn) == n and len({d.ref for d in drawn}) == n
    batches = defaultdict(list)
    for d in drawn:
        batches[d.group].append(d)
    assert [len(b) for b in batches.values()] == sampling.batch_sizes(n, batch_size)
    for batch in batches.values():
        assert len({d.gold for d in batch}) >= 2
    assert drawn == sampling.sample_clustering(list(reversed(items)), n, rng=rng(seed), batch_size=batch_size)


def test_clustering_uses_the_requested_clusters_per_batch_when_they_suffice():
    items = labelled({f"l{k}": 20 for k in range(10)})
    drawn = sampling.sample_clustering(items, 40, rng=rng(), batch_size=10, clusters_per_batch=3)
    for group in {d.group for d in drawn}:
        counts = Counter(d.gold for d in drawn if d.group == group)
        assert len(counts) == 3 and sorted(counts.values()) == [3, 3, 4]


def test_clustering_needs_two_clusters():
    with pytest.raises(SamplingError, match="at least two gold clusters"):
        sampling.sample_clustering(labelled({"only": 20}), 10, rng=rng())


def reranking_items() -> list[SourceItem]:
    return [
        SourceItem(
            ref=q,
            payload={
                "query": f"q{q}",
                "positive": [f"p{q}-{k}" for k in range(1 + q % 3)],
                "negative": [f"n{q}-{k}" for k in range(3 * q % 13)],
            },
            gold=None,
        )
        for q in range(12)
    ]


@pytest.mark.parametrize("cap", [None, 2, 5, 10])
def test_reranking_keeps_positives_and_negatives_under_the_cap(cap):
    items = reranking_items()
    drawn = sampling.sample_reranking(items, 8, rng=rng(), max_candidates=cap)
    groups = defaultdict(list)
    for d in drawn:
        groups[d.group].append(d)
        assert d.texts[0] == f"q{d.ref}" and d.gold == (1 if d.texts[1].startswith("p") else 0)
    assert len(groups) == 8
    for group in groups.values():
        item = items[group[0].ref]
        n_pos, n_neg = len(item.payload["positive"]), len(item.payload["negative"])
        golds = [d.gold for d in group]
        assert 1 in golds
        assert (0 in golds) == (n_neg > 0)
        assert len(group) == (n_pos + n_neg if cap is None else min(cap, n_pos + n_neg))
        assert len({d.texts[1] for d in group}) == len(group)
    assert len({d.key for d in drawn}) == len(drawn)


def test_reranking_candidates_are_shuffled_not_positives_first():
    items = [
        SourceItem(
            ref=q, payload={"query": f"q{q}", "positive": ["p1", "p2"], "negative": ["n1", "n2", "n3"]}, gold=None
        )
        for q in range(30)
    ]
    drawn = sampling.sample_reranking(items, 30, rng=rng(), max_candidates=None)
    firsts = Counter(next(d.gold for d in drawn if d.group == g) for g in {d.group for d in drawn})
    assert firsts[0] > 0 and firsts[1] > 0
