"""Transformation API and pages: permissions, prompt versions, a run started over the API."""

import pytest
from django.conf import settings
from django.urls import reverse
from rest_framework.test import APIClient

from corpora.services import dataset_import
from transforms.models import PromptTemplate, TransformRun

pytestmark = pytest.mark.django_db


@pytest.fixture
def sts(db):
    return dataset_import(source=settings.BASE_DIR / "fixtures/sts/demo-sts.csv", task="sts", name="demo-sts")


def client_for(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.mark.parametrize("url", ["/api/transform-runs/", "/api/prompt-templates/"])
def test_annotators_get_nothing(annotator, url):
    assert client_for(annotator).get(url).status_code == 403
    assert APIClient().get(url).status_code == 401


def test_default_prompts_are_listed_and_a_new_version_becomes_active(researcher):
    client = client_for(researcher)
    listed = client.get("/api/prompt-templates/?active=1&limit=50").json()
    assert {p["key"] for p in listed["results"]} == {
        "paraphrase",
        "translate",
        "style_change",
        "expansion",
        "summarization",
        "keywords",
        "negation",
        "antonym",
        "number_entity_swap",
        "role_swap",
    }
    created = client.post(
        "/api/prompt-templates/", {"key": "paraphrase", "system": "Be exact.", "user": "Reword: {text}"}, format="json"
    )
    assert created.status_code == 201 and created.json()["version"] == 2 and created.json()["is_active"]
    assert PromptTemplate.objects.get(key="paraphrase", is_active=True).user == "Reword: {text}"
    again = client.post(
        "/api/prompt-templates/", {"key": "paraphrase", "system": "Be exact.", "user": "Reword: {text}"}, format="json"
    )
    assert again.json()["version"] == 2  # same content: the same version, no duplicate


def test_invalid_prompt_is_rejected_with_the_reason(researcher):
    response = client_for(researcher).post(
        "/api/prompt-templates/", {"key": "paraphrase", "system": "x", "user": "no placeholder"}, format="json"
    )
    assert response.status_code == 400 and "must contain {text}" in response.json()["detail"]


@pytest.mark.django_db(transaction=True)
def test_run_started_over_the_api_and_shown_on_the_pages(researcher, sts, client):
    api = client_for(researcher)
    response = api.post(
        "/api/transform-runs/",
        {"dataset": "demo-sts", "transformation": "random_keywords", "seed": 3, "limit": 5},
        format="json",
    )
    assert response.status_code == 202, response.content
    body = response.json()
    assert body["status"] == "succeeded" and body["done"] == body["total"] == 10 and body["llm_calls"] == 0
    outputs = api.get(f"/api/transform-runs/{body['id']}/outputs/").json()
    assert outputs["count"] == 10 and outputs["results"][0]["side"] in {"sentence1", "sentence2"}
    summary = api.get(f"/api/transform-runs/{body['id']}/summary/").json()
    assert summary["n"] == 10
    client.force_login(researcher)
    listing = client.get(reverse("transforms:runs"))
    assert listing.status_code == 200 and b"Random keywords" in listing.content
    detail = client.get(reverse("transforms:run", args=[body["id"]]))
    assert detail.status_code == 200 and b"sts-001" in detail.content


def test_bad_run_requests_are_explained(researcher, sts):
    api = client_for(researcher)
    unknown = api.post("/api/transform-runs/", {"dataset": "nope", "transformation": "paraphrase"}, format="json")
    assert unknown.status_code == 404
    bad = api.post(
        "/api/transform-runs/",
        {"dataset": "demo-sts", "transformation": "translation", "languages": ["en"]},
        format="json",
    )
    assert bad.status_code == 400 and "no target language left" in bad.json()["detail"]
    assert not TransformRun.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_transform_command_runs_waits_and_exports(sts, tmp_path):
    import io

    from django.core.management import CommandError, call_command

    out = io.StringIO()
    call_command(
        "transform",
        "--dataset",
        "demo-sts",
        "--transformation",
        "random_keywords",
        "--limit",
        "4",
        "--wait",
        stdout=out,
    )
    text = out.getvalue()
    assert "8 texts" in text and "succeeded: 8/8 texts" in text and "LLM calls 0" in text
    run = TransformRun.objects.get()
    exported = io.StringIO()
    call_command("transform", "--run", str(run.pk), "--export", str(tmp_path / "kw.csv"), stdout=exported)
    assert "Exported" in exported.getvalue() and (tmp_path / "kw.csv").exists()
    with pytest.raises(CommandError, match="No dataset named 'missing'"):
        call_command("transform", "--dataset", "missing", "--transformation", "paraphrase")


@pytest.mark.django_db(transaction=True)
def test_a_run_with_missing_outcomes_can_be_resumed(researcher, sts):
    from transforms.models import TransformedItem
    from transforms.services import transform_run_create

    api = client_for(researcher)
    run = transform_run_create(dataset=sts, transformation="random_keywords", seed=9, limit=6, dispatch=False)
    assert run.status == "pending" and run.done == 0  # as if its worker and its final task were lost
    body = api.post(f"/api/transform-runs/{run.pk}/resume/").json()
    assert body["status"] == "succeeded" and body["done"] == 12
    TransformedItem.objects.filter(run=run, item__item_id="sts-002").delete()
    again = api.post(f"/api/transform-runs/{run.pk}/resume/").json()
    assert again["status"] == "succeeded" and again["done"] == 12
    assert TransformedItem.objects.filter(run=run).count() == 12


@pytest.mark.django_db(transaction=True)
def test_runs_page_queries_do_not_grow_with_the_number_of_runs(researcher, sts, client):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from transforms.selectors import transform_run_summaries, transform_run_summary
    from transforms.services import transform_run_create

    client.force_login(researcher)

    def page_queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get(reverse("transforms:runs")).status_code == 200
        return len(captured)

    transform_run_create(dataset=sts, transformation="random_keywords", seed=1, limit=3)
    one = page_queries()
    for seed in (2, 3, 4):
        transform_run_create(dataset=sts, transformation="random_keywords", seed=seed, limit=3)
    assert page_queries() == one
    runs = list(TransformRun.objects.all())
    batch = transform_run_summaries(runs=runs)
    assert all(batch[run.pk] == transform_run_summary(run=run) for run in runs)
