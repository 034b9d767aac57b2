"""Admin views of studies and baseline studies. Everything here is read-only: studies change only
through the services (lock, publish, sync, validate, gate, approve; baseline create, publish, sync,
llm-annotate), which enforce the declared rules and audit them."""

from django.contrib import admin

from annotation.models import (
    Annotator,
    Approval,
    ArgillaWebhook,
    Assignment,
    BaselineAnnotator,
    BaselineAnswer,
    BaselineAnswerRevision,
    BaselineInstance,
    BaselineLLMJob,
    BaselinePublishJob,
    BaselineStudy,
    BenchmarkConfig,
    Flag,
    GateResult,
    JudgePopulationJob,
    RaterDecision,
    Rating,
    RatingComment,
    RatingRevision,
    Study,
    StudyItem,
    StudyJob,
)
from core.admin import ReadOnlyAdmin


@admin.register(Study)
class StudyAdmin(ReadOnlyAdmin):
    list_display = ("name", "version", "project", "workspace", "status", "locked_at", "published_at", "created_by")
    list_filter = ("status", "project")
    search_fields = ("name",)


@admin.register(StudyItem)
class StudyItemAdmin(ReadOnlyAdmin):
    list_display = ("study", "position", "kind", "transformation", "external_id")
    list_filter = ("kind", "transformation")


@admin.register(Annotator)
class AnnotatorAdmin(ReadOnlyAdmin):
    list_display = ("user", "study", "status", "control_status", "argilla_deactivated")
    list_filter = ("status", "control_status")


@admin.register(Assignment)
class AssignmentAdmin(ReadOnlyAdmin):
    list_display = ("annotator", "study_item", "position", "batch", "active", "end_reason")
    list_filter = ("active",)


@admin.register(Rating)
class RatingAdmin(ReadOnlyAdmin):
    list_display = ("study_item", "annotator", "question", "value", "active", "edits", "submitted_at")
    list_filter = ("question", "active")


@admin.register(RatingRevision)
class RatingRevisionAdmin(ReadOnlyAdmin):
    list_display = ("rating", "value", "status", "argilla_updated_at", "recorded_at")


@admin.register(RatingComment)
class RatingCommentAdmin(ReadOnlyAdmin):
    list_display = ("study_item", "annotator", "text", "updated_at")


@admin.register(Flag)
class FlagAdmin(ReadOnlyAdmin):
    list_display = ("rating", "rule", "value", "estimate", "status", "reviewed_by", "reviewed_at")
    list_filter = ("rule", "status")


@admin.register(RaterDecision)
class RaterDecisionAdmin(ReadOnlyAdmin):
    list_display = ("annotator", "decision", "reason", "decided_by", "decided_at")
    list_filter = ("reason",)


@admin.register(GateResult)
class GateResultAdmin(ReadOnlyAdmin):
    list_display = ("study", "transformation", "passed", "created_by", "created_at")
    list_filter = ("passed", "transformation")


@admin.register(Approval)
class ApprovalAdmin(ReadOnlyAdmin):
    list_display = ("gate_result", "decision", "decided_by", "decided_at")
    list_filter = ("decision",)


@admin.register(BenchmarkConfig)
class BenchmarkConfigAdmin(ReadOnlyAdmin):
    list_display = ("config_hash", "name", "project", "created_by", "created_at")
    list_filter = ("project",)


@admin.register(BaselineStudy)
class BaselineStudyAdmin(ReadOnlyAdmin):
    list_display = ("name", "project", "task_type", "dataset", "split", "n_instances", "seed", "status", "published_at")
    list_filter = ("project", "task_type", "status")
    search_fields = ("name",)


@admin.register(BaselineAnnotator)
class BaselineAnnotatorAdmin(ReadOnlyAdmin):
    list_display = ("study", "user", "argilla_workspace", "argilla_dataset_id", "created_at")
    list_filter = ("study",)


@admin.register(BaselineInstance)
class BaselineInstanceAdmin(ReadOnlyAdmin):
    list_display = ("study", "key", "group", "gold")
    list_filter = ("study",)


@admin.register(BaselineAnswer)
class BaselineAnswerAdmin(ReadOnlyAdmin):
    list_display = ("instance", "rater", "source", "value", "valid", "active", "submitted_at")
    list_filter = ("source", "valid", "active", "rater")


@admin.register(BaselineAnswerRevision)
class BaselineAnswerRevisionAdmin(ReadOnlyAdmin):
    list_display = ("answer", "value", "status", "argilla_updated_at", "recorded_at")


@admin.register(BaselineLLMJob)
class BaselineLLMJobAdmin(ReadOnlyAdmin):
    list_display = ("study", "backend_alias", "status", "done", "total", "created_by", "created_at")
    list_filter = ("status",)


@admin.register(BaselinePublishJob)
class BaselinePublishJobAdmin(ReadOnlyAdmin):
    list_display = ("study", "status", "done", "total", "created_by", "created_at")
    list_filter = ("status",)


@admin.register(StudyJob)
class StudyJobAdmin(ReadOnlyAdmin):
    list_display = ("study", "action", "status", "done", "total", "created_by", "created_at")
    list_filter = ("action", "status")


@admin.register(JudgePopulationJob)
class JudgePopulationJobAdmin(ReadOnlyAdmin):
    list_display = ("study", "transformation", "status", "done", "total", "fingerprint", "created_at")
    list_filter = ("status",)


@admin.register(ArgillaWebhook)
class ArgillaWebhookAdmin(ReadOnlyAdmin):
    list_display = ("url", "argilla_id", "events", "created_at")
    exclude = ("secret",)
