"""Annotators are isolated by Argilla itself: each one's own API key lists exactly their own
records (nothing of another study, nothing of another annotator's batch); every batch holds its
controls; rejecting, replacing and adding annotators re-assigns work with an audit trail.

Real local Argilla server; the study's texts come from a random-keywords run (no LLM needed).
"""

from __future__ import annotations

from collections import Counter, defaultdict

import httpx
import pytest
from django.conf import settings as django_settings

from annotation.argilla import client as argilla
from annotation.argilla_services import study_publish
from annotation.controls import ItemKind
from annotation.design import StudyDesign
from annotation.design_services import study_create
from annotation.models import Annotator, Assignment, Rating, Study
from annotation.sync_services import study_sync
from annotation.validation_services import annotator_reject, annotator_replace
from core.models import AuditEvent
from core.projects import project_create
from core.roles import Role
from corpora.services import dataset_import
from tests.support import argilla_annotator_client, make_user
from transforms.services import transform_run_create
from transforms.tasks import start_run

pytestmark = [pytest.mark.django_db, pytest.mark.services, pytest.mark.heavy]

DESIGN = StudyDesign(
    items_per_transformation=8,
    raters_per_item=2,
    batch_size=3,
    controls_per_batch=2,
    min_control_ratings=2,
    llm_judges=(),
    seed=4,
)


def _my_records(client: httpx.Client, dataset_id) -> list[dict]:
    """Every record of the dataset the client's annotator can list (any status)."""
    found = client.post(
        f"/api/v1/me/datasets/{dataset_id}/records/search", params=[("include", "responses"), ("limit", 1000)], json={}
    )
    found.raise_for_status()
    return [item["record"] for item in found.json()["items"]]


def _my_datasets(client: httpx.Client) -> set[str]:
    return {d["id"] for d in client.get("/api/v1/me/datasets").raise_for_status().json()["items"]}


def _assigned(annotator: Annotator) -> set[str]:
    rows = Assignment.objects.filter(annotator=annotator, active=True).select_related("study_item")
    return {a.study_item.external_id for a in rows}


def _submit(client: httpx.Client, record: dict, item) -> None:
    values = {"quality": 5, "fluency": 5} if item.kind != ItemKind.EASY_NEGATIVE else {"quality": 1, "fluency": 4}
    body = {"status": "submitted", "values": {q: {"value": v} for q, v in values.items()}}
    client.post(f"/api/v1/records/{record['id']}/responses", json=body).raise_for_status()


def _holders(study: Study) -> Counter:
    return Counter(
        Assignment.objects.filter(
            annotator__study=study, active=True, study_item__kind=ItemKind.REAL, annotator__status="active"
        ).values_list("study_item_id", flat=True)
    )


