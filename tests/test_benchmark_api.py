"""Benchmark runs through the API and the pages: permissions, launch, progress, results table."""

from __future__ import annotations

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from corpora.services import dataset_import
from evaluation.models import BenchmarkRun

pytestmark = pytest.mark.django_db
MODEL = "all-MiniLM-L6-v2"


@pytest.fixture
def sts(db, tmp_path, settings):
    settings.EMBEDDING_CACHE_DIR = tmp_path / "embeddings"
    settings.DATA_DIR = tmp_path
    return dataset_import(source=settings.BASE_DIR / "fixtures/sts/demo-sts.csv", task="sts", name="bench-sts")


@pytest.mark.parametrize(
    ("who", "expected"), [("anonymous", (401, 403)), ("annotator", (403,)), ("researcher", (200,))]
)
def test_only_researchers_list_runs(who, expected, request):
    client = APIClient()
    if who != "anonymous":
        client.force_authenticate(request.getfixturevalue(who))
    assert client.get("/api/benchmark-runs/").status_code in expected
    created = client.post("/api/benchmark-runs/", {"models": [MODEL], "datasets": ["nope"]}, format="json")
    # A researcher gets past the permission check to the lookup (no dataset "nope": 404).
    assert created.status_code in ((404,) if who == "researcher" else expected)


@pytest.mark.heavy  # a real embedding model
def test_researcher_runs_an_original_benchmark_and_reads_results(
    researcher_client, sts, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        response = researcher_client.post(
            "/api/benchmark-runs/", {"models": [MODEL], "datasets": ["bench-sts"], "limit": 10}, format="json"
        )
    assert response.status_code == 201, response.content
    run_id = response.json()["id"]
    run = researcher_client.get(f"/api/benchmark-runs/{run_id}/").json()
    assert run["status"] == "succeeded" and run["done"] == run["total"] == 1 and run["models"] == [MODEL]
    results = researcher_client.get(f"/api/benchmark-runs/{run_id}/results/").json()["results"]
    assert [(r["dataset"], r["transformation"], r["n_items"]) for r in results] == [("bench-sts", "original", 10)]
    report = researcher_client.get(f"/api/benchmark-runs/{run_id}/report/").json()
    assert report["aggregates"][MODEL]["original"] == pytest.approx(results[0]["main_score"])


def test_bad_requests_say_what_is_wrong(researcher_client, sts):
    no_source = researcher_client.post("/api/benchmark-runs/", {"models": [MODEL]}, format="json")
    assert no_source.status_code == 400 and "config" in str(no_source.json())
    tampered = researcher_client.post(
        "/api/benchmark-runs/", {"models": [MODEL], "config_text": "schema: x\n"}, format="json"
    )
    assert tampered.status_code == 400 and "does not verify" in tampered.json()["detail"]
    assert not BenchmarkRun.objects.exists()


@pytest.mark.heavy  # a real embedding model
def test_pages_launch_watch_and_show_results(client, researcher, annotator, sts, django_capture_on_commit_callbacks):
    client.force_login(annotator)
    assert client.get(reverse("evaluation:benchmarks")).status_code == 403
    client.force_login(researcher)
    page = client.get(reverse("evaluation:benchmarks"))
    assert page.status_code == 200 and b"benchmark-form" in page.content
    with django_capture_on_commit_callbacks(execute=True):
        launched = client.post(
            reverse("evaluation:benchmarks"), {"models": MODEL, "datasets": ["bench-sts"], "limit": "10"}
        )
    run = BenchmarkRun.objects.get()
    assert launched.status_code == 302 and launched.url == reverse("evaluation:benchmark", args=[run.pk])
    detail = client.get(launched.url)
    assert detail.status_code == 200 and b"results-table" in detail.content and MODEL.encode() in detail.content
    assert f'href="{reverse("evaluation:benchmarks")}">Benchmarks</a>'.encode() in detail.content
