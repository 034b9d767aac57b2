from typing import TypeVar

from django.db.models import Model, QuerySet

from core.models import AuditEvent

M = TypeVar("M", bound=Model)


def filter_given(queryset: QuerySet[M], **lookups: object) -> QuerySet[M]:
    """``queryset`` filtered by the lookups that were given: a None or empty value filters nothing."""
    return queryset.filter(**{lookup: value for lookup, value in lookups.items() if value})


def audit_event_list(*, object_type: str | None = None, object_id: str | None = None) -> QuerySet[AuditEvent]:
    return filter_given(AuditEvent.objects.select_related("actor"), object_type=object_type, object_id=object_id)
