from django.conf import settings
from django.db import models


class AuditEvent(models.Model):
    """One decision or action by a person (or the system), kept forever.

    Later apps record researcher decisions here (approvals, rejections, flag reviews, exports)
    through ``core.services.audit_record``; rows are never updated or deleted by the application.
    """

    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="audit_events"
    )
    verb = models.CharField(max_length=64, help_text="What happened, e.g. 'dataset.import'.")
    object_type = models.CharField(max_length=100, blank=True)
    object_id = models.CharField(max_length=64, blank=True)
    object_repr = models.CharField(max_length=255, blank=True)
    payload = models.JSONField(default=dict, blank=True)
    at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["object_type", "object_id"])]

    def __str__(self) -> str:
        who = self.actor.get_username() if self.actor else "system"
        return f"{self.at:%Y-%m-%d %H:%M} {who} {self.verb} {self.object_repr}"


class TrackedJob(models.Model):
    """Long work that shows progress on its own row (runs, reports): status, ``done``/``total``
    steps (updated with ``F()`` by the tasks), the error a user can act on, and who started it."""

    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"

    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING, db_index=True)
    total = models.PositiveIntegerField(default=0)
    done = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True
        ordering = ["-created_at", "-id"]

    @property
    def progress(self) -> float:
        return min(1.0, self.done / self.total) if self.total else 0.0
