"""Every password asked again goes through the log-in lockout (issue 39, finding 7).

The current password on *My Argilla account* (page and API) and on the password change pages
(Django's and the admin site's) is checked by ``core.login_guard.password_confirm``: wrong guesses
count as failed log-ins, the one that locks says so, a locked account is refused even with the
right password, and the counts and locks are the log-in's own (shared both ways)."""

from __future__ import annotations

import html

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from core.models import AuditEvent
from core.roles import Role
from tests.support import PASSWORD, api_as, make_user, page_as

pytestmark = pytest.mark.django_db
LOCKED = "Too many failed log-ins for this username or from this address"
GUESSES = 30


@pytest.fixture
def ana(django_user_model):
    return make_user(django_user_model, "ana", Role.ANNOTATOR)


def _argilla_api(user, current: str):
    return api_as(user).post(
        "/api/me/argilla-password/", {"current_password": current, "password": "ana-chose-this-1"}, format="json"
    )


def _argilla_page(client, current: str) -> str:
    page = client.post(
        reverse("annotation:my-argilla"),
        {"current_password": current, "password": "ana-chose-this-1", "password_again": "ana-chose-this-1"},
    )
    assert page.status_code == 200, page.status_code
    return html.unescape(page.content.decode())


def test_guessing_the_current_password_on_the_api_locks_the_account(ana, settings):
    settings.ARGILLA_API_URL = "http://127.0.0.1:9"  # never reached: every answer below is a refusal
    answers = [_argilla_api(ana, f"guess-{n}") for n in range(GUESSES)]
    limit = settings.SHIFTLAB_LOGIN_MAX_FAILURES
    assert [a.status_code for a in answers[: limit - 1]] == [400] * (limit - 1)
    assert "Your Shiftlab password is not right" in answers[0].json()["detail"]
    assert {a.status_code for a in answers[limit - 1 :]} == {429}
    right = _argilla_api(ana, PASSWORD)
    assert right.status_code == 429 and LOCKED in right.json()["detail"], right.content
    assert int(right["Retry-After"]) > 0
    assert AuditEvent.objects.filter(verb="auth.lockout", payload__username="ana").exists()
    # The lock is the log-in's: the log-in page and the token endpoint refuse the right password too.
    login = APIClient().post("/api/auth/token/", {"username": "ana", "password": PASSWORD})
    assert login.status_code == 429
    assert page_as(ana).post(reverse("login"), {"username": "ana", "password": PASSWORD}).status_code == 429


def test_guessing_the_current_password_on_the_page_locks_the_account(ana, settings):
    settings.ARGILLA_API_URL = "http://127.0.0.1:9"
    client = page_as(ana)
    shown = [_argilla_page(client, f"guess-{n}") for n in range(GUESSES)]
    assert "Your Shiftlab password is not right" in shown[0]
    assert LOCKED in shown[-1]
    right = _argilla_page(client, PASSWORD)
    assert LOCKED in right and "Your Argilla password is set" not in right


def test_failed_log_ins_lock_the_current_password_check_too(ana, client, settings):
    settings.ARGILLA_API_URL = "http://127.0.0.1:9"
    for n in range(settings.SHIFTLAB_LOGIN_MAX_FAILURES):
        client.post(reverse("login"), {"username": "ana", "password": f"guess-{n}"})
    answer = _argilla_api(ana, PASSWORD)
    assert answer.status_code == 429 and LOCKED in answer.json()["detail"]
    assert LOCKED in _argilla_page(page_as(ana), PASSWORD)


def test_the_password_change_page_goes_through_the_lockout(researcher):
    client = page_as(researcher)
    url = reverse("password_change")
    new = {"new_password1": "a-new-pass-phrase-9", "new_password2": "a-new-pass-phrase-9"}
    for n in range(GUESSES):
        assert client.post(url, {"old_password": f"guess-{n}", **new}).status_code == 200
    refused = client.post(url, {"old_password": PASSWORD, **new})
    assert refused.status_code == 200 and LOCKED in html.unescape(refused.content.decode())
    researcher.refresh_from_db()
    assert researcher.check_password(PASSWORD)  # unchanged


def test_the_admin_sites_password_change_goes_through_the_lockout(django_user_model):
    admin = make_user(django_user_model, "adam", Role.ADMIN)
    admin.is_staff = True
    admin.save()
    client = page_as(admin)
    url = reverse("admin:password_change")
    new = {"new_password1": "a-new-pass-phrase-9", "new_password2": "a-new-pass-phrase-9"}
    for n in range(GUESSES):
        assert client.post(url, {"old_password": f"guess-{n}", **new}).status_code == 200
    refused = client.post(url, {"old_password": PASSWORD, **new})
    assert refused.status_code == 200 and LOCKED in html.unescape(refused.content.decode())
    admin.refresh_from_db()
    assert admin.check_password(PASSWORD)


def test_a_right_current_password_clears_the_usernames_failures(researcher, settings):
    client = page_as(researcher)
    url = reverse("password_change")
    for n in range(settings.SHIFTLAB_LOGIN_MAX_FAILURES - 1):
        client.post(url, {"old_password": f"guess-{n}", "new_password1": "x", "new_password2": "y"})
    done = client.post(
        url, {"old_password": PASSWORD, "new_password1": "a-new-pass-phrase-9", "new_password2": "a-new-pass-phrase-9"}
    )
    assert done.status_code == 302
    assert (
        APIClient().post("/api/auth/token/", {"username": "rita", "password": "a-new-pass-phrase-9"}).status_code == 200
    )
