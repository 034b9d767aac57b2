"""The pages' one error boundary: where a refused action's message is shown.

Views call a service inside ``try``/``except ShiftlabError`` and hand the error to
``show_error``: with a form, next to the field the error names (or the field its message starts
with, e.g. "temperature must be ..."), else above the form; without one, as a message on the
page the view redirects to. A refused access is answered with 403 instead.
"""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.http import HttpRequest

from core.errors import ShiftlabError
from core.projects import ProjectAccessError


def error_field(form: forms.Form, exc: ShiftlabError | str) -> str | None:
    """The form field ``exc`` is about: its ``field``, else the first word of its message
    (``--seed=...``, ``temperature must``) when that is a field of ``form``; None for the form."""
    field = getattr(exc, "field", None)
    if field is None:
        head = str(exc).split(" ", 1)[0].split("=", 1)[0].removeprefix("--").replace("-", "_")
        field = head
    return field if field in form.fields else None


def show_error(request: HttpRequest, exc: ShiftlabError, *, form: forms.Form | None = None) -> None:
    """Show ``exc`` on the page: on ``form`` when there is one, else as an error message.

    A change refused to a caller who may only read the project (``ProjectAccessError``) is no
    form problem: it is raised again, so every page answers it with 403, as the API does."""
    if isinstance(exc, ProjectAccessError):
        raise exc
    if form is not None:
        form.add_error(error_field(form, exc), str(exc))
    else:
        messages.error(request, str(exc))
