from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, Group, Permission
from django.db import models, transaction
from django.utils import timezone
from rest_framework.authtoken.models import Token

from core.models import AuditEvent, Project
from core.roles import Role


def audit_record(
    *,
    actor: AbstractBaseUser | None,
    verb: str,
    obj: models.Model | None = None,
    payload: dict[str, Any] | None = None,
    project: Project | None = None,
) -> AuditEvent:
    """Append one event to the audit log. Call it inside the transaction of the action it records.
    It goes into ``project`` when given, else into the project of ``obj``."""
    return AuditEvent.objects.create(
        project=project or _project_of(obj),
        actor=actor if actor is not None and actor.is_authenticated else None,
        verb=verb,
        object_type=obj._meta.label_lower if obj is not None else "",
        object_id=str(obj.pk) if obj is not None else "",
        object_repr=str(obj)[:255] if obj is not None else "",
        payload=payload or {},
    )


# How an object below an owned one reaches its project (a rating's study, a result's run...).
_PROJECT_PARENTS = ("study", "run", "gate_result", "annotator", "dataset", "transform_run")


def _project_of(obj: models.Model | None, depth: int = 0) -> Project | None:
    """The project ``obj`` belongs to, following its parents; None for objects of no project."""
    if obj is None or depth > 3:
        return None
    if isinstance(obj, Project):
        return obj
    project = getattr(obj, "project", None)
    if isinstance(project, Project):
        return project
    for parent in _PROJECT_PARENTS:
        related = getattr(obj, parent, None)
        if isinstance(related, models.Model):
            found = _project_of(related, depth + 1)
            if found is not None:
                return found
    return None


RESEARCHER_APPS = ("corpora", "transforms", "annotation", "evaluation")


def roles_sync() -> None:
    """Create the role groups and give them their permissions; safe to run any number of times.

    Researchers get every permission of the science apps and may read the audit log; admins get
    every permission. Annotators get none here: they work in Argilla.
    """
    Group.objects.get_or_create(name=Role.ANNOTATOR)
    researcher, _ = Group.objects.get_or_create(name=Role.RESEARCHER)
    admin, _ = Group.objects.get_or_create(name=Role.ADMIN)
    researcher_perms = Permission.objects.filter(
        content_type__app_label__in=RESEARCHER_APPS
    ) | Permission.objects.filter(content_type__app_label="core", codename="view_auditevent")
    researcher.permissions.set(researcher_perms)
    admin.permissions.set(Permission.objects.all())


def api_token_expires_at(token: Token) -> datetime:
    return token.created + timedelta(hours=settings.SHIFTLAB_TOKEN_TTL_HOURS)


def api_token_issue(*, user: AbstractBaseUser) -> Token:
    """The user's API token; an expired one is replaced by a new key (the old one stops working)."""
    with transaction.atomic():
        token, created = Token.objects.select_for_update().get_or_create(user=user)
        if not created and api_token_expires_at(token) <= timezone.now():
            token.delete()
            token = Token.objects.create(user=user)
    return token


def api_tokens_revoke(*, user: AbstractBaseUser) -> int:
    """End every API token of ``user`` (their password changed); returns how many there were."""
    deleted, _ = Token.objects.filter(user=user).delete()
    if deleted:
        audit_record(actor=None, verb="auth.tokens_revoke", obj=user, payload={"reason": "password changed"})
    return deleted
