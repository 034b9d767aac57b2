"""Benchmark Δ per transformation run, for the prompt-sensitivity report of ``transforms`` (which
cannot import this app: ``settings.TRANSFORMS_BENCHMARK_DELTA_SOURCES`` names
:func:`benchmark_deltas_by_transform_run` as its source)."""

from __future__ import annotations

from collections.abc import Sequence

from django.db.models import F

from evaluation.models import BenchmarkResult


def benchmark_deltas_by_transform_run(run_ids: Sequence[int]) -> dict[int, dict[tuple, float]]:
    """For each transformation run, Δ (transformed minus original main score on the same items) per
    (model, dataset, seed) unit that scored it; when several benchmark runs scored the same unit,
    the latest one counts. Only benchmark runs of the transformation run's own project count."""
    deltas: dict[int, dict[tuple, float]] = {}
    rows = (
        BenchmarkResult.objects.filter(
            transform_run_id__in=run_ids, original_main_score__isnull=False, run__project=F("transform_run__project")
        )
        .order_by("created_at", "pk")
        .values_list("transform_run_id", "model", "dataset__name", "seed", "main_score", "original_main_score")
    )
    for run_id, model, dataset, seed, score, original in rows:
        deltas.setdefault(run_id, {})[(model, dataset, seed)] = score - original
    return deltas
