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
    """Audit events; for ``user`` (not an admin) only their own and those of projects they may read,
    and never one about what another project did (``payload["in_project"]`` names where an
    annotator's change happened: events written before such changes were kept to their project
    were copied into every project sharing the annotator)."""
    events = filter_given(AuditEvent.objects.select_related("actor"), object_type=object_type, object_id=object_id)
    if user is None or is_admin(user):
        return events
    readable = projects_readable(user)
    elsewhere = list(Project.objects.exclude(pk__in=readable).values_list("slug", flat=True))
    events = events.filter(Q(project__in=readable) | Q(actor=user))
    if not elsewhere:
        return events
    # has_key first: a bare key lookup is NULL on rows without the key, and NOT (NULL IN ...) would
    # drop every such row too.
    return events.exclude(Q(payload__has_key="in_project") & Q(payload__in_project__in=elsewhere))


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
