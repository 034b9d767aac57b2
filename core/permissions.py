from rest_framework.permissions import BasePermission

from core.roles import Role, has_role, is_researcher


class IsResearcher(BasePermission):
    """Researchers and admins; annotators work in Argilla and get nothing here."""

    message = "This endpoint is for researchers: ask an admin to add you to the 'researcher' group."

    def has_permission(self, request, view) -> bool:
        return is_researcher(request.user)


class IsAnnotator(BasePermission):
    """Annotators (not superusers, who hold every role but have no annotator account): the only
    route they use is setting their own Argilla password."""

    message = "This endpoint is for annotators: it sets the password of your own Argilla annotator account."

    def has_permission(self, request, view) -> bool:
        return has_role(request.user, Role.ANNOTATOR) and not request.user.is_superuser
