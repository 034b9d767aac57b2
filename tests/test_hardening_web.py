"""Hardening of the web surface (issue 16): reflected input, Content Security Policy, production
secrets, log-in throttling and lockout, token expiry, the public health answer, one-time passwords
kept out of cookies, and Argilla accounts that are not annotators."""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.messages.storage.cookie import CookieStorage
from django.test import RequestFactory
from django.urls import reverse
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotation.argilla import client as argilla
from annotation.management.commands.argilla_server import DEV_OWNER_PASSWORD
from annotation.models import BenchmarkConfig, Study
from annotation.science.design import StudyDesign
from annotation.studies.argilla_services import PublishResult, annotator_roles_check
from core.errors import ShiftlabError
from core.models import AuditEvent
from core.roles import Role
from tests.support import PASSWORD, make_user

pytestmark = pytest.mark.django_db

XSS = "<img src=x onerror=alert(1)>"


# --- 1. reflected input and Content Security Policy ------------------------------------------


def test_export_download_never_echoes_an_unknown_format(client, researcher):
    config = BenchmarkConfig.objects.create(document={"x": 1}, config_hash="a" * 64, json_text="{}", yaml_text="x: 1\n")
    client.force_login(researcher)
    response = client.get(f"/annotation/exports/{config.pk}/{XSS}/")
    assert response.status_code == 404
    assert b"<img" not in response.content and b"onerror" not in response.content
    assert response["Content-Type"].startswith("text/plain")
    assert client.get(f"/annotation/exports/{config.pk}/yaml/").content == b"x: 1\n"


def test_pages_send_the_content_security_policy(client, researcher):
    assert client.get(reverse("login"))["Content-Security-Policy"] == settings.SHIFTLAB_CSP
    client.force_login(researcher)
    for url in (reverse("home"), reverse("corpora:list"), reverse("annotation:studies"), reverse("audit-log")):
        policy = client.get(url)["Content-Security-Policy"]
        assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy, url


def test_api_docs_and_admin_render_under_their_policy(admin_client):
    for url in ("/api/docs/", "/api/redoc/", "/admin/", "/admin/core/auditevent/", "/api/datasets/"):
        response = admin_client.get(url, HTTP_ACCEPT="text/html")
        assert response.status_code == 200, url
        if not url.startswith(tuple(settings.SHIFTLAB_CSP_EXEMPT_PATHS)):
            assert response["Content-Security-Policy"] == settings.SHIFTLAB_CSP, url


INLINE = re.compile(r"<script(?![^>]*\bsrc=)[^>]*>|<style\b|\sstyle=|\son[a-z]+=|javascript:", re.IGNORECASE)


