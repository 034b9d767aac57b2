"""Projects (teams): who may read and change what.

Every object a researcher makes belongs to one project; the owned models carry a ``project``
foreign key, and objects below them (items, outputs, ratings, results) follow their parent. The
rules, in one place so that every page, API route, command and task asks the same questions:

- admins (and superusers) read and change everything;
- a researcher reads the projects they are a member of (any role) and the open ones, and changes
  those where they are an owner or member, or which are open; viewers only read;
- a dataset marked ``shared`` is readable, and usable as input, by every researcher;
- annotators and anonymous callers get nothing here: they work in Argilla.

Objects a researcher may not read are answered as missing (404), never as forbidden, so their
existence does not leak; a read-only caller who tries to change something gets 403.
"""

from __future__ import annotations

import re
from typing import TypeVar

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Model, Q, QuerySet

from core.errors import ForbiddenError, InvalidError, NotFoundError, ShiftlabError
from core.models import Membership, Project, default_project_pk
from core.roles import is_admin, is_researcher

SLUG = re.compile(r"[a-z0-9][a-z0-9-]{0,60}")  # also an Argilla workspace name
WRITE_ROLES = (Membership.Role.OWNER, Membership.Role.MEMBER)

User = AbstractBaseUser | AnonymousUser | None
M = TypeVar("M", bound=Model)


class ProjectAccessError(ForbiddenError, PermissionDenied):
    """The caller may read the project but not change it (pages and the API answer 403)."""


def default_project() -> Project:
    """The open project that holds what existed before projects (made on first use)."""
    return Project.objects.get(pk=default_project_pk())


def _unrestricted(user: User) -> bool:
    """The system (tasks, and commands run without ``--as``) and admins see everything."""
    return user is None or is_admin(user)


def projects_readable(user: User) -> QuerySet[Project]:
    if _unrestricted(user):
        return Project.objects.all()
    if not is_researcher(user):
        return Project.objects.none()
    return Project.objects.filter(Q(open=True) | Q(memberships__user=user)).distinct()


def projects_writable(user: User) -> QuerySet[Project]:
    if _unrestricted(user):
        return Project.objects.all()
    if not is_researcher(user):
        return Project.objects.none()
    return Project.objects.filter(
        Q(open=True) | Q(memberships__user=user, memberships__role__in=WRITE_ROLES)
    ).distinct()


def scoped(queryset: QuerySet[M], user: User, *, write: bool = False, via: str = "project") -> QuerySet[M]:
    """``queryset`` cut to what ``user`` may read (or change, with ``write``).

    ``via`` is the lookup path from the queryset's model to its project (``"study__project"`` for
    an object below a study). Datasets marked shared are readable by every researcher.
    """
    if _unrestricted(user):
        return queryset
    projects = projects_writable(user) if write else projects_readable(user)
    allowed = Q(**{f"{via}__in": projects})
    if not write and is_researcher(user):
        if via == "project" and _shareable(queryset.model):
            allowed |= Q(shared=True)
    return queryset.filter(allowed)


def _shareable(model: type[Model]) -> bool:
    """An owned model with a ``shared`` flag (datasets) lets every researcher read its shared rows."""
    return any(field.name == "shared" for field in model._meta.get_fields())


def project_can_write(user: User, project: Project) -> bool:
    return projects_writable(user).filter(pk=project.pk).exists()


def project_require_write(user: User, project: Project) -> None:
    """Refuse (403) a change by someone who may only read ``project``."""
    if not project_can_write(user, project):
        raise ProjectAccessError(
            f"You may only read project {project.slug!r}: ask one of its owners to make you a member."
        )


def project_resolve(user: User, slug: str | None = None, *, field: str | None = "project") -> Project:
    """The project a new object goes into.

    With ``slug``: that project, which the caller must be able to change. Without: the caller's one
    project where they are owner or member, else the default project; several are refused with
    their names, so the caller chooses. ``field`` is the input the caller names the project in:
    an unknown project (``NotFoundError``, 404) or an ambiguous one (400) is an error about it.
    """
    if slug:
        project = projects_readable(user).filter(slug=slug).first()
        if project is None:
            raise NotFoundError(
                f"No project {slug!r} that you belong to. Yours: {_slugs(projects_readable(user))}.",
                field=field,
                code="no_project",
            )
        project_require_write(user, project)
        return project
    if _unrestricted(user):
        return default_project()
    own = Project.objects.filter(memberships__user=user, memberships__role__in=WRITE_ROLES).distinct()
    if own.count() > 1:
        raise InvalidError(
            f"You belong to several projects ({_slugs(own)}): name the one to work in.",
            field=field,
            code="project_ambiguous",
        )
    project = own.first() or default_project()
    project_require_write(user, project)
    return project


