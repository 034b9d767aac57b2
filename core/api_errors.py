"""The API's one error boundary: DRF's exception handler, set in ``REST_FRAMEWORK``.

A ``ShiftlabError`` raised anywhere below an API view becomes its class's ``http_status`` with
``{"detail": message, "code": code}``, or ``{field: [message], "code": code}`` when the error
names an input, so that API views never catch service errors themselves. Everything else goes to DRF's own handler.
"""

from __future__ import annotations

from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from core.errors import ShiftlabError


def exception_handler(exc: Exception, context: dict) -> Response | None:
    if isinstance(exc, ShiftlabError):
        body = {exc.field: [str(exc)]} if exc.field else {"detail": str(exc)}
        body["code"] = exc.code
        response = Response(body, status=exc.http_status)
        if wait := getattr(exc, "wait", None):  # a lockout says how long to wait
            response["Retry-After"] = str(wait)
        return response
    return drf_exception_handler(exc, context)