def test_templates_hold_nothing_the_policy_blocks():
    found = [
        f"{path.relative_to(settings.BASE_DIR)}:{n}: {line.strip()}"
        for path in sorted((Path(settings.BASE_DIR) / "templates").rglob("*.html"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if INLINE.search(line)
    ]
    assert not found, "\n".join(found)


# --- 2. production secrets -------------------------------------------------------------------


def _production(tmp_path, *args: str, **env: str) -> subprocess.CompletedProcess:
    """``manage.py <args>`` with the production settings and only ``env`` of the secret variables."""
    base = {k: v for k, v in os.environ.items() if k not in (*settings.SECRET_VARIABLES, "SHIFTLAB_DEBUG")}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=settings.BASE_DIR,
        capture_output=True,
        text=True,
        env={
            **base,
            "DJANGO_SETTINGS_MODULE": "shiftlab.settings_production",
            "SHIFTLAB_DATA_DIR": str(tmp_path),
            "SHIFTLAB_ALLOWED_HOSTS": "shiftlab.example.org",
            **env,
        },
        timeout=120,
    )


def _real_secrets() -> dict[str, str]:
    return {
        "SHIFTLAB_SECRET_KEY": secrets.token_urlsafe(50),
        "SHIFTLAB_CONFIG_SIGNING_KEY": secrets.token_hex(32),
        "ARGILLA_API_KEY": secrets.token_hex(16),
        "ARGILLA_OWNER_PASSWORD": secrets.token_hex(12),
        "ARGILLA_AUTH_SECRET_KEY": secrets.token_hex(32),
        "SHIFTLAB_LLM_API_KEY": secrets.token_hex(16),
        "POSTGRES_PASSWORD": (db_password := secrets.token_hex(16)),
        "DATABASE_URL": f"postgres://shiftlab:{db_password}@postgres:5432/shiftlab",
        "FLOWER_BASIC_AUTH": f"admin:{secrets.token_hex(12)}",
    }


def test_public_secret_lists_match_their_sources():
    text = (Path(settings.BASE_DIR) / ".env.example").read_text(encoding="utf-8")
    placeholders = dict(re.findall(r"^(\w+)=.*?(change-me[\w-]*)", text, flags=re.MULTILINE))
    assert set(placeholders.values()) == set(settings.PLACEHOLDER_SECRETS)
    assert set(placeholders) == set(settings.SECRET_VARIABLES)
    assert DEV_OWNER_PASSWORD in settings.DEVELOPMENT_SECRETS


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("SHIFTLAB_SECRET_KEY", "change-me-generate-with-openssl-rand-hex-50"),
        ("SHIFTLAB_SECRET_KEY", "insecure-development-key-set-SHIFTLAB_SECRET_KEY-in-production"),
        ("SHIFTLAB_CONFIG_SIGNING_KEY", "change-me-config-signing-key"),
        ("SHIFTLAB_CONFIG_SIGNING_KEY", settings.DEV_CONFIG_SIGNING_KEY),
        ("ARGILLA_API_KEY", "shiftlab-local-argilla-owner-key"),
        ("ARGILLA_API_KEY", "change-me-argilla-api-key"),
        ("ARGILLA_OWNER_PASSWORD", "shiftlab-local-owner"),
        ("SHIFTLAB_LLM_API_KEY", "change-me-llm-api-key"),
        ("DATABASE_URL", "postgres://shiftlab:change-me-postgres-password@postgres:5432/shiftlab"),
        ("FLOWER_BASIC_AUTH", "admin:change-me-flower-password"),
    ],
)
def test_production_refuses_placeholder_and_development_secrets(tmp_path, variable, value):
    done = _production(tmp_path, "check", **{**_real_secrets(), variable: value})
    assert done.returncode != 0
    assert "ImproperlyConfigured" in done.stderr and variable in done.stderr, done.stderr[-2000:]


def test_production_never_falls_back_to_development_secrets_even_with_debug_on(tmp_path):
    done = _production(tmp_path, "check", SHIFTLAB_DEBUG="1")
    assert done.returncode != 0 and "Set SHIFTLAB_SECRET_KEY" in done.stderr, done.stderr[-2000:]
    unsigned = _production(tmp_path, "check", SHIFTLAB_DEBUG="1", SHIFTLAB_SECRET_KEY=secrets.token_urlsafe(50))
    assert unsigned.returncode != 0 and "Set SHIFTLAB_CONFIG_SIGNING_KEY" in unsigned.stderr, unsigned.stderr[-2000:]
    shown = _production(
        tmp_path,
        "shell",
        "-c",
        "from django.conf import settings; print(repr(settings.ARGILLA_API_KEY), settings.DEBUG)",
        SHIFTLAB_DEBUG="1",
        SHIFTLAB_SECRET_KEY=secrets.token_urlsafe(50),
        SHIFTLAB_CONFIG_SIGNING_KEY=secrets.token_hex(32),
    )
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert shown.stdout.splitlines()[-1].split() == ["''", "False"]


def test_production_passes_check_deploy_with_real_secrets(tmp_path):
    done = _production(tmp_path, "check", "--deploy", "--fail-level", "WARNING", **_real_secrets())
    assert done.returncode == 0, done.stdout + done.stderr


# --- 3. log-in throttling, lockout and token expiry -------------------------------------------


@pytest.fixture
def lockout(settings):
    settings.SHIFTLAB_LOGIN_MAX_FAILURES = 3
    settings.SHIFTLAB_LOGIN_MAX_FAILURES_PER_IP = 6
    settings.SHIFTLAB_LOGIN_LOCKOUT_SECONDS = 600
    return settings


