"""A study's actions that take longer than a request: validating it (LLM judge estimates, then
control checks, flags and rejections) and publishing it to Argilla, each a job row whose
progress the study's page shows while a worker does the work (issue 41)."""

from django.conf import settings
from django.db import models

from annotation.models.studies import Study
from core.models import TrackedJob

__all__ = ["StudyJob"]


class StudyJob(TrackedJob):
    """One validation or publish of a study in the background. A validation counts ``done`` of
    ``total`` steps: each judge call of the LLM estimates (rated item × judged question × judge,
    cached ones included), then one for the checks, flags and rejections; a publish counts one
    step. Both are idempotent, so a retried or resumed task redoes nothing finished (estimates
    are saved per item, judgements cached, Argilla records upserted)."""

    class Action(models.TextChoices):
        VALIDATE = "validate"
        PUBLISH = "publish"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="jobs")
    action = models.CharField(max_length=16, choices=Action.choices)
    annotators = models.ManyToManyField(
        settings.AUTH_USER_MODEL, blank=True, related_name="+", help_text="Whom a publish adds (none: publish again)."
    )
    result = models.JSONField(default=dict, blank=True, help_text="What the finished job did (counts, names).")
    summary = models.TextField(blank=True, help_text="What the finished job did, in words.")

    class Meta(TrackedJob.Meta):
        indexes = [models.Index(fields=["study", "action", "status"], name="study_job_action_status")]

    def __str__(self) -> str:
        return f"{self.action} of {self.study} ({self.status})"
