"""The evaluation side of the loop in the browser, round 2 (issue 31): a failed run is not a dead
end (model picker, failures in words, Resume and Retry), progress updates in place instead of
reloading the page, the robustness report is stored when the run ends, the export page previews
the config, pages name models and the transformation runs a benchmark made, and speak in words."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.staticfiles import finders
from django.urls import reverse
from huggingface_hub import constants as hub_constants

from annotation.models import Approval, BenchmarkConfig, GateResult
from annotation.studies.design_services import StudyCreateRequest, study_create
from corpora.services import dataset_import
from evaluation import report_services
from evaluation.benchmark_execution import benchmark_run_finalize
from evaluation.models import BenchmarkResult, BenchmarkRun, StoredRobustnessReport
from evaluation.report_robustness import CSV_NAME, robustness_options, robustness_report_file, robustness_report_get
from evaluation.report_services import robustness_report_read
from tests.support import benchmark_run_with_results, keyword_run, roster_at_least, rostered
from tests.test_projects_annotation import DESIGN as STUDY_DESIGN

DEMO_STS = settings.BASE_DIR / "fixtures/sts/demo-sts.csv"
INTERNALS = ("EVALUATION_ENCODERS", "LocalEntryNotFoundError", "manage.py", "POST /api", "Traceback")


@pytest.fixture
def page(client, researcher):
    client.force_login(researcher)
    return client


@pytest.fixture
def sts(db):
    return dataset_import(source=DEMO_STS, task="sts", name="demo-sts")


@pytest.fixture
def run(db) -> BenchmarkRun:
    return benchmark_run_with_results()


def visible(html: str) -> str:
    """The page's text a reader sees: the collapsed "For scripts" notes and tags left out."""
    html = re.sub(r'<details class="for-scripts">.*?</details>', "", html, flags=re.S)
    return re.sub(r"<[^>]+>", " ", html)


# --- 9a: progress without full-page reloads ------------------------------------------------------


def test_no_page_reloads_itself():
    found = [
        p.name for p in Path(settings.BASE_DIR, "templates").rglob("*.html") if 'http-equiv="refresh"' in p.read_text()
    ]
    assert found == []


def test_a_running_run_updates_in_place_and_stops_when_it_ends(page, run):
    BenchmarkRun.objects.filter(pk=run.pk).update(status="running", total=40, done=12)
    html = page.get(reverse("evaluation:benchmark", args=[run.pk])).content.decode()
    assert '<meta name="shiftlab-poll" content="2">' in html and "live.js" in html
    assert re.search(r'id="run-badge" data-live role="status"', html)  # announced when the status changes
    assert 'id="run-state" data-live' in html and "12/40 units scored" in html
    script = Path(finders.find("live.js")).read_text()
    assert "shiftlab-poll" in script and "[data-live]" in script
    BenchmarkRun.objects.filter(pk=run.pk).update(status="succeeded", done=40)
    assert "shiftlab-poll" not in page.get(reverse("evaluation:benchmark", args=[run.pk])).content.decode()


# --- 3: a failed run is not a dead end -----------------------------------------------------------


def test_a_failed_run_offers_resume_and_retry_in_words(page, run, django_capture_on_commit_callbacks):
    BenchmarkRun.objects.filter(pk=run.pk).update(
        status="failed", total=40, done=39, n_failed=1, error="alpha / sts_a / original seed 0: the model process died"
    )
    html = page.get(reverse("evaluation:benchmark", args=[run.pk])).content.decode()
    resume = reverse("evaluation:benchmark-resume", args=[run.pk])
    assert f'action="{resume}"' in html and ">Resume</button>" in html
    assert f"?retry={run.pk}#launch" in html and "Retry with changes" in html
    assert not [word for word in INTERNALS if word in visible(html)]
    with django_capture_on_commit_callbacks(execute=False):
        response = page.post(resume)
    assert response.status_code == 302
    run.refresh_from_db()
    assert run.status == "pending" and run.n_failed == 0 and run.error == ""


def test_retry_fills_the_launch_form_as_the_run_was_started(page, sts):
    failed = BenchmarkRun.objects.create(
        source="datasets",
        model_names=["default"],
        plan={"datasets": ["demo-sts"]},
        item_limit=7,
        name="try",
        status="failed",
    )
    html = page.get(reverse("evaluation:benchmarks"), {"retry": failed.pk}).content.decode()
    assert re.search(r'<input type="checkbox" name="models" value="default"[^>]*checked', html)
    assert re.search(r'name="limit" value="7"', html) and re.search(r'<option value="demo-sts" selected>', html)
    # Its perturbed sides come back too; a run of a config this server has no record of (uploaded,
    # never registered) does not come back as a run of its datasets alone.
    sided = BenchmarkRun.objects.create(
        source="config",
        config_hash="f" * 64,
        model_names=["default"],
        plan={"datasets": ["demo-sts"], "sides": ["document", "both"], "document_scope": "documents"},
        status="failed",
    )
    html = page.get(reverse("evaluation:benchmarks"), {"retry": sided.pk}).content.decode()
    assert re.search(r'name="sides" value="document"[^>]*checked', html), html
    assert re.search(r'name="sides" value="both"[^>]*checked', html)
    assert '<option value="demo-sts" selected>' not in html
    assert re.search(r'<option value="documents" selected>', html)