def test_token_endpoint_locks_a_username_out_after_failed_logins(lockout, researcher, django_user_model):
    api = APIClient()
    answers = [api.post("/api/auth/token/", {"username": "rita", "password": "wrong"}) for _ in range(3)]
    assert [a.status_code for a in answers] == [400, 400, 429]
    refused = api.post("/api/auth/token/", {"username": "rita", "password": PASSWORD})
    assert refused.status_code == 429
    assert "too many failed log-ins" in refused.json()["detail"].lower() and "10 minutes" in refused.json()["detail"]
    assert int(refused["Retry-After"]) > 500
    event = AuditEvent.objects.get(verb="auth.lockout")
    assert event.payload["username"] == "rita" and event.payload["failures"] == 3
    # Another user from another address is not affected.
    make_user(django_user_model, "other", Role.RESEARCHER)
    ok = api.post("/api/auth/token/", {"username": "other", "password": PASSWORD}, REMOTE_ADDR="10.0.0.2")
    assert ok.status_code == 200


def test_login_page_locks_a_username_out_and_an_address_out(lockout, client, researcher, django_user_model):
    answers = [client.post(reverse("login"), {"username": "rita", "password": "wrong"}) for _ in range(3)]
    # The failure that locks the username out already says so.
    assert [page.status_code for page in answers] == [200, 200, 429]
    assert b"Too many failed log-ins" in answers[-1].content
    refused = client.post(reverse("login"), {"username": "rita", "password": PASSWORD})
    assert refused.status_code == 429 and b"Too many failed log-ins" in refused.content
    assert b"10 minutes" in refused.content and not refused.wsgi_request.user.is_authenticated
    # Failures for many usernames from one address lock the address out.
    for n in range(3):
        client.post(reverse("login"), {"username": f"nobody{n}", "password": "wrong"})
    make_user(django_user_model, "paul", Role.RESEARCHER)
    assert client.post(reverse("login"), {"username": "paul", "password": PASSWORD}).status_code == 429
    other = client.post(reverse("login"), {"username": "paul", "password": PASSWORD}, REMOTE_ADDR="10.0.0.9")
    assert other.status_code == 302
    assert AuditEvent.objects.filter(verb="auth.lockout").count() == 2


def test_a_successful_login_clears_the_failures(lockout, client, researcher):
    for _ in range(2):
        client.post(reverse("login"), {"username": "rita", "password": "wrong"})
    assert client.post(reverse("login"), {"username": "rita", "password": PASSWORD}).status_code == 302
    client.logout()
    for _ in range(2):
        client.post(reverse("login"), {"username": "rita", "password": "wrong"})
    assert client.post(reverse("login"), {"username": "rita", "password": PASSWORD}).status_code == 302


def test_token_endpoint_is_throttled_per_address_and_per_username(settings, researcher):
    settings.SHIFTLAB_AUTH_THROTTLE_RATES = {"auth_ip": "4/min", "auth_username": "2/min"}
    api = APIClient()
    answers = [api.post("/api/auth/token/", {"username": "rita", "password": PASSWORD}).status_code for _ in range(3)]
    assert answers == [200, 200, 429]
    answers = [
        api.post("/api/auth/token/", {"username": f"u{n}", "password": "x"}, REMOTE_ADDR="10.0.0.3").status_code
        for n in range(5)
    ]
    assert answers == [400, 400, 400, 400, 429]


def test_expired_token_is_refused_and_a_new_one_is_issued(settings, researcher):
    settings.SHIFTLAB_TOKEN_TTL_HOURS = 24
    token = Token.objects.create(user=researcher)
    Token.objects.filter(pk=token.pk).update(created=timezone.now() - timedelta(hours=25))
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    expired = api.get("/api/datasets/")
    assert expired.status_code == 401
    assert "expired" in expired.json()["detail"] and "/api/auth/token/" in expired.json()["detail"]
    fresh = APIClient().post("/api/auth/token/", {"username": "rita", "password": PASSWORD}).json()["token"]
    assert fresh != token.key
    api.credentials(HTTP_AUTHORIZATION=f"Token {fresh}")
    assert api.get("/api/datasets/").status_code == 200


