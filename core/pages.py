"""The pages' one error boundary: where a refused action is answered.

A view runs its service calls inside ``with refusals(request, form) as refused:``; a
``ShiftlabError`` raised there ends the block and is answered by its class, never by its message:

- ``ForbiddenError`` (a caller who may only read the project): 403, as the API answers;
- with a form, an error naming one of its fields goes next to that field (a form with an
  ``add_refusal(exc)`` method places it itself: a design's problems, the config given);
- ``NotFoundError`` otherwise: 404, as for any object the caller cannot see;
- anything else: above the form, or without one as an error message on the page the view goes on
  to show (or redirects to).

``refused`` is true after a refusal, for a view that answers differently then (a redirect, a page
that shows the refusal itself: ``show=False`` records it without showing it, 403 still raised).
No view catches ``ShiftlabError`` itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest

from core.errors import ForbiddenError, NotFoundError, ShiftlabError


@dataclass
class Refused:
    """What ``refusals`` caught: ``error`` is None while nothing was refused."""

    error: ShiftlabError | None = None

    def __bool__(self) -> bool:
        return self.error is not None

    @property
    def message(self) -> str:
        return "" if self.error is None else str(self.error)


@contextmanager
def refusals(request: HttpRequest, form: forms.Form | None = None, *, show: bool = True) -> Iterator[Refused]:
    """Answer a ``ShiftlabError`` raised in the block (see the module): shown with ``show_error``,
    or only recorded on the ``Refused`` it yields with ``show=False``."""
    refused = Refused()
    try:
        yield refused
    except ShiftlabError as exc:
        refused.error = exc
        if show:
            show_error(request, exc, form=form)
        elif isinstance(exc, ForbiddenError):
            _forbid(exc)


def show_error(request: HttpRequest, exc: ShiftlabError, *, form: forms.Form | None = None) -> None:
    """Show ``exc`` on the page by its class and ``field`` (see the module); 403 and 404 are raised."""
    if isinstance(exc, ForbiddenError):
        _forbid(exc)
    if form is not None and hasattr(form, "add_refusal"):
        form.add_refusal(exc)
    elif form is not None and exc.field in form.fields:
        form.add_error(exc.field, str(exc))
    elif isinstance(exc, NotFoundError):
        raise Http404(str(exc)) from exc
    elif form is not None:
        form.add_error(None, str(exc))
    else:
        messages.error(request, str(exc))


def _forbid(exc: ForbiddenError) -> None:
    if isinstance(exc, PermissionDenied):  # core.projects.ProjectAccessError is both
        raise exc
    raise PermissionDenied(str(exc)) from exc
