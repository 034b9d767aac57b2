from django.conf import settings
from django.db import models
from django.db.models import Q

from core.models import TrackedJob, project_field
from corpora.models import Dataset, DatasetItem
from transforms.describe import params_text, transformation_title
from transforms.registry import TRANSFORMATIONS

TRANSFORMATION_CHOICES = [(name, t.label) for name, t in TRANSFORMATIONS.items()]


class PromptTemplate(models.Model):
    """A version of the prompt for one step kind ("paraphrase", "translate", ...). Rows are never
    edited: a change is a new version with a new content hash, and one version per key is active."""

    key = models.CharField(max_length=32)
    version = models.PositiveIntegerField()
    system = models.TextField()
    user = models.TextField()
    content_hash = models.CharField(max_length=64)
    is_active = models.BooleanField(default=False)
    note = models.CharField(max_length=255, blank=True)
    project = project_field("prompt_templates")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["key", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["project", "key", "version"], name="unique_prompt_version"),
            models.UniqueConstraint(fields=["project", "key", "content_hash"], name="unique_prompt_content"),
            models.UniqueConstraint(
                fields=["project", "key"], condition=Q(is_active=True), name="one_active_prompt_per_key"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.key} v{self.version} ({self.content_hash[:8]})"


class GeneratorConfig(models.Model):
    """Backend alias, model and generation parameters; identified by their hash."""

    backend_alias = models.CharField(max_length=64)
    model = models.CharField(max_length=200)
    params = models.JSONField(help_text="temperature, top_p, max_tokens, max_attempts")
    content_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.model} via {self.backend_alias} ({params_text(self.params)})"


class TransformRun(TrackedJob):
    project = project_field("transform_runs")
    dataset = models.ForeignKey(Dataset, on_delete=models.PROTECT, related_name="transform_runs")
    transformation = models.CharField(max_length=32, choices=TRANSFORMATION_CHOICES)
    generator = models.ForeignKey(GeneratorConfig, on_delete=models.PROTECT, related_name="runs")
    prompts = models.ManyToManyField(PromptTemplate, blank=True, related_name="runs")
    prompt_hashes = models.JSONField(default=dict, help_text="Prompt key -> content hash used by this run.")
    seed = models.BigIntegerField()
    languages = models.JSONField(default=list, help_text="Candidate target/pivot languages.")
    run_language = models.CharField(max_length=16, blank=True, help_text="Target of a translation run.")
    item_limit = models.PositiveIntegerField(null=True, blank=True, help_text="Only the first N examples.")
    item_scope = models.CharField(
        max_length=24,
        blank=True,
        default="",
        help_text="What the run transforms: '' its examples (a retrieval dataset's queries); "
        "'relevant_documents' the documents relevant to those examples; 'documents' the whole corpus.",
    )
    preset = models.CharField(max_length=32, blank=True, help_text="The paper protocol the run follows (a preset).")
    model_identity = models.CharField(
        max_length=200, blank=True, help_text="What identifies the generator's weights (server metadata, file hash)."
    )
    language_check = models.BooleanField(default=True, help_text="Whether outputs' languages are checked.")
    unchecked_languages = models.JSONField(
        default=list, help_text="Languages of the run the language identifier cannot check."
    )
    run_hash = models.CharField(max_length=64, db_index=True, help_text="Hash of everything that defines outputs.")
    total = models.PositiveIntegerField(default=0, help_text="Texts to transform (items x transformed fields).")
    n_failed = models.PositiveIntegerField(default=0)
    llm_calls = models.PositiveIntegerField(default=0, help_text="LLM calls made (cache hits excluded).")
    cache_hits = models.PositiveIntegerField(default=0)

    def __str__(self) -> str:
        return f"run {self.pk}: {transformation_title(self.transformation)} on {self.dataset.name} (seed {self.seed})"


class Generation(models.Model):
    """The cache: one LLM output, addressed by everything that determines it."""

    key = models.CharField(max_length=64, unique=True)
    input_hash = models.CharField(max_length=64, db_index=True)
    transformation = models.CharField(max_length=32)
    step = models.PositiveSmallIntegerField()
    prompt_hash = models.CharField(max_length=64)
    model = models.CharField(max_length=200)
    params_hash = models.CharField(max_length=64)
    seed = models.BigIntegerField(help_text="Run seed.")
    sampling_seed = models.BigIntegerField(help_text="Seed sent to the LLM (new for each retry).")
    attempt = models.PositiveSmallIntegerField()
    language = models.CharField(max_length=16, help_text="Language the step writes in.")
    output = models.TextField(blank=True)
    failure = models.TextField(blank=True, help_text="Backend failure message when no output came back.")
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    latency_s = models.FloatField(default=0.0)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.transformation} step {self.step} attempt {self.attempt} ({self.key[:10]})"