# --- 4. the public health answer -------------------------------------------------------------


def test_health_shows_details_to_staff_only(client, admin_client, researcher, settings):
    settings.ARGILLA_API_URL = "http://127.0.0.1:9"
    settings.HEALTH_CHECK_TIMEOUT = 0.5
    public = client.get("/health/")
    assert public.status_code == 200 and public.json() == {"status": "degraded"}
    client.force_login(researcher)
    assert client.get("/health/").json() == {"status": "degraded"}
    full = admin_client.get("/health/").json()
    assert full["checks"]["argilla"]["status"] == "error" and "127.0.0.1:9" in full["checks"]["argilla"]["detail"]


# --- 5. passwords never reach a cookie ----------------------------------------------


def _cookie_texts(response) -> list[str]:
    """Every cookie the response sets, raw and, for the messages cookie, decoded."""
    texts = []
    for morsel in response.cookies.values():
        texts.append(morsel.OutputString())
        if morsel.key == CookieStorage.cookie_name:
            decoded = CookieStorage(RequestFactory().get("/"))._decode(morsel.value) or []
            texts.extend(str(m) for m in decoded)
    return texts


class _Connection:
    def close(self) -> None:
        pass


def test_argilla_passwords_stay_server_side(
    client, researcher, annotator, monkeypatch, django_capture_on_commit_callbacks
):
    design = StudyDesign(llm_judges=())
    study = Study.objects.create(name="pw", design=design.to_dict(), design_hash=design.content_hash)
    monkeypatch.setattr(
        "annotation.studies.publish_job_services.study_publish",
        lambda **_: PublishResult(study=study, dataset_id="d", records=3, new_accounts=("anna",)),
    )
    client.force_login(researcher)
    url = reverse("annotation:study", args=[study.pk])
    # Publishing names the new account; no password exists anywhere to leak (issue 27).
    with django_capture_on_commit_callbacks(execute=True):  # no broker: the publish job runs in the request
        response = client.post(url, {"action": "publish", "annotators": [str(annotator.pk)]})
    assert response.status_code == 302 and "New Argilla accounts: anna" in client.get(url).content.decode()
    # The password an annotator chooses goes to Argilla only: no cookie, no page carries it.
    sent = []
    monkeypatch.setattr(argilla, "client_get", lambda: _Connection())
    monkeypatch.setattr(argilla, "user_get_id", lambda username, *, client: "id")
    monkeypatch.setattr(argilla, "user_password_set", lambda username, password, *, client: sent.append(password))
    client.force_login(annotator)
    chosen = "chosen-" + secrets.token_hex(8)
    response = client.post(
        reverse("annotation:my-argilla"),
        {"current_password": PASSWORD, "password": chosen, "password_again": chosen},
    )
    assert response.status_code == 302 and sent == [chosen]
    assert not any(chosen in text for text in _cookie_texts(response))
    assert chosen.encode() not in client.get(reverse("annotation:my-argilla")).content


# --- 6. Argilla accounts that are not annotators ---------------------------------------------


def test_an_argilla_admin_is_never_reused_as_an_annotator(argilla_server, django_user_model):
    owner = argilla.client_get(api_url=argilla_server.url, api_key=argilla_server.api_key)
    try:
        argilla.workspace_ensure("hardening-ws", client=owner)
        argilla.user_ensure("boss", secrets.token_hex(8), "admin", "hardening-ws", client=owner)
        with pytest.raises(ShiftlabError, match=r"'boss'.*'admin'"):
            argilla.user_ensure("boss", secrets.token_hex(8), "annotator", "hardening-ws", client=owner)
        users = [make_user(django_user_model, name, Role.ANNOTATOR) for name in ("fresh-one", "boss")]
        with pytest.raises(ShiftlabError, match=r"'boss'.*'admin'.*rename"):
            annotator_roles_check(users, client=owner)  # what every publish calls first
        # Refused before anything was created: no account whose password nobody was shown.
        assert argilla.user_get_id("fresh-one", client=owner) is None
    finally:
        owner.close()
