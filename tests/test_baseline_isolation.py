"""Baseline studies are isolated per annotator, as validation studies are (issue 27, finding 6):
each annotator's own Argilla key lists exactly their own dataset of the baselines they were given,
holding only the instances assigned to them, and cannot read or answer another annotator's or
another baseline's records. A baseline published before (one dataset in the project's shared
workspace) moves to per-annotator datasets when published again, keeping every answer.

Real local Argilla server; texts from the demo STS fixture.
"""

from __future__ import annotations

import secrets
from collections import Counter

import httpx
import pytest
from django.conf import settings as django_settings
from django.utils import timezone

from annotation.argilla import client as argilla
from annotation.baselines.baseline_services import BaselineCreateRequest, baseline_create, baseline_publish
from annotation.baselines.baseline_sync_services import baseline_sync
from annotation.baselines.baseline_tasks import baseline_task
from annotation.models import BaselineAnswer, BaselineStudy
from core.models import AuditEvent
from core.projects import project_create
from core.roles import Role
from corpora.services import dataset_import
from tests.support import argilla_annotator_client, make_user

pytestmark = [pytest.mark.django_db, pytest.mark.services, pytest.mark.heavy]


def _own(owner: httpx.Client, username: str) -> httpx.Client:
    return argilla_annotator_client(owner, argilla.user_get_id(username, client=owner))


def _datasets(client: httpx.Client) -> dict[str, str]:
    """The datasets the client's user can list: id -> name."""
    return {d["id"]: d["name"] for d in client.get("/api/v1/me/datasets").raise_for_status().json()["items"]}


def _records(client: httpx.Client, dataset_id) -> dict[str, str]:
    """The records the client can search in the dataset: external id -> record id."""
    found = client.post(f"/api/v1/me/datasets/{dataset_id}/records/search", params={"limit": 1000}, json={})
    return {i["record"]["external_id"]: i["record"]["id"] for i in found.raise_for_status().json()["items"]}


def _answer(client: httpx.Client, record_id: str, value: int) -> httpx.Response:
    body = {"status": "submitted", "values": {"similarity": {"value": value}}}
    return client.post(f"/api/v1/records/{record_id}/responses", json=body)


def _sts(slug: str, django_user_model):
    rita = make_user(django_user_model, f"rita-{slug}", Role.RESEARCHER)
    team = project_create(slug=slug, owner=rita, actor=None)
    demo = django_settings.BASE_DIR / "fixtures/sts/demo-sts.csv"
    return rita, team, dataset_import(source=demo, task="sts", name=f"demo-sts-{slug}", project=team)


def test_each_annotator_reads_and_answers_only_their_own_baseline_records(argilla_server, settings, django_user_model):
    settings.ARGILLA_API_URL, settings.ARGILLA_API_KEY = argilla_server.url, argilla_server.api_key
    rita, team, sts = _sts("hb-iso", django_user_model)
    users = {n: make_user(django_user_model, n, Role.ANNOTATOR, roster=team) for n in ("bi-1", "bi-2", "bi-3")}
    split = next(iter(sts.splits))
    options = {"raters_per_instance": 1}
    x = baseline_create(
        request=BaselineCreateRequest(
            name="hbi-x", dataset=sts, task_type="sts", n_instances=6, split=split, options=options
        )
    )
    y = baseline_create(
        request=BaselineCreateRequest(
            name="hbi-y", dataset=sts, task_type="sts", n_instances=4, split=split, options=options
        )
    )
    baseline_publish(study=x, annotators=[users["bi-1"], users["bi-2"]], actor=rita)
    baseline_publish(study=y, annotators=[users["bi-3"]], actor=rita)
    owner = argilla.client_get()
    clients = {name: _own(owner, name) for name in users}

    # Each annotator lists one dataset: their own, of the baseline they were given.
    seen = {name: _datasets(client) for name, client in clients.items()}
    # Dataset names an annotator reads in Argilla (issue 42): the study and whose items they are.
    assert sorted(seen["bi-3"].values()) == ["baseline hbi-y: items for bi-3"], seen["bi-3"]
    assert sorted(seen["bi-1"].values()) == ["baseline hbi-x: items for bi-1"], seen["bi-1"]
    assert sorted(seen["bi-2"].values()) == ["baseline hbi-x: items for bi-2"], seen["bi-2"]
    assert len({*seen["bi-1"], *seen["bi-2"], *seen["bi-3"]}) == 3

    # ... holding exactly the instances assigned to them: each of x's instances with one of them.
    from annotation.models import BaselineAnnotator

    rows = {r.user.username: r for r in BaselineAnnotator.objects.select_related("user", "study")}
    holders = Counter()
    for name, client in clients.items():
        (dataset_id,) = seen[name]
        assert str(rows[name].argilla_dataset_id) == dataset_id
        keys = set(_records(client, dataset_id))
        assert keys == set(rows[name].keys) and keys
        holders.update((rows[name].study.name, key) for key in keys)
    assert set(holders) == {(s.name, i.key) for s in (x, y) for i in s.instances.all()}
    assert set(holders.values()) == {1}
    assert abs(len(rows["bi-1"].keys) - len(rows["bi-2"].keys)) <= 1

    # Nobody reads or answers another annotator's records, of this baseline or the other one.
    for name, client in clients.items():
        for other, row in rows.items():
            if other == name:
                continue
            dataset = row.argilla_dataset_id
            searched = client.post(f"/api/v1/me/datasets/{dataset}/records/search", json={})
            assert searched.status_code in (403, 404), (name, other, searched.status_code)
            assert client.get(f"/api/v1/datasets/{dataset}/records").status_code in (403, 404)
            record_ids = _records(owner, dataset)
            answered = _answer(client, next(iter(record_ids.values())), 3)
            assert answered.status_code in (403, 404), (name, other, answered.status_code)

    # Their own answers sync as before.
    for name, client in clients.items():
        for record_id in _records(client, rows[name].argilla_dataset_id).values():
            _answer(client, record_id, 4).raise_for_status()
    assert baseline_sync(study=x).created == 6 and baseline_sync(study=y).created == 4
    assert baseline_sync(study=x).changed == 0
    counts = Counter(BaselineAnswer.objects.filter(instance__study=x).values_list("rater", flat=True))
    assert counts == {"bi-1": len(rows["bi-1"].keys), "bi-2": len(rows["bi-2"].keys)}
    owner.close()


