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
