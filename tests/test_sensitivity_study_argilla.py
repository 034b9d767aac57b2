"""A sensitivity study in a real local Argilla (issue 30): a run of negations is published with the
inverse question ("did the meaning change?"), annotators answer through Argilla's REST API with
their own keys, a rater blind to meaning changes fails the study's own controls and is rejected,
and the gate passes on "changed"; the exported config carries what the gate passed on.

The negations are written by a rule here (no LLM: tests/test_meaning_change_llm.py runs the
prompts on the embedded LLM), so the test is about the study machinery."""

from __future__ import annotations

import json

import pytest
from django.conf import settings as django_settings
from django.urls import reverse

from annotation.argilla import client as argilla
from annotation.configs.config_schema import config_read
from annotation.export_services import BenchmarkConfigExportRequest, benchmark_config_export
from annotation.kinds import ItemKind
from annotation.models import Study
from annotation.science.design import StudyDesign
from annotation.studies.argilla_services import study_publish
from annotation.studies.design_services import StudyCreateRequest, study_create, study_lock
from annotation.studies.gate_services import approval_decide, study_gate
from annotation.studies.sync_services import study_sync
from annotation.studies.validation_services import study_validate
from core.errors import ShiftlabError
from core.projects import project_create
from core.roles import Role
from corpora.services import dataset_import
from tests.argilla_ui import respond
from tests.meaning_change_support import negation_run
from tests.support import FEW_CONTROLS_OVERRIDE, argilla_annotator_client, argilla_pending, make_user, page_as, rostered

pytestmark = [pytest.mark.django_db, pytest.mark.services]


def answer(item, *, blind: bool = False) -> dict[str, int]:
    """A careful rater sees every change of meaning; a blind one calls everything unchanged."""
    if blind:
        return {"changed": 1, "fluency": 4}
    if item.kind == ItemKind.EASY_POSITIVE:
        return {"changed": 1, "fluency": 5}
    if item.kind == ItemKind.EASY_NEGATIVE:
        return {"changed": 5, "fluency": 4}
    return {"changed": 5, "fluency": 4}


def answer_all(clients, datasets, by_external, *, names, blind=()) -> None:
    for name in names:
        for record in argilla_pending(clients[name], datasets[name]):
            values = answer(by_external[record["external_id"]], blind=name in blind)
            respond(clients[name], record["id"], "submitted", values)


def test_a_sensitivity_study_gates_on_changed_in_argilla(argilla_server, settings, django_user_model):
    settings.ARGILLA_API_URL, settings.ARGILLA_API_KEY = argilla_server.url, argilla_server.api_key
    rita = make_user(django_user_model, "rita", Role.RESEARCHER)
    team = project_create(slug="sens-project", owner=rita, actor=None)
    names = ("ann-a", "ann-b", "blind")
    users = {name: make_user(django_user_model, name, Role.ANNOTATOR, roster=team) for name in names}
    demo = django_settings.BASE_DIR / "fixtures/sts/demo-sts.csv"
    sts = dataset_import(source=demo, task="sts", name="demo-sts", project=team)
    run = negation_run(sts, limit=6)
    assert run.status == "succeeded"

    design = StudyDesign(
        kind="sensitivity",
        items_per_transformation=4,
        raters_per_item=2,
        batch_size=4,
        controls_per_batch=2,
        min_control_ratings=2,
        llm_judges=(),
        acceptance_threshold=4.0,
        seed=3,
        detectability_override=FEW_CONTROLS_OVERRIDE,
    )
    # A rewrite study cannot validate negations: it would pass outputs whose meaning was kept.
    with pytest.raises(ShiftlabError, match="negation must change the meaning"):
        study_create(
            actor=rita,
            request=rostered(
                StudyCreateRequest(name="wrong-kind", project=team.slug, runs=[run], design=StudyDesign())
            ),
        )
    study = study_lock(
        study=study_create(
            actor=rita, request=rostered(StudyCreateRequest(name="sens", project=team.slug, runs=[run], design=design))
        )
    )
    items = list(study.items.all())
    controls = [i for i in items if i.kind != ItemKind.REAL]
    assert {c.kind for c in controls} == {ItemKind.EASY_POSITIVE, ItemKind.EASY_NEGATIVE}
    # The study's own controls: a faithful paraphrase expects "not changed", an unrelated text "changed".
    for control in controls:
        expected = 1 if control.kind == ItemKind.EASY_POSITIVE else 5
        assert control.expected["changed"] == expected

    study_publish(study=study, annotators=users.values(), actor=rita)
    study.refresh_from_db()
    assert study.status == Study.Status.PUBLISHED
    owner = argilla.client_get()
    annotators = {a.user.username: a for a in study.annotators.select_related("user")}
    datasets = {name: annotators[name].argilla_dataset_id for name in names}
    clients = {name: argilla_annotator_client(owner, annotators[name].argilla_user_id) for name in names}
    # Annotators see the inverse question and its guidelines, nothing about controls.
    questions = clients["ann-a"].get(f"/api/v1/datasets/{datasets['ann-a']}/questions").raise_for_status().json()
    assert {q["name"]: q["title"] for q in questions["items"]}["changed"] == (
        "Did the second text change the meaning of the first?"
    )
    guidelines = clients["ann-a"].get(f"/api/v1/datasets/{datasets['ann-a']}").raise_for_status().json()["guidelines"]
    assert "change the meaning" in guidelines and "control" not in guidelines.lower()

    by_external = {i.external_id: i for i in items}
    answer_all(clients, datasets, by_external, names=names, blind={"blind"})
    assert study_sync(study=study).created > 0
    result = study_validate(study=study, actor=rita)
    assert result.rejected == {"blind": "failed_controls"}
    assert result.control_status["ann-a"] == result.control_status["ann-b"] == "passed"
    # The blind rater's items went to the others' queues: they answer those too.
    answer_all(clients, datasets, by_external, names=("ann-a", "ann-b"))
    study_sync(study=study)
    study_validate(study=study, actor=rita)

    [gate] = study_gate(study=study, actor=rita)
    evidence = gate.evidence
    assert gate.passed, evidence["reasons"]
    assert (evidence["state"], evidence["passes_on"], evidence["axis"]) == ("passed", "meaning_changed", "sensitivity")
    assert evidence["questions"]["changed"]["mean"] == 5.0
    assert [r["annotator"] for r in evidence["rejections"]] == ["blind"]
    page = page_as(rita).get(reverse("annotation:gate", args=[study.pk])).content.decode()
    assert 'class="gate-inverse"' in page and "passes_on: meaning_changed" in page
    approval_decide(gate_result=gate, decision="approve", comment="meaning changed", actor=rita)

    config = benchmark_config_export(actor=rita, request=BenchmarkConfigExportRequest(project=team.slug))
    document = json.loads(config.json_text)
    [entry] = document["transformations"]
    assert (entry["transformation"], entry["axis"], entry["gate"]["passes_on"]) == (
        "negation",
        "sensitivity",
        "meaning_changed",
    )
    assert entry["study"]["design"]["kind"] == "sensitivity"
    assert config_read(document).transformations[0].gate.passes_on == "meaning_changed"
    owner.close()
    for client in clients.values():
        client.close()
