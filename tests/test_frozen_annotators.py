"""Withdrawn and rejected annotators are frozen (issue 27, finding 5): their access to the study's
records is cut in Argilla (their own API key can no longer read, answer or edit a response), and
any change to one of their responses that lands after the cut is ignored by the sync and by the
webhook path, which keep the rating as it was and audit the change once.

Real local Argilla server; the study's texts come from a random-keywords run (no LLM needed).
"""

from __future__ import annotations

import uuid

import httpx
import pytest
from django.conf import settings as django_settings

from annotation.argilla import client as argilla
from annotation.models import Annotator, ArgillaWebhook, Rating, RatingComment, Study
from annotation.science.design import StudyDesign
from annotation.studies import webhook_services
from annotation.studies.argilla_services import study_publish
from annotation.studies.design_services import StudyCreateRequest, study_create
from annotation.studies.sync_services import study_sync, sync_summary
from annotation.studies.validation_services import annotator_reject, annotator_replace
from core.models import AuditEvent
from core.projects import project_create
from core.roles import Role
from corpora.services import dataset_import
from tests.support import FEW_CONTROLS_OVERRIDE, argilla_annotator_client, argilla_pending, make_user, page_as, rostered
from tests.test_argilla_webhooks import RECEIVER, SECRET, _event, _signed
from transforms.services import transform_run_create
from transforms.tasks import start_run

pytestmark = [pytest.mark.django_db, pytest.mark.services, pytest.mark.heavy]

DESIGN = StudyDesign(
    items_per_transformation=6,
    raters_per_item=2,
    batch_size=3,
    controls_per_batch=2,
    min_control_ratings=2,
    llm_judges=(),
    seed=5,
    detectability_override=FEW_CONTROLS_OVERRIDE,
)


def _study(slug: str, name: str, django_user_model, usernames: tuple[str, ...]):
    rita = make_user(django_user_model, f"rita-{slug}", Role.RESEARCHER)
    # Its slug is also the Argilla workspace: apart from other tests'.
    team = project_create(slug=slug, owner=rita, actor=None)
    users = {n: make_user(django_user_model, n, Role.ANNOTATOR, roster=team) for n in usernames}
    demo = django_settings.BASE_DIR / "fixtures/sts/demo-sts.csv"
    sts = dataset_import(source=demo, task="sts", name=f"demo-sts-{slug}", project=team)
    run = transform_run_create(dataset=sts, transformation="random_keywords", seed=1, limit=16, dispatch=False)
    start_run.delay(run.pk)  # eager: the run finishes here
    run.refresh_from_db()
    study = study_create(
        actor=rita, request=rostered(StudyCreateRequest(name=name, project=team.slug, runs=[run], design=DESIGN))
    )
    study_publish(study=study, annotators=list(users.values())[:3], actor=rita)
    return Study.objects.get(pk=study.pk), rita, users


def _answer(client: httpx.Client, record_id: str, quality: int, fluency: int, comment: str = "") -> str:
    values = {"quality": {"value": quality}, "fluency": {"value": fluency}}
    if comment:
        values["comment"] = {"value": comment}
    body = {"status": "submitted", "values": values}
    return client.post(f"/api/v1/records/{record_id}/responses", json=body).raise_for_status().json()["id"]


def _edit(client: httpx.Client, response_id: str, quality: int, fluency: int) -> httpx.Response:
    body = {"status": "submitted", "values": {"quality": {"value": quality}, "fluency": {"value": fluency}}}
    return client.put(f"/api/v1/responses/{response_id}", json=body)


def _ratings(annotator: Annotator) -> dict[tuple[str, str], tuple[int, bool]]:
    rows = Rating.objects.filter(annotator=annotator).select_related("study_item")
    return {(r.study_item.external_id, r.question): (r.value, r.active) for r in rows}


