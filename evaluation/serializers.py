from rest_framework import serializers

from core.limits import MAX_COUNT, MAX_ID, MAX_SEED
from core.serializers import JobWaitingSerializer, project_slug_field
from evaluation.aggregation import RESULT_SCORE_FIELDS
from evaluation.benchmark_plan import SIDES
from evaluation.models import BenchmarkResult, BenchmarkRun
from evaluation.robustness_options import MAX_SPLITS, OPTION_CHOICES
from transforms.presets import preset_choices
from transforms.selectors import DOCUMENT_SCOPES


class BenchmarkRunSerializer(JobWaitingSerializer, serializers.ModelSerializer):
    models = serializers.ListField(source="model_names", child=serializers.CharField(), read_only=True)
    progress = serializers.FloatField(read_only=True)
    config_label = serializers.CharField(read_only=True, help_text="The config in words (validated, or not).")
    config_development_key = serializers.BooleanField(
        read_only=True, help_text="The config is signed with Shiftlab's public development key: not validated."
    )
    created_by = serializers.StringRelatedField()
    project = project_slug_field()

    class Meta:
        model = BenchmarkRun
        fields = [
            "id",
            "name",
            "project",
            "source",
            "config_hash",
            "config_label",
            "config_development_key",
            "evidence_override",
            "models",
            "split",
            "item_limit",
            "status",
            "total",
            "done",
            "n_failed",
            "progress",
            "error",
            "waiting",
            "waiting_message",
            "plan",
            "created_by",
            "created_at",
            "started_at",
            "finished_at",
        ]
        read_only_fields = fields


class BenchmarkRunCreateSerializer(serializers.Serializer):
    """A run from an exported config (``config_id``, or ``config_text`` + ``config_format``) or, for
    original data only, from ``datasets``; in ``project`` (a slug; default: the inputs' project, else the
    caller's own). Shapes only: ``evaluation.benchmark_services.benchmark_run_start`` checks the rest."""

    models = serializers.ListField(child=serializers.CharField(max_length=200), min_length=1)
    config_id = serializers.IntegerField(required=False, min_value=1, max_value=MAX_ID)
    config_text = serializers.CharField(required=False, trim_whitespace=False)
    config_format = serializers.ChoiceField(choices=["json", "yaml"], default="yaml")
    datasets = serializers.ListField(child=serializers.CharField(max_length=200), required=False)
    seeds = serializers.ListField(child=serializers.IntegerField(min_value=0, max_value=MAX_SEED), required=False)
    limit = serializers.IntegerField(required=False, min_value=1, max_value=MAX_COUNT)
    split = serializers.CharField(default="test", max_length=32)
    name = serializers.CharField(default="", allow_blank=True, max_length=100)
    project = serializers.SlugField(
        required=False,
        max_length=61,
        help_text="The project the run belongs to (default: its datasets' and config's, else your own project).",
    )
    preset = serializers.ChoiceField(
        choices=preset_choices(),
        required=False,
        help_text="A paper's protocol: its seeds (unless seeds) and its encoder dtype, stored with the run.",
    )
    sides = serializers.ListField(
        child=serializers.ChoiceField(choices=list(SIDES)),
        required=False,
        help_text="What a config's transformations perturb on retrieval and reranking datasets: query (default, "
        "unless the config fixes its sides: then those, and this picks among them), document (reranking: the "
        "candidates), both; several give one unit per side.",
    )
    document_scope = serializers.ChoiceField(
        choices=list(DOCUMENT_SCOPES),
        required=False,
        help_text="Which documents the document side rewrites: relevant_documents (those the evaluated queries "
        "judge relevant; the default unless the config fixes the scope) or documents (the whole corpus: one "
        "rewrite per document). Reranking datasets rewrite every distinct candidate of the evaluated queries' "
        "lists.",
    )
    run_anyway = serializers.BooleanField(
        default=False,
        help_text="Run the config although the evidence behind it changed since it was exported; the run "
        "records what changed (evidence_override).",
    )


# --- robustness report options (the statistics' units; evaluation.robustness_options.ReportOptions) ---
class RobustnessOptionsSerializer(serializers.Serializer):
    """Query parameters of the robustness report; an unset option keeps the run's preset's value or
    the default (the multi-axis paper's protocol)."""

    tau_unit = serializers.ChoiceField(choices=OPTION_CHOICES["tau_unit"], required=False)
    axis_tau = serializers.ChoiceField(choices=OPTION_CHOICES["axis_tau"], required=False)
    split_half_on = serializers.ChoiceField(choices=OPTION_CHOICES["split_half_on"], required=False)
    split_half_splits = serializers.IntegerField(min_value=1, max_value=MAX_SPLITS, required=False)
    wilcoxon_unit = serializers.ChoiceField(choices=OPTION_CHOICES["wilcoxon_unit"], required=False)
    baseline_compare = serializers.ChoiceField(choices=OPTION_CHOICES["baseline_compare"], required=False)
    shift_interval = serializers.ChoiceField(choices=OPTION_CHOICES["shift_interval"], required=False)
    shift_figure_unit = serializers.ChoiceField(choices=OPTION_CHOICES["shift_figure_unit"], required=False)


class BenchmarkResultSerializer(serializers.ModelSerializer):
    dataset = serializers.CharField(source="dataset.name")
    delta = serializers.FloatField(allow_null=True)

    class Meta:
        model = BenchmarkResult
        fields = [
            "id",
            "model",
            "model_id",
            "model_revision",
            "dataset",
            "transformation",
            "axis",
            "seed",
            "side",
            "transform_run",
            "documents",
            *RESULT_SCORE_FIELDS,
            "metrics",
            "original_metrics",
            "result_path",
            "evaluation_time_s",
            "created_at",
        ]
        read_only_fields = fields
