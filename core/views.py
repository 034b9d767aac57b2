from functools import wraps

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.http import JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views import defaults
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

from core.forms import (
    GuardedAdminPasswordChangeForm,
    GuardedPasswordChangeForm,
    InvitationAcceptForm,
    InvitationForm,
    MembershipForm,
    ProjectCreateForm,
    RosterAddForm,
)
from core.health import health_report
from core.invitations import (
    invitation_accept,
    invitation_by_token,
    invitation_create,
    invitation_mail,
    invitation_revoke,
    invitation_usable,
    invitations_waiting,
)
from core.login_guard import client_address, login_lockout_message, login_lockout_wait
from core.pages import refusals
from core.project_sections import project_sections
from core.projects import (
    membership_remove,
    membership_set,
    project_can_manage,
    project_create,
    projects_readable,
)
from core.roles import is_admin, is_researcher
from core.rosters import project_annotators, roster_add, roster_remove
from core.selectors import audit_event_list, project_holdings, project_list


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


class PasswordChangeView(auth_views.PasswordChangeView):
    """Django's password change page, its current password checked through the log-in lockout
    (``core.login_guard.password_confirm``): guesses there count, and lock, as failed log-ins."""

    form_class = GuardedPasswordChangeForm

    def get_form(self, form_class=None):
        form = super().get_form(form_class)
        form.address = client_address(self.request)
        return form


def admin_password_change_view(request):
    """The admin site's own password change page, guarded alike (routed before the admin's URLs,
    wrapped in ``admin.site.admin_view``, which signs in and checks staff first)."""
    from django.contrib import admin
    from django.urls import reverse

    request.current_app = admin.site.name
    return PasswordChangeView.as_view(
        form_class=GuardedAdminPasswordChangeForm,
        success_url=reverse("admin:password_change_done", current_app=admin.site.name),
        extra_context=admin.site.each_context(request),
    )(request)


def bad_request_view(request, exception):
    """Django's 400 (a body over DATA_UPLOAD_MAX_MEMORY_SIZE, a host not allowed, ...) as JSON for
    API clients, like every other API error, and as the plain page elsewhere."""
    if not request.path.startswith("/api/"):
        return defaults.bad_request(request, exception)
    if isinstance(exception, RequestDataTooBig):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE // (1024 * 1024)
        detail = (
            f"The request body is over {limit} MB (files sent as multipart uploads do not count): "
            "send less per request."
        )
    else:
        detail = "Bad request: it may be malformed or name a host this server does not answer to."
    return JsonResponse({"detail": detail}, status=400)


@never_cache
def health_view(request):
    """Liveness for anyone (the overall status only); each probe's detail, which names internal
    URLs and errors, for staff and admins."""
    report = health_report()
    body = report if request.user.is_staff or is_admin(request.user) else {"status": report["status"]}
    return JsonResponse(body, status=503 if report["status"] == "down" else 200)


@researcher_required
def audit_log_view(request):
    return render(request, "core/audit_log.html", {"events": audit_event_list(user=request.user)[:200]})


@researcher_required
@require_http_methods(["GET", "POST"])
def project_list_view(request):
    """The caller's projects and their role in each; admins see every project and create them."""
    form = ProjectCreateForm(request.POST or None) if is_admin(request.user) else None
    if form is not None and request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        with refusals(request, form):
            project = project_create(slug=data["slug"], name=data["name"], owner=data["owner"], actor=request.user)
            messages.success(request, f"Project {project.slug} created.")
            return redirect("project", slug=project.slug)
    if form is None and request.method == "POST":
        raise PermissionDenied("Only admins create projects.")
    return render(request, "core/projects.html", {"projects": project_list(user=request.user), "form": form})


@researcher_required
@require_http_methods(["GET", "POST"])
def project_detail_view(request, slug: str):
    """A project's members, annotators and what it holds; owners and admins add, change and remove
    members and take annotators off the roster; admins put annotators on it."""
    project = get_object_or_404(projects_readable(request.user), slug=slug)
    manager = project_can_manage(request.user, project)
    roster_post = request.method == "POST" and request.POST.get("action") == "roster"
    # A section of another app (core.project_sections) answers its own action.
    section = next((s for s in project_sections() if request.POST.get("action") == s.action), None)
    section_post = request.method == "POST" and section is not None
    invite_post = request.method == "POST" and request.POST.get("action") in {"invite", "invite_revoke"}
    member_post = request.method == "POST" and not (roster_post or section_post or invite_post)
    form = MembershipForm(request.POST if member_post else None) if manager else None
    roster_form = (
        RosterAddForm(request.POST if roster_post else None, prefix="roster") if is_admin(request.user) else None
    )
    if request.method == "POST":
        if not manager:
            raise PermissionDenied(f"Only admins and owners of {project.slug} manage its members.")
        if roster_post:
            return _project_roster_change(request, project, roster_form)
        if section_post:
            return section.post(request, project)
        if invite_post:
            return _project_invitation(request, project, form=form, roster_form=roster_form)
        with refusals(request, form):
            if request.POST.get("remove"):
                user = get_object_or_404(project.memberships.select_related("user"), pk=request.POST["remove"]).user
                membership_remove(project=project, user=user, actor=request.user)
                messages.success(request, f"{user} is no longer in {project.slug}.")
                return redirect("project", slug=project.slug)
            if form.is_valid():
                data = form.cleaned_data
                membership_set(project=project, user=data["username"], role=data["role"], actor=request.user)
                messages.success(request, f"{data['username']} is now {data['role']} of {project.slug}.")
                return redirect("project", slug=project.slug)
    return _project_page(request, project, form=form, roster_form=roster_form, manager=manager)


