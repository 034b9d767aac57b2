from django.db.models import Q, QuerySet

from core.models import AuditEvent, Membership, Project
from core.projects import M, projects_readable
from core.roles import is_admin


def filter_given(queryset: QuerySet[M], **lookups: object) -> QuerySet[M]:
    """``queryset`` filtered by the lookups that were given: a None or empty value filters nothing."""
    return queryset.filter(**{lookup: value for lookup, value in lookups.items() if value})


def audit_event_list(
    *, object_type: str | None = None, object_id: str | None = None, user=None
) -> QuerySet[AuditEvent]:
    """Audit events; for ``user`` (not an admin) only their own and those of projects they may read."""
    events = filter_given(AuditEvent.objects.select_related("actor"), object_type=object_type, object_id=object_id)
    if user is None or is_admin(user):
        return events
    return events.filter(Q(project__in=projects_readable(user)) | Q(actor=user))


# What a project holds, by the reverse relation each owned model declares (core imports no app).
PROJECT_HOLDINGS = {
    "datasets": "datasets",
    "prompt versions": "prompt_templates",
    "transformation runs": "transform_runs",
    "judge reports": "judge_reports",
    "studies": "studies",
    "baseline studies": "baseline_studies",
    "benchmark configs": "benchmark_configs",
    "benchmark runs": "benchmark_runs",
}


def project_list(*, user=None) -> list[tuple[Project, str]]:
    """The projects ``user`` may read, each with the user's role there ("admin", "open" or theirs)."""
    roles = project_list_roles(user)
    return [(project, roles[project.pk]) for project in projects_readable(user).order_by("slug")]


def project_list_roles(user=None) -> dict[int, str]:
    """Project id -> the user's role there: their membership's, else "admin" or "open"."""
    mine = dict(Membership.objects.filter(user=user).values_list("project_id", "role")) if user is not None else {}
    fallback = "admin" if user is None or is_admin(user) else "open"
    return {pk: mine.get(pk, fallback) for pk in projects_readable(user).values_list("pk", flat=True)}


def project_holdings(project: Project) -> dict[str, int]:
    return {label: getattr(project, related).count() for label, related in PROJECT_HOLDINGS.items()}
