from django.db.models import QuerySet

from core.models import AuditEvent


def audit_event_list(*, object_type: str | None = None, object_id: str | None = None) -> QuerySet[AuditEvent]:
    events = AuditEvent.objects.select_related("actor")
    if object_type:
        events = events.filter(object_type=object_type)
    if object_id:
        events = events.filter(object_id=object_id)
    return events
