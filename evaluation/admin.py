from django.contrib import admin

from core.admin import ReadOnlyAdmin
from evaluation.models import BaselineScoreJob, BenchmarkResult, BenchmarkRun, StoredRobustnessReport


@admin.register(BenchmarkRun)
class BenchmarkRunAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "name",
        "project",
        "source",
        "status",
        "done",
        "total",
        "config_hash",
        "created_by",
        "created_at",
    )
    list_filter = ("project", "status", "source")
    readonly_fields = (
        "config_hash",
        "config_document",
        "plan",
        "done",
        "total",
        "n_failed",
        "started_at",
        "finished_at",
    )


@admin.register(BenchmarkResult)
class BenchmarkResultAdmin(admin.ModelAdmin):
    list_display = ("run", "model", "dataset", "transformation", "seed", "main_score", "original_main_score", "n_items")
    list_filter = ("transformation", "model")
    raw_id_fields = ("run", "dataset", "transform_run")


@admin.register(StoredRobustnessReport)
class StoredRobustnessReportAdmin(admin.ModelAdmin):
    """Reports stored when their run ended: listed and deletable (the page computes one again), never
    edited, and the sealed report itself is not shown."""

    list_display = ("run", "options_key", "results_key", "computed_at", "compute_seconds")
    raw_id_fields = ("run",)
    exclude = ("report",)
    readonly_fields = ("run", "options_key", "results_key", "computed_at", "compute_seconds")

    def has_add_permission(self, request) -> bool:
        return False


@admin.register(BaselineScoreJob)
class BaselineScoreJobAdmin(ReadOnlyAdmin):
    list_display = ("study", "model_names", "status", "done", "total", "created_by", "created_at")
    list_filter = ("status",)
