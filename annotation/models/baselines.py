"""Human performance baselines (SPEC §6): humans (and LLMs) answer instances of an embedding task
directly, so that model scores can be read against human performance."""

from django.conf import settings
from django.db import models

from annotation.models.studies import study_name_validator
from core.models import TrackedJob, project_field
from corpora.task_types import TaskType

__all__ = [
    "BASELINE_TASK_TYPES",
    "BaselineStudy",
    "BaselineAnnotator",
    "BaselineInstance",
    "BaselineAnswer",
    "BaselineAnswerRevision",
    "BaselineLLMJob",
    "BaselinePublishJob",
]

BASELINE_TASK_TYPES = (TaskType.STS, TaskType.CLASSIFICATION, TaskType.CLUSTERING, TaskType.RERANKING)


class BaselineStudy(models.Model):
    """Humans (and LLMs) answer instances of an embedding task directly, so that model scores can
    be read against human performance. The sample is drawn from ``dataset`` with ``seed``; the
    answers are scored in ``evaluation.human_baseline`` with the models' own evaluators."""

    class Status(models.TextChoices):
        DRAFT = "draft"
        PUBLISHED = "published"
        CLOSED = "closed"

    name = models.CharField(max_length=61, validators=[study_name_validator])
    dataset = models.ForeignKey("corpora.Dataset", on_delete=models.PROTECT, related_name="baseline_studies")
    task_type = models.CharField(max_length=16, choices=[(t.value, t.name.title()) for t in BASELINE_TASK_TYPES])
    split = models.CharField(max_length=32, default="test")
    seed = models.BigIntegerField(default=0)
    n_instances = models.PositiveIntegerField(help_text="Pairs, items or queries requested.")
    options = models.JSONField(
        default=dict, blank=True, help_text="Task options: batch_size, candidates, labels, raters_per_instance."
    )
    instructions = models.TextField(help_text="Shown to annotators and given to LLM annotators.")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.DRAFT, db_index=True)
    project = project_field("baseline_studies")
    workspace = models.CharField(
        max_length=61, default="shiftlab", validators=[study_name_validator], help_text="Argilla workspace."
    )
    annotators = models.ManyToManyField(
        settings.AUTH_USER_MODEL,
        blank=True,
        related_name="baseline_studies",
        help_text="Users whose Argilla answers count.",
    )
    argilla_dataset_id = models.UUIDField(
        null=True,
        blank=True,
        help_text="Only a study published before per-annotator datasets: its dataset shared in the project's "
        "workspace, until it is published again.",
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    published_at = models.DateTimeField(null=True, blank=True)
    synced_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["name"]
        verbose_name_plural = "baseline studies"
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="unique_baseline_name_per_project")]

    def __str__(self) -> str:
        return f"baseline {self.name}"

    @property
    def argilla_name(self) -> str:
        """The Argilla dataset's name: prefixed so it never clashes with a validation study's."""
        return f"baseline-{self.name}"


