from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models

from core.models import project_field
from corpora.task_types import TaskType

dataset_name_validator = RegexValidator(
    r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
    "Use letters, digits, '.', '_' and '-' only, starting with a letter or digit.",
)


class Dataset(models.Model):
    """An imported benchmark dataset of one task type. Immutable once imported: a changed file
    is a new dataset (its content hash differs), so results always point at exact data."""

    name = models.CharField(max_length=100, db_index=True, validators=[dataset_name_validator])
    task_type = models.CharField(max_length=32, choices=[(t.value, t.value) for t in TaskType])
    description = models.TextField(blank=True)
    languages = models.JSONField(default=list, help_text="Language codes present in the items.")
    splits = models.JSONField(default=dict, help_text="Items per split, e.g. {'test': 1379}.")
    source = models.CharField(max_length=500, help_text="File, folder or hub id it was imported from.")
    source_format = models.CharField(max_length=16)
    content_hash = models.CharField(max_length=64, db_index=True)
    n_items = models.PositiveIntegerField(default=0)
    metadata = models.JSONField(default=dict, blank=True)
    project = project_field("datasets")
    shared = models.BooleanField(
        default=False, help_text="Readable, and usable as input, by researchers of every project."
    )
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        # Per project: a name another project uses is free (and never revealed by a refusal).
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="unique_dataset_name_per_project")]

    def __str__(self) -> str:
        return self.name


class ControlTrust(models.Model):
    """A project's explicit choice to let a shared dataset of another project supply the expected
    answers of its studies' control items (gold paraphrase pairs, unrelated texts). Sharing a
    dataset alone never does: its owner could otherwise plant answers in projects they cannot see.
    Granted and revoked by the project's owners or an admin (``corpora.services.dataset_trust_for_controls``),
    audited; it counts only while the dataset stays shared."""

    project = models.ForeignKey("core.Project", on_delete=models.CASCADE, related_name="control_trusts")
    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="control_trusts")
    granted_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    granted_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["project", "dataset"]
        constraints = [
            models.UniqueConstraint(fields=["project", "dataset"], name="unique_control_trust_per_project"),
        ]

    def __str__(self) -> str:
        return f"{self.project} trusts {self.dataset.project}/{self.dataset.name} for controls"


ITEM_KIND_CHOICES = [("example", "example"), ("document", "document")]


class DatasetItem(models.Model):
    """One example (a pair, a text, a query with candidates...) or one retrieval document."""

    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="items")
    split = models.CharField(max_length=32)
    kind = models.CharField(max_length=16, choices=ITEM_KIND_CHOICES, default="example")
    item_id = models.CharField(max_length=200)
    position = models.PositiveIntegerField(help_text="Order in the source, for reproducible iteration.")
    payload = models.JSONField()
    gold = models.JSONField(null=True, blank=True)
    language = models.CharField(max_length=16)
    text_hashes = models.JSONField(default=dict, help_text="sha256 of each transformable text field.")
    content_hash = models.CharField(max_length=64)

    class Meta:
        ordering = ["dataset", "position"]
        constraints = [
            models.UniqueConstraint(fields=["dataset", "split", "kind", "item_id"], name="unique_item_per_split"),
        ]
        indexes = [models.Index(fields=["dataset", "split", "kind", "position"])]

    def __str__(self) -> str:
        return f"{self.dataset.name}/{self.split}/{self.item_id}"


class DatasetImport(models.Model):
    """An import job started from the upload page or the API; runs as a Celery task."""

    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"

    name = models.CharField(max_length=100, validators=[dataset_name_validator])
    task_type = models.CharField(max_length=32, choices=[(t.value, t.value) for t in TaskType])
    upload_dir = models.CharField(max_length=500, help_text="Where the uploaded files were stored.")
    options = models.JSONField(default=dict, help_text="language, format, columns, split, field map.")
    project = project_field("dataset_imports")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING, db_index=True)
    error = models.TextField(blank=True)
    attempts = models.PositiveSmallIntegerField(
        default=0, help_text="Times a worker started the import (a worker that dies leaves it running)."
    )
    dataset = models.ForeignKey(Dataset, null=True, blank=True, on_delete=models.SET_NULL, related_name="imports")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"import {self.name} ({self.status})"
