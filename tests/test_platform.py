"""Platform plumbing: pages and roles, health endpoint, admin, settings, deployment checks."""

import os
import subprocess
import sys

import pytest
from django.conf import settings
from django.contrib import admin
from django.contrib.auth.models import Group
from django.urls import reverse

from core.models import AuditEvent
from core.roles import Role
from core.services import audit_record

pytestmark = pytest.mark.django_db


def test_roles_exist_after_migrate_with_sensible_permissions():
    assert set(Group.objects.values_list("name", flat=True)) >= {"annotator", "researcher", "admin"}
    researcher = Group.objects.get(name=Role.RESEARCHER)
    codenames = set(researcher.permissions.values_list("codename", flat=True))
    assert {"add_dataset", "view_dataset", "view_auditevent"} <= codenames
    assert "add_user" not in codenames and "change_auditevent" not in codenames
    assert not Group.objects.get(name=Role.ANNOTATOR).permissions.exists()


def test_pages_need_login_and_the_researcher_role(client, researcher, annotator):
    assert client.get(reverse("corpora:list")).status_code == 302
    client.force_login(annotator)
    assert client.get(reverse("home")).status_code == 200
    assert client.get(reverse("corpora:list")).status_code == 403
    assert client.get(reverse("audit-log")).status_code == 403
    client.force_login(researcher)
    assert client.get(reverse("corpora:list")).status_code == 200
    assert client.get(reverse("audit-log")).status_code == 200


# Real commits: the import is queued with transaction.on_commit, as in production.
@pytest.mark.django_db(transaction=True)
def test_upload_page_imports_a_file_and_lists_it(client, researcher):
    client.force_login(researcher)
    with open(settings.BASE_DIR / "fixtures/sts/demo-sts.csv", "rb") as handle:
        response = client.post(
            reverse("corpora:list"),
            {"files": handle, "name": "page-sts", "task": "sts", "language": "en"},
            follow=True,
        )
    assert response.status_code == 200
    assert b"Imported 40 items into page-sts" in response.content
    detail = client.get(reverse("corpora:detail", args=["page-sts"]))
    assert b"sts-001" in detail.content


# Real commits: the import is queued with transaction.on_commit, as in production.
@pytest.mark.django_db(transaction=True)
def test_upload_page_shows_where_a_file_is_wrong(client, researcher):
    from django.core.files.uploadedfile import SimpleUploadedFile

    client.force_login(researcher)
    upload = SimpleUploadedFile("wrong.csv", b"sentence1,sentence2\na,b\n")
    response = client.post(
        reverse("corpora:list"), {"files": upload, "name": "wrong", "task": "sts", "language": "en"}, follow=True
    )
    # The header (line 1) lacks the column; the form comes back as it was sent.
    assert b"wrong.csv, line 1: missing column(s) score" in response.content
    assert b"Nothing was imported" in response.content
    assert b'name="name" value="wrong"' in response.content


def test_health_reports_each_service(admin_client, settings):
    settings.TRANSFORM_BACKENDS = {"default": {"OPTIONS": {"base_url": "http://127.0.0.1:9/v1"}}}
    settings.ARGILLA_API_URL = "http://127.0.0.1:9"
    settings.HEALTH_CHECK_TIMEOUT = 0.5
    response = admin_client.get("/health/")
    body = response.json()
    assert response.status_code == 200
    assert body["checks"]["database"]["status"] == "ok"
    assert body["checks"]["broker"]["status"] == "eager"
    assert body["checks"]["llm"]["status"] == "error" and body["checks"]["argilla"]["status"] == "error"
    assert body["status"] == "degraded"


def test_health_is_down_when_the_broker_is_unreachable(client, admin_client, settings):
    settings.CELERY_TASK_ALWAYS_EAGER = False
    settings.CELERY_BROKER_URL = "redis://:secret@127.0.0.1:9/0"
    from shiftlab.celery import app

    previous = app.conf.broker_url
    app.conf.broker_url = settings.CELERY_BROKER_URL
    try:
        settings.HEALTH_CHECK_TIMEOUT = 0.5
        public = client.get("/health/")
        response = admin_client.get("/health/")
    finally:
        app.conf.broker_url = previous
    assert public.status_code == 503 and public.json() == {"status": "down"}
    assert response.status_code == 503
    assert response.json()["checks"]["broker"]["status"] == "error"
    assert b"secret" not in response.content


@pytest.mark.parametrize("model", sorted(admin.site._registry, key=lambda m: m._meta.label))
def test_admin_changelist_for_every_model(admin_client, model):
    url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
    assert admin_client.get(url).status_code == 200


def test_every_project_model_is_in_the_admin():
    from django.apps import apps

    project_apps = {"core", "corpora", "transforms", "annotation", "evaluation"}
    models = [m for m in apps.get_models() if m._meta.app_label in project_apps]
    missing = [m._meta.label for m in models if m not in admin.site._registry]
    assert not missing


def test_audit_log_is_append_only_in_admin(admin_client, researcher):
    event = audit_record(actor=researcher, verb="test.decision", payload={"why": "because"})
    url = reverse("admin:core_auditevent_change", args=[event.pk])
    page = admin_client.get(url)
    assert page.status_code == 200 and b"test.decision" in page.content
    assert (
        admin_client.post(reverse("admin:core_auditevent_delete", args=[event.pk]), {"post": "yes"}).status_code == 403
    )
    assert AuditEvent.objects.filter(pk=event.pk).exists()


def _manage(*args, **env):
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=settings.BASE_DIR,
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=120,
    )


def test_production_settings_pass_check_deploy(tmp_path):
    # A fresh data directory: the check must not need database tables (schema generation runs).
    done = _manage(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        SHIFTLAB_DATA_DIR=str(tmp_path),
        DJANGO_SETTINGS_MODULE="shiftlab.settings_production",
        SHIFTLAB_SECRET_KEY="x" * 64 + "-a-long-random-production-secret-key",
        SHIFTLAB_CONFIG_SIGNING_KEY="y" * 64 + "-a-long-random-config-signing-key",
        SHIFTLAB_ALLOWED_HOSTS="shiftlab.example.org",
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_production_settings_refuse_to_start_without_a_secret():
    env = {"DJANGO_SETTINGS_MODULE": "shiftlab.settings_production"}
    done = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=settings.BASE_DIR,
        capture_output=True,
        text=True,
        env={k: v for k, v in {**os.environ, **env}.items() if k != "SHIFTLAB_SECRET_KEY"},
        timeout=120,
    )
    assert done.returncode != 0 and "Set SHIFTLAB_SECRET_KEY" in done.stderr


def test_database_url_selects_postgresql(monkeypatch):
    import dj_database_url

    parsed = dj_database_url.parse("postgres://u:p@db.example.org:5432/shiftlab")
    assert parsed["ENGINE"] == "django.db.backends.postgresql" and parsed["NAME"] == "shiftlab"


def test_datasets_inside_the_django_process_is_hugging_faces_package():
    import datasets

    assert callable(datasets.load_dataset)
    assert "site-packages" in datasets.__file__
