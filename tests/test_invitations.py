"""Invitations (issue 42): an owner invites an annotator from the project page, no shell, no mail server.

The link is shown once to the owner, works once, expires and can be withdrawn; whoever opens it
chooses their own username and password, lands on the roster and on *My Argilla account*; every
step is in the project's audit log; nobody else can make, see or withdraw a project's invitations.
"""

from __future__ import annotations

import html
import re
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from core.errors import ConflictError, NotFoundError, ShiftlabError
from core.invitations import invitation_accept, invitation_create, token_digest
from core.models import AuditEvent, Invitation, Project
from core.projects import ProjectAccessError, membership_set, project_create
from core.roles import Role, has_role
from core.rosters import project_annotators
from tests.support import PASSWORD, make_user, page_as

pytestmark = pytest.mark.django_db

NEW_PASSWORD = "a-long-and-unusual-passphrase-42"


@pytest.fixture
def world(django_user_model):
    owner = make_user(django_user_model, "olga", Role.RESEARCHER)
    member = make_user(django_user_model, "mo", Role.RESEARCHER)
    outsider = make_user(django_user_model, "otto", Role.RESEARCHER)
    project = project_create(slug="lab", name="The Lab", owner=owner, actor=None)
    membership_set(project=project, user=member, role="member", actor=None)
    project_create(slug="other", owner=outsider, actor=None)
    return project, owner, member, outsider


def invite_on_page(client, project, **fields) -> str:
    response = client.post(reverse("project", args=[project.slug]), {"action": "invite", "days": 7, **fields})
    assert response.status_code == 200, response.content[:500]
    match = re.search(r'id="issued-link" type="text" readonly value="([^"]+)"', response.content.decode())
    assert match, "the page shows the link once"
    return html.unescape(match.group(1))


def test_an_owner_invites_from_the_page_and_the_invitee_chooses_their_own_passwords(world):
    project, owner, _, _ = world
    link = invite_on_page(page_as(owner), project)
    assert link.startswith("http://testserver/invitations/")
    # Only the digest is stored; the page never shows the link again.
    token = link.rstrip("/").rsplit("/", 1)[1]
    invitation = Invitation.objects.get()
    assert invitation.token_digest == token_digest(token) and token not in invitation.token_digest
    again = page_as(owner).get(reverse("project", args=[project.slug])).content.decode()
    assert token not in again and 'id="invitations"' in again

    visitor = Client()
    page = visitor.get(link)
    assert page.status_code == 200 and "Annotate for The Lab" in page.content.decode()
    assert page["Referrer-Policy"] == "same-origin" and "no-cache" in page["Cache-Control"]
    answer = visitor.post(link, {"username": "ana", "password1": NEW_PASSWORD, "password2": NEW_PASSWORD})
    assert answer.status_code == 302 and answer["Location"] == reverse("annotation:my-argilla")
    ana = get_user_model().objects.get(username="ana")
    assert ana.check_password(NEW_PASSWORD) and has_role(ana, Role.ANNOTATOR) and not has_role(ana, Role.RESEARCHER)
    assert list(project_annotators(project)) == [ana]
    assert visitor.get(reverse("annotation:my-argilla")).status_code == 200  # signed in as ana
    verbs = list(AuditEvent.objects.filter(project=project).order_by("pk").values_list("verb", flat=True))
    assert verbs[-3:] == ["annotator.invitation.create", "annotator.invitation.accept", "annotator.roster.add"]
    assert not any(NEW_PASSWORD in str(e.payload) or token in str(e.payload) for e in AuditEvent.objects.all())

    # The link works once.
    used = Client().get(link)
    assert used.status_code == 409 and "used already" in used.content.decode()
    with pytest.raises(ConflictError, match="used already"):
        invitation_accept(token=token, username="ana2", password=NEW_PASSWORD)


def test_a_mail_server_gets_the_link_where_one_is_configured(world, settings):
    project, owner, _, _ = world
    settings.INVITATIONS_BY_MAIL = True
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    link = invite_on_page(page_as(owner), project, email="ana@example.org")
    assert len(mail.outbox) == 1 and mail.outbox[0].to == ["ana@example.org"] and link in mail.outbox[0].body
    settings.INVITATIONS_BY_MAIL = False  # the demo: nobody is mailed, the page shows the link
    page = page_as(owner).post(
        reverse("project", args=[project.slug]), {"action": "invite", "days": 7, "email": "bo@example.org"}
    )
    assert len(mail.outbox) == 1 and "pass on yourself" in page.content.decode()


