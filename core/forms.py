from django import forms
from django.contrib.auth import get_user_model
from django.contrib.auth.forms import PasswordChangeForm
from django.core.exceptions import ValidationError

from core.errors import ShiftlabError
from core.login_guard import LockedOutError, password_confirm
from core.models import Membership
from core.projects import User, project_resolve, projects_writable


class ProjectCreateForm(forms.Form):
    slug = forms.CharField(
        max_length=61,
        help_text="Short name: lowercase letters, digits and '-'.",
    )
    name = forms.CharField(max_length=200, required=False, help_text="A readable name (optional).")
    owner = forms.CharField(max_length=150, required=False, help_text="Username of its first owner (optional).")

    def clean_owner(self):
        return _user(self.cleaned_data["owner"]) if self.cleaned_data["owner"] else None


class MembershipForm(forms.Form):
    username = forms.CharField(max_length=150, help_text="A researcher's username.")
    role = forms.ChoiceField(
        choices=Membership.Role.choices,
        initial=Membership.Role.MEMBER,
        help_text="Owners manage members; members read and change; viewers only read.",
    )

    def clean_username(self):
        return _user(self.cleaned_data["username"])


class RosterAddForm(forms.Form):
    """An admin puts an existing annotator on a project's roster."""

    annotator = forms.CharField(max_length=150, help_text="An annotator's username.")

    def clean_annotator(self):
        return _user(self.cleaned_data["annotator"])


class InvitationForm(forms.Form):
    """An owner or admin invites an annotator: a one-time link, mailed where a server is configured."""

    email = forms.EmailField(
        required=False, help_text="Optional: where to mail the link (with no mail server you pass it on yourself)."
    )
    days = forms.IntegerField(min_value=1, max_value=30, initial=7, help_text="Days the link works (1 to 30).")


class InvitationAcceptForm(forms.Form):
    """Whoever opens an invitation link chooses their own username and Shiftlab password."""

    username = forms.CharField(max_length=150, help_text="Letters, digits and @ . + - _ only.")
    password1 = forms.CharField(label="Password", widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}))
    password2 = forms.CharField(
        label="Password again", widget=forms.PasswordInput(attrs={"autocomplete": "new-password"})
    )

    def clean(self):
        data = super().clean()
        if data.get("password1") and data.get("password1") != data.get("password2"):
            self.add_error("password2", "The two passwords differ: type the same one twice.")
        return data


def _user(username: str):
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise forms.ValidationError(f"No user {username!r}: check the spelling.")
    return user


class NewInProjectForm(forms.Form):
    """A form that makes something new in a project, as the API and the command take it.

    Its ``project`` select offers the projects ``user`` may change, preselecting their one project
    (``core.projects.project_resolve``), with an empty choice that leaves the project to the
    service (the inputs' project, else the caller's own). Any slug is passed on: the service entry
    alone decides, so an unknown project or one the caller may only read is refused with the
    words (and, for the latter, the 403) of the API and the command. ``cleaned_data["project"]`` is
    the slug, or None."""

    project = forms.CharField(
        required=False,
        max_length=61,
        widget=forms.Select,
        help_text="The project (team) it belongs to; its inputs must be of it (or shared datasets).",
    )

    def __init__(self, *args, user: User, **kwargs):
        kwargs.setdefault("label_suffix", "")
        super().__init__(*args, **kwargs)
        self.user = user
        field = self.fields["project"]
        field.widget.choices = [("", "the inputs' project, else your own")] + [
            (project.slug, str(project)) for project in projects_writable(user).order_by("slug")
        ]
        try:
            field.initial = project_resolve(user).slug
        except ShiftlabError:  # several projects (they choose), or none they may change
            field.initial = None

    def clean_project(self) -> str | None:
        return self.cleaned_data["project"] or None

    def project_preselected(self) -> str | None:
        """The project slug the form is shown for (its initial one), or None: the inputs it offers
        are cut to what the service accepts in it. A posted form is checked against the caller's
        readable inputs, as before: the service alone refuses one of another project, or a project
        the caller may only read, in the words of the API and the command (one front door)."""
        return self.initial.get("project") or self.fields["project"].initial or None


class GuardedPasswordChangeForm(PasswordChangeForm):
    """Django's password change form, whose current-password check goes through the log-in
    lockout (``core.login_guard.password_confirm``); ``address`` is the client's, set by the view."""

    address = ""

    def clean_old_password(self) -> str:
        old_password = self.cleaned_data["old_password"]
        try:
            right = password_confirm(user=self.user, password=old_password, address=self.address)
        except LockedOutError as exc:
            raise ValidationError(str(exc), code="locked_out") from None
        if not right:
            raise ValidationError(self.error_messages["password_incorrect"], code="password_incorrect")
        return old_password


class GuardedAdminPasswordChangeForm(GuardedPasswordChangeForm):
    """The admin site's password change form (``django.contrib.admin.forms.AdminPasswordChangeForm``), guarded."""

    required_css_class = "required"
