"""Sections that apps downstream of core add to a project's page (``core.views.project_detail_view``).

core sits below every app and imports none of them (the import-linter contracts in ``.importlinter``).
A section is declared by the app that owns its data, as a :class:`ProjectSection` value, and named by
dotted path in ``settings.PROJECT_PAGE_SECTIONS`` (the project package wires the apps); the page
resolves those paths when it is drawn (``import_string``: each module is imported once per process),
so nothing is wired at start-up.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils.module_loading import import_string

from core.models import Project


@dataclass(frozen=True)
class ProjectSection:
    """One section of the project page.

    ``template`` is included where the sections go, with the page's context plus what
    ``context(request, project, manager)`` adds (``manager``: the caller manages the project).
    ``post(request, project)`` answers a POST whose ``action`` field is ``action``; the page has
    checked that the caller manages the project.
    """

    template: str
    action: str
    context: Callable[[HttpRequest, Project, bool], dict[str, Any]]
    post: Callable[[HttpRequest, Project], HttpResponse]


def project_sections() -> tuple[ProjectSection, ...]:
    """The sections ``settings.PROJECT_PAGE_SECTIONS`` names, in its order."""
    return tuple(import_string(path) for path in settings.PROJECT_PAGE_SECTIONS)
