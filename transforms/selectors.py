from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from django.db.models import Avg, QuerySet

from transforms.models import TransformedItem, TransformRun


def transform_run_list() -> QuerySet[TransformRun]:
    return TransformRun.objects.select_related("dataset", "generator")


@dataclass(frozen=True)
class RunSummary:
    n: int
    n_failed: int
    error_rate: float
    error_rates: dict[str, float]
    mean_edit_distance: float | None
    mean_length_ratio: float | None
    attempt_error_rates: dict[str, float]
    languages: dict[str, int]


def transform_run_summary(*, run: TransformRun) -> RunSummary:
    """Error rates per type (each text counts at most once: its final error) and per attempt."""
    outputs = TransformedItem.objects.filter(run=run)
    n = outputs.count()
    final = Counter(outputs.exclude(ok=True).values_list("error_type", flat=True))
    attempts = Counter(e for errors in outputs.values_list("attempt_errors", flat=True) for e in errors if e)
    n_attempts = sum(len(errors) for errors in outputs.values_list("attempt_errors", flat=True))
    means = outputs.filter(ok=True).aggregate(edit=Avg("edit_distance"), ratio=Avg("length_ratio"))
    languages = Counter(outputs.values_list("target_language", flat=True))
    n_failed = sum(final.values())
    return RunSummary(
        n=n,
        n_failed=n_failed,
        error_rate=n_failed / n if n else 0.0,
        error_rates={k: v / n for k, v in sorted(final.items())} if n else {},
        mean_edit_distance=means["edit"],
        mean_length_ratio=means["ratio"],
        attempt_error_rates={k: v / n_attempts for k, v in sorted(attempts.items())} if n_attempts else {},
        languages=dict(sorted(languages.items())),
    )


def transformed_item_list(*, run: TransformRun, failed: bool | None = None) -> QuerySet[TransformedItem]:
    outputs = TransformedItem.objects.filter(run=run).select_related("item").order_by("item__position", "side")
    if failed is not None:
        outputs = outputs.filter(ok=not failed)
    return outputs
