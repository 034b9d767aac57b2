from django.contrib import admin

from core.models import AuditEvent, Invitation, Membership, Project, ProjectAnnotator


class ReadOnlyAdmin(admin.ModelAdmin):
    """An admin that shows rows and never adds, changes or deletes them."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


# The audit log is append-only: nobody edits or deletes history through the admin.
@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    list_display = ("at", "actor", "verb", "object_type", "object_repr")
    list_filter = ("verb", "object_type")
    search_fields = ("object_repr", "verb", "actor__username")
    date_hierarchy = "at"


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 1
    autocomplete_fields = ("user",)


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ("slug", "name", "open", "created_at")
    list_filter = ("open",)
    search_fields = ("slug", "name")
    inlines = (MembershipInline,)


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ("project", "user", "role", "created_at")
    list_filter = ("role", "project")
    search_fields = ("project__slug", "user__username")
    autocomplete_fields = ("user",)


# Rosters change on the project page or with `manage.py project annotator`, where each change is
# audited in the project it happened in; the admin site only shows them.
@admin.register(ProjectAnnotator)
class ProjectAnnotatorAdmin(ReadOnlyAdmin):
    list_display = ("project", "user", "added_by", "created_at")
    list_filter = ("project",)
    search_fields = ("project__slug", "user__username")


# Invitations are made and withdrawn on the project page (or `manage.py project invite`), audited
# there; only the digest of a link's secret is stored, so the admin site cannot show a link.
@admin.register(Invitation)
class InvitationAdmin(ReadOnlyAdmin):
    list_display = ("project", "email", "created_by", "created_at", "expires_at", "accepted_by", "revoked_at")
    list_filter = ("project",)
    exclude = ("token_digest",)