def test_each_annotator_sees_only_their_own_batch_and_reassignment_keeps_it_so(
    argilla_server, settings, django_user_model
):
    settings.ARGILLA_API_URL, settings.ARGILLA_API_KEY = argilla_server.url, argilla_server.api_key
    rita = make_user(django_user_model, "rita", Role.RESEARCHER)
    # Its slug is also the Argilla workspace: apart from other tests'.
    team = project_create(slug="team-a", owner=rita, actor=None)
    names = ("iso-1", "iso-2", "iso-3", "iso-4", "iso-5")
    users = {n: make_user(django_user_model, n, Role.ANNOTATOR, roster=team) for n in names}
    demo = django_settings.BASE_DIR / "fixtures/sts/demo-sts.csv"
    sts = dataset_import(source=demo, task="sts", name="demo-sts", project=team)
    # Gold pairs enough for two studies: no annotator meets a control twice (issue 27).
    pairs = django_settings.BASE_DIR / "fixtures/pair_classification/demo-paraphrase-pairs.jsonl"
    dataset_import(source=pairs, task="pair_classification", name="demo-paraphrase-pairs", project=team)
    run = transform_run_create(dataset=sts, transformation="random_keywords", seed=1, limit=20, dispatch=False)
    start_run.delay(run.pk)  # eager: the run finishes here
    run.refresh_from_db()
    first, second = (
        study_create(name=name, project=team, runs=[run], design=DESIGN, created_by=rita)
        for name in ("iso-one", "iso-two")
    )
    three = [users["iso-1"], users["iso-2"], users["iso-3"]]
    published = {s.name: study_publish(study=s, annotators=three, actor=rita) for s in (first, second)}
    assert set(published["iso-one"].new_accounts) == {"iso-1", "iso-2", "iso-3"}
    assert published["iso-two"].new_accounts == ()
    first, second = Study.objects.get(pk=first.pk), Study.objects.get(pk=second.pk)
    owner = argilla.client_get()
    clients = {}

    # Each annotator's own key: exactly their two datasets (one per study) and their own records.
    for name in ("iso-1", "iso-2", "iso-3"):
        mine = {s.name: Annotator.objects.get(study=s, user=users[name]) for s in (first, second)}
        clients[name] = argilla_annotator_client(owner, mine["iso-one"].argilla_user_id)
        assert _my_datasets(clients[name]) == {str(a.argilla_dataset_id) for a in mine.values()}
        for annotator in mine.values():
            listed = {r["external_id"] for r in _my_records(clients[name], annotator.argilla_dataset_id)}
            assert listed == _assigned(annotator) and listed
    # Nobody can open another annotator's dataset, of this study or the other.
    for name, client in clients.items():
        for other in Annotator.objects.exclude(user=users[name]).filter(study__in=[first, second]):
            response = client.post(f"/api/v1/me/datasets/{other.argilla_dataset_id}/records/search", json={})
            assert response.status_code in (403, 404), (name, other, response.status_code)
            assert client.get(f"/api/v1/datasets/{other.argilla_dataset_id}").status_code in (403, 404)

    # Exactly raters_per_item raters per real item, loads within one, controls in every batch.
    for study in (first, second):
        n_real = study.items.filter(kind=ItemKind.REAL).count()
        assert set(_holders(study).values()) == {2} and len(_holders(study)) == n_real
        loads = []
        for annotator in study.annotators.all():
            batches = defaultdict(lambda: {"real": 0, "controls": 0})
            for a in Assignment.objects.filter(annotator=annotator, active=True).select_related("study_item"):
                batches[a.batch]["controls" if a.study_item.kind != ItemKind.REAL else "real"] += 1
            assert batches and all(b["controls"] >= DESIGN.controls_per_batch for b in batches.values()), batches
            loads.append(sum(b["real"] for b in batches.values()))
        assert max(loads) - min(loads) <= 1

    # iso-1 submits their first-study batch but fails it; rejected in that study only.
    one = {a.user.username: a for a in first.annotators.select_related("user")}
    items = {i.external_id: i for i in first.items.all()}
    for record in _my_records(clients["iso-1"], one["iso-1"].argilla_dataset_id)[:3]:
        _submit(clients["iso-1"], record, items[record["external_id"]])
    study_sync(study=first)
    before = {n: _assigned(a) for n, a in one.items()}
    annotator_reject(annotator=one["iso-1"], detail="answers at random", actor=rita)
    one["iso-1"].refresh_from_db()
    assert one["iso-1"].status == "rejected" and one["iso-1"].argilla_deactivated
    iso1_second = Annotator.objects.get(study=second, user=users["iso-1"])
    assert _my_datasets(clients["iso-1"]) == {str(iso1_second.argilla_dataset_id)}
    denied = clients["iso-1"].post(f"/api/v1/me/datasets/{one['iso-1'].argilla_dataset_id}/records/search", json={})
    assert denied.status_code in (403, 404)
    # Every real item of theirs (submitted or not: their ratings no longer count) went to the
    # one annotator who did not hold it, and appears in that annotator's own Argilla queue.
    lost = {items[x].pk for x in before["iso-1"] if items[x].kind == ItemKind.REAL}
    assert set(_holders(first).values()) == {2}
    for name in ("iso-2", "iso-3"):
        gained = _assigned(one[name]) - before[name]
        assert {items[x].pk for x in gained if items[x].kind == ItemKind.REAL} <= lost
        listed = {r["external_id"] for r in _my_records(clients[name], one[name].argilla_dataset_id)}
        assert listed == _assigned(one[name])
    release = AuditEvent.objects.get(verb="study.assignment.release")
    assert sum(release.payload["given"].values()) == len(lost) and release.payload["unplaced"] == 0

    # iso-2 leaves the second study after submitting two records; iso-4 takes their open items.
    two = {a.user.username: a for a in second.annotators.select_related("user")}
    items2 = {i.external_id: i for i in second.items.all()}
    done = _my_records(clients["iso-2"], two["iso-2"].argilla_dataset_id)[:2]
    for record in done:
        _submit(clients["iso-2"], record, items2[record["external_id"]])
    study_sync(study=second)
    open_before = _assigned(two["iso-2"]) - {r["external_id"] for r in done}
    replaced = annotator_replace(
        annotator=two["iso-2"], user=users["iso-4"], reason="moved to another team", actor=rita
    )
    assert set(replaced.new_accounts) == {"iso-4"}
    iso4 = Annotator.objects.get(study=second, user=users["iso-4"])
    real_open = {x for x in open_before if items2[x].kind == ItemKind.REAL}
    assert {x for x in _assigned(iso4) if items2[x].kind == ItemKind.REAL} == real_open
    assert Counter(items2[x].kind != ItemKind.REAL for x in _assigned(iso4))[True] >= DESIGN.controls_per_batch
    clients["iso-4"] = argilla_annotator_client(owner, iso4.argilla_user_id)
    assert _my_datasets(clients["iso-4"]) == {str(iso4.argilla_dataset_id)}
    assert {r["external_id"] for r in _my_records(clients["iso-4"], iso4.argilla_dataset_id)} == _assigned(iso4)
    # iso-2 keeps the first study, loses the second; their submitted ratings still count.
    assert _my_datasets(clients["iso-2"]) == {str(one["iso-2"].argilla_dataset_id)}
    assert Rating.objects.filter(annotator=two["iso-2"], active=True).count() == 2 * len(done)

    # iso-5 joins the first study later and takes a fair share of the open work, which leaves
    # the others' Argilla queues.
    study_publish(study=first, annotators=[users["iso-5"]], actor=rita)
    iso5 = Annotator.objects.get(study=first, user=users["iso-5"])
    assert _assigned(iso5) and set(_holders(first).values()) == {2}
    clients["iso-5"] = argilla_annotator_client(owner, iso5.argilla_user_id)
    for name, client in (("iso-2", clients["iso-2"]), ("iso-3", clients["iso-3"]), ("iso-5", clients["iso-5"])):
        annotator = Annotator.objects.get(study=first, user=users[name])
        listed = {r["external_id"] for r in _my_records(client, annotator.argilla_dataset_id)}
        assert listed == _assigned(annotator), name
    moved = Assignment.objects.filter(annotator__study=first, active=False, end_reason__contains="joined later")
    assert moved.count() == len({x for x in _assigned(iso5) if items[x].kind == ItemKind.REAL})

    # The study page shows each annotator's batch and lets a researcher reject from it.
    from django.test import Client

    browser = Client()
    browser.force_login(rita)
    page = browser.get(f"/annotation/studies/{second.pk}/").content.decode()
    assert "Controls seen / assigned" in page and "withdrawn" in page and "Replace with" in page
    iso3 = Annotator.objects.get(study=second, user=users["iso-3"])
    answer = browser.post(
        f"/annotation/studies/{second.pk}/",
        {"action": "reject", "annotator": iso3.pk, "reason": "never started"},
        follow=True,
    ).content.decode()
    assert "Rejected iso-3: their items went to others" in answer
    iso3.refresh_from_db()
    assert iso3.status == "rejected" and not Assignment.objects.filter(annotator=iso3, active=True).exists()
    assert _my_datasets(clients["iso-3"]) == {
        str(Annotator.objects.get(study=first, user=users["iso-3"]).argilla_dataset_id)
    }


