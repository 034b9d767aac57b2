"""Annotator onboarding after publishing (issues 20, 27): each annotator's annotation page, their
submitted / assigned progress, annotators setting their own Argilla password (kept nowhere: not in
a cookie, the session's messages or the audit log; no researcher can set one), what a queued sync
found, and 403 for annotators on study pages. Argilla is replaced at its adapter here; the
adapter call itself runs against a real local Argilla in the last test."""

from __future__ import annotations

import json
import uuid

import httpx
import pytest
from celery.result import AsyncResult
from django.contrib.messages.storage.session import SessionStorage
from django.contrib.sessions.models import Session
from django.test import RequestFactory
from django.urls import reverse
from django.utils import timezone
from django_celery_results.models import TaskResult

from annotation.argilla import client as argilla_client
from annotation.models import Study
from annotation.studies.argilla_services import PublishResult
from annotation.studies.assignment_services import study_assign
from annotation.studies.onboarding_services import annotation_ui_url
from annotation.tasks import sync_study
from core.models import AuditEvent
from core.roles import Role
from tests.support import PASSWORD, api_as, make_user, published_keyword_study

pytestmark = pytest.mark.django_db


class _Connection:
    def close(self) -> None:
        pass


@pytest.fixture
def study(researcher, django_user_model, settings) -> Study:
    """A published study of 4 real items, 2 raters each, assigned to anna and bob (own datasets)."""
    settings.ARGILLA_UI_URL = "https://argilla.example.org/"
    study = published_keyword_study(researcher=researcher, name="onboard", limit=4, items=4, batch_size=4)
    users = [make_user(django_user_model, name, Role.ANNOTATOR) for name in ("anna", "bob")]
    study_assign(study=study, users=users, actor=researcher)
    for annotator in study.annotators.all():
        annotator.argilla_dataset_id = uuid.uuid4()
        annotator.save(update_fields=["argilla_dataset_id"])
    return study


@pytest.fixture
def argilla_calls(monkeypatch) -> list[tuple[str, str]]:
    """Argilla replaced at the adapter: password changes are recorded, nothing is sent."""
    calls: list[tuple[str, str]] = []
    monkeypatch.setattr(argilla_client, "client_get", lambda: _Connection())
    monkeypatch.setattr(
        argilla_client, "user_password_set", lambda username, password, *, client: calls.append((username, password))
    )
    monkeypatch.setattr(argilla_client, "user_get_id", lambda username, *, client: uuid.uuid4())
    return calls


def _session_texts(client) -> list[str]:
    """The raw session data and every message queued in it, decoded."""
    key = client.cookies.get("sessionid")
    if key is None:
        return []
    data = Session.objects.get(session_key=key.value).get_decoded()
    texts = [json.dumps(data, default=str)]
    stored = data.get(SessionStorage.session_key)
    if stored:
        request = RequestFactory().get("/")
        request.session = {}
        texts.extend(str(m) for m in SessionStorage(request).deserialize_messages(stored))
    return texts


def _everywhere_but_the_page(client, response) -> list[str]:
    texts = [morsel.OutputString() for morsel in response.cookies.values()]
    texts.extend(_session_texts(client))
    texts.extend(json.dumps(e.payload) for e in AuditEvent.objects.all())
    return texts


def test_access_table_links_each_annotator_to_their_page_with_progress(client, researcher, study):
    client.force_login(researcher)
    page = client.get(reverse("annotation:study", args=[study.pk])).content.decode()
    for annotator in study.annotators.select_related("user"):
        link = f"https://argilla.example.org/dataset/{annotator.argilla_dataset_id}/annotation-mode"
        assert link == annotation_ui_url(annotator.argilla_dataset_id) and link in page
    # 4 items x 2 raters over 2 annotators: each has 4 items + 2 controls (1 batch of 4), none submitted.
    assert page.count('<td class="num">0 / 6</td>') == 2


def test_an_annotator_sets_their_own_argilla_password_which_is_kept_nowhere(client, study, argilla_calls):
    anna = study.annotators.get(user__username="anna")
    client.force_login(anna.user)
    url = reverse("annotation:my-argilla")
    page = client.get(url).content.decode()
    link = f"/dataset/{anna.argilla_dataset_id}/annotation-mode"
    assert "My Argilla account" in page and link in page  # where she rates
    typed = "a-typed-secret-9"
    form = {"current_password": PASSWORD, "password": typed, "password_again": typed}
    response = client.post(url, form)
    assert response.status_code == 302 and argilla_calls == [("anna", typed)]
    assert not any(typed in text for text in _everywhere_but_the_page(client, response))
    assert typed not in client.get(url).content.decode()
    event = AuditEvent.objects.get(verb="annotator.argilla_password.set")
    assert event.payload["annotator"] == "anna" and event.payload["by"] == "the annotator"
    # Refused next to the form, nothing sent: a wrong Shiftlab password, a short or mistyped one.
    for changed, reason in (
        ({"current_password": "not-hers"}, "Your Shiftlab password is not right"),
        ({"password": "short", "password_again": "short"}, "at least 8 characters"),
        ({"password_again": "another-one-1"}, "The two passwords differ"),
    ):
        refused = client.post(url, {**form, **changed})
        assert refused.status_code == 200 and reason in refused.content.decode()
    assert len(argilla_calls) == 1


