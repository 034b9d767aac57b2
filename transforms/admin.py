from django.contrib import admin, messages

from core.admin import ReadOnlyAdmin
from core.pages import refusals
from transforms.models import (
    Generation,
    GeneratorConfig,
    Judgement,
    JudgeReport,
    LLMBackendUse,
    PromptTemplate,
    TransformedItem,
    TransformRun,
)
from transforms.prompt_services import prompt_template_create_version


@admin.register(PromptTemplate)
class PromptTemplateAdmin(admin.ModelAdmin):
    """Versions are never edited in place: adding a prompt creates (and activates) the next version
    of its key in its project, or re-activates the project's version with the same text."""

    list_display = ("key", "version", "project", "is_active", "content_hash", "note", "created_by", "created_at")
    list_filter = ("project", "key", "is_active")
    fields = ("project", "key", "system", "user", "note", "version", "content_hash", "is_active", "created_by")
    readonly_fields = ("version", "content_hash", "is_active", "created_by")

    def save_model(self, request, obj, form, change):
        with refusals(request) as refused:  # said as an error message on the admin's page
            created = prompt_template_create_version(
                key=obj.key,
                system=obj.system,
                user=obj.user,
                note=obj.note,
                created_by=request.user,
                project=obj.project,
            )
        if refused:
            return
        obj.pk = created.pk
        messages.info(
            request, f"Active prompt for {created.key} in {created.project} is now version {created.version}."
        )

    def get_readonly_fields(self, request, obj=None):
        # Versions are immutable: existing ones are shown read-only; "Add" creates the next version.
        return self.fields if obj is not None else self.readonly_fields

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(GeneratorConfig)
class GeneratorConfigAdmin(admin.ModelAdmin):
    list_display = ("model", "backend_alias", "params", "content_hash", "created_at")
    readonly_fields = ("backend_alias", "model", "params", "content_hash")


@admin.register(TransformRun)
class TransformRunAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "project",
        "dataset",
        "transformation",
        "seed",
        "status",
        "done",
        "total",
        "n_failed",
        "llm_calls",
    )
    list_filter = ("project", "status", "transformation")
    raw_id_fields = ("dataset", "generator", "created_by")
    readonly_fields = ("run_hash", "prompt_hashes", "done", "total", "n_failed", "llm_calls", "cache_hits")


@admin.register(TransformedItem)
class TransformedItemAdmin(admin.ModelAdmin):
    list_display = ("run", "item", "side", "ok", "error_type", "attempts", "target_language", "edit_distance")
    list_filter = ("ok", "error_type")
    raw_id_fields = ("run", "item")


@admin.register(Generation)
class GenerationAdmin(admin.ModelAdmin):
    list_display = ("key", "transformation", "step", "attempt", "model", "language", "latency_s")
    list_filter = ("transformation", "model")
    search_fields = ("key", "input_hash")


@admin.register(Judgement)
class JudgementAdmin(admin.ModelAdmin):
    list_display = ("kind", "model", "score", "attempt", "created_at")
    list_filter = ("kind", "model")
    search_fields = ("key", "text_a_hash")


@admin.register(JudgeReport)
class JudgeReportAdmin(admin.ModelAdmin):
    list_display = ("id", "kind", "project", "dataset", "status", "done", "total", "created_by", "created_at")
    list_filter = ("project", "kind", "status")
    raw_id_fields = ("dataset", "created_by")
    filter_horizontal = ("runs",)
    readonly_fields = ("result", "done", "total", "started_at", "finished_at")


@admin.register(LLMBackendUse)
class LLMBackendUseAdmin(ReadOnlyAdmin):
    """Which job holds which LLM backend (the "busy with run #N" of waiting jobs); rows expire."""

    list_display = ("backend_alias", "label", "job_model", "job_id", "started_at", "heartbeat_at")
