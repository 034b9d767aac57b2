"""Annotators are isolated by Argilla itself: each one's own API key lists exactly their own
records (nothing of another study, nothing of another annotator's batch); every batch holds its
controls; rejecting, replacing and adding annotators re-assigns work with an audit trail.

A second project with a hostile researcher (issue 27): every path around the validation that he
could take towards another project's study, annotators and records (pages, API, commands,
services, his annotators' own Argilla keys) reads and writes nothing of it.

Real local Argilla server; the study's texts come from a random-keywords run (no LLM needed).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import replace

import httpx
import pytest
from django.conf import settings as django_settings
from django.core.management import CommandError, call_command
from django.urls import reverse

from annotation.argilla import client as argilla
from annotation.baselines.baseline_services import BaselineCreateRequest, baseline_create, baseline_publish
from annotation.kinds import ItemKind
from annotation.models import Annotator, Assignment, Rating, Study
from annotation.science.design import StudyDesign
from annotation.studies.argilla_services import study_publish
from annotation.studies.design_services import StudyCreateRequest, study_create, study_lock
from annotation.studies.sync_services import study_sync
from annotation.studies.validation_services import annotator_reject, annotator_replace
from core.errors import ShiftlabError
from core.models import AuditEvent, ProjectAnnotator
from core.projects import project_create
from core.roles import Role
from core.rosters import roster_add
from corpora.models import DatasetItem
from corpora.services import dataset_import
from tests.support import (
    api_as,
    argilla_annotator_client,
    eager_keyword_run,
    make_user,
    page_as,
    reworded_demo_sts,
    rostered,
)
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
    detectability_override="isolation test: too few controls to measure detectability",
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
        study_create(
            actor=rita, request=rostered(StudyCreateRequest(name=name, project=team.slug, runs=[run], design=DESIGN))
        )
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
    study = study_create(
        actor=rita, request=rostered(StudyCreateRequest(name="iso-release", runs=[run], design=design))
    )
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


# --- a second project and a hostile researcher (issue 27) ----------------------------------------


def _keyword_study(*, project, owner, source, name: str) -> Study:
    dataset = dataset_import(source=source, task="sts", name="shared-name", project=project)
    run = eager_keyword_run(dataset, limit=12)
    design = replace(DESIGN, detectability_override="isolation test: too few controls to measure detectability")
    return study_lock(
        study=study_create(
            actor=owner,
            request=rostered(StudyCreateRequest(name=name, project=project.slug, runs=[run], design=design)),
        )
    )


def _alpha_state(alpha) -> dict:
    """Everything of alpha a hostile researcher could change, as comparable values."""
    studies = Study.objects.filter(project=alpha)
    return {
        "studies": sorted(studies.values_list("pk", "name", "version", "status", "published_at")),
        "annotators": sorted(
            Annotator.objects.filter(study__project=alpha).values_list("pk", "user_id", "status", "frozen_at")
        ),
        "assignments": sorted(
            Assignment.objects.filter(annotator__study__project=alpha).values_list("pk", "active", "annotator_id")
        ),
        "ratings": sorted(Rating.objects.filter(study_item__study__project=alpha).values_list("pk", "value", "active")),
        "roster": sorted(ProjectAnnotator.objects.filter(project=alpha).values_list("user_id", flat=True)),
        "audit": AuditEvent.objects.filter(project=alpha).count(),
    }


def test_a_hostile_researcher_of_another_project_reads_and_writes_nothing_of_it(
    argilla_server, settings, django_user_model, tmp_path
):
    """Alpha's study is published to alpha's annotator, who rates it. Hugo, researcher of beta,
    tries every path around the validation: reading alpha's study (API, pages, commands),
    publishing his study to alpha's annotator or replacing his own annotator by her (API, page,
    command, service), putting her on his roster, a baseline for her, a study and dataset named
    like alpha's, and, with his annotator's own Argilla key, alpha's records. Nothing of alpha is
    read (404 or a refusal that names nothing of alpha) or written (alpha's rows, its audit log and
    its Argilla datasets are as they were), and no control of beta's study comes from alpha."""
    settings.ARGILLA_API_URL, settings.ARGILLA_API_KEY = argilla_server.url, argilla_server.api_key
    ria = make_user(django_user_model, "hx-ria", Role.RESEARCHER)
    hugo = make_user(django_user_model, "hx-hugo", Role.RESEARCHER)
    alpha = project_create(slug="hx-alpha", owner=ria, actor=None)
    beta = project_create(slug="hx-beta", owner=hugo, actor=None)
    al = {n: make_user(django_user_model, n, Role.ANNOTATOR, roster=alpha) for n in ("hx-al1", "hx-al2")}
    be = {n: make_user(django_user_model, n, Role.ANNOTATOR, roster=beta) for n in ("hx-be1", "hx-be2")}
    demo = django_settings.BASE_DIR / "fixtures/sts/demo-sts.csv"
    secret = _keyword_study(project=alpha, owner=ria, source=demo, name="hx-secret")
    study_publish(study=secret, annotators=list(al.values()), actor=ria)
    owner = argilla.client_get()
    alpha_clients = {
        a.user.username: argilla_annotator_client(owner, a.argilla_user_id) for a in secret.annotators.all()
    }
    al1 = secret.annotators.get(user=al["hx-al1"])
    items = {i.external_id: i for i in secret.items.all()}
    for record in _my_records(alpha_clients["hx-al1"], al1.argilla_dataset_id)[:3]:
        _submit(alpha_clients["hx-al1"], record, items[record["external_id"]])
    study_sync(study=secret)
    alpha_datasets = {name: _my_datasets(c) for name, c in alpha_clients.items()}
    alpha_records = {
        name: sorted((r["id"], r["external_id"]) for r in _my_records(c, a.argilla_dataset_id))
        for name, c in alpha_clients.items()
        for a in [secret.annotators.get(user__username=name)]
    }
    before = _alpha_state(alpha)
    alpha_texts = {
        t
        for p in DatasetItem.objects.filter(dataset__project=alpha).values_list("payload", flat=True)
        for t in (p.get("sentence1"), p.get("sentence2"))
        if t
    }
    assert alpha_texts

    # Beta's own study, with its own dataset (same name as alpha's: names are per project).
    mine = _keyword_study(
        project=beta, owner=hugo, source=reworded_demo_sts(tmp_path / "beta.csv", "Belmont"), name="hx-secret"
    )
    beta_texts = {t for i in mine.items.all() for t in (i.text_a, i.text_b)}
    assert not beta_texts & alpha_texts, "a control or item of beta came from alpha's dataset"
    study_publish(study=mine, annotators=list(be.values()), actor=hugo)

    api, page = api_as(hugo), page_as(hugo)
    alma = al["hx-al1"]
    a1 = secret.annotators.get(user=alma)
    # Reads of alpha: every answer is 404 and names nothing of alpha.
    for url in (
        f"/api/studies/{secret.pk}/",
        f"/api/studies/{secret.pk}/items/",
        f"/api/studies/{secret.pk}/annotators/",
        f"/api/studies/{secret.pk}/progress/",
        f"/api/study-annotators/{a1.pk}/",
        f"/api/projects/{alpha.slug}/",
    ):
        answer = api.get(url)
        assert answer.status_code == 404, (url, answer.status_code)
    assert page.get(reverse("annotation:study", args=[secret.pk])).status_code == 404
    listing = (
        api.get("/api/studies/").content.decode()
        + page.get(reverse("annotation:study", args=[mine.pk])).content.decode()
    )
    assert (
        "hx-al1" not in listing
        and "hx-al2" not in listing
        and str(secret.pk) not in str([s["id"] for s in api.get("/api/studies/").json()["results"]])
    )
    with pytest.raises(CommandError):
        call_command("study", "status", str(secret.pk), "--as", "hx-hugo")
    # Writes on alpha: 404 before anything happens.
    for url, body in (
        (f"/api/studies/{secret.pk}/sync/", {}),
        (f"/api/studies/{secret.pk}/publish/", {"annotators": ["hx-be1"]}),
        (f"/api/study-annotators/{a1.pk}/reject/", {"reason": "x"}),
        (f"/api/study-annotators/{a1.pk}/replace/", {"username": "hx-be1", "reason": "x"}),
    ):
        assert api.post(url, body, format="json").status_code == 404, url
    assert page.post(reverse("annotation:study", args=[secret.pk]), {"action": "publish"}).status_code == 404

    # Pulling alpha's annotator into beta: publish, replace, roster, baseline, password.
    refused = api.post(f"/api/studies/{mine.pk}/publish/", {"annotators": ["hx-al1"]}, format="json")
    assert refused.status_code == 400 and "roster" in refused.json()["detail"]
    b1 = mine.annotators.get(user=be["hx-be1"])
    refused = api.post(f"/api/study-annotators/{b1.pk}/replace/", {"username": "hx-al1", "reason": "x"})
    assert refused.status_code == 400 and "roster" in refused.json()["detail"]
    with pytest.raises(CommandError, match="roster"):
        call_command("study", "publish", str(mine.pk), "--annotators", "hx-al2", "--as", "hx-hugo")
    with pytest.raises(ShiftlabError):
        roster_add(project=beta, user=alma, actor=hugo)
    dataset = mine.runs.first().dataset
    baseline = baseline_create(
        request=BaselineCreateRequest(
            name="hx-secret",
            dataset=dataset,
            task_type="sts",
            n_instances=4,
            split=next(iter(dataset.splits)),
            project=beta.slug,
        )
    )
    with pytest.raises(ShiftlabError, match="roster"):
        baseline_publish(study=baseline, annotators=[alma], actor=hugo)
    page.post(
        reverse("annotation:study", args=[mine.pk]), {"action": "password", "annotator": a1.pk, "password": "x" * 12}
    )
    assert api.post("/api/me/argilla-password/", {"password": "x" * 12}, format="json").status_code == 403

    # Beta's annotators, with their own Argilla keys, reach nothing of alpha.
    beta_clients = {a.user.username: argilla_annotator_client(owner, a.argilla_user_id) for a in mine.annotators.all()}
    for name, client in beta_clients.items():
        assert not _my_datasets(client) & set().union(*alpha_datasets.values()), name
        for record_id, _ in alpha_records["hx-al1"][:2]:
            assert client.get(f"/api/v1/records/{record_id}").status_code in (403, 404)
            body = {"status": "submitted", "values": {"quality": {"value": 1}, "fluency": {"value": 1}}}
            assert client.post(f"/api/v1/records/{record_id}/responses", json=body).status_code in (403, 404)
        search = client.post(f"/api/v1/me/datasets/{al1.argilla_dataset_id}/records/search", json={})
        assert search.status_code in (403, 404)

    # Nothing of alpha changed: its rows, its audit log, its annotators' Argilla datasets and records.
    study_sync(study=secret)
    assert _alpha_state(alpha) == before
    assert not AuditEvent.objects.filter(project=alpha, actor=hugo).exists()
    assert {name: _my_datasets(c) for name, c in alpha_clients.items()} == alpha_datasets
    assert {
        name: sorted((r["id"], r["external_id"]) for r in _my_records(c, a.argilla_dataset_id))
        for name, c in alpha_clients.items()
        for a in [secret.annotators.get(user__username=name)]
    } == alpha_records
    owner.close()