def test_a_replaced_annotator_can_no_longer_read_answer_or_edit_and_keeps_their_ratings(
    argilla_server, settings, django_user_model
):
    settings.ARGILLA_API_URL, settings.ARGILLA_API_KEY = argilla_server.url, argilla_server.api_key
    study, rita, users = _study("team-freeze", "freeze-one", django_user_model, ("fz-1", "fz-2", "fz-3", "fz-4"))
    owner = argilla.client_get()
    leaver = Annotator.objects.get(study=study, user=users["fz-1"])
    client = argilla_annotator_client(owner, leaver.argilla_user_id)
    first, second, third = argilla_pending(client, leaver.argilla_dataset_id)[:3]
    responses = [_answer(client, first["id"], 4, 4, "fine"), _answer(client, second["id"], 3, 5)]
    study_sync(study=study)
    before = _ratings(leaver)
    assert len(before) == 4

    annotator_replace(annotator=leaver, user=users["fz-4"], reason="moved to another team", actor=rita)
    leaver.refresh_from_db()

    # Their own key: the dataset is gone from their list, its records and their responses refused.
    listed = {d["id"] for d in client.get("/api/v1/me/datasets").raise_for_status().json()["items"]}
    assert str(leaver.argilla_dataset_id) not in listed
    dataset = leaver.argilla_dataset_id
    assert client.post(f"/api/v1/me/datasets/{dataset}/records/search", json={}).status_code in (403, 404)
    assert client.get(f"/api/v1/datasets/{dataset}/records").status_code in (403, 404)
    for response_id in responses:
        edited = _edit(client, response_id, 1, 1)
        assert edited.status_code in (403, 404), (edited.status_code, edited.text)
        assert client.delete(f"/api/v1/responses/{response_id}").status_code in (403, 404)
    new = {"status": "submitted", "values": {"quality": {"value": 1}, "fluency": {"value": 1}}}
    assert client.post(f"/api/v1/records/{third['id']}/responses", json=new).status_code in (403, 404)

    assert leaver.status == Annotator.Status.WITHDRAWN and leaver.frozen_at is not None
    assert leaver.argilla_deactivated
    # Their submitted ratings still count, exactly as they were, sync after sync.
    for _ in range(2):
        study_sync(study=Study.objects.get(pk=study.pk))
        assert _ratings(leaver) == before
    assert RatingComment.objects.get(annotator=leaver).text == "fine"
    cut = AuditEvent.objects.get(verb="study.annotator.cut", object_id=str(leaver.pk))
    assert cut.payload["dataset_deleted"] == str(dataset)
    # Their account lives on for their other studies and projects.
    assert argilla.user_get_id("fz-1", client=owner) == leaver.argilla_user_id
    owner.close()


def test_a_change_after_the_cut_is_ignored_by_sync_and_webhook_and_audited_once(
    argilla_server, settings, django_user_model, client
):
    settings.ARGILLA_API_URL, settings.ARGILLA_API_KEY = argilla_server.url, argilla_server.api_key
    study, rita, users = _study("team-frozen", "freeze-two", django_user_model, ("fr-1", "fr-2", "fr-3"))
    owner = argilla.client_get()
    careless = Annotator.objects.get(study=study, user=users["fr-1"])
    own = argilla_annotator_client(owner, careless.argilla_user_id)
    first, second = argilla_pending(own, careless.argilla_dataset_id)[:2]
    responses = [_answer(own, first["id"], 4, 4, "kept"), _answer(own, second["id"], 3, 5)]
    study_sync(study=study)
    before = _ratings(careless)

    # Rejected while Argilla cannot be reached: frozen in Django, the cut in Argilla still pending.
    unreachable = httpx.Client(base_url="http://127.0.0.1:9", trust_env=False)
    annotator_reject(annotator=careless, detail="answers at random", actor=rita, client=unreachable)

    # Changes land after the cut: their own edit, and one through the owner's key.
    assert _edit(own, responses[0], 1, 1).status_code == 200
    assert _edit(owner, responses[1], 2, 2).status_code == 200
    result = study_sync(study=Study.objects.get(pk=study.pk))
    assert _ratings(careless) == before, result
    careless.refresh_from_db()
    assert careless.frozen_at is not None and not careless.argilla_deactivated
    # Four ratings and the comment the edit dropped.
    assert result.frozen_ignored == 5 and result.updated == 0
    assert "5 changes by frozen annotators ignored" in sync_summary(result.__dict__)
    assert _ratings(careless) == before
    audits = AuditEvent.objects.filter(verb="study.sync.frozen")
    assert audits.count() == 1
    event = audits.get()
    assert event.project_id == study.project_id and event.payload["frozen_ignored"] == 5
    rating_ids = set(Rating.objects.filter(annotator=careless).values_list("pk", flat=True))
    assert {entry["rating"] for entry in event.payload["answers"]} == {*rating_ids, None}
    # The study page says so, and shows the freeze.
    page = page_as(rita).get(f"/annotation/studies/{study.pk}/").content.decode()
    assert "5 changes by frozen annotators ignored" in page
    assert "frozen since" in page and "Argilla access not cut yet" in page
    # Idempotent: the same ignored changes are not audited again.
    assert study_sync(study=Study.objects.get(pk=study.pk)).frozen_ignored == 5
    assert AuditEvent.objects.filter(verb="study.sync.frozen").count() == 1

    # The webhook path: a delivery about their dataset syncs the study, which ignores the change.
    ArgillaWebhook.objects.create(
        url="http://testserver" + RECEIVER, argilla_id=uuid.uuid4(), secret=SECRET, events=["response.updated"]
    )
    monkey_task = webhook_services.sync_task()
    assert monkey_task.app.conf.task_always_eager
    assert _edit(own, responses[0], 5, 1).status_code == 200
    body = _event(careless.argilla_dataset_id, "response.updated")
    delivered = client.post(RECEIVER, data=body, content_type="application/json", headers=_signed(body))
    assert delivered.status_code == 202, delivered.content
    assert _ratings(careless) == before
    assert RatingComment.objects.get(annotator=careless).text == "kept"
    assert AuditEvent.objects.filter(verb="study.sync.frozen").count() == 2

    # Publishing again finishes the cut: their key can no longer edit.
    study_publish(study=Study.objects.get(pk=study.pk), actor=rita)
    careless.refresh_from_db()
    assert careless.argilla_deactivated
    assert _edit(own, responses[0], 2, 2).status_code in (403, 404)
    assert _ratings(careless) == before
    owner.close()