def test_released_batches_advance_as_each_annotator_finishes(argilla_server, settings, django_user_model):
    from annotation.tasks import sync_study

    settings.ARGILLA_API_URL, settings.ARGILLA_API_KEY = argilla_server.url, argilla_server.api_key
    rita = make_user(django_user_model, "rita-rel", Role.RESEARCHER)
    users = [make_user(django_user_model, n, Role.ANNOTATOR) for n in ("rel-1", "rel-2")]
    sts = dataset_import(source=django_settings.BASE_DIR / "fixtures/sts/demo-sts.csv", task="sts", name="demo-sts")
    run = transform_run_create(dataset=sts, transformation="random_keywords", seed=2, limit=20, dispatch=False)
    start_run.delay(run.pk)
    run.refresh_from_db()
    design = DESIGN.revised(batches_released=1)
    study = study_create(name="iso-release", runs=[run], design=design, created_by=rita)
    study_publish(study=study, annotators=users, actor=rita)
    owner = argilla.client_get()
    annotators = {a.user.username: a for a in Study.objects.get(pk=study.pk).annotators.select_related("user")}
    clients = {n: argilla_annotator_client(owner, a.argilla_user_id) for n, a in annotators.items()}

    def batches_shown(name):
        listed = {r["external_id"] for r in _my_records(clients[name], annotators[name].argilla_dataset_id)}
        rows = Assignment.objects.filter(annotator=annotators[name], active=True).select_related("study_item")
        assert listed <= {a.study_item.external_id for a in rows}
        return sorted({a.batch for a in rows if a.study_item.external_id in listed})

    assert batches_shown("rel-1") == batches_shown("rel-2") == [0]
    items = {i.external_id: i for i in study.items.all()}
    for record in _my_records(clients["rel-1"], annotators["rel-1"].argilla_dataset_id):
        _submit(clients["rel-1"], record, items[record["external_id"]])
    sync_study.delay(study.pk)  # eager here: sync, then release
    assert batches_shown("rel-1") == [0, 1] and batches_shown("rel-2") == [0]