def test_a_baseline_published_in_the_shared_workspace_moves_when_published_again(
    argilla_server, settings, django_user_model
):
    settings.ARGILLA_API_URL, settings.ARGILLA_API_KEY = argilla_server.url, argilla_server.api_key
    rita, team, sts = _sts("hb-move", django_user_model)
    users = [make_user(django_user_model, n, Role.ANNOTATOR, roster=team) for n in ("bm-1", "bm-2")]
    study = baseline_create(
        request=BaselineCreateRequest(
            name="hbm-old", dataset=sts, task_type="sts", n_instances=4, split=next(iter(sts.splits)), project=team.slug
        )
    )
    # Published as before: one dataset in the project's workspace, shared by its annotators.
    owner = argilla.client_get()
    argilla.workspace_ensure(team.slug, client=owner)
    for user in users:
        argilla.user_ensure(user.username, secrets.token_urlsafe(12), "annotator", team.slug, client=owner)
    legacy = argilla.dataset_create(
        client=owner,
        workspace=team.slug,
        name=study.argilla_name,
        fields=baseline_task(study.task_type).fields,
        questions=baseline_task(study.task_type).questions(study.options),
        guidelines=study.instructions,
        min_submitted=2,
    )
    records = baseline_task(study.task_type).records(list(study.instances.order_by("position")))
    argilla.records_log(legacy, records, client=owner)
    BaselineStudy.objects.filter(pk=study.pk).update(
        argilla_dataset_id=legacy, status="published", published_at=timezone.now()
    )
    study.annotators.add(*users)
    first = _own(owner, "bm-1")
    answered = sorted(_records(first, legacy).items())[:2]
    for _, record_id in answered:
        _answer(first, record_id, 2).raise_for_status()
    assert baseline_sync(study=study).created == 2

    baseline_publish(study=study, annotators=users, actor=rita)
    study.refresh_from_db()
    assert study.argilla_dataset_id is None
    assert owner.get(f"/api/v1/datasets/{legacy}").status_code == 404
    moved = AuditEvent.objects.get(verb="baseline.move")
    assert moved.payload["dataset_deleted"] == str(legacy) and moved.payload["answers_kept"] == 2
    from annotation.models import BaselineAnnotator

    rows = {r.user.username: r for r in BaselineAnnotator.objects.filter(study=study).select_related("user")}
    # bm-1's two answers stay; they are not asked again. Every other instance waits for both.
    done = {key for key, _ in answered}
    assert set(rows["bm-1"].keys) == {i.key for i in study.instances.all()} - done
    assert set(rows["bm-2"].keys) == {i.key for i in study.instances.all()}
    for name in ("bm-1", "bm-2"):
        assert set(_records(_own(owner, name), rows[name].argilla_dataset_id)) == set(rows[name].keys)
    result = baseline_sync(study=study)
    assert (result.created, result.updated, result.withdrawn) == (0, 0, 0)
    assert BaselineAnswer.objects.filter(instance__study=study, active=True).count() == 2
    owner.close()