def test_the_model_picker_lists_what_this_server_runs(page, monkeypatch):
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", True)
    html = page.get(reverse("evaluation:benchmarks")).content.decode()
    assert "<legend>Models</legend>" in html
    assert re.search(r'value="default"[^>]*checked[^>]*>\s*default \(all-MiniLM-L6-v2\)', html)
    assert 'name="other_models"' not in html  # no free text where the hub is off
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", False)
    assert 'name="other_models"' in page.get(reverse("evaluation:benchmarks")).content.decode()


def test_an_unavailable_model_is_refused_before_the_run_starts_in_words(page, sts, monkeypatch):
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", True)
    url = reverse("evaluation:benchmarks")
    html = page.post(url, {"models": "no-such-org/no-such-model", "datasets": ["demo-sts"]}).content.decode()
    assert "Model &#x27;no-such-org/no-such-model&#x27; is not available on this server" in html
    assert "does not download models from the Hugging Face hub" in html
    assert not [word for word in INTERNALS if word in visible(html)]
    assert not BenchmarkRun.objects.exists()


def test_a_server_without_models_says_so(page, sts, settings):
    settings.EVALUATION_ENCODERS = {}
    html = page.post(reverse("evaluation:benchmarks"), {"models": "default", "datasets": ["demo-sts"]}).content.decode()
    assert "No embedding model is set up on this server" in html and "EVALUATION_ENCODERS" not in html
    assert not BenchmarkRun.objects.exists()


# --- 4: the report is stored when the run ends ---------------------------------------------------


def test_the_report_is_computed_when_the_run_ends_and_read_back(
    page, run, monkeypatch, django_capture_on_commit_callbacks
):
    BenchmarkRun.objects.filter(pk=run.pk).update(
        status="running", total=BenchmarkResult.objects.filter(run=run).count()
    )
    with django_capture_on_commit_callbacks(execute=True):
        benchmark_run_finalize(run_id=run.pk)  # eager Celery: the report task runs at once
    stored = StoredRobustnessReport.objects.get(run=run)
    fresh = robustness_report_get(run=run)

    def not_again(**kwargs):
        raise AssertionError("the report was computed again")

    monkeypatch.setattr(report_services, "robustness_report_get", not_again)
    monkeypatch.setattr(report_services, "report_figures", not_again)
    html = page.get(reverse("evaluation:robustness", args=[run.pk])).content.decode()
    assert 'id="report-computed"' in html and "when the run ended" in html and "<svg" in html
    run.refresh_from_db()
    report, _, row = robustness_report_read(run=run, options=robustness_options(run=run))
    assert row.pk == stored.pk
    assert robustness_report_file(report, CSV_NAME) == robustness_report_file(fresh, CSV_NAME)


# --- 7: state carried between pages --------------------------------------------------------------


def test_the_run_page_names_models_and_the_transformation_runs_it_made(page, sts):
    made, reused = keyword_run(sts, 1), keyword_run(sts, 2)
    made.status, made.done, made.total = "running", 3, 10
    made.save()
    bench = BenchmarkRun.objects.create(
        source="config",
        model_names=["default"],
        status="running",
        total=2,
        plan={"transform_runs": {"a": made.pk, "b": reused.pk}, "transform_runs_created": [made.pk]},
    )
    BenchmarkResult.objects.create(
        run=bench,
        model="default",
        model_id="sentence-transformers/all-MiniLM-L6-v2",
        model_revision="r",
        dataset=sts,
        transformation="original",
        axis="",
        seed=0,
        main_metric="cosine_spearman",
        main_score=0.8,
        n_items=10,
    )
    html = page.get(reverse("evaluation:benchmark", args=[bench.pk])).content.decode()
    assert "default (sentence-transformers/all-MiniLM-L6-v2)" in html
    link = f'href="{reverse("transforms:run", args=[made.pk])}">transformation run #{made.pk}</a>'
    assert f"{link}, <strong>made for this benchmark" in html
    assert "3 of 10 texts generated" in html
    assert f"transformation run #{reused.pk}</a>, made before and reused" in html


def test_the_export_page_previews_the_config_before_writing_it(page, sts, researcher):
    roster_at_least(sts.project, STUDY_DESIGN.raters_per_item)
    study = study_create(
        actor=None,
        request=rostered(StudyCreateRequest(name="approved", runs=[keyword_run(sts, 1)], design=STUDY_DESIGN)),
    )
    gate = GateResult.objects.create(
        study=study, transformation="random_keywords", passed=True, evidence={"state": "passed"}, evidence_hash="0" * 64
    )
    Approval.objects.create(gate_result=gate, decision="approve", comment="ok", decided_by=researcher)
    html = page.get(reverse("annotation:exports"), {"preview": "1", "project": study.project.slug}).content.decode()
    assert 'id="export-preview"' in html and "random_keywords" in html and "approved v1" in html
    assert "demo-sts (1)" in html and "The config as YAML" in html
    assert not BenchmarkConfig.objects.exists()


