from django import forms
from django.contrib.auth import get_user_model

from core.models import Membership, Project
from core.projects import SLUG


class ProjectCreateForm(forms.Form):
    slug = forms.CharField(
        max_length=61,
        help_text="Short name, also the Argilla workspace of its studies: lowercase letters, digits and '-'.",
    )
    name = forms.CharField(max_length=200, required=False, help_text="A readable name (optional).")
    owner = forms.CharField(max_length=150, required=False, help_text="Username of its first owner (optional).")

    def clean_slug(self) -> str:
        slug = self.cleaned_data["slug"]
        if not SLUG.fullmatch(slug):
            raise forms.ValidationError("Use lowercase letters, digits and '-', starting with a letter or digit.")
        if Project.objects.filter(slug=slug).exists():
            raise forms.ValidationError(f"Project {slug!r} exists already: choose another.")
        return slug

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


def _user(username: str):
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise forms.ValidationError(f"No user {username!r}: check the spelling.")
    return user
