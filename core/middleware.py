"""Response headers every page carries."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse


class ContentSecurityPolicyMiddleware:
    """Send ``SHIFTLAB_CSP`` as the Content-Security-Policy of every response.

    Paths under ``SHIFTLAB_CSP_EXEMPT_PATHS`` get none: third-party pages (Redoc) that only work
    with inline scripts and styles. A response that sets its own policy keeps it.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if settings.SHIFTLAB_CSP and not request.path.startswith(tuple(settings.SHIFTLAB_CSP_EXEMPT_PATHS)):
            response.headers.setdefault("Content-Security-Policy", settings.SHIFTLAB_CSP)
        return response
