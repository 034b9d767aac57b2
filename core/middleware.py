"""Response headers every page carries, and the request body limit."""

from __future__ import annotations

import json
from collections.abc import Callable

from django.conf import settings
from django.core.handlers.wsgi import LimitedStream
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.shortcuts import render
from django.template.loader import render_to_string

from core.request_body import DiscardFilesUploadHandler, body_limit, content_length, route_name, too_large_message


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


class RequestBodyLimitMiddleware:
    """Refuse (413) a request whose ``Content-Length`` is over its limit before anything reads the
    body, and drop file parts where no file is taken (``core.request_body``).

    After ``AuthenticationMiddleware`` (a page's caller is its session user) and before anything
    that reads the body (the CSRF check reads a POST's form in ``process_view``). On the API a
    caller's token is checked by DRF, before any parser reads the body, so here the API gets the
    logged-in limit and DRF refuses anonymous calls unread.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        size = content_length(request)
        if not size:
            return self.get_response(request)  # nothing to read (a chunked body reads as empty under WSGI)
        api = request.path_info.startswith("/api/")
        limit = body_limit(route=route_name(request.path_info), anonymous=not api and not request.user.is_authenticated)
        if size > limit.size:
            return _refuse(request, too_large_message(size, limit), api=api)
        if not limit.keeps_files:
            request.upload_handlers = [DiscardFilesUploadHandler(request)]
        return self.get_response(request)


def _refuse(request: HttpRequest, message: str, *, api: bool) -> HttpResponse:
    # The body stays unread. Django's development server would read what is left after the response
    # (into memory, 1 GB for a 1 GB body): its stream is told there is nothing left. A response
    # without Content-Length (a streamed one, which no middleware sizes) makes it close the
    # connection instead of reading the unread body as the next request; gunicorn closes it anyway.
    stream = request.environ.get("wsgi.input")
    if isinstance(stream, LimitedStream):
        stream.limit = 0
    if api:
        body, content_type = json.dumps({"detail": message}), "application/json"
    else:
        body, content_type = render_to_string("413.html", {"message": message}, request), "text/html; charset=utf-8"
    return StreamingHttpResponse([body.encode()], status=413, content_type=content_type)
