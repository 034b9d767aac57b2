from functools import wraps

from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import JsonResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache

from core.health import health_report
from core.login_guard import client_address, login_lockout_message, login_lockout_wait
from core.roles import is_admin, is_researcher
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


class LoginView(auth_views.LoginView):
    """Django's log-in page, refused with 429 and the wait while ``core.login_guard`` locks the
    username or address out (also right after the failure that locked it)."""

    def post(self, request, *args, **kwargs):
        if self._lockout_wait():
            return self._locked_out()
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form):
        return self._locked_out() if self._lockout_wait() else super().form_invalid(form)

    def _lockout_wait(self) -> int:
        username = self.request.POST.get("username", "")
        return login_lockout_wait(username=username, address=client_address(self.request))

    def _locked_out(self):
        wait = self._lockout_wait()
        context = self.get_context_data(form=self.form_class(self.request), lockout=login_lockout_message(wait))
        response = self.render_to_response(context, status=429)
        response["Retry-After"] = str(wait)
        return response


@never_cache
def health_view(request):
    """Liveness for anyone (the overall status only); each probe's detail, which names internal
    URLs and errors, for staff and admins."""
    report = health_report()
    body = report if request.user.is_staff or is_admin(request.user) else {"status": report["status"]}
    return JsonResponse(body, status=503 if report["status"] == "down" else 200)


@researcher_required
def audit_log_view(request):
    return render(request, "core/audit_log.html", {"events": audit_event_list()[:200]})
