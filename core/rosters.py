"""Annotators belong to projects (issue 27): each project has a roster of annotators.

- A researcher publishes to, replaces by, onboards and sees only the annotators on the rosters of
  the projects they may read; every page, API route and command asks :func:`project_annotators`
  or :func:`roster_require` (the services of ``annotation`` call the latter themselves).
- Only admins (and the system: an operator's command) put an annotator on a roster, so that a
  researcher can never pull another project's annotator into theirs by username. Owners of a
  project, and admins, take an annotator off its roster; their past work stays in its studies.
- An annotator on two rosters is one person with one Argilla account, whose password only they
  set (``annotation.studies.onboarding_services``). A change made in a project (publishing to
  them, a withdrawal or rejection with its reason, a roster change) is audited in that project
  only: it is that project's business, and another project sharing the annotator never reads it. A
  change to the person themselves (their Argilla password) is audited in every project whose
  roster holds them (:func:`annotator_audit`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import models, transaction
from django.db.models import QuerySet

from core.errors import ShiftlabError
from core.models import AuditEvent, Project, ProjectAnnotator
from core.projects import ProjectAccessError, User, project_can_manage
from core.roles import Role, has_role, is_admin


def annotator_users() -> QuerySet:
    """Active users of the annotator group, by username."""
    return get_user_model().objects.filter(groups__name=Role.ANNOTATOR, is_active=True).order_by("username")


def project_annotators(project: Project) -> QuerySet:
    """The annotators on ``project``'s roster: the only ones its studies may be published to."""
    return annotator_users().filter(rosters__project=project)


def _operator_or_admin(user: User) -> bool:
    """The system (an operator's command, a task) or an admin."""
    return user is None or is_admin(user)


def roster_require(project: Project, users: Iterable[AbstractBaseUser]) -> None:
    """Refuse users who are not annotators on ``project``'s roster (before anything is written).

    The message is the same for an unknown user and another project's annotator, so that it tells
    nobody who exists elsewhere."""
    allowed = set(project_annotators(project).values_list("pk", flat=True))
    outside = sorted(u.get_username() for u in users if u.pk not in allowed)
    if outside:
        raise ShiftlabError(roster_refusal(project, outside))


def roster_refusal(project: Project, usernames: Iterable[str]) -> str:
    names = ", ".join(sorted(usernames))
    return (
        f"not on the annotator roster of project {project.slug!r}: {names}. Only its own annotators can be "
        "published to or take over work; an admin adds an annotator to the roster (project page, or "
        f"`manage.py project annotator {project.slug} USERNAME`)."
    )


def roster_add(*, project: Project, user: AbstractBaseUser, actor: User) -> ProjectAnnotator:
    """Put the annotator ``user`` on ``project``'s roster (admins and the system only)."""
    if not _operator_or_admin(actor):
        raise ProjectAccessError(
            "Only admins put annotators on a project's roster: ask one to add them (an annotator of another "
            "project joins yours only that way)."
        )
    if not has_role(user, Role.ANNOTATOR):
        raise ShiftlabError(f"{user.get_username()} is not in the 'annotator' group: add them there first")
    with transaction.atomic():
        entry, created = ProjectAnnotator.objects.get_or_create(
            project=project, user=user, defaults={"added_by": actor}
        )
        if created:
            annotator_audit(actor=actor, verb="annotator.roster.add", user=user, obj=project, project=project)
    return entry


def roster_remove(*, project: Project, user: AbstractBaseUser, actor: User) -> None:
    """Take ``user`` off ``project``'s roster (its owners and admins); their past work stays."""
    if not project_can_manage(actor, project):
        raise ProjectAccessError(f"Only admins and owners of {project.slug!r} manage its annotators.")
    with transaction.atomic():
        # Audited in the project losing them (only there: another project's roster is not its business).
        annotator_audit(actor=actor, verb="annotator.roster.remove", user=user, obj=project, project=project)
        ProjectAnnotator.objects.filter(project=project, user=user).delete()


def annotator_audit(
    *,
    actor: User,
    verb: str,
    user: AbstractBaseUser,
    obj: models.Model | None = None,
    payload: dict[str, Any] | None = None,
    project: Project | None = None,
) -> list[AuditEvent]:
    """Record a change to the annotator ``user``: in ``project`` (or ``obj``'s project) when it
    happened in one, and there only (a project never reads what another did with the annotator it
    shares, nor why); else (a change to the person, in no project) in every project whose roster
    holds them. Each event names the annotator and the project where the change came from."""
    from core.services import _project_of, audit_record

    where = project or _project_of(obj)
    body = {"annotator": user.get_username(), "in_project": where.slug if where else "", **(payload or {})}
    if where is not None:
        return [audit_record(actor=actor, verb=verb, obj=obj or user, payload=body, project=where)]
    projects = list(Project.objects.filter(roster__user=user).order_by("pk"))
    return [audit_record(actor=actor, verb=verb, obj=obj or user, payload=body, project=p) for p in projects] or [
        audit_record(actor=actor, verb=verb, obj=obj or user, payload=body)
    ]
