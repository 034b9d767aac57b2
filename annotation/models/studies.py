"""Human-validation studies (SPEC §4, §9): designs, items, annotators, ratings, flags, decisions,
gate results, approvals, exported benchmark configs, and the Argilla webhook of live responses.

Control status, expected control answers and LLM estimates live only here, on ``StudyItem``:
Argilla records carry an opaque id and the two texts, nothing else.
"""

import uuid

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models
from django.db.models import Q

from annotation.configs.config_export import config_signed_with
from annotation.kinds import FlagRule, ItemKind, RejectionReason
from core.models import project_field
from transforms.models import TransformedItem, TransformRun

__all__ = [
    "STUDY_NAME_PATTERN",
    "STUDY_NAME_RULE",
    "study_name_validator",
    "_opaque_id",
    "Study",
    "StudyItem",
    "Annotator",
    "Assignment",
    "Rating",
    "RatingRevision",
    "RatingComment",
    "Flag",
    "RaterDecision",
    "GateResult",
    "Approval",
    "BenchmarkConfig",
    "ArgillaWebhook",
]

# The one pattern of study (and baseline) names: the model's validator, the service entries that
# create them and the forms' input hint all read it from here.
STUDY_NAME_PATTERN = r"^[a-z0-9][a-z0-9-]{0,60}$"
STUDY_NAME_RULE = "Use lowercase letters, digits and '-', starting with a letter or digit."
study_name_validator = RegexValidator(STUDY_NAME_PATTERN, STUDY_NAME_RULE)


def _opaque_id() -> str:
    return uuid.uuid4().hex


class Study(models.Model):
    """One version of a validation study. The design is editable while the study is a draft and
    frozen from ``locked_at`` on; a changed design is a new row with ``version + 1``."""

    class Status(models.TextChoices):
        DRAFT = "draft"
        LOCKED = "locked"
        PUBLISHED = "published"

    name = models.CharField(max_length=61, validators=[study_name_validator])
    version = models.PositiveIntegerField(default=1)
    previous = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT, related_name="revisions")
    project = project_field("studies")
    workspace = models.CharField(
        max_length=61,
        default="shiftlab",
        validators=[study_name_validator],
        help_text="Argilla workspace: its project's slug (older studies keep the one they were published in).",
    )
    runs = models.ManyToManyField(TransformRun, related_name="studies")
    design = models.JSONField(help_text="annotation.science.design.StudyDesign as a dict.")
    design_hash = models.CharField(max_length=64)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.DRAFT, db_index=True)
    sample_info = models.JSONField(default=dict, blank=True, help_text="Per transformation: strata, shortfall.")
    locked_at = models.DateTimeField(null=True, blank=True)
    published_at = models.DateTimeField(null=True, blank=True)
    argilla_dataset_id = models.UUIDField(null=True, blank=True)
    ratings_changed_at = models.DateTimeField(null=True, blank=True, help_text="Last sync that changed ratings.")
    synced_at = models.DateTimeField(null=True, blank=True)
    last_sync = models.JSONField(
        default=dict, blank=True, help_text="Counts of the last sync (created, updated, withdrawn, unchanged...)."
    )
    validated_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name", "-version"]
        verbose_name_plural = "studies"
        # Per project: a name another project uses is free (and never revealed by a refusal).
        constraints = [
            models.UniqueConstraint(fields=["project", "name", "version"], name="unique_study_version_per_project")
        ]

    def __str__(self) -> str:
        return f"{self.name} v{self.version}"

    @property
    def argilla_name(self) -> str:
        return f"{self.name}-v{self.version}"

    @property
    def is_locked(self) -> bool:
        return self.locked_at is not None


