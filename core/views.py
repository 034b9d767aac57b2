from functools import wraps

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import JsonResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache

from core.health import health_report
from core.roles import is_researcher
from core.selectors import audit_event_list


def researcher_required(view):
    """Login required; then only researchers and admins pass (annotators get 403)."""

    @login_required
    @wraps(view)
    def wrapped(request, *args, **kwargs):
        if not is_researcher(request.user):
            raise PermissionDenied("Researchers only: annotators rate items in Argilla.")
        return view(request, *args, **kwargs)

    return wrapped


@never_cache
def health_view(request):
    report = health_report()
    return JsonResponse(report, status=503 if report["status"] == "down" else 200)


@researcher_required
def audit_log_view(request):
    return render(request, "core/audit_log.html", {"events": audit_event_list()[:200]})
