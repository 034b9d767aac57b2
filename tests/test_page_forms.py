"""Every step startable from the pages (issue 20): each form's happy path creates its object
through the page, and each refusal shows the reason next to the field with the input kept. The
services behind the forms are the ones the API and the commands call; no LLM or model runs here
(jobs are created, their tasks are not executed)."""

from __future__ import annotations

import html as html_text
import json
import re

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.urls import reverse

from annotation.export_services import BenchmarkConfigExportRequest, benchmark_config_export
from annotation.models import Approval, BaselineStudy, GateResult, Study
from annotation.studies.design_services import StudyCreateRequest, study_create
from core.roles import Role
from corpora.services import dataset_import
from evaluation.models import BenchmarkRun
from tests.support import keyword_run, make_user, rostered
from tests.test_projects_annotation import DESIGN as STUDY_DESIGN
from transforms.backends import reset_backends
from transforms.models import JudgeReport, TransformRun

pytestmark = pytest.mark.django_db

DEMO_STS = settings.BASE_DIR / "fixtures/sts/demo-sts.csv"


@pytest.fixture
def sts(db):
    return dataset_import(source=DEMO_STS, task="sts", name="demo-sts")


@pytest.fixture
def page(client, researcher):
    client.force_login(researcher)
    return client


def field_errors(html: str, field_id: str) -> str:
    """The text of the errors shown in the field block of ``field_id`` (empty when none)."""
    # up to the end of its errors: a widget of checkboxes has blocks of its own
    block = re.search(
        rf'<div class="field has-error" id="{re.escape(field_id)}-field">(.*?<div role="alert">.*?)</div>\s*</div>',
        html,
        re.S,
    )
    return html_text.unescape(re.sub(r"<[^>]+>", " ", block.group(1))) if block else ""


def value_of(html: str, field_id: str) -> str | None:
    match = re.search(rf'<input[^>]*id="{re.escape(field_id)}"[^>]*>', html)
    found = re.search(r'value="([^"]*)"', match.group(0)) if match else None
    return found.group(1) if found else None


# --- transformation runs -----------------------------------------------------------------------


def test_a_run_starts_from_the_runs_page_and_from_the_dataset_page(page, sts):
    detail = page.get(reverse("corpora:detail", args=["demo-sts"])).content.decode()
    assert 'href="/transforms/?dataset=demo-sts#start-run">Transform</a>' in detail
    assert 'href="/benchmarks/?datasets=demo-sts#launch">Benchmark</a>' in detail
    form = page.get("/transforms/?dataset=demo-sts").content.decode()
    assert '<option value="demo-sts" selected>' in form
    response = page.post(
        reverse("transforms:runs"),
        {"dataset": "demo-sts", "transformation": "random_keywords", "seed": "7", "limit": "3", "backend": "default"},
    )
    run = TransformRun.objects.get()
    assert response.status_code == 302 and response["Location"] == reverse("transforms:run", args=[run.pk])
    assert (run.seed, run.item_limit, run.transformation, run.dataset.name) == (7, 3, "random_keywords", "demo-sts")


def test_a_refused_run_shows_the_reason_next_to_the_field_and_keeps_the_input(page, sts):
    sent = {"dataset": "demo-sts", "transformation": "paraphrase", "limit": "3", "backend": "default"}
    html = page.post(reverse("transforms:runs"), {**sent, "temperature": "5"}).content.decode()
    assert "less than or equal to 2" in field_errors(html, "id_temperature") and value_of(html, "id_temperature") == "5"
    # The service refuses a setting a preset fixes otherwise; the message lands on that field.
    html = page.post(
        reverse("transforms:runs"), {**sent, "preset": "multi-axis-paper", "temperature": "0.5"}
    ).content.decode()
    assert "conflicts with preset" in field_errors(html, "id_temperature")
    assert value_of(html, "id_limit") == "3" and '<option value="multi-axis-paper" selected>' in html
    assert not TransformRun.objects.exists()