def test_only_owners_and_admins_invite_and_withdraw(world, django_user_model):
    project, owner, member, outsider = world
    for user in (member, outsider):
        response = page_as(user).post(reverse("project", args=[project.slug]), {"action": "invite", "days": 7})
        assert response.status_code in (403, 404)
    with pytest.raises(ProjectAccessError):
        invitation_create(project=project, actor=member)
    assert not Invitation.objects.exists()
    page = page_as(member).get(reverse("project", args=[project.slug])).content.decode()
    assert "Make an invitation link" not in page and 'id="invitations"' not in page
    admin = make_user(django_user_model, "ada", Role.ADMIN)
    invite_on_page(page_as(admin), project)
    invitation = Invitation.objects.get()
    refused = page_as(member).post(
        reverse("project", args=[project.slug]), {"action": "invite_revoke", "invitation": invitation.pk}
    )
    assert refused.status_code == 403
    page_as(owner).post(
        reverse("project", args=[project.slug]), {"action": "invite_revoke", "invitation": invitation.pk}
    )
    invitation.refresh_from_db()
    assert invitation.revoked_at is not None
    assert AuditEvent.objects.filter(project=project, verb="annotator.invitation.revoke", actor=owner).exists()


def test_expired_withdrawn_and_unknown_links_say_why_and_create_nothing(world):
    project, owner, _, _ = world
    expired = invitation_create(project=project, actor=owner, days=1)
    Invitation.objects.filter(pk=expired.invitation.pk).update(expires_at=timezone.now() - timedelta(minutes=1))
    response = Client().post(expired.path(), {"username": "late", "password1": NEW_PASSWORD, "password2": NEW_PASSWORD})
    assert response.status_code == 409 and "expired" in response.content.decode()
    withdrawn = invitation_create(project=project, actor=owner)
    Invitation.objects.filter(pk=withdrawn.invitation.pk).update(revoked_at=timezone.now())
    assert "withdrawn" in Client().get(withdrawn.path()).content.decode()
    unknown = Client().get("/invitations/not-a-real-secret/")
    assert unknown.status_code == 404 and "not valid" in unknown.content.decode()
    assert not get_user_model().objects.filter(username="late").exists()
    with pytest.raises(NotFoundError):
        invitation_accept(token="guess", username="x", password=NEW_PASSWORD)
    with pytest.raises(ShiftlabError, match="1 to 30 days"):
        invitation_create(project=project, actor=owner, days=90)


def test_bad_choices_are_refused_on_their_field_and_leave_the_link_usable(world, django_user_model):
    project, owner, _, _ = world
    issued = invitation_create(project=project, actor=owner)
    visitor = Client()
    taken = visitor.post(issued.path(), {"username": "OLGA", "password1": NEW_PASSWORD, "password2": NEW_PASSWORD})
    assert taken.status_code == 200 and "is taken" in taken.content.decode()
    weak = visitor.post(issued.path(), {"username": "ana", "password1": "password", "password2": "password"})
    assert weak.status_code == 200 and "too common" in weak.content.decode()
    differ = visitor.post(issued.path(), {"username": "ana", "password1": NEW_PASSWORD, "password2": "other"})
    assert "differ" in differ.content.decode()
    assert not get_user_model().objects.filter(username="ana").exists()
    ok = visitor.post(issued.path(), {"username": "ana", "password1": NEW_PASSWORD, "password2": NEW_PASSWORD})
    assert ok.status_code == 302


def test_a_signed_in_annotator_joins_with_their_account_and_a_researcher_cannot(world, django_user_model):
    project, owner, member, _ = world
    other = Project.objects.get(slug="other")
    existing = make_user(django_user_model, "eve", Role.ANNOTATOR, roster=other)
    issued = invitation_create(project=project, actor=owner)
    refused = page_as(member).post(issued.path())
    assert refused.status_code == 200 and "not an annotator" in refused.content.decode()
    joined = page_as(existing).post(issued.path())
    assert joined.status_code == 302
    assert existing in project_annotators(project) and existing in project_annotators(other)
    assert existing.check_password(PASSWORD)  # their account, untouched


def test_the_project_command_makes_a_link_too(world, capsys):
    project, owner, _, _ = world
    call_command("project", "invite", project.slug, "--as", owner.username, "--url", "https://shiftlab.example")
    out = capsys.readouterr().out
    link = re.search(r"https://shiftlab\.example/invitations/\S+/", out).group(0)
    token = link.rstrip("/").rsplit("/", 1)[1]
    assert Invitation.objects.get().token_digest == token_digest(token)
