"""Who may read the API docs and schema: anyone in the demo, logged-in users elsewhere
(``SHIFTLAB_PUBLIC_API_DOCS``: on in the base settings, off in ``shiftlab.settings_production``)."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse
from rest_framework.permissions import BasePermission


class ApiDocsAccess(BasePermission):
    """drf-spectacular's ``SERVE_PERMISSIONS``: the schema for anyone while the docs are public,
    else for callers logged in with a session or an API token (others get 401)."""

    message = "Log in, or send an API token (POST /api/auth/token/), to read the API schema."

    def has_permission(self, request, view) -> bool:
        return settings.SHIFTLAB_PUBLIC_API_DOCS or bool(request.user and request.user.is_authenticated)


def docs_page(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """A docs page (Swagger UI, ReDoc) that sends a visitor who is not logged in to the log-in page
    while the docs are not public, rather than answering 401."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if not settings.SHIFTLAB_PUBLIC_API_DOCS and not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        return view(request, *args, **kwargs)

    return wrapped