class StudyItem(models.Model):
    """A record annotators rate: a real (original, transformed) pair, or a control."""

    Kind = models.TextChoices("Kind", [(k.value, k.value) for k in ItemKind])

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="items")
    position = models.PositiveIntegerField(help_text="Seeded shuffled order in which records were logged.")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    transformed_item = models.ForeignKey(
        TransformedItem, null=True, blank=True, on_delete=models.PROTECT, related_name="study_items"
    )
    transformation = models.CharField(max_length=32, blank=True, help_text="Empty for controls.")
    stratum = models.CharField(max_length=200, blank=True)
    text_a = models.TextField()
    text_b = models.TextField()
    language_a = models.CharField(max_length=16, blank=True)
    language_b = models.CharField(max_length=16, blank=True)
    external_id = models.CharField(
        max_length=32, unique=True, default=_opaque_id, help_text="Opaque record id in Argilla."
    )
    expected = models.JSONField(default=dict, blank=True, help_text="Controls: question -> expected value.")
    llm_estimates = models.JSONField(
        default=dict, blank=True, help_text="question -> {'scores': {judge: score}, 'estimate': x}."
    )
    translations = models.JSONField(default=dict, blank=True, help_text="English translations for reviewers.")

    class Meta:
        ordering = ["study", "position"]
        constraints = [
            models.UniqueConstraint(fields=["study", "position"], name="unique_study_item_position"),
            models.UniqueConstraint(
                fields=["study", "transformed_item"],
                condition=Q(transformed_item__isnull=False),
                name="unique_study_transformed_item",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.study} #{self.position} ({self.kind})"


class Annotator(models.Model):
    """A user rating in one study, with their Argilla account id and standing."""

    class Status(models.TextChoices):
        ACTIVE = "active"
        REJECTED = "rejected"  # their ratings stop counting; all their items go to others
        WITHDRAWN = "withdrawn"  # replaced: submitted ratings still count; open items go to others

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="annotators")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="study_roles")
    argilla_user_id = models.UUIDField(null=True, blank=True)
    argilla_workspace = models.CharField(
        max_length=200, blank=True, help_text="This annotator's own workspace for this study version."
    )
    argilla_dataset_id = models.UUIDField(null=True, blank=True, help_text="The dataset holding only their batch.")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE, db_index=True)
    control_status = models.CharField(max_length=16, blank=True, help_text="Result of the last validation.")
    argilla_deactivated = models.BooleanField(
        default=False, help_text="Their access was cut in Argilla: out of their workspace, their dataset deleted."
    )
    frozen_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When they were withdrawn or rejected: any later change to their responses is ignored and audited.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["study", "user__username"]
        constraints = [models.UniqueConstraint(fields=["study", "user"], name="unique_study_annotator")]

    def __str__(self) -> str:
        return f"{self.user.get_username()} in {self.study}"


class Assignment(models.Model):
    """One record in one annotator's batch: Shiftlab, not Argilla, decides who rates what.

    Drawn when the study is first published (``annotation.science.assignment``); ``active`` is False once
    the item was taken from this annotator (rejected, replaced, rebalanced), with the reason."""

    annotator = models.ForeignKey(Annotator, on_delete=models.CASCADE, related_name="assignments")
    study_item = models.ForeignKey(StudyItem, on_delete=models.CASCADE, related_name="assignments")
    position = models.PositiveIntegerField(help_text="Place in the annotator's queue (controls at seeded places).")
    batch = models.PositiveIntegerField(help_text="Index of the batch of batch_size real items it belongs to.")
    active = models.BooleanField(default=True)
    argilla_record_id = models.UUIDField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    end_reason = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["annotator", "position"]
        constraints = [
            models.UniqueConstraint(fields=["annotator", "study_item"], name="unique_assignment"),
        ]

    def __str__(self) -> str:
        return f"{self.study_item_id} -> {self.annotator}"


class Rating(models.Model):
    """The current submitted answer of one annotator to one question of one item. ``active`` is
    False once the response stopped being submitted in Argilla (discarded, back to draft, deleted);
    every value change is kept in ``RatingRevision``."""

    study_item = models.ForeignKey(StudyItem, on_delete=models.CASCADE, related_name="ratings")
    annotator = models.ForeignKey(Annotator, on_delete=models.CASCADE, related_name="ratings")
    question = models.CharField(max_length=32)
    value = models.SmallIntegerField()
    active = models.BooleanField(default=True)
    submitted_at = models.DateTimeField(help_text="Argilla's updated_at of the submitted response.")
    edits = models.PositiveIntegerField(default=0, help_text="Changes after the first submission.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["study_item", "annotator", "question"]
        constraints = [
            models.UniqueConstraint(fields=["study_item", "annotator", "question"], name="unique_rating"),
        ]

    def __str__(self) -> str:
        return f"{self.annotator.user.get_username()} {self.question}={self.value} on {self.study_item_id}"


class RatingRevision(models.Model):
    """One observed state of a rating: its first value, each edit, each withdrawal."""

    rating = models.ForeignKey(Rating, on_delete=models.CASCADE, related_name="revisions")
    value = models.SmallIntegerField(null=True, blank=True)
    status = models.CharField(max_length=16, help_text="Argilla response status seen, or 'missing'.")
    argilla_updated_at = models.DateTimeField(null=True, blank=True)
    recorded_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["rating", "recorded_at", "id"]

    def __str__(self) -> str:
        return f"rating {self.rating_id}: {self.value} ({self.status})"


class RatingComment(models.Model):
    study_item = models.ForeignKey(StudyItem, on_delete=models.CASCADE, related_name="comments")
    annotator = models.ForeignKey(Annotator, on_delete=models.CASCADE, related_name="comments")
    text = models.TextField()
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["study_item", "annotator"], name="unique_rating_comment")]

    def __str__(self) -> str:
        return self.text[:60]