# --- 8: plain words ------------------------------------------------------------------------------


def test_pages_speak_in_words(page, run, sts):
    for name, args in (
        ("evaluation:benchmarks", []),
        ("evaluation:benchmark", [run.pk]),
        ("evaluation:robustness", [run.pk]),
        ("annotation:exports", []),
        ("transforms:runs", []),
        ("transforms:judge-reports", []),
        ("transforms:sensitivity", []),
        ("corpora:list", []),
        ("corpora:detail", [sts.name]),
    ):
        text = visible(page.get(reverse(name, args=args)).content.decode())
        assert not [word for word in ("manage.py", "POST /api", "n_examples") if word in text], name
    report = page.get(reverse("evaluation:robustness", args=[run.pk])).content.decode()
    assert ">tau_unit<" not in report and "Ranking stability: rank the models on" in report
    assert "each dataset&#x27;s scores averaged over seeds (default)" in report


def test_a_stored_report_an_older_version_cannot_read_is_computed_again(page, run):
    BenchmarkRun.objects.filter(pk=run.pk).update(status="succeeded")
    run.refresh_from_db()
    report_services.robustness_report_store(run=run)
    StoredRobustnessReport.objects.filter(run=run).update(report=b"not a pickled report")
    assert page.get(reverse("evaluation:robustness", args=[run.pk])).status_code == 200
    report, _, row = robustness_report_read(run=run, options=robustness_options(run=run))
    assert row.report != b"not a pickled report" and list(report.models) == run.model_names


class _Planted:
    """Unpickling this runs ``_PLANTED.append``: a forged row that were unpickled would show it."""

    def __reduce__(self):
        return (_PLANTED.append, ("unpickled",))


_PLANTED: list[str] = []


def test_a_stored_report_altered_in_the_database_is_never_unpickled(page, run):
    # Someone who can write to the database but does not hold SECRET_KEY: a pickle that runs code
    # when loaded, with or without a copied seal, is recomputed instead of loaded.
    import pickle

    BenchmarkRun.objects.filter(pk=run.pk).update(status="succeeded")
    run.refresh_from_db()
    report_services.robustness_report_store(run=run)
    row = StoredRobustnessReport.objects.get(run=run)
    forged = pickle.dumps(_Planted())
    for blob in (forged, bytes(row.report)[:32] + forged):
        StoredRobustnessReport.objects.filter(run=run).update(report=blob)
        assert page.get(reverse("evaluation:robustness", args=[run.pk])).status_code == 200
        report, _, stored = robustness_report_read(run=run, options=robustness_options(run=run))
        assert list(report.models) == run.model_names and bytes(stored.report) != blob
    assert _PLANTED == []


def test_a_stored_report_of_other_code_or_moved_to_another_row_is_computed_again(page, run, monkeypatch):
    # The seal covers the row's run, options and results and the code that computed it: a fix to the
    # report code shows new figures, and a sealed row moved to another run is not taken as its own.
    BenchmarkRun.objects.filter(pk=run.pk).update(status="succeeded")
    run.refresh_from_db()
    options = robustness_options(run=run)
    first = bytes(report_services.robustness_report_store(run=run).report)
    monkeypatch.setattr(report_services, "_code_version", lambda: "other code")
    _, _, row = robustness_report_read(run=run, options=options)
    assert bytes(row.report) != first  # computed again under the new code
    monkeypatch.undo()
    sealed = bytes(report_services.robustness_report_store(run=run).report)
    assert report_services._opened(StoredRobustnessReport.objects.get(run=run)) is not None
    StoredRobustnessReport.objects.filter(run=run).update(results_key="0:0")
    assert report_services._opened(StoredRobustnessReport.objects.get(run=run, report=sealed)) is None


def test_a_reader_varying_the_options_leaves_the_runs_own_report_and_a_few_others_stored(page, run):
    # Each options set asked for is stored; a reader asking for many (splits go to thousands) must
    # not grow the database without bound, nor push out the report of the run's own options.
    from dataclasses import replace

    BenchmarkRun.objects.filter(pk=run.pk).update(status="succeeded")
    run.refresh_from_db()
    own = robustness_options(run=run)
    report_services.robustness_report_store(run=run)
    for splits in range(1, report_services.STORED_OTHER_OPTIONS + 5):
        robustness_report_read(run=run, options=replace(own, split_half_splits=splits))
    rows = StoredRobustnessReport.objects.filter(run=run)
    assert rows.count() == report_services.STORED_OTHER_OPTIONS + 1
    assert rows.filter(options_key=report_services._options_key(own)).exists()
    newest = replace(own, split_half_splits=report_services.STORED_OTHER_OPTIONS + 4)
    assert rows.filter(options_key=report_services._options_key(newest)).exists()
