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
from dataclasses import asdict, dataclass, field, fields

import numpy as np

from core.stats import CorrelationResult, kendall_tau, spearman_with_ci
from evaluation.aggregation import ModelAggregate, UnitScore, aggregate, mean_sd
from evaluation.benchmark_plan import BENCHMARK_AXES, ORIGINAL
from evaluation.ranking import Ranking, rank_models
from evaluation.stats import SHIFT_INTERVALS, ShiftResult, aggregate_runs, paired_shifts, split_half_reliability
from transforms.presets import DEFAULT_PROTOCOL, preset_get, resolve_report_options

ALL_MODELS = "all models"
MODEL_MEAN = "model mean"  # the pseudo-model of the all-models tables when models are averaged first
POOLED = "pooled"
RUN_AGGREGATED = "run-aggregated"
UNIT_DESCRIPTIONS = {
    (POOLED, "transformation"): "unit: dataset × seed result",
    (POOLED, "axis"): "unit: dataset × transformation × seed result of the axis",
    (RUN_AGGREGATED, "transformation"): "unit: dataset, scores averaged over seeds first",
    (RUN_AGGREGATED, "axis"): "unit: dataset, scores averaged over the axis' transformations and seeds first",
}


# Report options: name -> the values each accepts. Their defaults are the paper's protocol, read
# from its preset (transforms.presets.DEFAULT_PROTOCOL, the one place they are written); an option
# the paper leaves open falls back to OPEN_DEFAULTS.
_VALUES: dict[str, tuple[str, ...]] = {
    "tau_unit": ("seed_mean", "per_seed"),
    "axis_tau": ("axis_mean_scores", "pooled"),
    "split_half_on": ("scores", "deltas"),
    "wilcoxon_unit": ("model_mean", "per_model"),
    "baseline_compare": ("delta", "transformed"),
    "shift_interval": SHIFT_INTERVALS,
    "shift_figure_unit": ("run_aggregated", "pooled"),
}
OPEN_DEFAULTS: dict[str, object] = {"baseline_compare": "delta"}
PAPER_DEFAULTS: Mapping[str, object] = {**OPEN_DEFAULTS, **preset_get(DEFAULT_PROTOCOL).report_options}
# name -> allowed values, the default first (the default's reason is in ReportOptions)
OPTION_CHOICES: dict[str, tuple[str, ...]] = {
    name: (PAPER_DEFAULTS[name], *(v for v in values if v != PAPER_DEFAULTS[name])) for name, values in _VALUES.items()
}
SHIFT_FIGURE_UNITS = {"run_aggregated": RUN_AGGREGATED, "pooled": POOLED}
MAX_SPLITS = 100_000


class ReportOptionError(ValueError):
    """An unknown report option or value; the message names the option and what it accepts."""


@dataclass(frozen=True)
class ReportOptions:
    """Units of the report's statistics, where the papers and this report could differ. The
    defaults are the multi-axis (HTEB) paper's protocol (SPEC §5), taken from its preset; the
    other values stay as named options.

    - ``tau_unit``: ``seed_mean`` (default, the paper) ranks the models on each dataset's scores
      averaged over seeds: how stable the expected ranking is; ``per_seed`` (the default before
      November 2026) ranks them on each dataset × seed result: how stable one draw of the
      transformation leaves the ranking.
    - ``axis_tau``: ``axis_mean_scores`` (default, the paper) ranks models on the axis' scores
      averaged over its transformations (the axis score a leaderboard shows); ``pooled`` pools the
      τ of the axis' transformations (the typical transformation).
    - ``split_half_on``: ``scores`` (default, the paper: transformed scores) or ``deltas`` (the
      robustness profile); ``split_half_splits``: random splits (default 1000, the paper; more
      splits only make the median's Monte Carlo error smaller).
    - ``wilcoxon_unit`` (all-models tables only): ``model_mean`` (default) averages the models'
      results per dataset × transformation × seed first (the papers); ``per_model`` (before
      November 2026) made every model × dataset × seed result a unit. The models are scored on the
      same transformed texts, so their results are not independent: counting each model as a unit
      multiplies n by the number of models and makes p-values too small. That was a bug, hence
      the new default; ``per_model`` stays for comparison with old reports.
    - ``baseline_compare``: ``delta`` (default; the multi-axis paper makes no such comparison)
      compares a model's Δ with the baseline's (is it more robust?); ``transformed`` compares their
      transformed scores (is it better on the transformed data? the paraphrasing paper).
    - ``shift_interval``: the Hodges–Lehmann interval. ``walsh`` (default, the papers) is the
      distribution-free interval between ordered Walsh averages, its order from the signed-rank
      distribution, with its achieved coverage; ``bootstrap`` (before November 2026) a percentile
      bootstrap, which covered the true shift only 89% of the time at n = 8 (issue 29).
    - ``shift_figure_unit``: the table the shifts figure draws (its stars are that table's Holm
      p). ``run_aggregated`` (default, the paper: a dataset, runs averaged); ``pooled`` (before
      November 2026) a dataset × seed result, a unit the paper rejects (seeds of one dataset are
      not independent, so its p-values are too small).
    """

    tau_unit: str = PAPER_DEFAULTS["tau_unit"]
    axis_tau: str = PAPER_DEFAULTS["axis_tau"]
    split_half_on: str = PAPER_DEFAULTS["split_half_on"]
    split_half_splits: int = PAPER_DEFAULTS["split_half_splits"]
    wilcoxon_unit: str = PAPER_DEFAULTS["wilcoxon_unit"]
    baseline_compare: str = PAPER_DEFAULTS["baseline_compare"]
    shift_interval: str = PAPER_DEFAULTS["shift_interval"]
    shift_figure_unit: str = PAPER_DEFAULTS["shift_figure_unit"]

    def __post_init__(self) -> None:
        for name, choices in OPTION_CHOICES.items():
            if getattr(self, name) not in choices:
                raise ReportOptionError(
                    f"report option {name}={getattr(self, name)!r} is unknown: use one of {', '.join(choices)}"
                )
        splits = self.split_half_splits
        if isinstance(splits, bool) or not isinstance(splits, int) or not 1 <= splits <= MAX_SPLITS:
            raise ReportOptionError(
                f"report option split_half_splits must be an integer from 1 to {MAX_SPLITS}, got {splits!r}"
            )

    @classmethod
    def from_mapping(cls, values: Mapping[str, object] | None) -> ReportOptions:
        """Options from plain data (a preset's ``report_options``, a query string, a command line);
        unset or None values keep the default; an integer given as text is accepted for the splits."""
        return cls(**_given_options(values))

    @classmethod
    def for_preset(cls, preset: str | None, values: Mapping[str, object] | None = None) -> ReportOptions:
        """Options from plain data filled from ``preset``'s (a run's preset; none: the defaults).
        A value that differs from the preset's is refused, naming the option and the preset."""
        given = _given_options(values)
        try:
            return cls(**resolve_report_options(preset or None, given))
        except ReportOptionError:
            raise
        except ValueError as exc:  # PresetConflict, or an unknown preset
            raise ReportOptionError(str(exc)) from None

    def as_dict(self) -> dict[str, object]:
        return asdict(self)

    def tau_unit_text(self, level: str) -> str:
        cell = "dataset × seed" if self.tau_unit == "per_seed" else "dataset (scores averaged over seeds first)"
        if level == "transformation":
            return f"unit: {cell} ranking of the models"
        if self.axis_tau == "pooled":
            return f"unit: {cell} × transformation of the axis (the transformations' τ pooled)"
        return f"unit: {cell} ranking on the axis' scores (averaged over its transformations first)"

    def comparison_text(self, baseline: str | None) -> str:
        what = "Δ model − Δ baseline" if self.baseline_compare == "delta" else "transformed score model − baseline"
        return f"unit: dataset × seed, {what}; baseline {baseline}"

    def split_half_text(self) -> str:
        what = "mean Δ" if self.split_half_on == "deltas" else "mean transformed score"
        return f"dataset × model {what} on the axis, strata: task type, {self.split_half_splits} splits"