class Flag(models.Model):
    """A rating that broke a declared flag rule, and the researcher's review of it."""

    Rule = models.TextChoices("Rule", [(r.value, r.value) for r in FlagRule])

    class Status(models.TextChoices):
        OPEN = "open"
        CONFIRMED = "confirmed"
        DISMISSED = "dismissed"

    rating = models.ForeignKey(Rating, on_delete=models.CASCADE, related_name="flags")
    rule = models.CharField(max_length=32, choices=Rule.choices)
    value = models.SmallIntegerField(help_text="The rating's value when flagged.")
    estimate = models.FloatField(null=True, blank=True, help_text="LLM estimate on the question's scale.")
    deviation = models.FloatField(null=True, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.OPEN, db_index=True)
    note = models.TextField(blank=True)
    reviewed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    reviewed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [models.UniqueConstraint(fields=["rating", "rule"], name="unique_flag_per_rule")]

    def __str__(self) -> str:
        return f"{self.rule} on rating {self.rating_id} ({self.status})"


class RaterDecision(models.Model):
    """The rejection of an annotator, with the rule (or manual reason) behind it."""

    Reason = models.TextChoices("Reason", [(r.value, r.value) for r in RejectionReason])

    annotator = models.ForeignKey(Annotator, on_delete=models.CASCADE, related_name="decisions")
    decision = models.CharField(max_length=16, default="reject")
    reason = models.CharField(max_length=32, choices=Reason.choices)
    detail = models.TextField()
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    decided_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-decided_at", "-id"]

    def __str__(self) -> str:
        return f"{self.decision} {self.annotator}: {self.reason}"


class GateResult(models.Model):
    """One evaluation of the gate for one transformation of a study, with its stored evidence.
    Rows are never changed: gating again adds a row, and the latest one is the current result."""

    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="gate_results")
    transformation = models.CharField(max_length=32)
    passed = models.BooleanField()
    evidence = models.JSONField()
    evidence_hash = models.CharField(max_length=64)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"gate {self.transformation} in {self.study}: {'passed' if self.passed else 'failed'}"


class Approval(models.Model):
    """A researcher's decision on one gate result (approve only if it passed)."""

    class Decision(models.TextChoices):
        APPROVE = "approve"
        REJECT = "reject"

    gate_result = models.OneToOneField(GateResult, on_delete=models.PROTECT, related_name="approval")
    decision = models.CharField(max_length=16, choices=Decision.choices)
    comment = models.TextField()
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    decided_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-decided_at", "-id"]

    def __str__(self) -> str:
        return f"{self.decision} {self.gate_result.transformation} ({self.gate_result.study})"


class BenchmarkConfig(models.Model):
    """An exported validated benchmark config, in both renderings, identified by its own hash."""

    name = models.CharField(max_length=100, blank=True)
    project = project_field("benchmark_configs")
    document = models.JSONField()
    config_hash = models.CharField(max_length=64, unique=True)
    json_text = models.TextField()
    yaml_text = models.TextField()
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"benchmark config {self.config_hash[:12]}{' ' + self.name if self.name else ''}"

    @property
    def development_key(self) -> bool:
        """Signed with Shiftlab's public development key (the demo's): label it so, never "validated"."""
        return config_signed_with(self.document, key=settings.DEV_CONFIG_SIGNING_KEY)


class ArgillaWebhook(models.Model):
    """The webhook this deployment registered in Argilla (webhooks there are server-wide): Argilla
    POSTs response events to ``url``, signed with ``secret``, and the receiver checks the signature
    (``annotation.studies.webhook_services``). One row per deployment; a new public URL replaces it."""

    url = models.URLField(max_length=500, unique=True, help_text="Shiftlab's receiver, as registered.")
    argilla_id = models.UUIDField(unique=True)
    secret = models.TextField(help_text="Argilla's signing secret (base64); never shown.")
    events = models.JSONField(default=list)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"Argilla webhook {self.argilla_id} to {self.url}"
