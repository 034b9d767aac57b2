"""Robustness report of a benchmark run (pure module: no Django, no I/O).

Takes the run's units as ``aggregation.UnitScore`` rows (transformed units carry the original
data's score on the same items) and answers the questions of SPEC §5 with ``evaluation.stats``
and ``core.stats``:

- **original vs transformed**: Hodges–Lehmann shift (transformed − original) with the
  distribution-free Walsh-average 95% interval (or a seeded bootstrap one), Wilcoxon p and
  Holm-adjusted p, per transformation and per axis, for each model and for all models pooled.
  Two units of observation: *run-aggregated* (a dataset's results averaged over seeds first, the
  paper's unit) and *pooled* (one dataset × seed result). Holm's family is one table:
  the transformations (or the axes) of one scope and unit;
- **model vs baseline**: per transformation, each model's Δ (or transformed score) against the
  first model's, paired over (dataset, seed); Holm over every (model, transformation) comparison;
- **Kendall's τ** between the original and the transformed model ranking of each dataset, seeds
  averaged (or dataset × seed), mean ± SD per transformation and per axis;
- **split-half reliability** of per-axis profiles (dataset × model mean score or Δ, strata = task
  type);
- **drift vs quality**: Spearman between per-item embedding drift and mean human quality;
- **rankings**: models ranked on the original data and per axis, with bootstrap rank intervals
  and significance letters (``evaluation.ranking``).

Where the papers and this report could use different units, ``ReportOptions`` chooses: by default
the multi-axis paper's protocol (its preset is the one definition of these defaults), the other
units as named options (see its docstring for why); the chosen unit is named in every table.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from core.stats import kendall_tau, spearman_with_ci
from evaluation.aggregation import UnitScore, aggregate, mean_sd
from evaluation.benchmark_plan import BENCHMARK_AXES, ORIGINAL
from evaluation.ranking import Ranking, rank_models
from evaluation.robustness_options import ReportOptions
from evaluation.robustness_results import (
    ALL_MODELS,
    MODEL_MEAN,
    POOLED,
    RUN_AGGREGATED,
    DriftItem,
    DriftSummary,
    ReliabilitySummary,
    RobustnessReport,
    ShiftTable,
    TauSummary,
)
from evaluation.severity import severity_curves
from evaluation.stats import ShiftResult, aggregate_runs, paired_shifts, split_half_reliability


def robustness_analyse(
    units: Iterable[UnitScore],
    *,
    models: Sequence[str],
    task_types: Mapping[str, str],
    seed: int = 0,
    n_resamples: int = 1000,
    drift_items: Sequence[DriftItem] | None = None,
    options: ReportOptions | None = None,
) -> RobustnessReport:
    """The robustness report of one run's units (see the module docstring). ``models`` orders the
    models (the first is the baseline); ``task_types`` maps each dataset to its task type (the
    strata of split-half reliability); ``drift_items`` are the rated items, None when the run has
    none; ``options`` the statistics' units (default ``ReportOptions()``). Every bootstrap and
    split uses a generator seeded with ``seed``."""
    options = options or ReportOptions()
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

    shifts = _shift_tables(rows, models, transformations, axes, options, seed=seed, n_resamples=n_resamples)
    baseline = models[0] if models else None
    comparisons: tuple[ShiftResult, ...] = ()
    taus: tuple[TauSummary, ...] = ()
    if len(models) < 2:
        notes["comparisons"] = f"the run has {len(models)} model(s): no model comparison"
        notes["taus"] = "Kendall's τ needs at least 2 models"
    else:
        comparisons = _comparisons(rows, models, transformations, options, seed=seed, n_resamples=n_resamples)
        taus = _taus(rows, models, transformations, axes, axis_of, options)
    reliability = _reliability(rows, models, axes, task_types, options, seed=seed, notes=notes)
    drift: tuple[DriftSummary, ...] = ()
    if not drift_items:
        notes["drift"] = "no transformed item of this run has human quality ratings: no drift vs quality analysis"
    else:
        drift = _drift(drift_items, seed=seed, n_resamples=n_resamples)

    rankings, ranking_note = _rankings(units, models, axes, seed=seed, n_resamples=n_resamples)
    if ranking_note:
        notes["rankings"] = ranking_note

    found = aggregate(units)
    curves = severity_curves(units, models=models, seed=seed, n_resamples=n_resamples)
    return RobustnessReport(
        models=models,
        axes=axes,
        transformations=transformations,
        axis_of=axis_of,
        aggregates={m: found[m] for m in models if m in found},
        shifts=shifts,
        baseline=baseline,
        comparisons=comparisons,
        taus=taus,
        reliability=reliability,
        drift=drift,
        seed=seed,
        notes=notes,
        options=options,
        rankings=rankings,
        severity_curves=curves,
    )


def _shift_tables(
    rows: Sequence[UnitScore],
    models: Sequence[str],
    transformations: Sequence[str],
    axes: Sequence[str],
    options: ReportOptions,
    *,
    seed: int,
    n_resamples: int,
) -> tuple[ShiftTable, ...]:
    """Original vs transformed: one Holm family per scope (all models, then each model), level and unit."""
    shifts = []
    for scope in (ALL_MODELS, *models) if len(models) > 1 else models:
        if scope != ALL_MODELS:
            scoped = [u for u in rows if u.model == scope]
        elif options.wilcoxon_unit == "model_mean":
            scoped = _model_means(rows, models)
        else:
            scoped = rows
        for level in ("transformation", "axis"):
            groups = _group(scoped, (lambda u: u.transformation) if level == "transformation" else (lambda u: u.axis))
            order = transformations if level == "transformation" else axes
            for unit in (POOLED, RUN_AGGREGATED):
                pairs = {
                    label: _pairs(groups[label], run_aggregated=unit == RUN_AGGREGATED)
                    for label in order
                    if label in groups
                }
                results = paired_shifts(pairs, seed=seed, n_resamples=n_resamples, interval=options.shift_interval)
                shifts.append(ShiftTable(scope, unit, level, tuple(results), options.wilcoxon_unit))
    return tuple(shifts)


def _comparisons(
    rows: Sequence[UnitScore],
    models: Sequence[str],
    transformations: Sequence[str],
    options: ReportOptions,
    *,
    seed: int,
    n_resamples: int,
) -> tuple[ShiftResult, ...]:
    """Each model against the baseline (the first), per transformation, paired over (dataset, seed)."""
    baseline = models[0]
    # what is compared: each model's Δ (more robust?) or its transformed score (better on it?)
    delta = {
        (u.model, u.transformation, u.dataset, u.seed): u.delta if options.baseline_compare == "delta" else u.score
        for u in rows
    }
    pairs = {}
    for model in models[1:]:
        for t in transformations:
            keys = sorted(k[2:] for k in delta if k[0] == model and k[1] == t and (baseline, t, *k[2:]) in delta)
            if keys:
                pairs[f"{model} | {t}"] = (
                    [delta[(baseline, t, *k)] for k in keys],
                    [delta[(model, t, *k)] for k in keys],
                )
    return tuple(paired_shifts(pairs, seed=seed, n_resamples=n_resamples, interval=options.shift_interval))


def _reliability(
    rows: Sequence[UnitScore],
    models: Sequence[str],
    axes: Sequence[str],
    task_types: Mapping[str, str],
    options: ReportOptions,
    *,
    seed: int,
    notes: dict[str, str],
) -> tuple[ReliabilitySummary, ...]:
    """Split-half reliability of each axis' dataset × model profile; why it is missing or coarse goes to ``notes``."""
    datasets = sorted({u.dataset for u in rows})
    if len(models) < 3 or len(datasets) < 2:
        notes["reliability"] = (
            f"split-half reliability needs at least 3 models and 2 datasets; the run has "
            f"{len(models)} and {len(datasets)}"
        )
        return ()
    if len(datasets) < 4:
        half = -(-len(datasets) // 2)
        notes["reliability"] = (
            f"only {len(datasets)} datasets: each half holds at most {half}, so the "
            "split-half figure is coarse (with 2 datasets every split gives ±1)"
        )
    reliability = []
    for axis in axes:
        cells = _group([u for u in rows if u.axis == axis], lambda u: (u.dataset, u.model))
        complete = [d for d in datasets if all((d, m) in cells for m in models)]
        if len(complete) < 2:
            reliability.append(ReliabilitySummary(axis, len(complete), len(models), 0, None))
            continue
        value = (lambda u: u.delta) if options.split_half_on == "deltas" else (lambda u: u.score)
        matrix = np.array([[np.mean([value(u) for u in cells[(d, m)]]) for m in models] for d in complete])
        n_splits = options.split_half_splits
        result = split_half_reliability(
            matrix, [task_types.get(d, "") for d in complete], n_splits=n_splits, rng=np.random.default_rng(seed)
        )
        reliability.append(ReliabilitySummary(axis, len(complete), len(models), n_splits, result.median))
    return tuple(reliability)


def _drift(drift_items: Sequence[DriftItem], *, seed: int, n_resamples: int) -> tuple[DriftSummary, ...]:
    """Spearman between embedding drift and human quality, per transformation."""
    drift = []
    for t, items in sorted(_group(drift_items, lambda d: d.transformation).items()):
        drifts = [d.drift for d in items]
        qualities = [d.quality for d in items]
        correlation = spearman_with_ci(drifts, qualities, rng=np.random.default_rng(seed), n_resamples=n_resamples)
        drift.append(DriftSummary(t, correlation, tuple(drifts), tuple(qualities)))
    return tuple(drift)


def _taus(rows, models, transformations, axes, axis_of, options: ReportOptions) -> tuple[TauSummary, ...]:
    """τ-b between the original (same items) and the transformed ranking of the models, per cell:
    a dataset × seed, or a dataset with its scores averaged over seeds (``options.tau_unit``)."""
    per_seed = options.tau_unit == "per_seed"
    cells = _group(rows, lambda u: (u.transformation, u.dataset, u.seed if per_seed else None))
    # (transformation, cell) -> model -> (original, transformed), averaged over the cell's seeds
    means: dict[tuple, dict[str, tuple[float, float]]] = defaultdict(dict)
    for (t, dataset, cell_seed), members in cells.items():
        for model, of_model in _group(members, lambda u: u.model).items():
            pair = (float(np.mean([u.original_score for u in of_model])), float(np.mean([u.score for u in of_model])))
            means[(t, (dataset, cell_seed))][model] = pair

    def tau(of_model: Mapping[str, tuple[float, float]]) -> float | None:
        if not all(m in of_model for m in models):
            return None
        return kendall_tau([of_model[m][0] for m in models], [of_model[m][1] for m in models])

    values: dict[str, list[float]] = defaultdict(list)
    for (t, _cell), of_model in sorted(means.items(), key=lambda item: repr(item[0])):
        value = tau(of_model)
        if value is not None:
            values[t].append(value)
    out = [TauSummary(t, "transformation", len(values[t]), *mean_sd(values[t])) for t in transformations]
    for axis in axes:
        members = [t for t in transformations if axis_of[t] == axis]
        if options.axis_tau == "pooled":
            found = [v for t in members for v in values[t]]
        else:
            # rank on the axis' scores: each model's mean over the axis' transformations in the cell
            by_cell: dict[tuple, dict[str, list[tuple[float, float]]]] = defaultdict(lambda: defaultdict(list))
            for (t, cell), of_model in means.items():
                if t in members:
                    for model, pair in of_model.items():
                        by_cell[cell][model].append(pair)
            found = []
            for _cell, of_model in sorted(by_cell.items(), key=lambda item: repr(item[0])):
                if len({len(pairs) for pairs in of_model.values()}) != 1:
                    continue  # models scored on different transformations of this cell: not comparable
                value = tau({m: tuple(np.mean(pairs, axis=0)) for m, pairs in of_model.items()})
                if value is not None:
                    found.append(value)
        out.append(TauSummary(axis, "axis", len(found), *mean_sd(found)))
    return tuple(out)


def _model_means(rows: Sequence[UnitScore], models: Sequence[str]) -> list[UnitScore]:
    """One ``MODEL_MEAN`` unit per dataset × transformation × seed that every model has: the mean
    over the models of the transformed and of the original score."""
    out = []
    for (dataset, t, unit_seed), members in sorted(
        _group(rows, lambda u: (u.dataset, u.transformation, u.seed)).items()
    ):
        of_model = {u.model: u for u in members}
        if not all(m in of_model for m in models):
            continue
        chosen = [of_model[m] for m in models]
        out.append(
            UnitScore(
                MODEL_MEAN,
                dataset,
                t,
                chosen[0].axis,
                unit_seed,
                float(np.mean([u.score for u in chosen])),
                float(np.mean([u.original_score for u in chosen])),
            )
        )
    return out


def _rankings(
    units: Sequence[UnitScore], models: Sequence[str], axes: Sequence[str], *, seed: int, n_resamples: int
) -> tuple[tuple[Ranking, ...], str | None]:
    """The models ranked on the original data and on each axis (``evaluation.ranking``), on the
    datasets where every model has every seed; a note when a ranking cannot be made. The rank
    intervals resample items within each dataset when every ranked unit has per-item scores,
    datasets otherwise (``Ranking.unit`` says which)."""
    if len(models) < 2:
        return (), f"ranking needs at least 2 models; the run has {len(models)}"
    rankings, skipped = [], []
    scopes = [(ORIGINAL, [u for u in units if u.transformation == ORIGINAL])]
    scopes += [(axis, [u for u in units if u.transformation != ORIGINAL and u.axis == axis]) for axis in axes]
    for scope, members in scopes:
        # the axis score of a model at a dataset × seed: the mean over the axis' transformations
        groups = _group(members, lambda u: (u.model, u.dataset, u.seed))
        cells = {key: float(np.mean([u.score for u in group])) for key, group in groups.items()}
        seeds = sorted({key[2] for key in cells})
        datasets = sorted({key[1] for key in cells if all((m, key[1], s) in cells for m in models for s in seeds)})
        if len(datasets) < 2:
            skipped.append(f"{scope} ({len(datasets)} complete dataset(s))")
            continue
        scores = np.array([[[cells[(m, d, s)] for s in seeds] for d in datasets] for m in models])
        items = [[[[u.item_scores for u in groups[(m, d, s)]] for s in seeds] for d in datasets] for m in models]
        complete = all(
            i is not None for per_model in items for per_dataset in per_model for cell in per_dataset for i in cell
        )
        rankings.append(
            rank_models(
                scores,
                models,
                scope=scope,
                datasets=datasets,
                rng=np.random.default_rng(seed),
                n_resamples=n_resamples,
                items=items if complete else None,
            )
        )
    note = None
    if skipped:
        note = (
            "the letter groups compare models over datasets, so a ranking needs at least 2 datasets on which "
            "every model has every seed; not ranked: " + ", ".join(skipped)
        )
    return tuple(rankings), note


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
