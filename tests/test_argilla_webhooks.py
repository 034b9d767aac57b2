"""Live responses through Argilla's webhook: the receiver's refusals and debounce (Django's test
client, signatures made here with hmac and base64), registration at publish, and a real local
Argilla server whose worker POSTs to Django's live server while annotators answer.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
import uuid
from types import SimpleNamespace

import httpx
import pytest
from django.conf import settings as django_settings

from annotation.argilla import ArgillaError
from annotation.argilla import client as argilla
from annotation.models import Annotator, ArgillaWebhook, Rating, Study
from annotation.science.design import StudyDesign
from annotation.studies import webhook_services
from annotation.studies.argilla_services import study_publish
from annotation.studies.design_services import StudyCreateRequest, study_create
from annotation.studies.sync_services import study_sync
from annotation.studies.webhook_services import argilla_webhook_ensure
from core.models import AuditEvent
from core.projects import project_create
from core.roles import Role
from corpora.services import dataset_import
from tests.support import (
    FEW_CONTROLS_OVERRIDE,
    argilla_annotator_client,
    argilla_pending,
    make_user,
    published_keyword_study,
    rostered,
)
from transforms.services import transform_run_create
from transforms.tasks import start_run

RECEIVER = "/annotation/argilla/webhook/"
SECRET = base64.b64encode(b"a signing secret of 32 bytes....").decode()


def _signed(body: bytes, *, secret: str = SECRET, message_id: str | None = None, at: int | None = None) -> dict:
    """Standard Webhooks headers for ``body``, computed here independently of annotation.studies.webhooks."""
    message_id = message_id or f"msg_{secrets.token_urlsafe(16)}"
    at = int(time.time()) if at is None else at
    digest = hmac.new(base64.b64decode(secret), f"{message_id}.{at}.".encode() + body, hashlib.sha256).digest()
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(at),
        "webhook-signature": "v1," + base64.b64encode(digest).decode(),
    }


def _event(dataset_id, kind: str = "response.created") -> bytes:
    return json.dumps({"type": kind, "version": 1, "data": {"record": {"dataset": {"id": str(dataset_id)}}}}).encode()


def _post(client, body: bytes, headers: dict):
    return client.post(RECEIVER, data=body, content_type="application/json", headers=headers)


class FakeSyncTask:
    """Stands in for ``annotation.sync_study``: records how it was called, runs nothing."""

    def __init__(self, *, eager: bool):
        self.app = SimpleNamespace(conf=SimpleNamespace(task_always_eager=eager))
        self.ran: list[int] = []
        self.queued: list[tuple[tuple, int]] = []

    def delay(self, study_id):
        self.ran.append(study_id)

    def apply_async(self, args, countdown):
        self.queued.append((args, countdown))


@pytest.fixture
def webhook_row(db):
    return ArgillaWebhook.objects.create(
        url="http://testserver" + RECEIVER, argilla_id=uuid.uuid4(), secret=SECRET, events=["response.created"]
    )


@pytest.fixture
def study_datasets(db, django_user_model):
    """A study with one annotator's dataset and a legacy shared dataset (no Argilla needed)."""
    rita = make_user(django_user_model, "rita", Role.RESEARCHER)
    shared = uuid.uuid4()
    study = published_keyword_study(
        researcher=rita, name="hooked", limit=12, items=4, batch_size=4, argilla_dataset_id=shared
    )
    own = uuid.uuid4()
    Annotator.objects.create(
        study=study, user=make_user(django_user_model, "anna", Role.ANNOTATOR), argilla_dataset_id=own
    )
    return SimpleNamespace(study=study, own=own, shared=shared)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("change", "status", "says"),
    [
        (lambda h: {}, 400, "missing header"),
        (lambda h: {**h, "webhook-signature": "v1," + base64.b64encode(b"x" * 32).decode()}, 401, "no valid signature"),
        (lambda h: _signed(b"{}", secret=base64.b64encode(b"another secret").decode()), 401, "no valid signature"),
        (lambda h: {**h, "webhook-timestamp": "soon"}, 400, "whole Unix seconds"),
    ],
    ids=["unsigned", "bad-signature", "other-secret", "bad-timestamp"],
)
def test_the_receiver_refuses_unsigned_and_badly_signed_deliveries(
    client, webhook_row, study_datasets, monkeypatch, change, status, says
):
    fake = FakeSyncTask(eager=True)
    monkeypatch.setattr(webhook_services, "sync_task", lambda: fake)
    body = _event(study_datasets.own)
    answer = _post(client, body, change(_signed(body)))
    assert answer.status_code == status and says in answer.json()["detail"]
    assert fake.ran == [] and fake.queued == []