class TransformedItem(models.Model):
    """The outcome for one text of one item in a run: an output, or a failure with its error type."""

    run = models.ForeignKey(TransformRun, on_delete=models.CASCADE, related_name="outputs")
    item = models.ForeignKey(DatasetItem, on_delete=models.CASCADE, related_name="transformations")
    side = models.CharField(max_length=32, help_text="The transformed field, e.g. sentence1.")
    source_text = models.TextField()
    output_text = models.TextField(blank=True)
    ok = models.BooleanField()
    error_type = models.CharField(max_length=32, blank=True, help_text="Error of the last attempt when failed.")
    attempt_errors = models.JSONField(default=list, help_text="Error of every attempt, in order.")
    attempts = models.PositiveSmallIntegerField()
    target_language = models.CharField(max_length=16)
    pivot_language = models.CharField(max_length=16, blank=True)
    detected_language = models.CharField(max_length=16, blank=True)
    edit_distance = models.FloatField(null=True)
    length_ratio = models.FloatField(null=True)
    generation_keys = models.JSONField(default=list, help_text="Cache keys of the steps of the kept attempt.")
    llm_calls = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["run", "item__position", "side"]
        constraints = [models.UniqueConstraint(fields=["run", "item", "side"], name="one_output_per_item_side")]

    def __str__(self) -> str:
        return f"{self.run_id}/{self.item_id}/{self.side}"


class Judgement(models.Model):
    """The judge's cache: one LLM judgement of a text pair, addressed by everything that
    determines it. ``score`` is None when the answer held no number on the scale."""

    key = models.CharField(max_length=64, unique=True)
    kind = models.CharField(max_length=16, help_text="similarity, quality or fluency")
    model = models.CharField(max_length=200)
    prompt_hash = models.CharField(max_length=64)
    params_hash = models.CharField(max_length=64)
    text_a_hash = models.CharField(max_length=64, db_index=True)
    text_b_hash = models.CharField(max_length=64)
    seed = models.BigIntegerField()
    attempt = models.PositiveSmallIntegerField()
    output = models.TextField(blank=True)
    failure = models.TextField(blank=True, help_text="Backend failure message when no answer came back.")
    score = models.FloatField(null=True)
    latency_s = models.FloatField(default=0.0)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.kind} by {self.model}: {self.score}"


class JudgeReportKind(models.TextChoices):
    EVALUATION = "evaluation", "judge evaluation against gold STS scores"
    RUN = "run", "judged transformation run"
    SELECTION = "selection", "generator selection"


class JudgeReport(TrackedJob):
    """One use of the LLM judge and its stored result, so the page, the API, the export and the
    command all show the same numbers. Judgements themselves live in the Judgement cache: running
    a report again (or resuming it) only asks the judge what it has not answered yet."""

    Kind = JudgeReportKind

    kind = models.CharField(max_length=16, choices=Kind.choices)
    project = project_field("judge_reports")
    dataset = models.ForeignKey(Dataset, null=True, blank=True, on_delete=models.PROTECT, related_name="judge_reports")
    runs = models.ManyToManyField(
        TransformRun,
        blank=True,
        related_name="judge_reports",
        help_text="The judged run, or the candidates' runs of a selection.",
    )
    judges = models.JSONField(default=list, help_text="Backend aliases of the judges.")
    options = models.JSONField(default=dict, help_text="Seed, limits, judge parameters, bootstrap settings.")
    total = models.PositiveIntegerField(default=0, help_text="Steps: texts to transform plus judge calls planned.")
    result = models.JSONField(null=True, blank=True)

    def __str__(self) -> str:
        return f"judge report {self.pk} ({self.kind}, {self.status})"


class LLMBackendUse(models.Model):
    """A job's task sending requests to an LLM backend right now (one row per batch in flight),
    so that a job queued behind it can say which job holds the backend ("busy with run #7").
    Written by :class:`transforms.llm_activity.LLMCalls`; a row whose ``heartbeat_at`` is old
    belongs to a worker that died and is ignored."""

    backend_alias = models.CharField(max_length=64, db_index=True)
    job_model = models.CharField(max_length=100, help_text="app_label.ModelName of the job's row.")
    job_id = models.PositiveBigIntegerField()
    label = models.CharField(max_length=200, help_text='How a user names the job, e.g. "run #7".')
    started_at = models.DateTimeField()
    heartbeat_at = models.DateTimeField()

    class Meta:
        ordering = ["started_at", "id"]

    def __str__(self) -> str:
        return f"{self.label} on {self.backend_alias}"
