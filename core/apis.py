"""The API token endpoint: ``POST /api/auth/token/`` with a username and password, throttled per
client address and per username, refused while ``core.login_guard`` locks the username or address
out. The token it returns expires (core/authentication.py)."""

from __future__ import annotations

import hashlib

from django.conf import settings
from rest_framework import exceptions, serializers, status, viewsets
from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.response import Response
from rest_framework.throttling import SimpleRateThrottle

from core.login_guard import client_address, login_lockout_message, login_lockout_wait
from core.models import Project
from core.permissions import IsResearcher
from core.projects import projects_readable
from core.rosters import project_annotators
from core.selectors import project_list_roles
from core.services import api_token_issue


class LoginLockedOut(exceptions.APIException):
    status_code = status.HTTP_429_TOO_MANY_REQUESTS
    default_code = "locked_out"

    def __init__(self, wait: int) -> None:
        super().__init__(login_lockout_message(wait))
        self.wait = wait  # DRF's exception handler turns it into Retry-After


class _AuthRateThrottle(SimpleRateThrottle):
    """Rates come from ``SHIFTLAB_AUTH_THROTTLE_RATES``, read per request (DRF binds its own rates
    when the class is defined)."""

    def get_rate(self) -> str:
        return settings.SHIFTLAB_AUTH_THROTTLE_RATES[self.scope]


class AuthAddressThrottle(_AuthRateThrottle):
    scope = "auth_ip"

    def get_cache_key(self, request, view) -> str:
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}


class AuthUsernameThrottle(_AuthRateThrottle):
    scope = "auth_username"

    def get_cache_key(self, request, view) -> str | None:
        username = str(request.data.get("username", "")).lower()
        if not username:
            return None
        return self.cache_format % {"scope": self.scope, "ident": hashlib.sha256(username.encode()).hexdigest()}


class ObtainExpiringAuthToken(ObtainAuthToken):
    """The user's API token for a username and password; an expired token is replaced by a new one."""

    throttle_classes = (AuthAddressThrottle, AuthUsernameThrottle)

    def post(self, request, *args, **kwargs):
        username, address = str(request.data.get("username", "")), client_address(request)
        self._refuse_if_locked_out(username, address)
        serializer = self.get_serializer(data=request.data)
        try:
            serializer.is_valid(raise_exception=True)
        except exceptions.ValidationError:
            self._refuse_if_locked_out(username, address)  # this failure may have locked them out
            raise
        token = api_token_issue(user=serializer.validated_data["user"])
        return Response({"token": token.key})

    @staticmethod
    def _refuse_if_locked_out(username: str, address: str) -> None:
        wait = login_lockout_wait(username=username, address=address)
        if wait:
            raise LoginLockedOut(wait)


class ProjectSerializer(serializers.ModelSerializer):
    role = serializers.SerializerMethodField(help_text="Your role: owner, member, viewer, open or admin.")
    members = serializers.SerializerMethodField()
    annotators = serializers.SerializerMethodField(help_text="Its roster: the annotators its studies may go to.")

    class Meta:
        model = Project
        fields = ["slug", "name", "description", "open", "role", "members", "annotators", "created_at"]

    def get_role(self, project: Project) -> str:
        return self.context["roles"].get(project.pk, "")

    def get_members(self, project: Project) -> list[dict[str, str]]:
        return [{"username": m.user.username, "role": m.role} for m in project.memberships.all()]

    def get_annotators(self, project: Project) -> list[str]:
        return list(project_annotators(project).values_list("username", flat=True))


class ProjectViewSet(viewsets.ReadOnlyModelViewSet):
    """The projects you may read, with your role and their members: the slugs to pass as ``project``
    when creating datasets, runs, studies and benchmark runs. Admins manage projects on the
    Projects page, the admin site or ``manage.py project``."""

    serializer_class = ProjectSerializer
    permission_classes = [IsResearcher]
    lookup_field = "slug"

    def get_queryset(self):
        return projects_readable(self.request.user).prefetch_related("memberships__user").order_by("slug")

    def get_serializer_context(self):
        return {**super().get_serializer_context(), "roles": dict(project_list_roles(self.request.user))}