@pytest.mark.django_db
def test_the_receiver_refuses_stale_and_future_timestamps_and_replays(client, webhook_row, study_datasets, monkeypatch):
    fake = FakeSyncTask(eager=True)
    monkeypatch.setattr(webhook_services, "sync_task", lambda: fake)
    body = _event(study_datasets.own)
    # 10 s past the 300 s tolerance: a whole-second timestamp and a request that crosses a second
    # boundary (or takes a while on a busy machine) must not bring it back within it.
    for at, says in ((int(time.time()) - 310, "old"), (int(time.time()) + 310, "ahead")):
        answer = _post(client, body, _signed(body, at=at))
        assert answer.status_code == 401 and says in answer.json()["detail"]
    assert fake.ran == []
    headers = _signed(body)
    assert _post(client, body, headers).status_code == 202 and fake.ran == [study_datasets.study.pk]
    replay = _post(client, body, headers)
    assert replay.status_code == 400 and "received already" in replay.json()["detail"]
    assert fake.ran == [study_datasets.study.pk]
    assert client.get(RECEIVER).status_code == 405


@pytest.mark.django_db
def test_without_a_registered_webhook_every_delivery_is_refused(client, study_datasets):
    body = _event(study_datasets.own)
    answer = _post(client, body, _signed(body))
    assert answer.status_code == 401 and "no Argilla webhook" in answer.json()["detail"]


@pytest.mark.django_db
def test_events_of_studies_sync_them_and_other_events_are_ignored_with_200(
    client, webhook_row, study_datasets, monkeypatch, caplog
):
    fake = FakeSyncTask(eager=True)
    monkeypatch.setattr(webhook_services, "sync_task", lambda: fake)
    for dataset in (study_datasets.own, study_datasets.shared):  # an annotator's dataset, a legacy one
        body = _event(dataset, "response.updated")
        assert _post(client, body, _signed(body)).status_code == 202
    assert fake.ran == [study_datasets.study.pk] * 2
    with caplog.at_level("INFO", logger="annotation.studies.webhook_services"):
        for _ in range(2):
            body = _event(uuid.uuid4(), "response.deleted")
            answer = _post(client, body, _signed(body))
            assert answer.status_code == 200 and "belongs to no study" in answer.json()["detail"]
    assert "(2 ignored" in caplog.text
    ping = json.dumps({"type": "ping", "data": {"agent": "argilla-server"}}).encode()
    assert _post(client, ping, _signed(ping)).json()["detail"] == "ignored: ping events are not used"
    assert _post(client, b"not json", _signed(b"not json")).status_code == 400
    assert fake.ran == [study_datasets.study.pk] * 2


@pytest.mark.django_db
def test_with_a_broker_deliveries_share_a_queued_sync_that_starts_after_them(
    client, webhook_row, study_datasets, monkeypatch, django_capture_on_commit_callbacks
):
    fake = FakeSyncTask(eager=False)
    monkeypatch.setattr(webhook_services, "sync_task", lambda: fake)
    monkeypatch.setattr(webhook_services, "SYNC_DELAY_SECONDS", 1)
    body = _event(study_datasets.own)

    def deliver():
        with django_capture_on_commit_callbacks(execute=True):
            return _post(client, body, _signed(body)).json()["detail"]

    assert deliver() == f"sync of study {study_datasets.study.pk} queued"
    assert "queued already" in deliver() and "queued already" in deliver()
    # One sync, starting only once the window in which it counts as queued has passed.
    assert fake.queued == [((study_datasets.study.pk,), 2)]
    time.sleep(1.1)  # that sync may start now: the next delivery needs a sync of its own
    assert deliver().endswith("queued") and len(fake.queued) == 2


@pytest.mark.django_db
def test_a_sync_that_could_not_be_queued_does_not_hold_back_the_next(
    client, webhook_row, study_datasets, monkeypatch, django_capture_on_commit_callbacks
):
    fake = FakeSyncTask(eager=False)

    def broker_down(args, countdown):
        raise ConnectionError("broker down")

    monkeypatch.setattr(fake, "apply_async", broker_down)
    monkeypatch.setattr(webhook_services, "sync_task", lambda: fake)
    body = _event(study_datasets.own)
    with pytest.raises(ConnectionError), django_capture_on_commit_callbacks(execute=True):
        _post(client, body, _signed(body))
    monkeypatch.setattr(fake, "apply_async", FakeSyncTask.apply_async.__get__(fake))
    with django_capture_on_commit_callbacks(execute=True):
        assert _post(client, body, _signed(body)).json()["detail"].endswith("queued")
    assert fake.queued == [((study_datasets.study.pk,), webhook_services.SYNC_DELAY_SECONDS + 1)]


