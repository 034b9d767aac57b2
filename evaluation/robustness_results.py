"""What the robustness report holds (pure module): its shift tables, τ, reliability and drift
summaries and the report itself, with the names of its units of observation. Computed by
``evaluation.robustness``; rendered by ``robustness_tables`` and ``figures``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field

from core.stats import CorrelationResult
from evaluation.aggregation import ModelAggregate
from evaluation.meaning_change import ModelSensitivity
from evaluation.ranking import Ranking
from evaluation.robustness_options import ReportOptions
from evaluation.severity import SeverityCurve
from evaluation.stats import ShiftResult

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


SHIFT_FIGURE_UNITS = {"run_aggregated": RUN_AGGREGATED, "pooled": POOLED}


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
    # Meaning-changing rewrites: how far each model moves changed pairs apart, beside its invariance
    # (evaluation.meaning_change; filled by evaluation.meaning_change_services).
    sensitivity: tuple[ModelSensitivity, ...] = ()
    severity_curves: tuple[SeverityCurve, ...] = ()  # the noise axis: Δ against severity, per model and kind

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
            **self._as_dict(),
            **(
                {"invariance_sensitivity": [sensitivity_as_dict(s) for s in self.sensitivity]}
                if self.sensitivity
                else {}
            ),
        }

    def _as_dict(self) -> dict:
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
            "severity_curves": [asdict(c) for c in self.severity_curves],
            "notes": dict(self.notes),
        }


def sensitivity_as_dict(s: ModelSensitivity) -> dict:
    return {
        "model": s.model,
        "invariance": s.invariance,
        "sensitivity": s.sensitivity,
        "summary": s.summary,
        "similarity_drops": [{"dataset": d, "transformation": t, **asdict(drop)} for d, t, drop in s.drops],
        "rank_losses": [{"dataset": d, "transformation": t, **asdict(loss)} for d, t, loss in s.rank_losses],
    }


def _summary_delta(agg: ModelAggregate | None, transformation: str) -> float | None:
    summary = agg.transformations.get(transformation) if agg else None
    return summary.delta if summary else None