def test_no_researcher_sets_an_annotators_password(client, researcher, study, argilla_calls):
    client.force_login(researcher)
    anna = study.annotators.get(user__username="anna")
    url = reverse("annotation:study", args=[study.pk])
    assert "Set password" not in client.get(url).content.decode()
    client.post(url, {"action": "password", "annotator": anna.pk, "password": "researcher-chose-1"})
    assert client.get(reverse("annotation:my-argilla")).status_code == 403
    assert api_as(researcher).post("/api/me/argilla-password/", {}, format="json").status_code == 403
    assert argilla_calls == []


def test_publishing_names_new_accounts_and_shows_no_password(
    client, researcher, study, monkeypatch, django_capture_on_commit_callbacks
):
    monkeypatch.setattr(
        "annotation.studies.publish_job_services.study_publish",
        lambda **_: PublishResult(study=study, dataset_id="d", records=6, new_accounts=("anna",)),
    )
    client.force_login(researcher)
    url = reverse("annotation:study", args=[study.pk])
    with django_capture_on_commit_callbacks(execute=True):  # no broker: the publish job runs in the request
        response = client.post(url, {"action": "publish"})
    assert response.status_code == 302
    page = client.get(url).content.decode()
    # Nobody ticked on a published study (issue 31): nobody added, and the page says so.
    assert "no new work was sent" in page and "hold 6 records, as before" in page
    assert "New Argilla accounts: anna" in page
    assert "My Argilla account" in page and "password</th>" not in page
    anna = study.annotators.get(user__username="anna")
    assert f"/dataset/{anna.argilla_dataset_id}/annotation-mode" in page


def test_a_queued_sync_shows_when_it_finished_and_what_it_found(client, researcher, study, monkeypatch):
    task_id = str(uuid.uuid4())
    monkeypatch.setattr(sync_study, "delay", lambda pk: AsyncResult(task_id))
    client.force_login(researcher)
    url = reverse("annotation:study", args=[study.pk])
    response = client.post(url, {"action": "sync"})
    assert response["Location"] == f"{url}?sync={task_id}#sync-job"
    waiting = client.get(f"{url}?sync={task_id}").content.decode()
    # The page follows the job in place (static/live.js polls while this marker is there), no reload.
    assert "Queued sync: waiting for a worker" in waiting and 'name="shiftlab-poll"' in waiting
    assert 'http-equiv="refresh"' not in waiting
    counts = {"created": 3, "updated": 1, "withdrawn": 0, "unchanged": 2}
    TaskResult.objects.create(
        task_id=task_id,
        task_name="annotation.sync_study",
        task_args=f"({study.pk},)",
        status="SUCCESS",
        result=json.dumps(counts),
        date_done=timezone.now(),
    )
    done = client.get(f"{url}?sync={task_id}").content.decode()
    assert "Queued sync: finished" in done and "3 new, 1 edited, 0 withdrawn (2 unchanged)" in done
    assert 'name="shiftlab-poll"' not in done
    # Another study's task id shows nothing here.
    other = Study.objects.create(name="other", design=study.design, design_hash=study.design_hash)
    assert (
        "Queued sync"
        not in client.get(reverse("annotation:study", args=[other.pk]) + f"?sync={task_id}").content.decode()
    )
    TaskResult.objects.filter(task_id=task_id).update(
        status="FAILURE",
        result=json.dumps({"exc_type": "ArgillaUnavailable", "exc_message": ["Argilla is not reachable"]}),
    )
    failed = client.get(f"{url}?sync={task_id}").content.decode()
    assert "failed" in failed and "ArgillaUnavailable: Argilla is not reachable" in failed


def test_annotators_get_403_on_the_study_page_and_its_password_form(client, study, argilla_calls):
    anna = study.annotators.get(user__username="anna")
    client.force_login(anna.user)
    url = reverse("annotation:study", args=[study.pk])
    assert client.get(url).status_code == 403
    assert client.post(url, {"action": "password", "annotator": anna.pk, "password": ""}).status_code == 403
    assert argilla_calls == []


@pytest.mark.heavy
def test_the_password_set_logs_the_annotator_in_to_a_real_argilla(argilla_server, settings, django_user_model):
    settings.ARGILLA_API_URL, settings.ARGILLA_API_KEY = argilla_server.url, argilla_server.api_key
    owner = argilla_client.client_get()
    try:
        argilla_client.workspace_ensure("onboarding", client=owner)
        argilla_client.user_ensure("olga", "first-password-1", "annotator", "onboarding", client=owner)
        argilla_client.user_password_set("olga", "second-password-2", client=owner)
        with pytest.raises(argilla_client.ArgillaError, match="role 'owner'"):
            owner_name = owner.get("/api/v1/me").json()["username"]
            argilla_client.user_password_set(owner_name, "never-used-here", client=owner)
    finally:
        owner.close()
    with httpx.Client(base_url=argilla_server.url, trust_env=False, timeout=30) as anonymous:

        def token(password: str) -> int:
            return anonymous.post("/api/v1/token", data={"username": "olga", "password": password}).status_code

        assert token("second-password-2") == 201
        assert token("first-password-1") == 401