def test_a_failed_run_is_resumed_from_its_page_and_a_complete_one_is_not(page, sts):
    run = keyword_run(sts, 1)
    url = reverse("transforms:run", args=[run.pk])
    assert 'id="resume-form"' not in page.get(url).content.decode()
    assert "nothing to resume" in page.post(url, follow=True).content.decode()
    TransformRun.objects.filter(pk=run.pk).update(status=TransformRun.Status.FAILED, error="worker lost")
    assert 'id="resume-form"' in page.get(url).content.decode()
    assert "Resumed run" in page.post(url, follow=True).content.decode()
    run.refresh_from_db()
    assert run.status in (TransformRun.Status.PENDING, TransformRun.Status.SUCCEEDED) and run.error == ""


# --- judge reports and generator selection -----------------------------------------------------


def selection_fields() -> dict:
    return {"kind": "selection", "dataset": "demo-sts", "transformation": "paraphrase", "limit": "5"}


def test_judge_forms_queue_reports_and_keep_refused_input(page, sts, settings):
    run = keyword_run(sts, 1)
    url = reverse("transforms:judge-reports")
    response = page.post(url, {"kind": "run", "run": run.pk, "judges": ["default"]})
    report = JudgeReport.objects.get()
    assert response["Location"] == reverse("transforms:judge-report", args=[report.pk])
    assert report.kind == "run" and list(report.runs.all()) == [run] and report.judges == ["default"]
    selection = selection_fields()
    html = page.post(url, {**selection, "candidates": ["default"]}).content.decode()
    assert "at least two candidates" in html and value_of(html, "sel-limit") == "5"
    settings.TRANSFORM_BACKENDS = {**settings.TRANSFORM_BACKENDS, "other": settings.TRANSFORM_BACKENDS["default"]}
    reset_backends()
    response = page.post(url, {**selection, "candidates": ["default", "other"]})
    selection = JudgeReport.objects.get(kind="selection")
    assert response["Location"] == reverse("transforms:judge-report", args=[selection.pk])
    # Pooled over two transformations, judged on similarity too (issue 15's selection options).
    pooled = {**selection_fields(), "transformations": ["backtranslation"], "criteria": ["quality", "similarity"]}
    response = page.post(url, {**pooled, "candidates": ["default", "other"], "top_k": "2"})
    reset_backends()
    report = JudgeReport.objects.filter(kind="selection").latest("pk")
    assert response["Location"] == reverse("transforms:judge-report", args=[report.pk])
    assert report.options["transformations"] == ["paraphrase", "backtranslation"] and report.options["top_k"] == 2
    assert report.options["criteria"] == ["quality", "similarity"]
    JudgeReport.objects.filter(pk=report.pk).delete()
    # Refused: a limit below 1 (next to the field, input kept); an unknown judge.
    html = page.post(url, {"kind": "evaluation", "dataset": "demo-sts", "judges": "default", "limit": "0"}).content
    html = html.decode()
    assert "greater than or equal to 1" in field_errors(html, "ev-limit") and value_of(html, "ev-limit") == "0"
    html = page.post(url, {"kind": "run", "run": run.pk, "judges": ["nobody"]}).content.decode()
    assert "nobody is not one of the available choices" in field_errors(html, "run-judges")
    assert JudgeReport.objects.count() == 2


# --- study design --------------------------------------------------------------------------------


DESIGN = {
    "name": "page-study",
    "project": "shiftlab",
    "kind": "rewrite",
    "items_per_transformation": "5",
    "raters_per_item": "2",
    "batch_size": "5",
    "controls_per_batch": "2",
    "min_control_ratings": "2",
    "control_margin": "1",
    "llm_flag_deviation": "2",
    "low_rating_max": "2",
    "max_confirmed_flags": "3",
    "min_seconds_per_item": "3",
    "flag_too_fast_share": "0",
    "flag_straight_line_run": "0",
    "flag_low_competence": "0",
    "acceptance_threshold": "3",
    "adaptive_alpha": "0.05",
    "adaptive_min_items": "10",
    "batches_released": "0",
    "seed": "0",
}


@pytest.fixture
def annotators(django_user_model):
    return [make_user(django_user_model, name, Role.ANNOTATOR) for name in ("anna", "bob")]


