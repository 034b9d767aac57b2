"""A benchmark run's results as one report: units, aggregates per model and axis, text and JSON."""

from __future__ import annotations

from dataclasses import dataclass

from evaluation.aggregation import ModelAggregate, Summary
from evaluation.benchmark_plan import BENCHMARK_AXES
from evaluation.models import BenchmarkResult, BenchmarkRun
from evaluation.selectors import benchmark_result_list, benchmark_run_aggregates


@dataclass(frozen=True)
class BenchmarkReport:
    run: BenchmarkRun
    results: list[BenchmarkResult]
    aggregates: dict[str, ModelAggregate]

    @property
    def axes(self) -> list[str]:
        present = {axis for agg in self.aggregates.values() for axis in agg.axes}
        return [a for a in BENCHMARK_AXES if a in present] + sorted(present - set(BENCHMARK_AXES))

    @property
    def transformations(self) -> list[str]:
        return sorted({name for agg in self.aggregates.values() for name in agg.transformations})

    def table(self) -> list[dict]:
        """One row per model: original, each axis and the total (mean, SD, Δ), and what the total
        lacks ("" when nothing)."""
        return [
            {
                "model": model,
                "original": agg.original,
                "axes": [agg.axes.get(axis) for axis in self.axes],
                # each axis with the items its Δ is taken on, in words (items_shared_text)
                "axis_cells": [(s, items_shared_text(s) if s else "") for s in (agg.axes.get(a) for a in self.axes)],
                "total": agg.total,
                "complete": agg.complete,
                "partial": self.partial_reason(agg),
            }
            for model, agg in self.aggregates.items()
        ]

    def partial_reason(self, agg: ModelAggregate) -> str:
        """Why the total of ``agg``'s model is partial, from the run's plan: the planned
        transformations it has no result of, and the benchmark axes the plan has no transformation
        of; "" when the total covers every axis and every planned transformation."""
        planned = [t for t in (self.run.plan or {}).get("transformations", []) if t["axis"] in BENCHMARK_AXES]
        missing = [t["transformation"] for t in planned if t["transformation"] not in agg.transformations]
        unplanned = [axis for axis in BENCHMARK_AXES if not any(t["axis"] == axis for t in planned)]
        if not planned or (not missing and agg.complete):
            return ""
        parts = []
        if missing:
            finished = self.run.status in (BenchmarkRun.Status.SUCCEEDED, BenchmarkRun.Status.FAILED)
            have = "have no results (their units failed)" if finished else "have no results yet"
            if len(missing) == 1:
                have = have.replace("have", "has", 1).replace("their units", "its units")
            parts.append(
                f"{len(missing)} of {len(planned)} transformation{'s' if len(planned) != 1 else ''} {have}: "
                + ", ".join(missing)
            )
        if unplanned:
            parts.append(f"the run has no {' or '.join(unplanned)} transformation")
        return "partial: " + "; ".join(parts)

    def as_dict(self) -> dict:
        run = self.run
        return {
            "run": run.pk,
            "status": run.status,
            "done": run.done,
            "total": run.total,
            "config_hash": run.config_hash,
            "config_label": run.config_label,
            "config_development_key": run.config_development_key,
            "evidence_override": run.evidence_override,
            "source": run.source,
            "models": run.model_names,
            "aggregates": {
                model: {**agg.summaries_as_dict(), "complete": agg.complete} for model, agg in self.aggregates.items()
            },
            "units": [
                {
                    "model": r.model,
                    "model_id": r.model_id,
                    "model_revision": r.model_revision,
                    "dataset": r.dataset.name,
                    "transformation": r.transformation,
                    "axis": r.axis,
                    "seed": r.seed,
                    "side": r.side,
                    "transform_run": r.transform_run_id,
                    "documents": r.documents,
                    "main_metric": r.main_metric,
                    "main_score": r.main_score,
                    "original_main_score": r.original_main_score,
                    "delta": r.delta,
                    "n_items": r.n_items,
                    "n_left_out": r.n_left_out,
                    "metrics": r.metrics,
                    "result_path": r.result_path,
                }
                for r in self.results
            ],
        }

    def as_text(self) -> str:
        run = self.run
        lines = [
            f"Benchmark run {run.pk} {run.status}: {run.done}/{run.total} units"
            + (f", {run.config_label} {run.config_hash[:12]}" if run.config_hash else "")
        ]
        if run.evidence_override:
            lines.append("Run anyway although: " + "; ".join(run.evidence_override["reasons"]))
        header = ["model", "original", *self.axes, "total"]
        rows = [
            [
                row["model"],
                _fmt(row["original"]),
                *(_fmt_summary(s) for s in row["axes"]),
                _fmt_summary(row["total"]) + (f" ({row['partial']})" if row["partial"] and self.axes else ""),
            ]
            for row in self.table()
        ]
        widths = [max(len(str(x)) for x in column) for column in zip(header, *rows, strict=True)]
        for cells in [header, *rows]:
            lines.append("  ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip())
        if self.transformations:
            lines.append("")
            lines.append(
                "per transformation (mean ± SD over seeds; Δ = transformed − original on the items both sides "
                "have, whose original score follows it):"
            )
            for model, agg in self.aggregates.items():
                for name, s in agg.transformations.items():
                    paired = f" vs original {_fmt(s.original)} on {items_shared_text(s)}" if s.delta is not None else ""
                    lines.append(
                        f"  {model}  {name:<22} {_fmt_summary(s)}  Δ {_fmt(s.delta, signed=True)}{paired}"
                        f"  ({s.n_seeds} seeds)"
                    )
        return "\n".join(lines)


def items_shared_text(summary: Summary) -> str:
    """The items a Δ is taken on, in words: "the 35 items both sides have" (per seed, over the
    datasets; a range when seeds or transformations differ)."""
    if summary.items_shared is None:
        return "the items both sides have"
    fewest, most = summary.items_shared
    count = str(fewest) if fewest == most else f"{fewest}–{most}"
    return f"the {count} item{'' if most == 1 else 's'} both sides have" + ("" if fewest == most else " (per seed)")


def _fmt(value: float | None, *, signed: bool = False) -> str:
    if value is None:
        return "n/a"
    return f"{value:+.4f}" if signed else f"{value:.4f}"


def _fmt_summary(summary: Summary | None) -> str:
    if summary is None or summary.mean is None:
        return "n/a"
    return _fmt(summary.mean) + (f" ± {summary.sd:.4f}" if summary.sd is not None else "")


def benchmark_report(*, run: BenchmarkRun) -> BenchmarkReport:
    return BenchmarkReport(
        run=run, results=list(benchmark_result_list(run=run)), aggregates=benchmark_run_aggregates(run=run)
    )
