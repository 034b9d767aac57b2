"""Benchmark aggregates (pure module): per transformation, per axis, total and original.

For one model, with scores of units (dataset, transformation or "original", seed):

- **original**: mean over datasets of the original score;
- **transformation**: at each seed the mean over datasets, then the mean and the sample standard
  deviation (ddof=1) over seeds;
- **axis**: the mean of its transformations' means; its SD is that of the per-seed axis scores
  (the mean of the axis' transformations at each seed) over the seeds they share;
- **total**: the unweighted mean of the three benchmark axes (lexical, length, language), with the
  SD of the per-seed totals. The "extra" axis is never part of the total;
- **delta**: transformed minus original on the same items, per unit, averaged like the scores;
  beside it the original score on those same items (averaged the same way) and how many items
  both sides have (per seed, summed over datasets: the fewest and the most), since items whose
  transformation failed are left out of both sides and the delta is not taken against the
  original score of every item.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field

from evaluation.benchmark_plan import BENCHMARK_AXES, ORIGINAL
from evaluation.item_scores import ItemScores

# A unit's score as the API and the Hugging Face export show it (fields and properties of
# evaluation.models.BenchmarkResult).
RESULT_SCORE_FIELDS = ("main_metric", "main_score", "original_main_score", "delta", "n_items", "n_left_out")


@dataclass(frozen=True)
class UnitScore:
    model: str
    dataset: str
    transformation: str
    axis: str
    seed: int
    score: float
    original_score: float | None = None  # original data on the same items (transformed units)
    # per-item scores of ``score`` (None where the metric does not decompose), for rank intervals
    item_scores: ItemScores | None = field(default=None, compare=False, repr=False)
    n_items: int | None = field(default=None, compare=False)  # items scored, on both sides for a transformed unit

    @property
    def delta(self) -> float | None:
        return None if self.original_score is None else self.score - self.original_score


@dataclass(frozen=True)
class Summary:
    mean: float | None
    sd: float | None  # sample SD over seeds; None with fewer than two seeds
    n_seeds: int
    delta: float | None = None  # mean transformed - original on the same items
    original: float | None = None  # the original score on those same items, averaged like ``delta``
    items_shared: tuple[int, int] | None = None  # items both sides have per seed: (fewest, most)


@dataclass(frozen=True)
class ModelAggregate:
    model: str
    original: float | None
    transformations: Mapping[str, Summary]
    axes: Mapping[str, Summary]
    total: Summary
    complete: bool  # every benchmark axis has at least one transformation

    def summaries_as_dict(self) -> dict:
        """The original score and every summary as plain data (for JSON)."""
        return {
            "original": self.original,
            "total": asdict(self.total),
            "axes": {k: asdict(v) for k, v in self.axes.items()},
            "transformations": {k: asdict(v) for k, v in self.transformations.items()},
        }


def mean_sd(values: Sequence[float]) -> tuple[float | None, float | None]:
    """Mean and sample standard deviation (ddof=1); SD is None for fewer than two values."""
    if not values:
        return None, None
    mean = math.fsum(values) / len(values)
    if len(values) < 2:
        return mean, None
    return mean, math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1))


def _mean(values: Iterable[float]) -> float | None:
    values = list(values)
    return math.fsum(values) / len(values) if values else None


def _span(values: Iterable[int]) -> tuple[int, int] | None:
    values = list(values)
    return (min(values), max(values)) if values else None


def aggregate(units: Iterable[UnitScore]) -> dict[str, ModelAggregate]:
    """Aggregates per model (see the module docstring)."""
    by_model: dict[str, list[UnitScore]] = defaultdict(list)
    for unit in units:
        by_model[unit.model].append(unit)
    return {model: _aggregate_model(model, rows) for model, rows in by_model.items()}


def _aggregate_model(model: str, units: list[UnitScore]) -> ModelAggregate:
    original = _mean(u.score for u in units if u.transformation == ORIGINAL)
    # transformation -> seed -> per-dataset scores and deltas
    scores: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    deltas: dict[str, list[float]] = defaultdict(list)
    originals: dict[str, list[float]] = defaultdict(list)
    shared: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))  # transformation -> seed -> items
    axis_of: dict[str, str] = {}
    for u in units:
        if u.transformation == ORIGINAL:
            continue
        scores[u.transformation][u.seed].append(u.score)
        axis_of[u.transformation] = u.axis
        if u.delta is not None:
            deltas[u.transformation].append(u.delta)
            originals[u.transformation].append(u.original_score)
            if u.n_items is not None:
                shared[u.transformation][u.seed] += u.n_items
    per_seed = {t: {seed: math.fsum(v) / len(v) for seed, v in seeds.items()} for t, seeds in scores.items()}
    transformations = {}
    for name in sorted(per_seed):
        mean, sd = mean_sd([per_seed[name][seed] for seed in sorted(per_seed[name])])
        transformations[name] = Summary(
            mean, sd, len(per_seed[name]), _mean(deltas[name]), _mean(originals[name]), _span(shared[name].values())
        )
    axes: dict[str, Summary] = {}
    axis_series: dict[str, dict[int, float]] = {}
    for axis in sorted(set(axis_of.values())):
        members = [t for t in transformations if axis_of[t] == axis]
        seeds = set.intersection(*(set(per_seed[t]) for t in members))
        axis_series[axis] = {seed: math.fsum(per_seed[t][seed] for t in members) / len(members) for seed in seeds}
        _, sd = mean_sd([axis_series[axis][seed] for seed in sorted(seeds)])
        axes[axis] = Summary(
            _mean(transformations[t].mean for t in members),
            sd,
            len(seeds),
            _mean(transformations[t].delta for t in members if transformations[t].delta is not None),
            _mean(transformations[t].original for t in members if transformations[t].original is not None),
            _span(n for t in members for n in shared[t].values()),
        )
    present = [axis for axis in BENCHMARK_AXES if axis in axes]
    if present:
        seeds = set.intersection(*(set(axis_series[a]) for a in present))
        _, sd = mean_sd([math.fsum(axis_series[a][seed] for a in present) / len(present) for seed in sorted(seeds)])
        axis_deltas = [axes[a].delta for a in present if axes[a].delta is not None]
        total = Summary(
            _mean(axes[a].mean for a in present),
            sd,
            len(seeds),
            _mean(axis_deltas),
            _mean(axes[a].original for a in present if axes[a].original is not None),
            _span(n for t, axis in axis_of.items() if axis in present for n in shared[t].values()),
        )
    else:
        total = Summary(None, None, 0)
    return ModelAggregate(model, original, transformations, axes, total, complete=len(present) == len(BENCHMARK_AXES))