@pytest.mark.django_db
def test_registration_is_off_without_a_public_url_and_a_failure_is_audited_not_raised(settings, monkeypatch):
    settings.SHIFTLAB_PUBLIC_URL = ""
    off = argilla_webhook_ensure(client=None)
    assert off.state == "off" and "SHIFTLAB_PUBLIC_URL" in off.detail
    settings.SHIFTLAB_PUBLIC_URL = "https://shiftlab.example.org"

    def refused(*, client):
        raise ArgillaError("Argilla at http://argilla:6900 refused to list webhooks (HTTP 403)")

    monkeypatch.setattr(argilla, "webhooks_list", refused)
    failed = argilla_webhook_ensure(client=None)
    assert failed.state == "failed" and failed.url == "https://shiftlab.example.org" + RECEIVER
    assert "HTTP 403" in AuditEvent.objects.get(verb="argilla.webhook.failed").payload["error"]
    assert not ArgillaWebhook.objects.exists()


# --- With a real Argilla server ------------------------------------------------------------

DESIGN = StudyDesign(
    items_per_transformation=4,
    raters_per_item=2,
    batch_size=4,
    controls_per_batch=1,
    min_control_ratings=1,
    llm_judges=(),
    seed=5,
    detectability_override=FEW_CONTROLS_OVERRIDE,
)


def _ratings(annotator: Annotator, external_id: str) -> dict[str, int]:
    rows = Rating.objects.filter(annotator=annotator, study_item__external_id=external_id, active=True)
    return dict(rows.values_list("question", "value"))


def _wait_for(predicate, what: str, timeout: float = 30.0) -> float:
    """Seconds until ``predicate()`` held (polling), or fail naming ``what``."""
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout:
            pytest.fail(f"{what} did not happen within {timeout:.0f} s")
        time.sleep(0.2)
    return time.monotonic() - start


def _answer(client: httpx.Client, record: dict, quality: int, fluency: int) -> dict:
    body = {"status": "submitted", "values": {"quality": {"value": quality}, "fluency": {"value": fluency}}}
    return client.post(f"/api/v1/records/{record['id']}/responses", json=body).raise_for_status().json()


