"""Severity curves of the noise axis (pure module): per model and noise kind, the score change
against the noise severity, with bootstrap bands, and the curve's normalised area.

Points. Severity 0 is the original text: Δ = 0 by construction. At each severity ``s`` of the
run, Δ̄(s) is the mean over the model's units (dataset × seed) of transformed − original main
score on the same items, and ``score`` the mean transformed score.

Units and bands. Only units present at every severity of the kind count (a dataset × seed
missing one level would bend the curve), so the curve's points share their units. The bands are
percentile bootstraps of those units, resampled jointly across severities (``core.stats.
bootstrap_ci``, the same generator seed for every point and the area, so each resample draws the
same units at every level).

Area. ``area = (1 / s_max) ∫₀^s_max Δ̄(s) ds``, the trapezoid rule over (0, 0) and the run's
severities: the mean score change over the severity range, in main-score units (0 = untouched by
noise; −0.05 = on average over 0..s_max the score drops by 0.05). Dividing by ``s_max`` makes
runs with the same levels comparable whatever their spacing; runs with different top levels are
not comparable.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from core.stats import bootstrap_ci
from evaluation.aggregation import UnitScore
from transforms.registry import TRANSFORMATIONS


@dataclass(frozen=True)
class SeverityPoint:
    severity: int  # percent of the kind's units changed; 0 = the original text
    delta: float  # mean transformed − original over the curve's units
    low: float  # percentile-bootstrap band of ``delta``
    high: float
    score: float | None  # mean transformed score (None at severity 0: the original, per dataset)


@dataclass(frozen=True)
class SeverityCurve:
    model: str
    kind: str  # noise kind (``transforms.noise.NOISE_KINDS``)
    points: tuple[SeverityPoint, ...]  # severity 0 first
    area: float  # normalised area (see the module docstring)
    area_low: float
    area_high: float
    n_units: int  # dataset × seed units at every severity
    confidence: float
    n_resamples: int


def normalised_area(severities: Sequence[float], deltas: Sequence[float]) -> float:
    """Trapezoid area of Δ over severity from 0 (where Δ = 0) to the largest severity, divided by
    that severity."""
    xs = np.concatenate([[0.0], np.asarray(severities, dtype=float)])
    ys = np.concatenate([[0.0], np.asarray(deltas, dtype=float)])
    widths = np.diff(xs)
    return float(np.sum(widths * (ys[1:] + ys[:-1]) / 2) / xs[-1])


def severity_curves(
    units: Iterable[UnitScore],
    *,
    models: Sequence[str],
    seed: int = 0,
    n_resamples: int = 1000,
    confidence: float = 0.95,
) -> tuple[SeverityCurve, ...]:
    """The curve of each model (in ``models`` order) and noise kind with at least one unit at every
    severity the run has of that kind."""
    cells: dict[tuple[str, str], dict[tuple[str, int], dict[int, UnitScore]]] = defaultdict(lambda: defaultdict(dict))
    for unit in units:
        spec = TRANSFORMATIONS.get(unit.transformation)
        if spec is None or not spec.noise or unit.delta is None:
            continue
        cells[(unit.model, spec.noise)][(unit.dataset, unit.seed)][spec.severity] = unit
    curves = []
    for model in models:
        for kind in sorted({k for m, k in cells if m == model}):
            curve = _curve(model, kind, cells[(model, kind)], seed, n_resamples, confidence)
            if curve is not None:
                curves.append(curve)
    return tuple(curves)


def _curve(model, kind, by_unit, seed, n_resamples, confidence) -> SeverityCurve | None:
    levels = sorted({s for per in by_unit.values() for s in per})
    complete = [per for _, per in sorted(by_unit.items()) if all(s in per for s in levels)]
    if not complete:
        return None
    deltas = np.array([[per[s].delta for s in levels] for per in complete], dtype=float)
    scores = np.array([[per[s].score for s in levels] for per in complete], dtype=float)
    rows = np.arange(len(complete))

    def interval(statistic):
        # A fresh generator per statistic: every call resamples the same units (``bootstrap_ci``
        # hands the resampled row numbers back as floats).
        return bootstrap_ci(
            rows,
            lambda idx: statistic(idx.astype(int)),
            rng=np.random.default_rng(seed),
            n_resamples=n_resamples,
            confidence=confidence,
        )

    points = [SeverityPoint(0, 0.0, 0.0, 0.0, None)]
    for j, level in enumerate(levels):
        ci = interval(lambda idx, j=j: float(deltas[idx, j].mean()))
        points.append(SeverityPoint(level, ci.estimate, ci.low, ci.high, float(scores[:, j].mean())))
    area = interval(lambda idx: normalised_area(levels, deltas[idx].mean(axis=0)))
    return SeverityCurve(
        model=model,
        kind=kind,
        points=tuple(points),
        area=area.estimate,
        area_low=area.low,
        area_high=area.high,
        n_units=len(complete),
        confidence=confidence,
        n_resamples=n_resamples,
    )
