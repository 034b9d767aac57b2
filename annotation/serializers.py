from rest_framework import serializers

from annotation.models import Annotator, Approval, BenchmarkConfig, Flag, GateResult, Study, StudyItem, StudyJob
from core.limits import MAX_ID
from core.serializers import JSONField, project_slug_field, username_field


class StudySerializer(serializers.ModelSerializer):
    project = project_slug_field()
    runs = serializers.PrimaryKeyRelatedField(many=True, read_only=True)
    created_by = username_field()

    class Meta:
        model = Study
        fields = [
            "id",
            "name",
            "version",
            "previous",
            "project",
            "workspace",
            "runs",
            "design",
            "design_hash",
            "status",
            "sample_info",
            "locked_at",
            "published_at",
            "argilla_dataset_id",
            "synced_at",
            "validated_at",
            "ratings_changed_at",
            "created_by",
            "created_at",
        ]
        read_only_fields = fields


class StudyCreateSerializer(serializers.Serializer):
    name = serializers.CharField(
        max_length=200, help_text="Lower-case letters, digits and hyphens (STUDY_NAME_PATTERN), e.g. paraphrase-check."
    )
    project = serializers.SlugField(
        required=False,
        allow_blank=True,
        default="",
        help_text="Slug of the project it goes into (its runs must be in it); default: the runs' project, else "
        "your one project.",
    )
    runs = serializers.ListField(child=serializers.IntegerField(min_value=1, max_value=MAX_ID), min_length=1)
    design = JSONField(default=dict, help_text="Fields of annotation.science.design.StudyDesign.")


class StudyDesignSerializer(serializers.Serializer):
    design = JSONField(help_text="The changed design fields; a locked study gets a new version.")


class StudyPublishSerializer(serializers.Serializer):
    annotators = serializers.ListField(
        child=serializers.CharField(),
        default=list,
        help_text="Usernames of annotators on the roster of the study's project.",
    )


class ArgillaPasswordSerializer(serializers.Serializer):
    current_password = serializers.CharField(
        trim_whitespace=False, help_text="Your Shiftlab password: only you set your Argilla password."
    )
    password = serializers.CharField(
        trim_whitespace=False, min_length=8, max_length=100, help_text="The new password of your Argilla account."
    )


class StudyItemSerializer(serializers.ModelSerializer):
    class Meta:
        model = StudyItem
        fields = [
            "id",
            "position",
            "kind",
            "transformation",
            "stratum",
            "text_a",
            "text_b",
            "language_a",
            "language_b",
            "external_id",
            "expected",
            "llm_estimates",
            "translations",
        ]
        read_only_fields = fields


class AnnotatorSerializer(serializers.ModelSerializer):
    username = serializers.CharField(source="user.username", read_only=True)

    class Meta:
        model = Annotator
        fields = [
            "id",
            "username",
            "status",
            "control_status",
            "argilla_user_id",
            "argilla_workspace",
            "argilla_dataset_id",
            "argilla_deactivated",
            "frozen_at",
        ]
        read_only_fields = fields


class RejectSerializer(serializers.Serializer):
    reason = serializers.CharField()


class ReplaceSerializer(serializers.Serializer):
    username = serializers.CharField(
        help_text="The annotator who takes over the unsubmitted items (on the roster of the study's project)."
    )
    reason = serializers.CharField()


class FlagSerializer(serializers.ModelSerializer):
    study = serializers.IntegerField(source="rating.study_item.study_id", read_only=True)
    item = serializers.IntegerField(source="rating.study_item_id", read_only=True)
    annotator = serializers.CharField(source="rating.annotator.user.username", read_only=True)
    question = serializers.CharField(source="rating.question", read_only=True)
    text_a = serializers.CharField(source="rating.study_item.text_a", read_only=True)
    text_b = serializers.CharField(source="rating.study_item.text_b", read_only=True)
    reviewed_by = username_field()

    class Meta:
        model = Flag
        fields = [
            "id",
            "study",
            "item",
            "annotator",
            "question",
            "rule",
            "value",
            "estimate",
            "deviation",
            "status",
            "note",
            "reviewed_by",
            "reviewed_at",
            "text_a",
            "text_b",
            "created_at",
        ]
        read_only_fields = fields


FLAG_REVIEW_CHOICES = [(Flag.Status.CONFIRMED.value, "confirmed"), (Flag.Status.DISMISSED.value, "dismissed")]


class FlagReviewSerializer(serializers.Serializer):
    decision = serializers.ChoiceField(choices=FLAG_REVIEW_CHOICES)
    note = serializers.CharField(required=False, allow_blank=True, default="")


class ApprovalSerializer(serializers.ModelSerializer):
    decided_by = username_field()

    class Meta:
        model = Approval
        fields = ["id", "decision", "comment", "decided_by", "decided_at"]
        read_only_fields = fields


class GateResultSerializer(serializers.ModelSerializer):
    approval = ApprovalSerializer(read_only=True)

    class Meta:
        model = GateResult
        fields = ["id", "study", "transformation", "passed", "evidence", "evidence_hash", "created_at", "approval"]
        read_only_fields = fields


class DecisionSerializer(serializers.Serializer):
    decision = serializers.ChoiceField(choices=Approval.Decision.choices)
    comment = serializers.CharField()


class BenchmarkConfigSerializer(serializers.ModelSerializer):
    project = project_slug_field()
    development_key = serializers.BooleanField(
        read_only=True, help_text="Signed with Shiftlab's public development key (the demo's): not a validated config."
    )

    class Meta:
        model = BenchmarkConfig
        fields = ["id", "name", "project", "config_hash", "development_key", "document", "created_at"]
        read_only_fields = fields


class BenchmarkConfigExportSerializer(serializers.Serializer):
    name = serializers.CharField(required=False, allow_blank=True, default="")
    studies = serializers.ListField(child=serializers.IntegerField(min_value=1, max_value=MAX_ID), required=False)
    project = serializers.SlugField(
        required=False,
        allow_blank=True,
        default="",
        help_text="Export the approvals of this project's studies; without it (and without studies) those "
        "of the projects you may change, which must be one.",
    )
    sides = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        help_text="The sides the config's runs perturb on retrieval datasets (query, document, both), written "
        "into the config as its perturbation block; without it the config leaves the sides to each run.",
    )
    document_scope = serializers.CharField(
        required=False,
        help_text="With sides: the documents the document side rewrites (relevant_documents, the default, or "
        "documents).",
    )


class BenchmarkConfigVerifySerializer(serializers.Serializer):
    text = serializers.CharField(trim_whitespace=False)
    format = serializers.ChoiceField(choices=["json", "yaml"])


class StudyJobSerializer(serializers.ModelSerializer):
    """A study's validation or publish job: its progress, the backend it waits for, its outcome."""

    waiting = serializers.CharField(source="waiting_message", read_only=True, allow_null=True)

    class Meta:
        model = StudyJob
        fields = [
            "id",
            "action",
            "status",
            "done",
            "total",
            "waiting",
            "error",
            "summary",
            "result",
            "created_at",
            "started_at",
            "finished_at",
        ]
        read_only_fields = fields