def test_the_design_form_explains_checks_and_creates_a_study(page, sts, annotators):
    run = keyword_run(sts, 1)
    form = page.get(reverse("annotation:studies")).content.decode()
    assert "Control pairs with a known answer" in form and "Default 20." in form  # help text, defaults
    url = reverse("annotation:studies")
    checked = page.post(url, {**DESIGN, "runs": [run.pk], "action": "check"}).content.decode()
    # 5 items x 2 raters x 2 questions = 20 ratings; 2 annotators: 5 items and 2 controls each.
    assert "<strong>20 ratings</strong>" in checked and "meets 2 controls" in checked
    assert not Study.objects.exists()
    response = page.post(url, {**DESIGN, "runs": [run.pk], "action": "create"})
    study = Study.objects.get(name="page-study")
    assert response["Location"] == reverse("annotation:study", args=[study.pk])
    assert study.design["items_per_transformation"] == 5 and study.design["llm_judges"] == []


def test_the_design_form_declares_a_single_rater_pilot_and_a_minimum_agreement(page, sts, annotators):
    run = keyword_run(sts, 1)
    url = reverse("annotation:studies")
    form = page.get(url).content.decode()
    assert "Single-rater pilot" in form and "Minimum agreement (AC2 lower bound)" in form
    html = page.post(url, {**DESIGN, "min_ac2_lower": "1.5", "runs": [run.pk]}).content.decode()
    assert "less than or equal to 1" in field_errors(html, "id_min_ac2_lower")
    fields = {**DESIGN, "raters_per_item": "1", "single_rater_pilot": "on", "min_ac2_lower": "0.2"}
    page.post(url, {**fields, "runs": [run.pk], "action": "create"})
    design = Study.objects.get(name="page-study").design
    assert design["single_rater_pilot"] is True and design["min_ac2_lower"] == 0.2
    # Left at their defaults, the fields stay out of the design (and of its hash).
    page.post(url, {**DESIGN, "name": "plain", "runs": [run.pk], "action": "create"})
    plain = Study.objects.get(name="plain").design
    assert "single_rater_pilot" not in plain and "min_ac2_lower" not in plain


def test_designs_that_cannot_work_are_refused_next_to_the_field(page, researcher_client, sts, annotators):
    run = keyword_run(sts, 1)
    url = reverse("annotation:studies")
    # The demo: 1 control per 5 items, a check that needs 2 control answers.
    html = page.post(url, {**DESIGN, "controls_per_batch": "1", "runs": [run.pk]}).content.decode()
    assert "meets 1 control" in field_errors(html, "id_controls_per_batch")
    assert value_of(html, "id_controls_per_batch") == "1" and value_of(html, "id_name") == "page-study"
    html = page.post(url, {**DESIGN, "raters_per_item": "3", "runs": [run.pk]}).content.decode()
    assert "only 2 annotator accounts" in field_errors(html, "id_raters_per_item")
    html = page.post(url, {**DESIGN, "items_per_transformation": "500", "runs": [run.pk]}).content.decode()
    assert "ask for at most" in field_errors(html, "id_items_per_transformation")
    assert not Study.objects.exists()
    # The API refuses the same design through the same check.
    body = {"name": "api-study", "runs": [run.pk], "design": {"items_per_transformation": 5, "batch_size": 5}}
    body["design"].update(controls_per_batch=1, min_control_ratings=2, llm_judges=[])
    response = researcher_client.post("/api/studies/", body, format="json")
    assert response.status_code == 400 and "meets 1 control" in response.json()["detail"]
    with pytest.raises(CommandError, match="meets 1 control"):
        call_command("study", "create", "cli-study", "--runs", str(run.pk), "--design", json.dumps(body["design"]))
    assert not Study.objects.exists()


# --- benchmarks ---------------------------------------------------------------------------------


