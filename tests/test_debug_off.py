"""Debug mode off by default (issue 26): the demo and the tests start with no secret set, and what an
anonymous caller can provoke (an oversized POST, an unknown address, a server error) gets a plain
page or JSON, never Django's debug page with settings, file paths and tracebacks."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import path, reverse
from rest_framework.test import APIClient
from rest_framework.views import APIView

import shiftlab.urls
from annotation.argilla import ArgillaError
from annotation.management.commands import argilla_server
from annotation.management.commands.argilla_server import DEV_OWNER_PASSWORD

pytestmark = pytest.mark.django_db

WEBHOOK = "/annotation/argilla/webhook/"
ELEVEN_MB = b"x" * (11 * 1024 * 1024)
# What Django's debug pages show and a plain page must not.
LEAKS = ("Traceback", "settings", "DATABASES", "SECRET_KEY", str(settings.BASE_DIR))


def _assert_plain(body: str) -> None:
    leaked = [leak for leak in LEAKS if leak in body]
    assert not leaked, f"the page shows {leaked}:\n{body[:2000]}"


def _boom(request):
    raise RuntimeError(f"failed with {settings.SECRET_KEY} in {settings.BASE_DIR}")


class _BoomAPI(APIView):
    permission_classes = []

    def get(self, request):
        _boom(request)


# The project's URLs and two that fail, for the tests marked with pytest.mark.urls(__name__).
urlpatterns = [path("boom/", _boom), path("api/boom/", _BoomAPI.as_view()), *shiftlab.urls.urlpatterns]


# --- 1. the settings: debug off by default, development secrets whatever debug says ----------


def _settings_in_a_new_process(tmp_path, **env: str) -> list[str]:
    """Start Django with ``shiftlab.settings``, no secret variable and only ``env`` set, run the
    system checks, and return what the settings hold."""
    base = {k: v for k, v in os.environ.items() if k not in (*settings.SECRET_VARIABLES, "SHIFTLAB_DEBUG")}
    code = (
        "import django; django.setup(); from django.core.management import call_command; call_command('check'); "
        "from django.conf import settings as s; "
        "print(s.DEBUG, s.SECRET_KEY == s.DEV_SECRET_KEY, s.CONFIG_SIGNING_KEY == s.DEV_CONFIG_SIGNING_KEY, "
        "s.ARGILLA_API_KEY == s.DEV_ARGILLA_API_KEY)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=settings.BASE_DIR,
        capture_output=True,
        text=True,
        env={**base, "DJANGO_SETTINGS_MODULE": "shiftlab.settings", "SHIFTLAB_DATA_DIR": str(tmp_path), **env},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.splitlines()[-1].split()


def test_debug_is_off_by_default_and_the_settings_start_without_secrets(tmp_path):
    assert _settings_in_a_new_process(tmp_path) == ["False", "True", "True", "True"]


def test_shiftlab_debug_turns_debug_on(tmp_path):
    assert _settings_in_a_new_process(tmp_path, SHIFTLAB_DEBUG="1") == ["True", "True", "True", "True"]


class _StoppedServer:
    """Stands in for the local Argilla server: records the owner password, then stops the command."""

    owner_password = None

    def __init__(self, **options):
        _StoppedServer.owner_password = options["owner_password"]

    def start(self):
        raise ArgillaError("stopped by the test")

    def stop(self):
        pass


def test_local_argilla_owner_password_falls_back_with_debug_off_but_not_in_production(settings, monkeypatch):
    monkeypatch.delenv("ARGILLA_OWNER_PASSWORD", raising=False)
    monkeypatch.setattr(argilla_server, "LocalArgillaServer", _StoppedServer)
    assert settings.DEBUG is False and settings.DEVELOPMENT_SECRETS_ALLOWED is True
    with pytest.raises(CommandError, match="stopped by the test"):
        call_command("argilla_server")
    assert _StoppedServer.owner_password == DEV_OWNER_PASSWORD
    settings.DEVELOPMENT_SECRETS_ALLOWED = False  # as shiftlab.settings_production has it
    with pytest.raises(CommandError, match="Set ARGILLA_OWNER_PASSWORD"):
        call_command("argilla_server")


# --- 2. plain error pages with debug off ----------------------------------------------------------


def test_an_oversized_anonymous_webhook_post_gets_the_plain_413_page(client):
    """Refused unread by its Content-Length (issue 39: 1 MB before logging in), with the site's page."""
    assert settings.DEBUG is False
    response = client.post(WEBHOOK, data=ELEVEN_MB, content_type="application/json")
    body = b"".join(response.streaming_content).decode()
    assert response.status_code == 413
    assert "<h1>Request too large</h1>" in body and "Log in first" in body
    _assert_plain(body)


def test_an_oversized_anonymous_api_post_gets_json():
    response = APIClient().post("/api/dataset-imports/", data=ELEVEN_MB, content_type="application/json")
    assert response.status_code == 401 and response["Content-Type"].startswith("application/json")
    assert set(response.json()) == {"detail"}


def test_an_oversized_form_post_gets_the_plain_413_page(client):
    response = client.post(reverse("login"), data={"username": ELEVEN_MB.decode(), "password": "x"})
    body = b"".join(response.streaming_content).decode()
    assert response.status_code == 413 and "<h1>Request too large</h1>" in body
    _assert_plain(body)


def test_an_unknown_address_gets_the_plain_404_page(client):
    response = client.get("/no-such-page/")
    assert response.status_code == 404 and "<h1>Page not found</h1>" in response.content.decode()
    _assert_plain(response.content.decode())


@pytest.mark.urls(__name__)
def test_a_server_error_gets_the_plain_500_page_on_pages_and_the_api():
    client = Client(raise_request_exception=False)
    for url in ("/boom/", "/api/boom/"):
        response = client.get(url)
        body = response.content.decode()
        assert response.status_code == 500, url
        assert "<h1>Something went wrong</h1>" in body, url
        assert settings.SECRET_KEY not in body, url
        _assert_plain(body)


def test_api_errors_are_json_not_pages(researcher_client):
    answers = {
        401: APIClient().get("/api/projects/"),
        404: researcher_client.get("/api/transform-runs/999999/"),
        400: researcher_client.post("/api/transform-runs/", data={}, format="json"),
    }
    for status, response in answers.items():
        assert response.status_code == status and response["Content-Type"].startswith("application/json"), status
        _assert_plain(response.content.decode())


def test_an_oversized_api_post_gets_json(researcher_client):
    # Django refuses the body before DRF parses it; its 400 handler answers API clients in JSON.
    response = researcher_client.post("/api/transform-runs/", data=ELEVEN_MB, content_type="application/json")
    assert response.status_code == 400 and response["Content-Type"].startswith("application/json")
    detail = "The request body is over 10 MB (files sent as multipart uploads do not count): send less per request."
    assert response.json() == {"detail": detail}
    _assert_plain(response.content.decode())