@pytest.mark.services
@pytest.mark.heavy
@pytest.mark.django_db(transaction=True)
def test_responses_arrive_live_and_the_sync_catches_up_when_delivery_stops(
    argilla_server, live_server, settings, django_user_model
):
    settings.ARGILLA_API_URL, settings.ARGILLA_API_KEY = argilla_server.url, argilla_server.api_key
    settings.SHIFTLAB_PUBLIC_URL = live_server.url
    rita = make_user(django_user_model, "rita", Role.RESEARCHER)
    # Its slug is also the Argilla workspace: apart from other tests'.
    team = project_create(slug="team-live", owner=rita, actor=None)
    users = [make_user(django_user_model, name, Role.ANNOTATOR, roster=team) for name in ("live-1", "live-2")]
    demo = django_settings.BASE_DIR / "fixtures/sts/demo-sts.csv"
    sts = dataset_import(source=demo, task="sts", name="demo-sts", project=team)
    run = transform_run_create(dataset=sts, transformation="random_keywords", seed=1, limit=12, dispatch=False)
    start_run.delay(run.pk)  # eager: the run finishes here
    run.refresh_from_db()
    study = study_create(
        actor=rita, request=rostered(StudyCreateRequest(name="live", project=team.slug, runs=[run], design=DESIGN))
    )
    owner = argilla.client_get()
    try:
        study_publish(study=study, annotators=users, actor=rita)
        published = AuditEvent.objects.filter(verb="study.publish").latest("at").payload
        assert published["live_responses"] == f"on: Argilla sends response events to {live_server.url}{RECEIVER}"
        first_hook = ArgillaWebhook.objects.get()
        listed = [w for w in argilla.webhooks_list(client=owner) if w.url == first_hook.url]
        assert [(w.id, w.secret, w.enabled) for w in listed] == [(first_hook.argilla_id, first_hook.secret, True)]
        assert set(listed[0].events) == {"response.created", "response.updated", "response.deleted"}
        study_publish(study=study, annotators=users, actor=rita)  # publishing again keeps that webhook
        assert ArgillaWebhook.objects.get().argilla_id == first_hook.argilla_id
        assert [w.id for w in argilla.webhooks_list(client=owner)] == [first_hook.argilla_id]

        annotator = Annotator.objects.get(study=study, user=users[0])
        client = argilla_annotator_client(owner, annotator.argilla_user_id)
        first, second, third = argilla_pending(client, annotator.argilla_dataset_id)[:3]
        # A new answer, then an edit of it, reach Django without anyone syncing.
        response = _answer(client, first, 4, 3)
        took = _wait_for(lambda: _ratings(annotator, first["external_id"]) == {"quality": 4, "fluency": 3}, "rating")
        print(f"new answer stored {took:.1f} s after it was submitted")
        edit = {"status": "submitted", "values": {"quality": {"value": 2}, "fluency": {"value": 3}}}
        client.put(f"/api/v1/responses/{response['id']}", json=edit).raise_for_status()
        took = _wait_for(lambda: _ratings(annotator, first["external_id"])["quality"] == 2, "edit")
        print(f"edit stored {took:.1f} s after it was submitted")

        # Delivery stops: the answer waits in Argilla until the next sync brings it.
        assert argilla.webhook_delete(first_hook.argilla_id, client=owner)
        _answer(client, second, 5, 5)
        time.sleep(3)
        assert _ratings(annotator, second["external_id"]) == {}
        assert study_sync(study=Study.objects.get(pk=study.pk)).created == 2
        assert _ratings(annotator, second["external_id"]) == {"quality": 5, "fluency": 5}

        # The next publish registers the webhook again, and answers arrive live again.
        study_publish(study=study, annotators=users, actor=rita)
        hook = ArgillaWebhook.objects.get()
        assert hook.argilla_id != first_hook.argilla_id
        assert [w.id for w in argilla.webhooks_list(client=owner)] == [hook.argilla_id]
        assert AuditEvent.objects.filter(verb="argilla.webhook.register").latest("at").payload["change"] == "created"
        _answer(client, third, 1, 2)
        _wait_for(lambda: _ratings(annotator, third["external_id"]) == {"quality": 1, "fluency": 2}, "third rating")
    finally:
        for webhook in argilla.webhooks_list(client=owner):
            argilla.webhook_delete(webhook.id, client=owner)
        owner.close()


@pytest.mark.services
@pytest.mark.heavy
@pytest.mark.django_db
def test_registration_adopts_repairs_and_replaces_webhooks_in_argilla(argilla_server, settings):
    settings.ARGILLA_API_URL, settings.ARGILLA_API_KEY = argilla_server.url, argilla_server.api_key
    owner = argilla.client_get()
    try:
        settings.SHIFTLAB_PUBLIC_URL = "http://shiftlab.invalid"
        url = "http://shiftlab.invalid" + RECEIVER
        # Two webhooks to our URL already (say, two publishes at once), one of them disabled.
        made = [argilla.webhook_create(url, ["response.created"], client=owner) for _ in range(2)]
        argilla.webhook_update(made[0].id, enabled=False, client=owner)
        assert argilla_webhook_ensure(client=owner).state == "on"
        kept = ArgillaWebhook.objects.get()
        assert kept.argilla_id == made[0].id and kept.secret == made[0].secret
        (listed,) = argilla.webhooks_list(client=owner)
        assert listed.id == made[0].id and listed.enabled and len(listed.events) == 3
        assert AuditEvent.objects.get(verb="argilla.webhook.register").payload["duplicates_removed"] == 1

        # A new public URL: a new webhook, and the one of the earlier URL leaves Argilla.
        settings.SHIFTLAB_PUBLIC_URL = "https://shiftlab.example.invalid/lab"
        assert argilla_webhook_ensure(client=owner).url == "https://shiftlab.example.invalid/lab" + RECEIVER
        (listed,) = argilla.webhooks_list(client=owner)
        assert ArgillaWebhook.objects.get().argilla_id == listed.id != kept.argilla_id

        # A URL Argilla refuses: the failure is reported, nothing raised, nothing stored changes.
        settings.SHIFTLAB_PUBLIC_URL = "http://exa mple"
        failed = argilla_webhook_ensure(client=owner)
        assert failed.state == "failed" and "HTTP 422" in failed.detail
        assert ArgillaWebhook.objects.get().argilla_id == listed.id
    finally:
        for webhook in argilla.webhooks_list(client=owner):
            argilla.webhook_delete(webhook.id, client=owner)
        owner.close()