def test_annotators_who_left_before_freezing_existed_are_frozen_from_their_decision(django_user_model):
    import importlib

    from django.apps import apps
    from django.utils import timezone

    from annotation.models import RaterDecision
    from tests.support import published_keyword_study

    migration = importlib.import_module("annotation.migrations.0009_frozen_and_isolated_annotators")
    rita = make_user(django_user_model, "rita-old", Role.RESEARCHER)
    study = published_keyword_study(researcher=rita, name="freeze-old", limit=12, items=4, batch_size=4)
    rows = {}
    for name, status, dataset in (
        ("old-1", "rejected", uuid.uuid4()),
        ("old-2", "withdrawn", None),
        ("old-3", "active", None),
    ):
        user = make_user(django_user_model, name, Role.ANNOTATOR)
        rows[name] = Annotator.objects.create(
            study=study, user=user, status=status, argilla_dataset_id=dataset, argilla_deactivated=status != "active"
        )
    decided = RaterDecision.objects.create(annotator=rows["old-1"], reason="manual", detail="random").decided_at
    before = timezone.now()
    migration.freeze_earlier_leavers(apps, None)
    for row in rows.values():
        row.refresh_from_db()
    # Their own dataset still exists (only the workspace was left): the next reconcile deletes it.
    assert (rows["old-1"].frozen_at, rows["old-1"].argilla_deactivated) == (decided, False)
    assert rows["old-2"].frozen_at >= before and rows["old-2"].argilla_deactivated  # a shared dataset's
    assert rows["old-3"].frozen_at is None


def test_in_a_study_shared_by_its_annotators_a_rejected_annotator_loses_their_responses_not_ratings(
    argilla_server, settings, django_user_model
):
    """A study published before per-annotator batches: one dataset in a shared workspace."""
    from tests.support import published_keyword_study

    settings.ARGILLA_API_URL, settings.ARGILLA_API_KEY = argilla_server.url, argilla_server.api_key
    rita = make_user(django_user_model, "rita-shared", Role.RESEARCHER)
    study = published_keyword_study(researcher=rita, name="freeze-shared", limit=12, items=4, batch_size=4)
    owner = argilla.client_get()
    argilla.workspace_ensure(study.workspace, client=owner)
    dataset = argilla.dataset_create(
        client=owner,
        workspace=study.workspace,
        name=study.argilla_name,
        fields=[argilla.TextField("original", "Original"), argilla.TextField("transformed", "Transformed")],
        rating_questions=[
            argilla.RatingQuestion("quality", "Meaning kept?", (1, 2, 3, 4, 5)),
            argilla.RatingQuestion("fluency", "Fluent?", (1, 2, 3, 4, 5)),
        ],
        comment_question="Comment",
        guidelines="Rate each pair.",
        min_submitted=2,
    )
    items = list(study.items.all())
    records = [argilla.RecordIn(i.external_id, {"original": i.text_a, "transformed": i.text_b}) for i in items]
    argilla.records_log(dataset, records, client=owner)
    Study.objects.filter(pk=study.pk).update(argilla_dataset_id=dataset)
    clients = {}
    for name in ("sh-1", "sh-2"):
        user = make_user(django_user_model, name, Role.ANNOTATOR)
        user_id = argilla.user_ensure(name, uuid.uuid4().hex, "annotator", study.workspace, client=owner)
        Annotator.objects.create(study=study, user=user, argilla_user_id=user_id)
        clients[name] = argilla_annotator_client(owner, user_id)
    record = owner.get(f"/api/v1/datasets/{dataset}/records").raise_for_status().json()["items"][0]
    mine, theirs = _answer(clients["sh-1"], record["id"], 4, 4), _answer(clients["sh-2"], record["id"], 5, 5)
    study_sync(study=Study.objects.get(pk=study.pk))
    careless = Annotator.objects.get(study=study, user__username="sh-1")
    before = _ratings(careless)

    annotator_reject(annotator=careless, detail="answers at random", actor=rita)
    assert _edit(clients["sh-1"], mine, 1, 1).status_code in (403, 404)
    assert clients["sh-1"].post(f"/api/v1/me/datasets/{dataset}/records/search", json={}).status_code in (403, 404)
    # The other annotator's answer stays, and still syncs.
    assert _edit(clients["sh-2"], theirs, 5, 4).status_code == 200
    result = study_sync(study=Study.objects.get(pk=study.pk))
    assert (result.updated, result.withdrawn, result.frozen_ignored) == (1, 0, 0)
    assert _ratings(careless) == before
    cut = AuditEvent.objects.get(verb="study.annotator.cut", object_id=str(careless.pk))
    assert cut.payload["shared_responses_deleted"] == 1
    owner.close()
