"""The local Argilla server (SQL search engine) through Shiftlab's adapter, its REST API and its UI.

Annotators act as the Argilla UI does: with their own credentials on the ``/api/v1/me/...`` and
``/api/v1/records/...`` endpoints, and in the browser test through the real web app. Search order
is never asserted: it differs from Elasticsearch by design.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from uuid import UUID

import httpx
import pytest
from django.conf import settings

from annotation.argilla import ArgillaError
from annotation.argilla import client as argilla
from annotation.argilla.client import API_KEY_HEADER
from core.health import probe_argilla
from tests.support import require_or_skip

pytestmark = pytest.mark.services

PASSWORD = "annotator-password-1"
QUESTIONS = (
    argilla.RatingQuestion(name="quality", title="Quality of the rewrite", values=(1, 2, 3, 4, 5)),
    argilla.RatingQuestion(name="fluency", title="Fluency of the rewrite", values=(1, 2, 3, 4, 5)),
)
HIDDEN = ("item_kind", "expected_rating")
PENDING_FOR_ME = {
    "filters": {
        "and": [
            {"type": "terms", "scope": {"entity": "response", "property": "status"}, "values": ["pending"]},
            {"type": "terms", "scope": {"entity": "record", "property": "status"}, "values": ["pending"]},
        ]
    }
}
CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOT = "argilla-annotator-ui.png"


@dataclass(frozen=True)
class Study:
    dataset_id: UUID
    workspace: str
    annotators: dict[str, UUID]  # username -> Argilla user id
    record_ids: dict[str, UUID]  # external id -> Argilla record id


@pytest.fixture(scope="module")
def owner(argilla_server):
    """The adapter's connection, authenticated as the server's owner."""
    client = argilla.client_get(api_url=argilla_server.url, api_key=argilla_server.api_key)
    yield client
    client.close()


def _study(owner, *, name: str, annotators: tuple[str, ...], items: int) -> Study:
    workspace = f"{name}-ws"
    assert argilla.workspace_ensure(workspace, client=owner) == argilla.workspace_ensure(workspace, client=owner)
    users = {u: argilla.user_ensure(u, PASSWORD, "annotator", workspace, client=owner) for u in annotators}
    assert argilla.user_ensure(annotators[0], PASSWORD, "annotator", workspace, client=owner) == users[annotators[0]]
    dataset_id = argilla.dataset_create(
        client=owner,
        workspace=workspace,
        name=name,
        fields=[argilla.TextField("original", "Original"), argilla.TextField("transformed", "Transformed")],
        rating_questions=QUESTIONS,
        comment_question="Anything to add? (optional)",
        guidelines="Rate how well the transformed text keeps the meaning of the original.",
        min_submitted=2,
        metadata=[argilla.MetadataProperty("item_kind"), argilla.MetadataProperty("expected_rating", kind="integer")],
    )
    records = [
        argilla.RecordIn(
            external_id=f"item-{i}",
            fields={"original": f"The cat sat on mat number {i}.", "transformed": f"A cat was sitting on mat {i}."},
            metadata={"item_kind": "control" if i == 1 else "study", "expected_rating": 5},
        )
        for i in range(1, items + 1)
    ]
    assert argilla.records_log(dataset_id, records, client=owner) == items
    assert argilla.records_log(dataset_id, records, client=owner) == items  # same ids: updated, not added
    listing = owner.get(f"/api/v1/datasets/{dataset_id}/records", params={"limit": 1000}).raise_for_status().json()
    assert listing["total"] == items
    record_ids = {item["external_id"]: UUID(item["id"]) for item in listing["items"]}
    return Study(dataset_id=dataset_id, workspace=workspace, annotators=users, record_ids=record_ids)


def _annotator(owner, user_id: UUID) -> httpx.Client:
    """An HTTP client authenticated as the annotator (the owner may read users' API keys)."""
    key = owner.get(f"/api/v1/users/{user_id}").raise_for_status().json()["api_key"]
    return httpx.Client(base_url=owner.base_url, headers={API_KEY_HEADER: key}, timeout=30, trust_env=False)


def _pending_for_me(annotator: httpx.Client, study: Study) -> dict[str, dict]:
    """What the annotation page asks for: records I have not answered that still need answers."""
    found = (
        annotator.post(
            f"/api/v1/me/datasets/{study.dataset_id}/records/search",
            params=[("include", "responses"), ("include", "suggestions"), ("limit", 50)],
            json=PENDING_FOR_ME,
        )
        .raise_for_status()
        .json()
    )
    records = {item["record"]["external_id"]: item["record"] for item in found["items"]}
    assert found["total"] == len(records)
    return records


def _respond(annotator: httpx.Client, study: Study, external_id: str, status: str, **values: int) -> None:
    body = {"status": status, "values": {q: {"value": v} for q, v in values.items()} or None}
    annotator.post(f"/api/v1/records/{study.record_ids[external_id]}/responses", json=body).raise_for_status()


def test_round_trip_through_adapter_and_annotator_endpoints(owner):
    study = _study(owner, name="round-trip", annotators=("ann1", "ann2"), items=5)
    ann1_id, ann2_id = study.annotators["ann1"], study.annotators["ann2"]
    ann1, ann2 = _annotator(owner, ann1_id), _annotator(owner, ann2_id)

    _respond(ann1, study, "item-1", "submitted", quality=4, fluency=5)

    pending = _pending_for_me(ann2, study)
    assert set(pending) == {f"item-{i}" for i in range(1, 6)}
    assert pending["item-1"]["responses"] == []  # ann1's answer stays invisible to ann2
    assert all(not (record.get("metadata") or {}).keys() & set(HIDDEN) for record in pending.values())
    props = ann2.get(f"/api/v1/me/datasets/{study.dataset_id}/metadata-properties").raise_for_status().json()
    assert props["items"] == []

    _respond(ann2, study, "item-2", "draft", quality=2)
    _respond(ann2, study, "item-3", "discarded")

    pending = _pending_for_me(ann1, study)
    assert set(pending) == {"item-2", "item-3", "item-4", "item-5"}
    assert all(record["responses"] == [] for record in pending.values())

    _respond(ann2, study, "item-1", "submitted", quality=3, fluency=4)  # second of two: item-1 is complete
    assert set(_pending_for_me(ann2, study)) == {"item-4", "item-5"}
    assert set(_pending_for_me(ann1, study)) == {"item-2", "item-3", "item-4", "item-5"}
    metrics = ann2.get(f"/api/v1/me/datasets/{study.dataset_id}/metrics").raise_for_status().json()
    assert metrics["responses"] == {"total": 5, "submitted": 1, "draft": 1, "discarded": 1, "pending": 2}
    progress = owner.get(f"/api/v1/datasets/{study.dataset_id}/progress").raise_for_status().json()
    assert (progress["total"], progress["completed"], progress["pending"]) == (5, 1, 4)

    rows = list(argilla.responses_fetch(study.dataset_id, client=owner))
    assert {(r.record_external_id, r.user_id, r.question, r.value, r.status) for r in rows} == {
        ("item-1", ann1_id, "quality", 4, "submitted"),
        ("item-1", ann1_id, "fluency", 5, "submitted"),
        ("item-1", ann2_id, "quality", 3, "submitted"),
        ("item-1", ann2_id, "fluency", 4, "submitted"),
        ("item-2", ann2_id, "quality", 2, "draft"),
        ("item-3", ann2_id, None, None, "discarded"),
    }
    assert len(rows) == 6

    assert argilla.user_deactivate("ann2", study.workspace, client=owner) is True
    assert argilla.user_deactivate("ann2", study.workspace, client=owner) is False
    assert ann2.get("/api/v1/me/datasets").raise_for_status().json()["items"] == []
    assert len(list(argilla.responses_fetch(study.dataset_id, client=owner))) == 6  # answers are kept
    ann1.close()
    ann2.close()


def test_text_search_and_metadata_filters(owner):
    """The other searches the UI offers: free text, metadata filters and sorting, metadata metrics."""
    study = _study(owner, name="filters", annotators=("ann5",), items=4)

    def search(body: dict, **params: int) -> list[str]:
        url = f"/api/v1/datasets/{study.dataset_id}/records/search"
        found = owner.post(url, params=params, json=body).raise_for_status().json()
        return [item["record"]["external_id"] for item in found["items"]]

    assert search({"query": {"text": {"q": "MAT number 3", "field": "original"}}}) == ["item-3"]
    assert search({"query": {"text": {"q": "sitting 2"}}}) == ["item-2"]
    control = {
        "type": "terms",
        "scope": {"entity": "metadata", "metadata_property": "item_kind"},
        "values": ["control"],
    }
    assert search({"filters": {"and": [control]}}) == ["item-1"]
    by_external_id = {"scope": {"entity": "record", "property": "external_id"}, "order": "desc"}
    assert search({"sort": [by_external_id]}, limit=2) == ["item-4", "item-3"]
    props = owner.get(f"/api/v1/me/datasets/{study.dataset_id}/metadata-properties").raise_for_status().json()
    ids = {p["name"]: p["id"] for p in props["items"]}
    terms = owner.get(f"/api/v1/metadata-properties/{ids['item_kind']}/metrics").raise_for_status().json()
    assert {v["term"]: v["count"] for v in terms["values"]} == {"study": 3, "control": 1}
    numbers = owner.get(f"/api/v1/metadata-properties/{ids['expected_rating']}/metrics").raise_for_status().json()
    assert (numbers["min"], numbers["max"]) == (5, 5)


def test_adapter_errors_name_the_server_and_the_fix(argilla_server):
    with pytest.raises(ArgillaError, match="ARGILLA_API_KEY"):
        argilla.client_get(api_url=argilla_server.url, api_key="not-the-owner-key")
    with pytest.raises(ArgillaError, match=r"not reachable at http://127\.0\.0\.1:9 .*manage\.py argilla_server"):
        argilla.client_get(api_url="http://127.0.0.1:9", api_key="any")


def test_health_probe_sees_the_local_server(argilla_server, settings):
    settings.ARGILLA_API_URL = argilla_server.url
    probe = probe_argilla()
    assert probe.status == "ok", probe.detail


@pytest.fixture(scope="module")
def browser():
    if not (CHROMIUM.is_file() and os.access(CHROMIUM, os.X_OK)):
        require_or_skip(f"browser tests need Chromium at {CHROMIUM} (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        require_or_skip("browser tests need the playwright package (pip install -r requirements-dev.txt)")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox", "--disable-gpu", "--no-first-run"]
        )
        yield chromium
        chromium.close()