def project_for_new(user: User, slug: str | None, *inputs: Model | None, field: str | None = "project") -> Project:
    """The project a new object goes into: the one ``slug`` names; else that of its inputs when they
    all belong to one (a shared dataset counts for none: it serves every project); else the
    caller's own (:func:`project_resolve`, which says what ``field`` is; the system's is the
    default project). The caller must be able to change it (ProjectAccessError, a 403, otherwise)."""
    if not slug:
        owners = {obj.project_id for obj in inputs if obj is not None and not getattr(obj, "shared", False)}
        if len(owners) == 1:
            project = Project.objects.get(pk=owners.pop())
            project_require_write(user, project)
            return project
    return project_resolve(user, slug or None, field=field)


def project_require_same(project: Project, *objects: Model, role: str) -> None:
    """Refuse to combine objects of another project (a shared dataset is fine anywhere).

    ``role`` says what the objects are to the new one, e.g. "the study's runs".
    """
    for obj in objects:
        if getattr(obj, "shared", False):
            continue
        if obj.project_id != project.pk:
            raise ShiftlabError(
                f"{obj} belongs to project {obj.project.slug!r}, not {project.slug!r}: {role} must be in "
                f"the same project (or be a shared dataset)."
            )


def _slugs(projects: QuerySet[Project]) -> str:
    return ", ".join(projects.values_list("slug", flat=True)) or "none"


# --- managing projects (admins, and owners for their members) --------------------------------------


def project_create(
    *, slug: str, name: str = "", owner: AbstractBaseUser | None, actor: User, open: bool = False
) -> Project:
    """A new project (admins only, or the system), with ``owner`` as its first owner."""
    from core.services import audit_record

    if not _unrestricted(actor):
        raise ProjectAccessError("Only admins create projects.")
    if not SLUG.fullmatch(slug or ""):
        raise ShiftlabError(
            f"Project slug {slug!r}: use lowercase letters, digits and '-', starting with a letter or digit "
            "(at most 61; it also names the project's Argilla workspace).",
            field="slug",
        )
    if Project.objects.filter(slug=slug).exists():
        raise ShiftlabError(f"Project {slug!r} exists already: choose another slug.", field="slug")
    with transaction.atomic():
        project = Project.objects.create(slug=slug, name=name, open=open)
        if owner is not None:
            Membership.objects.create(project=project, user=owner, role=Membership.Role.OWNER)
        audit_record(actor=actor, verb="project.create", obj=project, payload={"owner": str(owner or "")})
    return project


def membership_set(*, project: Project, user: AbstractBaseUser, role: str, actor: User) -> Membership:
    """Give ``user`` a role in ``project``; only admins and the project's owners may."""
    from core.services import audit_record

    if role not in Membership.Role.values:
        raise ShiftlabError(f"Unknown project role {role!r}: use one of {', '.join(Membership.Role.values)}.")
    _require_owner(actor, project)
    if not is_researcher(user):
        raise ShiftlabError(f"{user} is not a researcher: project roles are for researchers (annotators use Argilla).")
    with transaction.atomic():
        membership, _ = Membership.objects.update_or_create(project=project, user=user, defaults={"role": role})
        audit_record(actor=actor, verb="project.member", obj=project, payload={"user": str(user), "role": role})
    return membership


def membership_remove(*, project: Project, user: AbstractBaseUser, actor: User) -> None:
    from core.services import audit_record

    _require_owner(actor, project)
    with transaction.atomic():
        Membership.objects.filter(project=project, user=user).delete()
        audit_record(actor=actor, verb="project.member_remove", obj=project, payload={"user": str(user)})


def project_can_manage(user: User, project: Project) -> bool:
    """Admins and the project's owners manage its members."""
    if _unrestricted(user):
        return True
    return Membership.objects.filter(project=project, user=user, role=Membership.Role.OWNER).exists()


def _require_owner(actor: User, project: Project) -> None:
    if not project_can_manage(actor, project):
        raise ProjectAccessError(f"Only admins and owners of {project.slug!r} manage its members.")


def user_by_name(username: str) -> AbstractBaseUser:
    """The user a command's ``--as`` names, or a clear error."""
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise NotFoundError(f"No user {username!r}: check the name (manage.py createsuperuser / the admin site).")
    return user