class BaselineAnnotator(models.Model):
    """One annotator of a baseline study, as ``Annotator`` is for a validation study: their own
    Argilla workspace (they are its only annotator) and dataset, holding only the instances
    assigned to them (``keys``). Shiftlab, not Argilla's task distribution, decides who answers
    what: Argilla shows an annotator every record of every dataset in their workspaces."""

    study = models.ForeignKey(BaselineStudy, on_delete=models.CASCADE, related_name="baseline_annotators")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="baseline_seats")
    argilla_user_id = models.UUIDField(null=True, blank=True)
    argilla_workspace = models.CharField(max_length=200, blank=True)
    argilla_dataset_id = models.UUIDField(null=True, blank=True)
    keys = models.JSONField(
        default=list, blank=True, help_text="Keys of the instances in their dataset, in the study's order."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["study", "user__username"]
        constraints = [models.UniqueConstraint(fields=["study", "user"], name="unique_baseline_annotator")]

    def __str__(self) -> str:
        return f"{self.user.get_username()} in {self.study}"


class BaselineInstance(models.Model):
    """One unit an annotator answers. ``texts`` is what they see; ``gold`` never leaves Django.

    sts: texts (sentence1, sentence2), gold float score; classification: (text,), gold label;
    clustering: (text,), gold label, ``group`` the batch shown together; reranking: (query,
    candidate), gold 1 relevant / 0 not, ``group`` the query.
    """

    study = models.ForeignKey(BaselineStudy, on_delete=models.CASCADE, related_name="instances")
    key = models.CharField(max_length=32, help_text="Stable id within the study; the Argilla record's external id.")
    position = models.PositiveIntegerField()
    item = models.ForeignKey(
        "corpora.DatasetItem", null=True, blank=True, on_delete=models.SET_NULL, related_name="baseline_instances"
    )
    group = models.CharField(max_length=32, blank=True, help_text="Clustering batch or reranking query.")
    texts = models.JSONField()
    gold = models.JSONField()

    class Meta:
        ordering = ["study", "position"]
        constraints = [
            models.UniqueConstraint(fields=["study", "key"], name="unique_baseline_instance_key"),
            models.UniqueConstraint(fields=["study", "position"], name="unique_baseline_instance_position"),
        ]

    def __str__(self) -> str:
        return f"{self.study.name}/{self.key}"


class BaselineAnswer(models.Model):
    """One rater's current answer to one instance: a human's submitted Argilla response, or an
    LLM's reply. An LLM reply that did not parse is kept with ``valid=False`` (and no value).
    A human answer whose response stopped being submitted in Argilla (discarded, back to draft,
    deleted) is kept with ``active=False``; every change is kept in ``BaselineAnswerRevision``."""

    class Source(models.TextChoices):
        HUMAN = "human"
        LLM = "llm"

    instance = models.ForeignKey(BaselineInstance, on_delete=models.CASCADE, related_name="answers")
    rater = models.CharField(max_length=150, help_text="Username, or 'llm:<backend alias>'.")
    source = models.CharField(max_length=8, choices=Source.choices)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="baseline_answers"
    )
    value = models.JSONField(null=True, blank=True, help_text="None only for an LLM reply that did not parse.")
    raw = models.TextField(blank=True, help_text="The LLM's reply as received.")
    valid = models.BooleanField(default=True)
    active = models.BooleanField(default=True, help_text="False once the human's response was withdrawn.")
    submitted_at = models.DateTimeField()
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["instance", "rater"]
        constraints = [models.UniqueConstraint(fields=["instance", "rater"], name="unique_baseline_answer")]

    def __str__(self) -> str:
        return f"{self.rater} on {self.instance_id}: {self.value!r}"


class BaselineAnswerRevision(models.Model):
    """One observed state of a human answer: its first value, each edit, each withdrawal."""

    answer = models.ForeignKey(BaselineAnswer, on_delete=models.CASCADE, related_name="revisions")
    value = models.JSONField(null=True, blank=True, help_text="None for a withdrawal.")
    status = models.CharField(max_length=16, help_text="Argilla response status seen, or 'missing'.")
    argilla_updated_at = models.DateTimeField(
        null=True, blank=True, help_text="The response's updated_at; for a missing one, when the fetch started."
    )
    recorded_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["answer", "recorded_at", "id"]

    def __str__(self) -> str:
        return f"answer {self.answer_id}: {self.value!r} ({self.status})"


class BaselineLLMJob(TrackedJob):
    """An LLM answering a baseline study in the background (``baseline_llm_services``): ``done``
    of ``total`` instances answered, counted as it goes, so the study's page shows progress while
    the LLM works instead of holding the request open."""

    study = models.ForeignKey(BaselineStudy, on_delete=models.CASCADE, related_name="llm_jobs")
    backend_alias = models.CharField(max_length=64, help_text="The LLM backend's alias (TRANSFORM_BACKENDS).")
    summary = models.CharField(max_length=500, blank=True, help_text="What a finished job did, in words.")

    class Meta(TrackedJob.Meta):
        pass

    def __str__(self) -> str:
        return f"LLM {self.backend_alias} on {self.study} ({self.status})"


class BaselinePublishJob(TrackedJob):
    """A publish of a baseline study to Argilla in the background (issue 41): ``baseline_publish``
    run by a task on the default queue, which waits and retries while Argilla cannot be reached.
    Publishing is idempotent (workspaces, accounts and datasets reused, records upserted), so a
    retried task redoes nothing already there. One step."""

    study = models.ForeignKey(BaselineStudy, on_delete=models.CASCADE, related_name="publish_jobs")
    annotators = models.ManyToManyField(
        settings.AUTH_USER_MODEL, blank=True, related_name="+", help_text="Whom it adds (none: publish again)."
    )
    summary = models.TextField(blank=True, help_text="What the finished job did, in words.")

    class Meta(TrackedJob.Meta):
        pass

    def __str__(self) -> str:
        return f"publish of {self.study} ({self.status})"
