"""Robustness report of a benchmark run (pure module: no Django, no I/O).

Takes the run's units as ``aggregation.UnitScore`` rows (transformed units carry the original
data's score on the same items) and answers the questions of SPEC §5 with ``evaluation.stats``
and ``core.stats``:

- **original vs transformed**: Hodges–Lehmann shift (transformed − original) with a seeded 95%
  bootstrap CI, Wilcoxon p and Holm-adjusted p, per transformation and per axis, for each model and
  for all models pooled. Two units of observation: *pooled* (one dataset × seed result) and
  *run-aggregated* (a dataset's results averaged over seeds first). Holm's family is one table:
  the transformations (or the axes) of one scope and unit;
- **model vs baseline**: per transformation, each model's Δ against the first model's Δ, paired
  over (dataset, seed); Holm over every (model, transformation) comparison;
- **Kendall's τ** between the original and the transformed model ranking of each dataset × seed,
  mean ± SD per transformation and per axis;
- **split-half reliability** of per-axis profiles (dataset × model mean Δ, strata = task type);
- **drift vs quality**: Spearman between per-item embedding drift and mean human quality.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from core.stats import CorrelationResult, kendall_tau, spearman_with_ci
from evaluation.aggregation import ModelAggregate, UnitScore, aggregate, mean_sd
from evaluation.benchmark_plan import BENCHMARK_AXES, ORIGINAL
from evaluation.stats import ShiftResult, aggregate_runs, paired_shifts, split_half_reliability

ALL_MODELS = "all models"
POOLED = "pooled"
RUN_AGGREGATED = "run-aggregated"
UNIT_DESCRIPTIONS = {
    (POOLED, "transformation"): "unit: dataset × seed result",
    (POOLED, "axis"): "unit: dataset × transformation × seed result of the axis",
    (RUN_AGGREGATED, "transformation"): "unit: dataset, scores averaged over seeds first",
    (RUN_AGGREGATED, "axis"): "unit: dataset, scores averaged over the axis' transformations and seeds first",
}


@dataclass(frozen=True)
class ShiftTable:
    """One Holm family: the transformations (level "transformation") or the axes (level "axis")
    of one scope (a model, or all models pooled) under one unit of observation."""

    scope: str
    unit: str  # POOLED or RUN_AGGREGATED
    level: str  # "transformation" or "axis"
    rows: tuple[ShiftResult, ...]

    @property
    def description(self) -> str:
        pooled = ", models pooled (a model × dataset is one unit)" if self.scope == ALL_MODELS else ""
        return UNIT_DESCRIPTIONS[(self.unit, self.level)] + pooled


@dataclass(frozen=True)
class TauSummary:
    label: str  # a transformation or an axis
    level: str
    n: int  # dataset × seed (× transformation, for an axis) units with a defined τ
    mean: float | None
    sd: float | None


@dataclass(frozen=True)
class ReliabilitySummary:
    axis: str
    n_datasets: int
    n_models: int
    n_splits: int
    median: float | None


@dataclass(frozen=True)
class DriftItem:
    """One rated transformed item: its embedding drift and mean human quality."""

    transformation: str
    drift: float
    quality: float


@dataclass(frozen=True)
class DriftSummary:
    transformation: str
    correlation: CorrelationResult
    drifts: tuple[float, ...]
    qualities: tuple[float, ...]


@dataclass(frozen=True)
class RobustnessReport:
    models: tuple[str, ...]
    axes: tuple[str, ...]
    transformations: tuple[str, ...]
    axis_of: Mapping[str, str]
    aggregates: Mapping[str, ModelAggregate]
    shifts: tuple[ShiftTable, ...]
    baseline: str | None
    comparisons: tuple[ShiftResult, ...]
    taus: tuple[TauSummary, ...]
    reliability: tuple[ReliabilitySummary, ...]
    drift: tuple[DriftSummary, ...]
    seed: int
    notes: Mapping[str, str] = field(default_factory=dict)  # section -> why it is empty

    def shift_table(self, *, scope: str, unit: str, level: str) -> ShiftTable | None:
        return next((t for t in self.shifts if (t.scope, t.unit, t.level) == (scope, unit, level)), None)

    def axis_table(self) -> list[dict]:
        """One row per model: original, each axis and the total (mean, SD over seeds, Δ)."""
        return [
            {"model": m, "original": a.original, "axes": [a.axes.get(axis) for axis in self.axes], "total": a.total}
            for m, a in self.aggregates.items()
        ]

    def delta_table(self) -> list[dict]:
        return [{"model": m, "deltas": row} for m, row in zip(self.models, self.delta_matrix(), strict=True)]

    def delta_matrix(self) -> list[list[float | None]]:
        """Mean Δ (transformed − original, same items) per model (rows) and transformation (columns)."""
        return [[_summary_delta(self.aggregates.get(m), t) for t in self.transformations] for m in self.models]

    def as_dict(self) -> dict:
        return {
            "seed": self.seed,
            "models": list(self.models),
            "axes": list(self.axes),
            "transformations": [{"name": t, "axis": self.axis_of[t]} for t in self.transformations],
            "aggregates": {m: a.summaries_as_dict() for m, a in self.aggregates.items()},
            "shifts": [
                {
                    "scope": t.scope,
                    "unit": t.unit,
                    "level": t.level,
                    "description": t.description,
                    "rows": [asdict(r) for r in t.rows],
                }
                for t in self.shifts
            ],
            "model_comparisons": {
                "baseline": self.baseline,
                "unit": "dataset × seed, Δ model − Δ baseline",
                "rows": [asdict(r) for r in self.comparisons],
            },
            "kendall_tau": [asdict(t) for t in self.taus],
            "split_half_reliability": [asdict(r) for r in self.reliability],
            "drift_vs_quality": [{"transformation": d.transformation, **asdict(d.correlation)} for d in self.drift],
            "notes": dict(self.notes),
        }


def robustness_analyse(
    units: Iterable[UnitScore],
    *,
    models: Sequence[str],
    task_types: Mapping[str, str],
    seed: int = 0,
    n_resamples: int = 1000,
    n_splits: int = 100,
    drift_items: Sequence[DriftItem] | None = None,
) -> RobustnessReport:
    """The robustness report of one run's units (see the module docstring). ``models`` orders the
    models (the first is the baseline); ``task_types`` maps each dataset to its task type (the
    strata of split-half reliability); ``drift_items`` are the rated items, None when the run has
    none. Every bootstrap and split uses a generator seeded with ``seed``."""
    units = list(units)
    rows = [u for u in units if u.transformation != ORIGINAL and u.original_score is not None]
    present = {u.model for u in units}
    models = tuple(m for m in models if m in present) + tuple(sorted(present - set(models)))
    axis_of = {u.transformation: u.axis for u in rows}
    transformations = tuple(sorted(axis_of, key=lambda t: (_axis_order(axis_of[t]), t)))
    axes = tuple(sorted(set(axis_of.values()), key=_axis_order))
    notes: dict[str, str] = {}
    if not rows:
        notes["shifts"] = "the run has no transformed results with original scores on the same items"

    shifts = []
    for scope in (ALL_MODELS, *models) if len(models) > 1 else models:
        scoped = [u for u in rows if scope == ALL_MODELS or u.model == scope]
        for level in ("transformation", "axis"):
            groups = _group(scoped, (lambda u: u.transformation) if level == "transformation" else (lambda u: u.axis))
            order = transformations if level == "transformation" else axes
            for unit in (POOLED, RUN_AGGREGATED):
                pairs = {
                    label: _pairs(groups[label], run_aggregated=unit == RUN_AGGREGATED)
                    for label in order
                    if label in groups
                }
                results = paired_shifts(pairs, seed=seed, n_resamples=n_resamples)
                shifts.append(ShiftTable(scope, unit, level, tuple(results)))

    baseline = models[0] if models else None
    comparisons: tuple[ShiftResult, ...] = ()
    if len(models) < 2:
        notes["comparisons"] = f"the run has {len(models)} model(s): no model comparison"
    else:
        delta = {(u.model, u.transformation, u.dataset, u.seed): u.delta for u in rows}
        pairs = {}
        for model in models[1:]:
            for t in transformations:
                keys = sorted(k[2:] for k in delta if k[0] == model and k[1] == t and (baseline, t, *k[2:]) in delta)
                if keys:
                    pairs[f"{model} | {t}"] = (
                        [delta[(baseline, t, *k)] for k in keys],
                        [delta[(model, t, *k)] for k in keys],
                    )
        comparisons = tuple(paired_shifts(pairs, seed=seed, n_resamples=n_resamples))

    taus: tuple[TauSummary, ...] = ()
    if len(models) < 2:
        notes["taus"] = "Kendall's τ needs at least 2 models"
    else:
        taus = _taus(rows, models, transformations, axes, axis_of)

    reliability: list[ReliabilitySummary] = []
    datasets = sorted({u.dataset for u in rows})
    if len(models) < 3 or len(datasets) < 2:
        notes["reliability"] = (
            f"split-half reliability needs at least 3 models and 2 datasets; the run has "
            f"{len(models)} and {len(datasets)}"
        )
    else:
        if len(datasets) < 4:
            half = -(-len(datasets) // 2)
            notes["reliability"] = (
                f"only {len(datasets)} datasets: each half holds at most {half}, so the "
                "split-half figure is coarse (with 2 datasets every split gives ±1)"
            )
        for axis in axes:
            cells = _group([u for u in rows if u.axis == axis], lambda u: (u.dataset, u.model))
            complete = [d for d in datasets if all((d, m) in cells for m in models)]
            if len(complete) < 2:
                reliability.append(ReliabilitySummary(axis, len(complete), len(models), 0, None))
                continue
            matrix = np.array([[np.mean([u.delta for u in cells[(d, m)]]) for m in models] for d in complete])
            result = split_half_reliability(
                matrix, [task_types.get(d, "") for d in complete], n_splits=n_splits, rng=np.random.default_rng(seed)
            )
            reliability.append(ReliabilitySummary(axis, len(complete), len(models), n_splits, result.median))

    drift: list[DriftSummary] = []
    if not drift_items:
        notes["drift"] = "no transformed item of this run has human quality ratings: no drift vs quality analysis"
    else:
        for t, items in sorted(_group(drift_items, lambda d: d.transformation).items()):
            drifts = [d.drift for d in items]
            qualities = [d.quality for d in items]
            correlation = spearman_with_ci(drifts, qualities, rng=np.random.default_rng(seed), n_resamples=n_resamples)
            drift.append(DriftSummary(t, correlation, tuple(drifts), tuple(qualities)))

    found = aggregate(units)
    return RobustnessReport(
        models=models,
        axes=axes,
        transformations=transformations,
        axis_of=axis_of,
        aggregates={m: found[m] for m in models if m in found},
        shifts=tuple(shifts),
        baseline=baseline,
        comparisons=comparisons,
        taus=taus,
        reliability=tuple(reliability),
        drift=tuple(drift),
        seed=seed,
        notes=notes,
    )


def _taus(rows, models, transformations, axes, axis_of) -> tuple[TauSummary, ...]:
    by_unit = _group(rows, lambda u: (u.transformation, u.dataset, u.seed))
    values: dict[str, list[float]] = defaultdict(list)
    for (t, _dataset, _seed), members in by_unit.items():
        of_model = {u.model: u for u in members}
        if not all(m in of_model for m in models):
            continue
        tau = kendall_tau([of_model[m].original_score for m in models], [of_model[m].score for m in models])
        if tau is not None:
            values[t].append(tau)
    out = [TauSummary(t, "transformation", len(values[t]), *mean_sd(values[t])) for t in transformations]
    for axis in axes:
        pooled = [v for t in transformations if axis_of[t] == axis for v in values[t]]
        out.append(TauSummary(axis, "axis", len(pooled), *mean_sd(pooled)))
    return tuple(out)


def _pairs(units: Sequence[UnitScore], *, run_aggregated: bool) -> tuple[list[float], list[float]]:
    if not run_aggregated:
        ordered = sorted(units, key=lambda u: (u.model, u.dataset, u.transformation, u.seed))
        return [u.original_score for u in ordered], [u.score for u in ordered]
    # a (model, dataset) is the unit: average its results over seeds (and the axis' transformations)
    key = {(f"{u.model}\x1f{u.dataset}", (u.transformation, u.seed)): u for u in units}
    before = aggregate_runs({k: u.original_score for k, u in key.items()})
    after = aggregate_runs({k: u.score for k, u in key.items()})
    return [before[k] for k in before], [after[k] for k in before]


def _group(items, key) -> dict:
    groups: dict = defaultdict(list)
    for item in items:
        groups[key(item)].append(item)
    return groups


def _axis_order(axis: str) -> tuple[int, str]:
    return (BENCHMARK_AXES.index(axis) if axis in BENCHMARK_AXES else len(BENCHMARK_AXES), axis)


def _summary_delta(agg: ModelAggregate | None, transformation: str) -> float | None:
    summary = agg.transformations.get(transformation) if agg else None
    return summary.delta if summary else None