def test_a_benchmark_starts_from_an_approved_config_and_refusals_keep_the_form(page, sts, researcher):
    # A real export: a run re-checks the gate result and approval a registered config names.
    study = study_create(
        actor=None,
        request=rostered(StudyCreateRequest(name="approved", runs=[keyword_run(sts, 1)], design=STUDY_DESIGN)),
    )
    gate = GateResult.objects.create(
        study=study, transformation="random_keywords", passed=True, evidence={"state": "passed"}, evidence_hash="0" * 64
    )
    Approval.objects.create(gate_result=gate, decision="approve", comment="ok", decided_by=researcher)
    config = benchmark_config_export(
        actor=researcher, request=BenchmarkConfigExportRequest(studies=[study], name="approved")
    )
    url = reverse("evaluation:benchmarks")
    form = page.get(url).content.decode()
    assert f'<option value="{config.pk}" selected>' in form  # the newest approved config
    html = page.post(url, {"config": config.pk, "models": "", "limit": "4"}).content.decode()
    assert "This field is required." in field_errors(html, "bm-models") and value_of(html, "bm-limit") == "4"
    response = page.post(url, {"config": config.pk, "models": "all-MiniLM-L6-v2", "limit": "4"})
    bench = BenchmarkRun.objects.get()
    assert response["Location"] == reverse("evaluation:benchmark", args=[bench.pk])
    assert bench.config_hash == config.config_hash
    assert [t["transformation"] for t in bench.plan["transformations"]] == ["random_keywords"]
    html = page.post(url, {"models": "all-MiniLM-L6-v2"}).content.decode()
    assert "choose at least one dataset" in field_errors(html, "bm-datasets")
    assert BenchmarkRun.objects.count() == 1


# --- human baselines ----------------------------------------------------------------------------


def test_a_baseline_study_is_declared_on_its_page(page, sts):
    url = reverse("evaluation:baselines")
    assert 'id="baseline-form"' in page.get(url).content.decode()  # the page, not a command (issue 31)
    sent = {"name": "sts-humans", "dataset": "demo-sts", "n_instances": "4", "seed": "5", "project": "shiftlab"}
    html = page.post(url, {**sent, "split": "dev"}).content.decode()
    assert "has no split 'dev'" in field_errors(html, "bl-split") and value_of(html, "bl-n_instances") == "4"
    assert not BaselineStudy.objects.exists()
    response = page.post(url, {**sent, "split": "test", "raters_per_instance": "2", "candidates": "9"})
    study = BaselineStudy.objects.get()
    assert response["Location"] == reverse("evaluation:baseline", args=[study.pk])
    assert study.options == {"raters_per_instance": 2} and study.instances.count() == 4 and study.seed == 5
    # The LLM annotator's form is on the study page (running it needs an LLM: not here).
    assert 'id="llm-annotate-form"' in page.get(response["Location"]).content.decode()


def test_annotators_get_403_on_every_form_page(client, django_user_model, sts):
    client.force_login(make_user(django_user_model, "ann", Role.ANNOTATOR))
    for name in ("transforms:runs", "transforms:judge-reports", "annotation:studies", "evaluation:benchmarks"):
        assert client.post(reverse(name), {}).status_code == 403
    assert client.post(reverse("evaluation:baselines"), {}).status_code == 403


def test_the_design_form_promises_no_fixed_adaptive_saving(page, sts, annotators, django_user_model):
    run = keyword_run(sts, 1)
    url = reverse("annotation:studies")
    form = page.get(url).content.decode()
    checked = page.post(
        url,
        {
            **DESIGN,
            "adaptive": "on",
            "assignment": "pull",
            "batches_released": "1",
            "runs": [run.pk],
            "action": "check",
        },
    ).content.decode()
    for html in (form, checked):
        assert "44%" not in html and "41–44%" not in html and "≥ 40%" not in html
    # Before any rating the saving is said to depend on the distance to the threshold, with the replay's table.
    text = html_text.unescape(re.sub(r"<[^>]+>", " ", checked))
    assert "depends on how far" in text and "true mean − threshold" in text
    assert re.search(r"±0\.10\s+\d+%", text) and re.search(r"±0\.75\s+\d+%", text)
    # A design whose gate observes 2 of 3 raters gets that design's own replay table and conditions.
    make_user(django_user_model, "cara", Role.ANNOTATOR)
    gate = page.post(
        url,
        {
            **DESIGN,
            "raters_per_item": "3",
            "adaptive": "on",
            "adaptive_gate_raters": "2",
            "assignment": "pull",
            "batches_released": "1",
            "runs": [run.pk],
            "action": "check",
        },
    ).content.decode()
    gate_text = html_text.unescape(re.sub(r"<[^>]+>", " ", gate))
    assert "the gate on each item's first 2" in gate_text and re.search(r"±0\.10\s+3\d%", gate_text)
    assert "the gate on each item's first 2" not in text
