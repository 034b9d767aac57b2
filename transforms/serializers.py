from rest_framework import serializers

from core.limits import MAX_COUNT, MAX_ID, MAX_SEED
from core.serializers import JOB_END_FIELDS, JobWaitingSerializer, project_choice_field, project_slug_field
from transforms.models import TRANSFORMATION_CHOICES, JudgeReport, PromptTemplate, TransformedItem, TransformRun
from transforms.noise import NOISE_KINDS
from transforms.presets import preset_choices


class PromptTemplateSerializer(serializers.ModelSerializer):
    project = project_slug_field()

    class Meta:
        model = PromptTemplate
        fields = [
            "id",
            "project",
            "key",
            "version",
            "system",
            "user",
            "content_hash",
            "is_active",
            "note",
            "created_at",
        ]
        read_only_fields = ["id", "project", "version", "content_hash", "is_active", "created_at"]


class PromptTemplateCreateSerializer(serializers.ModelSerializer):
    """A new prompt version, made active in its project (every project numbers its own versions)."""

    project = project_choice_field()

    class Meta:
        model = PromptTemplate
        fields = ["key", "system", "user", "note", "project"]
        validators = []  # versions are found or numbered by the service, within the project


class TransformRunSerializer(JobWaitingSerializer, serializers.ModelSerializer):
    project = project_slug_field()
    dataset = serializers.SlugRelatedField(slug_field="name", read_only=True)
    model = serializers.CharField(source="generator.model", read_only=True)
    params = serializers.JSONField(source="generator.params", read_only=True)
    backend = serializers.CharField(source="generator.backend_alias", read_only=True)

    class Meta:
        model = TransformRun
        fields = [
            "id",
            "project",
            "dataset",
            "transformation",
            "seed",
            "backend",
            "model",
            "params",
            "prompt_hashes",
            "languages",
            "run_language",
            "item_limit",
            "item_scope",
            "preset",
            "model_identity",
            "language_check",
            "unchecked_languages",
            "run_hash",
            "status",
            "total",
            "done",
            "n_failed",
            "llm_calls",
            "cache_hits",
            *JOB_END_FIELDS,
        ]
        read_only_fields = fields


class TransformRunCreateSerializer(serializers.Serializer):
    dataset = serializers.CharField()
    project = project_choice_field()
    transformation = serializers.ChoiceField(
        choices=TRANSFORMATION_CHOICES + [(k.name, k.label) for k in NOISE_KINDS.values()],
        help_text="A transformation, or a noise kind run at ``severities``.",
    )
    severities = serializers.ListField(
        child=serializers.IntegerField(),
        required=False,
        help_text="Noise kinds only: one run per severity (percent); left out: 2, 5, 10 and 20.",
    )
    # Settings left out are unset: a preset fills them, else the defaults (seed 1337, temperature
    # 0.7, top_p 0.95, max_tokens 512, max_attempts 3).
    seed = serializers.IntegerField(
        required=False, min_value=0, max_value=MAX_SEED, help_text="Without a seed, a preset makes one run per seed."
    )
    backend = serializers.CharField(default="default")
    limit = serializers.IntegerField(required=False, min_value=1, max_value=MAX_COUNT)
    languages = serializers.ListField(child=serializers.CharField(max_length=16), required=False)
    temperature = serializers.FloatField(required=False)
    top_p = serializers.FloatField(required=False)
    max_tokens = serializers.IntegerField(required=False, min_value=1, max_value=MAX_COUNT)
    max_attempts = serializers.IntegerField(required=False, min_value=1, max_value=MAX_COUNT)
    preset = serializers.ChoiceField(choices=preset_choices(), required=False, help_text="A paper's protocol.")
    language_check = serializers.BooleanField(
        default=True, help_text="false allows languages the language identifier cannot check (check skipped)."
    )


class TransformedItemSerializer(serializers.ModelSerializer):
    item_id = serializers.CharField(source="item.item_id", read_only=True)

    class Meta:
        model = TransformedItem
        fields = [
            "item_id",
            "side",
            "source_text",
            "output_text",
            "ok",
            "error_type",
            "attempt_errors",
            "attempts",
            "target_language",
            "pivot_language",
            "detected_language",
            "edit_distance",
            "length_ratio",
            "llm_calls",
        ]
        read_only_fields = fields


class JudgeReportSerializer(JobWaitingSerializer, serializers.ModelSerializer):
    project = project_slug_field()
    dataset = serializers.SlugRelatedField(slug_field="name", read_only=True)
    runs = serializers.PrimaryKeyRelatedField(many=True, read_only=True)

    class Meta:
        model = JudgeReport
        fields = [
            "id",
            "kind",
            "project",
            "status",
            "dataset",
            "runs",
            "judges",
            "options",
            "total",
            "done",
            "result",
            *JOB_END_FIELDS,
        ]
        read_only_fields = fields


class JudgeReportCreateSerializer(serializers.Serializer):
    """One body for the three kinds; each kind reads the fields it needs."""

    kind = serializers.ChoiceField(choices=JudgeReport.Kind.choices)
    project = project_choice_field()
    dataset = serializers.CharField(required=False, help_text="evaluation: an sts/str dataset; selection: to transform")
    run = serializers.IntegerField(
        required=False, min_value=1, max_value=MAX_ID, help_text="run: the transformation run to judge"
    )
    runs = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=MAX_ID),
        required=False,
        default=list,
        help_text="selection: existing runs as candidates",
    )
    candidates = serializers.ListField(
        child=serializers.CharField(), required=False, default=list, help_text="selection: generator backend aliases"
    )
    judges = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        help_text="judge backend aliases (selection default: the candidates)",
    )
    transformation = serializers.ChoiceField(choices=TRANSFORMATION_CHOICES, default="paraphrase")
    # selection over several transformations (pooled, with the top-k crossover) and its criteria
    transformations = serializers.ListField(
        child=serializers.ChoiceField(choices=TRANSFORMATION_CHOICES),
        required=False,
        default=list,
        help_text="selection: transform with every candidate on each and pool (default: transformation)",
    )
    criteria = serializers.ListField(
        child=serializers.ChoiceField(choices=["quality", "fluency", "similarity"]),
        required=False,
        help_text="selection: judged dimensions (default quality, fluency; similarity for paraphrase-like ones)",
    )
    top_k = serializers.IntegerField(
        default=3, min_value=1, max_value=MAX_COUNT, help_text="selection: k of the pooled top-k crossover"
    )
    limit = serializers.IntegerField(required=False, min_value=1, max_value=MAX_COUNT)
    split = serializers.CharField(required=False)
    seed = serializers.IntegerField(
        required=False, min_value=0, max_value=MAX_SEED, help_text="default 0, or the preset's first seed"
    )
    temperature = serializers.FloatField(required=False, help_text="default 0.0, or the preset's")
    preset = serializers.ChoiceField(choices=preset_choices(), required=False, help_text="A paper's protocol.")
    max_attempts = serializers.IntegerField(default=3, min_value=1, max_value=MAX_COUNT)
    resamples = serializers.IntegerField(default=1000, min_value=100, max_value=100_000)
    alpha = serializers.FloatField(default=0.05)
