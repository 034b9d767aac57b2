"""Read-only queries of benchmark runs and their aggregates, and of baseline studies to report on."""

from __future__ import annotations

from django.db.models import Count, QuerySet

from annotation.models import BaselineStudy
from evaluation.aggregation import ModelAggregate, UnitScore, aggregate
from evaluation.models import BenchmarkResult, BenchmarkRun


def benchmark_run_list() -> QuerySet[BenchmarkRun]:
    return BenchmarkRun.objects.select_related("created_by").order_by("-created_at", "-id")


def benchmark_result_list(*, run: BenchmarkRun) -> QuerySet[BenchmarkResult]:
    return (
        BenchmarkResult.objects.filter(run=run)
        .select_related("dataset")
        .order_by("model", "dataset__name", "transformation", "seed")
    )


def benchmark_run_aggregates(*, run: BenchmarkRun) -> dict[str, ModelAggregate]:
    """Per model: original, per transformation and per axis (mean ± SD over seeds), total."""
    units = [
        UnitScore(
            model=r.model,
            dataset=r.dataset.name,
            transformation=r.transformation,
            axis=r.axis,
            seed=r.seed,
            score=r.main_score,
            original_score=r.original_main_score,
        )
        for r in benchmark_result_list(run=run)
    ]
    found = aggregate(units)
    return {model: found[model] for model in run.model_names if model in found}


def baseline_study_list() -> QuerySet[BaselineStudy]:
    """Baseline studies newest first, with their drawn instances (``n_drawn``) and answers counted."""
    return (
        BaselineStudy.objects.select_related("dataset")
        .annotate(n_drawn=Count("instances", distinct=True), n_answers=Count("instances__answers"))
        .order_by("-created_at", "-id")
    )
