from rest_framework.permissions import BasePermission

from core.roles import is_researcher


class IsResearcher(BasePermission):
    """Researchers and admins; annotators work in Argilla and get nothing here."""

    message = "This endpoint is for researchers: ask an admin to add you to the 'researcher' group."

    def has_permission(self, request, view) -> bool:
        return is_researcher(request.user)