@dataclass(frozen=True)
class ShiftTable:
    """One Holm family: the transformations (level "transformation") or the axes (level "axis")
    of one scope (a model, or all models pooled) under one unit of observation."""

    scope: str
    unit: str  # POOLED or RUN_AGGREGATED
    level: str  # "transformation" or "axis"
    rows: tuple[ShiftResult, ...]
    wilcoxon_unit: str = "model_mean"  # how the all-models table treats models (ReportOptions)

    @property
    def description(self) -> str:
        models = ""
        if self.scope == ALL_MODELS:
            models = (
                ", models averaged first (one value per unit, the mean over the models)"
                if self.wilcoxon_unit == "model_mean"
                else ", models pooled (a model × dataset is one unit)"
            )
        return UNIT_DESCRIPTIONS[(self.unit, self.level)] + models


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
    options: ReportOptions = field(default_factory=ReportOptions)
    rankings: tuple[Ranking, ...] = ()

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
            "options": self.options.as_dict(),
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
                "unit": self.options.comparison_text(self.baseline),
                "rows": [asdict(r) for r in self.comparisons],
            },
            "kendall_tau": [{**asdict(t), "unit": self.options.tau_unit_text(t.level)} for t in self.taus],
            "split_half_reliability": [{**asdict(r), "unit": self.options.split_half_text()} for r in self.reliability],
            "drift_vs_quality": [{"transformation": d.transformation, **asdict(d.correlation)} for d in self.drift],
            "rankings": [r.as_dict() for r in self.rankings],
            "notes": dict(self.notes),
        }


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

    baseline = models[0] if models else None
    comparisons: tuple[ShiftResult, ...] = ()
    if len(models) < 2:
        notes["comparisons"] = f"the run has {len(models)} model(s): no model comparison"
    else:
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
        comparisons = tuple(paired_shifts(pairs, seed=seed, n_resamples=n_resamples, interval=options.shift_interval))

    taus: tuple[TauSummary, ...] = ()
    if len(models) < 2:
        notes["taus"] = "Kendall's τ needs at least 2 models"
    else:
        taus = _taus(rows, models, transformations, axes, axis_of, options)

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
            value = (lambda u: u.delta) if options.split_half_on == "deltas" else (lambda u: u.score)
            matrix = np.array([[np.mean([value(u) for u in cells[(d, m)]]) for m in models] for d in complete])
            n_splits = options.split_half_splits
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

    rankings, ranking_note = _rankings(units, models, axes, seed=seed, n_resamples=n_resamples)
    if ranking_note:
        notes["rankings"] = ranking_note

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
        options=options,
        rankings=rankings,
    )


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


def _given_options(values: Mapping[str, object] | None) -> dict[str, object]:
    """The set options of plain data (None and "" are unset); unknown names refused; the splits
    given as text made an integer."""
    values = {k: v for k, v in (values or {}).items() if v is not None and v != ""}
    unknown = sorted(set(values) - {f.name for f in fields(ReportOptions)})
    if unknown:
        known = ", ".join(f.name for f in fields(ReportOptions))
        raise ReportOptionError(f"unknown report option(s) {', '.join(unknown)}: the options are {known}")
    if isinstance(values.get("split_half_splits"), str):
        text = values["split_half_splits"]
        if not text.strip().isdigit():
            raise ReportOptionError(f"report option split_half_splits must be an integer, got {text!r}")
        values["split_half_splits"] = int(text)
    return values


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