def test_annotator_rates_in_the_argilla_ui(argilla_server, owner, browser, tmp_path):
    study = _study(owner, name="ui-study", annotators=("ann9",), items=3)
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.set_default_timeout(60_000)
    page.goto(f"{argilla_server.url}/sign-in")
    page.locator("input[name=Username]").fill("ann9")
    page.locator("input[name=Password]").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{argilla_server.url}/")
    page.goto(f"{argilla_server.url}/dataset/{study.dataset_id}/annotation-mode")
    for question in ("quality", "fluency"):
        page.locator(f"label[for={question}_4]").click()
    shot = tmp_path / SCREENSHOT
    page.screenshot(path=str(shot))
    if os.environ.get("SHIFTLAB_UPDATE_SCREENSHOTS") == "1":
        shutil.copy(shot, Path(settings.BASE_DIR) / "docs" / "screenshots" / SCREENSHOT)
    page.get_by_role("button", name="Submit").click()

    deadline = time.monotonic() + 30
    while not (rows := list(argilla.responses_fetch(study.dataset_id, client=owner))):
        assert time.monotonic() < deadline, "the submitted rating never reached Argilla"
        page.wait_for_timeout(250)
    page.close()
    assert {(r.user_id, r.question, r.value, r.status) for r in rows} == {
        (study.annotators["ann9"], "quality", 4, "submitted"),
        (study.annotators["ann9"], "fluency", 4, "submitted"),
    }
    assert len({r.record_external_id for r in rows}) == 1
