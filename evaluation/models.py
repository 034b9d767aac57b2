"""Benchmark runs (models x datasets x original + approved transformations x seeds) and their
results, one row per unit."""

from django.conf import settings
from django.db import models

from annotation.configs.config_export import DEVELOPMENT_KEY_LABEL, config_signed_with
from core.models import TrackedJob, project_field
from corpora.models import Dataset
from transforms.models import TransformRun

ORIGINAL = "original"  # the transformation name of a unit scored on the untouched data


class BenchmarkRun(TrackedJob):
    class Source(models.TextChoices):
        CONFIG = "config", "validated benchmark config"
        DATASETS = "datasets", "datasets directly (original data only)"

    name = models.CharField(max_length=100, blank=True)
    project = project_field("benchmark_runs")
    source = models.CharField(max_length=16, choices=Source.choices)
    config_hash = models.CharField(max_length=64, blank=True, db_index=True, help_text="Hash of the config used.")
    config_document = models.JSONField(null=True, blank=True, help_text="The verified config, as read.")
    evidence_override = models.JSONField(
        null=True,
        blank=True,
        help_text="Set when the researcher ran the config although its evidence had changed since it was "
        "exported: {reasons: [what changed], by: username, at: ISO time}. None: the evidence held.",
    )
    model_names = models.JSONField(default=list, help_text="Encoder aliases or model names, in order.")
    plan = models.JSONField(
        default=dict, help_text="Units and the transformation run of each (dataset, transformation, seed)."
    )
    split = models.CharField(max_length=32, default="test", help_text="The evaluated split.")
    item_limit = models.PositiveIntegerField(null=True, blank=True, help_text="Only the first N examples.")
    total = models.PositiveIntegerField(default=0, help_text="Units planned.")
    done = models.PositiveIntegerField(default=0, help_text="Units with a result.")
    n_failed = models.PositiveIntegerField(default=0, help_text="Units that failed in the current attempt.")

    def __str__(self) -> str:
        return f"benchmark run {self.pk} ({self.status}, {self.done}/{self.total})"

    @property
    def config_development_key(self) -> bool:
        """Its config is signed with Shiftlab's public development key: not a validated config."""
        return bool(self.config_document) and config_signed_with(
            self.config_document, key=settings.DEV_CONFIG_SIGNING_KEY
        )

    @property
    def config_label(self) -> str:
        """What the run's config is, in words, for pages and reports."""
        if self.source != self.Source.CONFIG:
            return self.Source.DATASETS.label
        label = f"config {DEVELOPMENT_KEY_LABEL} (not validated)" if self.config_development_key else "validated config"
        return f"{label}, run anyway although its evidence changed" if self.evidence_override else label


class BenchmarkResult(models.Model):
    """The score of one unit: (run, model, dataset, transformation or "original", seed). For a
    transformed unit, ``original_main_score`` is the original data's score on the same items
    (items whose transformation failed are left out of both)."""

    run = models.ForeignKey(BenchmarkRun, on_delete=models.CASCADE, related_name="results")
    model = models.CharField(max_length=200, help_text="As named in the run (alias or model).")
    model_id = models.CharField(max_length=200)
    model_revision = models.CharField(max_length=64)
    dataset = models.ForeignKey(Dataset, on_delete=models.PROTECT, related_name="benchmark_results")
    transformation = models.CharField(max_length=32, help_text='"original" or a transformation name.')
    axis = models.CharField(max_length=16, blank=True, help_text="Empty for original units.")
    seed = models.BigIntegerField(help_text="Transformation seed; 0 for original units.")
    side = models.CharField(
        max_length=16,
        default="query",
        help_text="What a ranking unit perturbs: query, document or both (query for every other unit).",
    )
    transform_run = models.ForeignKey(
        TransformRun, null=True, blank=True, on_delete=models.PROTECT, related_name="benchmark_results"
    )
    documents = models.JSONField(
        null=True,
        blank=True,
        help_text="Document-side units: documents transformed, left out, and corpus texts encoded vs reused from the "
        "embedding cache.",
    )
    main_metric = models.CharField(max_length=64)
    main_score = models.FloatField()
    metrics = models.JSONField(default=dict)
    n_items = models.PositiveIntegerField(help_text="Items evaluated.")
    n_left_out = models.PositiveIntegerField(default=0, help_text="Items left out because a transformation failed.")
    original_main_score = models.FloatField(null=True, blank=True, help_text="Original data, same items.")
    original_metrics = models.JSONField(null=True, blank=True)
    item_scores = models.JSONField(
        null=True, blank=True, help_text="Per-item scores of the main score (evaluation.item_scores); None if none."
    )
    original_item_scores = models.JSONField(
        null=True, blank=True, help_text="Per-item scores of the original data on the same items."
    )
    result_path = models.CharField(max_length=500, blank=True, help_text="MTEB-style JSON file of this unit.")
    evaluation_time_s = models.FloatField(default=0.0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "model", "dataset__name", "transformation", "seed", "side"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "model", "dataset", "transformation", "seed", "side"],
                name="one_result_per_benchmark_unit_side",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.model} {self.dataset_id} {self.transformation} seed {self.seed}: {self.main_score:.4f}"

    @property
    def delta(self) -> float | None:
        """Transformed minus original on the same items."""
        if self.original_main_score is None:
            return None
        return self.main_score - self.original_main_score


class StoredRobustnessReport(models.Model):
    """A run's robustness report as computed when the run ended (issue 31), so that opening it does
    not recompute the statistics and figures: the report and its figures as SVG, pickled together
    behind a seal that only this server's code writes (``report_services``). ``options_key`` names the options it
    was computed under, ``results_key`` the results it was computed from (their count and newest
    id): a resumed run that gained results is computed afresh."""

    run = models.ForeignKey(BenchmarkRun, on_delete=models.CASCADE, related_name="stored_reports")
    options_key = models.CharField(max_length=500)
    results_key = models.CharField(max_length=64)
    report = models.BinaryField()
    computed_at = models.DateTimeField(auto_now=True)
    compute_seconds = models.FloatField(default=0.0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "options_key"], name="one_stored_report_per_options")]

    def __str__(self) -> str:
        return f"robustness report of run {self.run_id} ({self.options_key})"


class BaselineScoreJob(TrackedJob):
    """Models scored on a human-baseline study's instances in the background (issue 41): ``done`` of
    ``total`` models, each encoding the study's texts through the embedding cache, then scored with
    the benchmark's evaluators. ``scores`` keeps each finished model's score as it comes, so a
    resumed or retried job scores only the models still missing; the study's page ranks them among
    the humans."""

    study = models.ForeignKey("annotation.BaselineStudy", on_delete=models.CASCADE, related_name="score_jobs")
    model_names = models.JSONField(default=list, help_text="The encoder aliases or model names asked for, in order.")
    batch_size = models.PositiveIntegerField(
        null=True, blank=True, help_text="Encoding batch size; none: the encoder's."
    )
    scores = models.JSONField(
        default=list, blank=True, help_text="One entry per model scored: its score (RaterScore), model id and revision."
    )

    class Meta(TrackedJob.Meta):
        pass

    def __str__(self) -> str:
        return f"{', '.join(self.model_names)} on {self.study} ({self.status})"
