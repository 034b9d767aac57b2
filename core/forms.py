from django import forms
from django.contrib.auth import get_user_model

from core.errors import ShiftlabError
from core.models import Membership, Project
from core.projects import ProjectAccessError, User, project_resolve, projects_writable


class ProjectCreateForm(forms.Form):
    slug = forms.CharField(
        max_length=61,
        help_text="Short name, also the Argilla workspace of its studies: lowercase letters, digits and '-'.",
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


def _user(username: str):
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise forms.ValidationError(f"No user {username!r}: check the spelling.")
    return user


class NewInProjectForm(forms.Form):
    """A form that makes something new in a project: its ``project`` field offers the projects
    ``user`` may change, preselecting the one ``core.projects.project_resolve`` picks when none is
    named (their single own project, else the default one). Left empty, that one is taken; a
    researcher with several projects must choose. ``cleaned_data["project"]`` is a Project."""

    project = forms.ModelChoiceField(
        queryset=Project.objects.none(),
        to_field_name="slug",
        required=False,
        help_text="The project (team) it belongs to.",
        error_messages={"invalid_choice": "You cannot add to that project: choose one of yours."},
    )

    def __init__(self, *args, user: User, **kwargs):
        kwargs.setdefault("label_suffix", "")
        super().__init__(*args, **kwargs)
        self.user = user
        try:
            preselected = project_resolve(user)
        except ShiftlabError:
            preselected = None
        field = self.fields["project"]
        field.queryset = projects_writable(user).order_by("slug")
        field.initial = preselected
        if preselected is not None:
            field.empty_label = None

    def clean_project(self) -> Project:
        chosen = self.cleaned_data["project"]
        try:
            return project_resolve(self.user, chosen.slug if chosen else None)
        except ProjectAccessError:
            raise  # a read-only caller: 403, not a form error
        except ShiftlabError as exc:
            raise forms.ValidationError(str(exc)) from None
