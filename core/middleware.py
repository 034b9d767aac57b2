"""Response headers every page carries."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render


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


class NotFoundPageMiddleware:
    """Answer every 404 with the site's own page, also with DEBUG on (SHIFTLAB_DEBUG=1), where
    Django would show its debug page listing every URL pattern.

    Covers a URL that matches no pattern and an ``Http404`` raised by a view; a 404 response a view
    returns itself is kept. Under ``/api/`` the answer is DRF's JSON ``{"detail": "Not found."}``.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if response.status_code == 404 and getattr(request, "resolver_match", None) is None:
            return self._not_found(request)  # no URL pattern matched
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        return self._not_found(request) if isinstance(exception, Http404) else None

    def _not_found(self, request: HttpRequest) -> HttpResponse:
        if request.path.startswith("/api/"):
            return JsonResponse({"detail": "Not found."}, status=404)
        return render(request, "404.html", status=404)
