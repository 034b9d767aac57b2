"""Per-item scores of one evaluated unit, from which its main score can be recomputed on any
multiset of its items (pure module: numpy and scipy, no Django, no I/O).

Two kinds cover the main scores that decompose over items:

- ``"mean"``: the main score is the mean of one value per item (retrieval and reranking: the main
  measure of each query; summarization: the cosine Spearman of each text; classification: each
  test item's correctness averaged over the experiments);
- ``"spearman"``: the main score is the Spearman correlation of the items' predicted similarities
  (``values``) with their gold scores (``gold``) (STS and STR: one pair per item).

On a multiset (``counts`` per item: how often it was drawn) an item drawn k times counts k times:
its value weighs k in the mean; for Spearman it is repeated k times before ranking, ties taking
their average rank as ``scipy.stats.spearmanr`` does. Clustering and pair classification scores
do not decompose over items and have none.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

KINDS = ("mean", "spearman")


@dataclass(frozen=True)
class ItemScores:
    kind: Literal["mean", "spearman"]
    ids: tuple[str, ...]
    values: tuple[float, ...]  # "mean": each item's value; "spearman": its predicted similarity
    gold: tuple[float, ...] = ()  # "spearman" only: each item's gold score

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")
        if len(self.values) != len(self.ids) or len(set(self.ids)) != len(self.ids):
            raise ValueError(f"need one value per distinct item id, got {len(self.values)} for {len(self.ids)} ids")
        if len(self.gold) != (len(self.ids) if self.kind == "spearman" else 0):
            raise ValueError(f"{self.kind} item scores need {'one gold score per item' if self.gold else 'no gold'}")

    def score(self, counts: Mapping[str, int] | None = None) -> float:
        """The main score on the multiset ``counts`` (item id -> times drawn; ids this unit lacks
        are ignored); on every item once when None. NaN when no drawn item carries weight or a
        Spearman side is constant."""
        weights = np.ones(len(self.ids)) if counts is None else np.array([counts.get(i, 0) for i in self.ids])
        return float(self.scores(weights[None, :])[0])

    def scores(self, weights: np.ndarray) -> np.ndarray:
        """The main score under each row of ``weights`` (resamples × items, in ``ids`` order)."""
        weights = np.asarray(weights, dtype=float)
        values = np.asarray(self.values, dtype=float)
        if self.kind == "mean":
            with np.errstate(invalid="ignore", divide="ignore"):
                return weights @ values / weights.sum(axis=1)
        return weighted_spearman(values, np.asarray(self.gold, dtype=float), weights)

    def as_json(self, *, digits: int = 9) -> dict:
        """Plain data, values rounded to ``digits`` significant digits (what a result row stores)."""
        data = {"kind": self.kind, "ids": list(self.ids), "values": [_significant(v, digits) for v in self.values]}
        if self.kind == "spearman":
            data["gold"] = [_significant(v, digits) for v in self.gold]
        return data

    @classmethod
    def from_json(cls, data: Mapping | None) -> ItemScores | None:
        if not data:
            return None
        gold = tuple(float(v) for v in data.get("gold", ()))
        return cls(data["kind"], tuple(data["ids"]), tuple(float(v) for v in data["values"]), gold)

    def relabelled(self, ids: Sequence[str]) -> ItemScores:
        """The same scores under other ids: ``ids[int(i)]`` for each positional id ``i``."""
        return ItemScores(self.kind, tuple(str(ids[int(i)]) for i in self.ids), self.values, self.gold)


def positional(kind: Literal["mean", "spearman"], values: Sequence[float], gold: Sequence[float] = ()) -> ItemScores:
    """Item scores whose ids are the items' positions in the evaluator's input ("0", "1", ...)."""
    return ItemScores(
        kind, tuple(str(i) for i in range(len(values))), tuple(map(float, values)), tuple(map(float, gold))
    )


def weighted_spearman(x: np.ndarray, y: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Spearman's ρ of ``x`` and ``y`` with every item repeated ``weights[b, i]`` times, for each
    row b: the Pearson correlation of the average ranks, weighted by the counts (equal to
    ``spearmanr(np.repeat(x, w), np.repeat(y, w))`` up to rounding). NaN where a side is constant."""
    weights = np.asarray(weights, dtype=float)
    rank_x, rank_y = _weighted_ranks(x, weights), _weighted_ranks(y, weights)
    total = weights.sum(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        dx = rank_x - (weights * rank_x).sum(axis=1, keepdims=True) / total
        dy = rank_y - (weights * rank_y).sum(axis=1, keepdims=True) / total
        covariance = (weights * dx * dy).sum(axis=1)
        spread = np.sqrt((weights * dx * dx).sum(axis=1) * (weights * dy * dy).sum(axis=1))
        rho = covariance / spread
    return np.where(spread > 1e-12 * np.maximum(total[:, 0], 1) ** 3, rho, np.nan)


def _weighted_ranks(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Average rank (1-based) of each item among the repeated items, per row of ``weights``."""
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    group_of = np.cumsum(np.r_[True, ordered[1:] != ordered[:-1]]) - 1
    group_weight = np.add.reduceat(weights[:, order], starts, axis=1)
    below = np.cumsum(group_weight, axis=1) - group_weight
    ranks = np.empty_like(weights)
    ranks[:, order] = (below + (group_weight + 1) / 2)[:, group_of]
    return ranks


def _significant(value: float, digits: int) -> float:
    return float(f"{value:.{digits}g}") if math.isfinite(value) else value
