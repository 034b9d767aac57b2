"""Prompt templates: the shipped defaults and each project's own versions, one active per key."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models import Count, Max, QuerySet

from core.errors import ShiftlabError
from core.models import Project
from core.projects import default_project
from core.services import audit_record
from transforms.models import PromptTemplate
from transforms.prompts import DEFAULT_PROMPTS, PromptTemplateError, default_prompt, prompt_hash, validate_template


def prompt_templates_ensure_defaults(*, project: Project | None = None) -> None:
    """Create version 1 of every shipped default prompt whose key has no version yet in ``project``
    (default: the default project), so a project that never made its own uses the default wording
    (idempotent)."""
    project = project or default_project()
    present = set(PromptTemplate.objects.filter(project=project).values_list("key", flat=True))
    for key in DEFAULT_PROMPTS:
        if key in present:
            continue
        prompt = default_prompt(key)
        try:
            with transaction.atomic():
                PromptTemplate.objects.create(
                    project=project,
                    key=key,
                    version=1,
                    system=prompt.system,
                    user=prompt.user,
                    content_hash=prompt.content_hash,
                    is_active=True,
                    note="Shiftlab default",
                )
        except IntegrityError:  # created concurrently by another process
            pass


def prompt_templates_ensure_defaults_of(projects: QuerySet[Project]) -> None:
    """:func:`prompt_templates_ensure_defaults` for each of ``projects`` that lacks a default key:
    one query when none does (the prompt list asks on every read)."""
    complete = (
        PromptTemplate.objects.filter(project__in=projects, key__in=DEFAULT_PROMPTS)
        .values("project_id")
        .annotate(keys=Count("key", distinct=True))
        .filter(keys=len(DEFAULT_PROMPTS))
        .values("project_id")
    )
    for project in projects.exclude(pk__in=complete):
        prompt_templates_ensure_defaults(project=project)


def prompt_template_create_version(
    *,
    key: str,
    system: str,
    user: str,
    note: str = "",
    created_by: AbstractBaseUser | None = None,
    project: Project | None = None,
) -> PromptTemplate:
    """Make (system, user) the active prompt for ``key`` in ``project`` (default: the default
    project): a new version, numbered per project and key, or the project's existing version with
    the same content. Runs of the project created later use it; earlier runs and other projects
    keep theirs."""
    if key not in DEFAULT_PROMPTS:
        raise ShiftlabError(f"unknown prompt key {key!r}: choose one of {', '.join(DEFAULT_PROMPTS)}")
    try:
        validate_template(system, user)
    except PromptTemplateError as exc:
        raise ShiftlabError(f"Prompt {key!r} rejected: {exc}") from None
    project = project or default_project()
    prompt_templates_ensure_defaults(project=project)
    content_hash = prompt_hash(system, user)
    versions = PromptTemplate.objects.filter(project=project, key=key)
    with transaction.atomic():
        versions.select_for_update().update(is_active=False)
        template = versions.filter(content_hash=content_hash).first()
        if template is None:
            version = (versions.aggregate(v=Max("version"))["v"] or 0) + 1
            template = PromptTemplate.objects.create(
                project=project,
                key=key,
                version=version,
                system=system,
                user=user,
                content_hash=content_hash,
                note=note,
                created_by=created_by,
            )
        template.is_active = True
        template.save(update_fields=["is_active"])
        audit_record(actor=created_by, verb="prompt.activate", obj=template, payload={"content_hash": content_hash})
    return template


def prompt_template_activate(*, template: PromptTemplate, actor: AbstractBaseUser | None = None) -> PromptTemplate:
    """Make an existing version the active one of its key in its own project (other projects keep
    theirs). Runs of the project created later use it."""
    with transaction.atomic():
        PromptTemplate.objects.select_for_update().filter(project_id=template.project_id, key=template.key).exclude(
            pk=template.pk
        ).update(is_active=False)
        PromptTemplate.objects.filter(pk=template.pk).update(is_active=True)
        audit_record(actor=actor, verb="prompt.activate", obj=template, payload={"content_hash": template.content_hash})
    template.refresh_from_db()
    return template


def prompt_template_active(key: str, *, project: Project | None = None) -> PromptTemplate:
    """The version of ``key`` that new runs of ``project`` (default: the default project) use."""
    project = project or default_project()
    prompt_templates_ensure_defaults(project=project)
    return PromptTemplate.objects.get(project=project, key=key, is_active=True)