def _project_invitation(request, project, **context):
    """Make a one-time invitation link, shown once on the page that answers (owners, admins), or
    withdraw a waiting one."""
    if request.POST.get("action") == "invite_revoke":
        invitation = get_object_or_404(invitations_waiting(project), pk=request.POST.get("invitation"))
        with refusals(request):
            invitation_revoke(invitation=invitation, actor=request.user)
            messages.success(request, "The invitation was withdrawn: its link no longer works.")
        return redirect("project", slug=project.slug)
    invite_form = InvitationForm(request.POST)
    if invite_form.is_valid():
        data = invite_form.cleaned_data
        with refusals(request, invite_form):
            issued = invitation_create(project=project, actor=request.user, email=data["email"], days=data["days"])
            link = request.build_absolute_uri(issued.path())
            mailed = invitation_mail(issued, link=link)
            context.update(issued_link=link, issued=issued.invitation, mailed=mailed)
            invite_form = InvitationForm()
    return _project_page(request, project, invite_form=invite_form, manager=True, **context)


def _project_page(request, project, **context):
    manager = context.get("manager")
    sections = project_sections()
    context = {
        "invite_form": InvitationForm() if manager else None,
        "invitations": invitations_waiting(project) if manager else (),
        **context,
        "project": project,
        "annotators": project_annotators(project),
        "members": project.memberships.select_related("user").order_by("role", "user__username"),
        "holdings": project_holdings(project),
        "sections": sections,
    }
    for section in sections:
        context.update(section.context(request, project, bool(manager)))
    return render(request, "core/project_detail.html", context)


def _project_roster_change(request, project, roster_form):
    """Take an annotator off the roster (owners, admins), or put one on it (admins)."""
    with refusals(request, roster_form):
        if request.POST.get("remove"):
            user = get_object_or_404(project_annotators(project), pk=request.POST["remove"])
            roster_remove(project=project, user=user, actor=request.user)
            messages.success(request, f"{user} is no longer an annotator of {project.slug}.")
            return redirect("project", slug=project.slug)
        if roster_form is None:
            raise PermissionDenied("Only admins put annotators on a project's roster.")
        if roster_form.is_valid():
            user = roster_form.cleaned_data["annotator"]
            roster_add(project=project, user=user, actor=request.user)
            messages.success(request, f"{user} is now an annotator of {project.slug}.")
            return redirect("project", slug=project.slug)
    return _project_page(request, project, form=MembershipForm(), roster_form=roster_form, manager=True)


@never_cache
@require_http_methods(["GET", "POST"])
def invitation_accept_view(request, token: str):
    """Open to anyone holding the link: choose a username and password (or join as the annotator
    signed in), land on the roster, then choose the Argilla password. The secret is in the path, so
    the page is never cached and sends its address to no other site (``same-origin``: with
    ``no-referrer`` the browser would send ``Origin: null`` on the form's POST, which CSRF refuses)."""
    with refusals(request, show=False) as refused:  # a link that does not work: said on its own page
        invitation = invitation_by_token(token)
        invitation_usable(invitation)
    if refused:
        response = render(
            request, "core/invitation.html", {"refusal": refused.message}, status=refused.error.http_status
        )
        response["Referrer-Policy"] = "same-origin"
        return response
    signed_in = request.user.is_authenticated
    form = None if signed_in else InvitationAcceptForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and (signed_in or form.is_valid()):
        data = form.cleaned_data if form is not None else {}
        with refusals(request, form):
            annotator = invitation_accept(
                token=token,
                user=request.user if signed_in else None,
                username=data.get("username", ""),
                password=data.get("password1", ""),
            )
            if not signed_in:
                login(request, annotator, backend=settings.AUTHENTICATION_BACKENDS[0])
            project = invitation.project
            messages.success(
                request,
                f"Welcome: you are an annotator of {project.name or project.slug}. Choose your Argilla password "
                "now; studies published to you appear on your home page.",
            )
            return redirect("annotation:my-argilla")
    response = render(request, "core/invitation.html", {"invitation": invitation, "form": form})
    response["Referrer-Policy"] = "same-origin"
    return response
