"""A human-validation study end to end, with every service real: transformation runs made by the
embedded LLM (SmolLM2 on llama.cpp), a local Argilla server, annotators answering through Argilla's
REST API with their own keys and one through the Argilla web UI in headless Chromium, then sync,
validation (a careless rater fails the controls and is rejected), review, gate, approval and an
exported config that verifies and stops verifying after a one-byte edit.

SmolLM2 is a poor generator and judge: the test checks the machinery, not the science.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from django.conf import settings as django_settings
from django.core.management import CommandError, call_command
from django.urls import reverse

from annotation.argilla import client as argilla
from annotation.kinds import ItemKind
from annotation.models import Annotator, Assignment, Flag, Rating, RatingRevision, Study
from annotation.science.design import StudyDesign
from annotation.studies.argilla_services import study_publish
from annotation.studies.design_services import (
    StudyCreateRequest,
    StudyReviseRequest,
    study_create,
    study_lock,
    study_revise,
    study_update_design,
)
from annotation.studies.gate_services import approval_decide, study_gate
from annotation.studies.sync_services import study_sync
from annotation.studies.validation_services import flag_review, study_validate
from core.errors import ShiftlabError
from core.models import AuditEvent
from core.projects import project_create
from core.roles import Role
from corpora.services import dataset_import
from evaluation.benchmark_services import benchmark_run_create_from_config
from evaluation.tasks import start_benchmark_run
from tests.argilla_ui import answer, rate_in_ui, respond
from tests.support import (
    FEW_CONTROLS_OVERRIDE,
    PASSWORD,
    argilla_annotator_client,
    argilla_pending,
    make_user,
    page_as,
    require_or_skip,
    rostered,
)
from transforms.params import GenerationParams
from transforms.services import transform_run_create

pytestmark = [pytest.mark.django_db, pytest.mark.services]

CHROMIUM = Path("/usr/bin/chromium")
HIDDEN_WORDS = ("control", "positive", "negative", "gold", "expected", "estimate", "llm", "judge", "kind")


@contextmanager
def chromium_page():
    """A page in headless Chromium. Playwright's sync API runs an event loop in this thread, where
    Django refuses database queries: keep database work outside this block."""
    if not (CHROMIUM.is_file() and os.access(CHROMIUM, os.X_OK)):
        require_or_skip(f"browser tests need Chromium at {CHROMIUM} (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox", "--disable-gpu", "--no-first-run"]
        )
        page = chromium.new_page(viewport={"width": 1400, "height": 900})
        page.set_default_timeout(60_000)
        try:
            yield page
        finally:
            chromium.close()


def run_now(dataset, transformation: str):
    from transforms.tasks import start_run

    run = transform_run_create(
        dataset=dataset,
        transformation=transformation,
        seed=1337,
        limit=6,
        dispatch=False,
        # Four attempts: SmolLM2 through llama-server keeps only 3 of 6 summaries within two.
        params=GenerationParams(temperature=0.7, max_tokens=48, max_attempts=4),
    )
    start_run.delay(run.pk)
    run.refresh_from_db()
    assert run.status == "succeeded"
    return run


def assert_nothing_hidden_leaks(client: httpx.Client, dataset_id, records: list[dict]) -> None:
    """What an annotator can read of the dataset carries texts and an opaque id, nothing else."""
    assert records
    for record in records:
        assert set(record["fields"]) == {"original", "transformed"}
        assert not record.get("metadata") and not record.get("suggestions") and not record.get("vectors")
        assert re.fullmatch(r"[0-9a-f]{32}", record["external_id"])
        hidden = json.dumps({k: v for k, v in record.items() if k != "fields"}).lower()
        assert not any(word in hidden for word in HIDDEN_WORDS), hidden
    base = f"/api/v1/me/datasets/{dataset_id}"
    assert client.get(f"{base}/metadata-properties").raise_for_status().json()["items"] == []
    questions = client.get(f"/api/v1/datasets/{dataset_id}/questions").raise_for_status().json()["items"]
    assert {q["name"] for q in questions} == {"quality", "fluency", "comment"}
    dataset = client.get(f"/api/v1/datasets/{dataset_id}").raise_for_status().json()
    assert not any(word in (dataset.get("guidelines") or "").lower() for word in ("control", "gold", "llm"))


def test_study_end_to_end(llm_backend, argilla_server, settings, django_user_model, tmp_path):
    started = time.monotonic()
    settings.ARGILLA_API_URL, settings.ARGILLA_API_KEY = argilla_server.url, argilla_server.api_key
    rita = make_user(django_user_model, "rita", Role.RESEARCHER)
    names = ("ann-ui", "ann-a", "ann-b", "careless")
    team = project_create(slug="e2e-project", owner=rita, actor=None)
    users = {name: make_user(django_user_model, name, Role.ANNOTATOR, roster=team) for name in names}
    demo = django_settings.BASE_DIR / "fixtures/sts/demo-sts.csv"
    sts = dataset_import(source=demo, task="sts", name="demo-sts", project=team)
    runs = [run_now(sts, "paraphrase"), run_now(sts, "summarization")]
    t_runs = time.monotonic() - started

    # Design: editable as a draft, frozen by locking; a change then makes a new version.
    design = StudyDesign(
        items_per_transformation=4,
        raters_per_item=3,
        batch_size=4,
        controls_per_batch=2,
        min_control_ratings=2,
        max_confirmed_flags=3,
        seed=11,
        detectability_override=FEW_CONTROLS_OVERRIDE,
    )
    study = study_create(
        actor=rita,
        request=rostered(StudyCreateRequest(name="e2e", project=team.slug, runs=runs, design=design.revised(seed=5))),
    )
    study = study_update_design(actor=rita, request=StudyReviseRequest(study=study, design=design))
    study = study_lock(study=study, actor=rita)
    with pytest.raises(ShiftlabError, match="locked"):
        study_update_design(
            actor=rita, request=StudyReviseRequest(study=study, design=design.revised(raters_per_item=2))
        )
    v2 = study_revise(actor=rita, request=StudyReviseRequest(study=study, design=design.revised(raters_per_item=2)))
    assert (v2.version, v2.status, v2.previous_id) == (2, Study.Status.DRAFT, study.pk)
    items = list(study.items.all())
    real = [i for i in items if i.kind == ItemKind.REAL]
    controls = [i for i in items if i.kind != ItemKind.REAL]
    assert {i.transformation for i in real} == {"paraphrase", "summarization"}
    assert len(controls) == 2 * -(-len(real) // 4) and {c.kind for c in controls} == {"easy_positive", "easy_negative"}

    # Publish twice: the second run changes nothing and creates no account. Each annotator gets
    # their own dataset holding their batch: 3 raters per real item, controls in every batch.
    first = study_publish(study=study, annotators=users.values(), actor=rita)
    assigned = Assignment.objects.filter(annotator__study=study, active=True)
    assert set(first.new_accounts) == set(names) and first.records == assigned.count()
    assert set(Counter(assigned.filter(study_item__kind="real").values_list("study_item", flat=True)).values()) == {3}
    assert study_publish(study=study, annotators=users.values(), actor=rita).new_accounts == ()
    study.refresh_from_db()
    owner = argilla.client_get()
    annotators = {a.user.username: a for a in study.annotators.select_related("user")}
    datasets = {name: annotators[name].argilla_dataset_id for name in names}
    for name in names:
        total = owner.get(f"/api/v1/datasets/{datasets[name]}/records", params={"limit": 1}).json()["total"]
        assert total == assigned.filter(annotator=annotators[name]).count()
    clients = {name: argilla_annotator_client(owner, annotators[name].argilla_user_id) for name in names}
    by_external = {i.external_id: i for i in items}

    # What an annotator can read in Argilla reveals no control status, gold or LLM estimate.
    assert_nothing_hidden_leaks(
        clients["ann-a"], datasets["ann-a"], argilla_pending(clients["ann-a"], datasets["ann-a"])
    )

    # One annotator rates two records in the real Argilla web UI.
    by_text = {(i.text_a, i.text_b): i for i in items}
    # Nobody was shown a password: ann-ui chooses hers on My Argilla account, signed in to Shiftlab.
    ui_user_id, ui_password = annotators["ann-ui"].argilla_user_id, "ann-ui-chose-this-1"
    chosen = {"current_password": PASSWORD, "password": ui_password, "password_again": ui_password}
    assert page_as(users["ann-ui"]).post(reverse("annotation:my-argilla"), chosen).status_code == 302
    with chromium_page() as page:
        page.goto(f"{argilla_server.url}/sign-in")
        page.locator("input[name=Username]").fill("ann-ui")
        page.locator("input[name=Password]").fill(ui_password)
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(f"{argilla_server.url}/")
        ui_rated = rate_in_ui(page, argilla_server.url, datasets["ann-ui"], by_text, owner, ui_user_id, 2)

    # Three annotators answer through the REST API with their own keys.
    low_planted, careless_skipped = None, set()
    for name in ("ann-a", "ann-b", "careless"):
        records = argilla_pending(clients[name], datasets[name])
        for record in records:
            item = by_external[record["external_id"]]
            # The careless rater discards one real item and leaves another as a draft.
            if name == "careless" and item.kind == ItemKind.REAL and len(careless_skipped) < 2:
                status = "draft" if careless_skipped else "discarded"
                careless_skipped.add(item)
                respond(clients[name], record["id"], status, answer(item, careless=True) if status == "draft" else None)
                continue
            low = name == "ann-b" and item.kind == ItemKind.REAL and low_planted is None
            low_planted = item if low else low_planted
            respond(clients[name], record["id"], "submitted", answer(item, careless=name == "careless", low=low))
    assert len(careless_skipped) == 2  # one discarded, one left as a draft

    # Sync twice: every submitted answer once; drafts and discarded responses never count.
    first_sync = study_sync(study=study)
    n_ratings = Rating.objects.filter(study_item__study=study).count()
    assert first_sync.created == n_ratings > 0 and first_sync.updated == first_sync.withdrawn == 0
    second_sync = study_sync(study=study)
    assert second_sync.created == second_sync.updated == second_sync.withdrawn == 0
    assert second_sync.unchanged == n_ratings == Rating.objects.filter(study_item__study=study).count()
    assert RatingRevision.objects.filter(rating__study_item__study=study).count() == n_ratings
    careless = annotators["careless"]
    assert not Rating.objects.filter(annotator=careless, study_item__in=careless_skipped).exists()
    assert Rating.objects.filter(annotator=annotators["ann-ui"]).count() == 4
    assert {r.study_item.external_id for r in Rating.objects.filter(annotator=annotators["ann-ui"])} == set(ui_rated)

    # An edit after submission updates the rating once and keeps its history.
    edited = next(
        r for r in pending_all(clients["ann-a"], datasets["ann-a"]) if by_external[r["external_id"]].kind == "real"
    )
    response_id = edited["responses"][0]["id"]
    clients["ann-a"].put(
        f"/api/v1/responses/{response_id}",
        json={"status": "submitted", "values": {"quality": {"value": 5}, "fluency": {"value": 4}}},
    ).raise_for_status()
    third_sync = study_sync(study=study)
    assert (third_sync.created, third_sync.updated) == (0, 1)
    rating = Rating.objects.get(
        annotator=annotators["ann-a"], study_item__external_id=edited["external_id"], question="quality"
    )
    assert (rating.value, rating.edits, rating.revisions.count()) == (5, 1, 2)

    # Validation as declared: the careless rater fails the controls and is rejected (and leaves Argilla).
    result = study_validate(study=study, actor=rita)
    careless_controls = Rating.objects.filter(annotator=annotators["careless"]).exclude(study_item__kind="real")
    assert careless_controls.exists(), "the careless rater met no control item"
    assert result.rejected == {"careless": "failed_controls"}
    assert result.control_status["ann-a"] == result.control_status["ann-b"] == "passed"
    careless.refresh_from_db()
    assert careless.status == Annotator.Status.REJECTED and careless.argilla_deactivated
    assert "control ratings outside ±1" in careless.decisions.get().detail
    assert clients["careless"].get("/api/v1/me/datasets").raise_for_status().json()["items"] == []
    assert result.estimated_items == len(real)
    low_flag = Flag.objects.get(
        rating__study_item=low_planted,
        rating__annotator=annotators["ann-b"],
        rating__question="fluency",
        rule="low_rating",
    )
    assert not Flag.objects.filter(rating__study_item__kind__in=["easy_positive", "easy_negative"]).exists()

    # Review: confirm one flag, dismiss the rest; nobody reaches the "repeatedly deviant" rule.
    flag_review(flag=low_flag, decision="confirmed", note="really disfluent", actor=rita)
    for flag in Flag.objects.filter(rating__study_item__study=study, status="open"):
        flag_review(flag=flag, decision="dismissed", actor=rita)
    with pytest.raises(ShiftlabError, match="already"):
        flag_review(flag=low_flag, decision="dismissed", actor=rita)
    dismissed = Flag.objects.filter(rating__study_item__study=study, status="dismissed").count()
    assert AuditEvent.objects.filter(verb="study.flag.dismissed").count() == dismissed

    # The design asks for 3 counted raters per item: with the careless rater rejected and ann-ui's
    # two records, the gate says how many ratings are missing and allows no decision yet.
    for gate in study_gate(study=study, actor=rita):
        assert gate.evidence["state"] == "not_enough_ratings" and not gate.passed, gate.evidence["reasons"]
        assert gate.evidence["ratings_missing"] > 0
        with pytest.raises(ShiftlabError, match="not enough ratings"):
            approval_decide(gate_result=gate, decision="reject", comment="too early", actor=rita)
    # The careless rater's items went to the others' queues; ann-ui answers the rest of theirs
    # through the API, so every item has three raters who count.
    for name in ("ann-ui", "ann-a", "ann-b"):
        for record in argilla_pending(clients[name], datasets[name]):
            respond(clients[name], record["id"], "submitted", answer(by_external[record["external_id"]]))
    assert study_sync(study=study).created > 0
    assert study_validate(study=study, actor=rita).control_status["ann-ui"] == "passed"

    # Gate, approval (a passed transformation may still be rejected), export and verification.
    gates = {g.transformation: g for g in study_gate(study=study, actor=rita)}
    assert set(gates) == {"paraphrase", "summarization"}
    for gate in gates.values():
        evidence = gate.evidence
        assert gate.passed, evidence["reasons"]
        assert (evidence["state"], evidence["ratings_missing"]) == ("passed", 0)
        assert evidence["n_items"] >= 1 and evidence["n_ratings"] >= 2 * evidence["n_items"]
        assert [r["annotator"] for r in evidence["rejections"]] == ["careless"]
        assert evidence["questions"]["quality"]["mean"] >= 3
    approval_decide(gate_result=gates["paraphrase"], decision="approve", comment="meaning kept", actor=rita)
    approval_decide(gate_result=gates["summarization"], decision="reject", comment="too few items", actor=rita)
    with pytest.raises(ShiftlabError, match="already decided"):
        approval_decide(gate_result=gates["paraphrase"], decision="reject", comment="changed my mind", actor=rita)

    yaml_path, json_path = tmp_path / "benchmark.yaml", tmp_path / "benchmark.json"
    call_command("benchmark_config", "export", "--out", str(yaml_path), "--out", str(json_path), "--as", "rita")
    document = json.loads(json_path.read_text())
    assert [t["transformation"] for t in document["transformations"]] == ["paraphrase"]
    entry = document["transformations"][0]
    assert entry["runs"][0]["prompts"][0]["hash"] == runs[0].prompt_hashes["paraphrase"]
    assert entry["runs"][0]["dataset"]["content_hash"] == sts.content_hash
    assert set(entry["gate"]["evidence"]["questions"]["quality"]) >= {"mean", "sd", "ac2", "alpha"}
    # The exported file drives a benchmark run: only the approved paraphrase enters it, and with the
    # study runs' item limit the approved run itself is reused (eager Celery here;
    # tests/test_benchmark_worker.py runs one on a real broker and worker).
    bench = benchmark_run_create_from_config(
        text=yaml_path.read_text(),
        fmt="yaml",
        models=["all-MiniLM-L6-v2"],
        limit=runs[0].item_limit,
        dispatch=False,
        project=team,
    )
    start_benchmark_run.delay(bench.pk)
    bench.refresh_from_db()
    assert bench.status == "succeeded", bench.error
    units = {(r.transformation, r.transform_run_id) for r in bench.results.all()}
    assert units == {("original", None), ("paraphrase", runs[0].pk)}
    for path in (yaml_path, json_path):
        call_command("benchmark_config", "verify", str(path))
        data = bytearray(path.read_bytes())
        position = data.index(b"meaning kept")
        data[position] = ord("M")
        path.write_bytes(bytes(data))
        with pytest.raises(CommandError, match="does not verify"):
            call_command("benchmark_config", "verify", str(path))

    verbs = set(AuditEvent.objects.values_list("verb", flat=True))
    assert {
        "study.create",
        "study.lock",
        "study.publish",
        "study.sync",
        "study.validate",
        "study.annotator.reject",
        "study.flag.confirmed",
        "study.gate",
        "study.transformation.approve",
        "study.transformation.reject",
        "benchmark_config.export",
    } <= verbs
    owner.close()
    for client in clients.values():
        client.close()
    print(
        f"\ne2e: runs {t_runs:.1f} s, whole study {time.monotonic() - started:.1f} s; {len(real)} real items, "
        f"{len(controls)} controls, {n_ratings} ratings, {Flag.objects.count()} flags; gate evidence "
        f"{json.dumps({k: g.evidence['questions'] for k, g in gates.items()})}"
    )


def pending_all(client: httpx.Client, dataset_id) -> list[dict]:
    """The annotator's submitted records, with their own responses."""
    body = {
        "filters": {
            "and": [{"type": "terms", "scope": {"entity": "response", "property": "status"}, "values": ["submitted"]}]
        }
    }
    found = (
        client.post(
            f"/api/v1/me/datasets/{dataset_id}/records/search",
            params=[("include", "responses"), ("limit", 100)],
            json=body,
        )
        .raise_for_status()
        .json()
    )
    return [item["record"] for item in found["items"]]
