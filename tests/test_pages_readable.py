"""Pages say things in words (issue 20, "Raw internals"): generator parameters and judge options
read as text, models by name with the backend alias secondary, the site's own 404 page even with
DEBUG on, plurals that agree with their number, and a warning for a judge that gives every text
the same score. Stored rows are written directly: no LLM is needed."""

from __future__ import annotations

import io
from dataclasses import asdict

import pytest
from django.conf import settings
from django.core.management import call_command
from django.template.loader import render_to_string
from django.urls import reverse

from corpora.services import dataset_import
from tests.support import benchmark_run_with_results
from transforms.judge_tables import report_warnings
from transforms.judging import degenerate_judges, summarize_run
from transforms.models import GeneratorConfig, JudgeReport, TransformRun
from transforms.selection import CandidateStats, SelectionReport, compare_kind

pytestmark = pytest.mark.django_db

PARAMS = {"temperature": 0.7, "top_p": 0.95, "max_tokens": 256, "max_attempts": 3}
PARAMS_TEXT = "temperature 0.7 · top-p 0.95 · max 256 tokens · up to 3 attempts"


@pytest.fixture
def sts(db):
    return dataset_import(source=settings.BASE_DIR / "fixtures/sts/demo-sts.csv", task="sts", name="demo-sts")


def _run(dataset, *, model: str, alias: str = "default", transformation: str = "paraphrase") -> TransformRun:
    generator = GeneratorConfig.objects.create(
        backend_alias=alias, model=model, params=PARAMS, content_hash=f"{alias}-{model}-{transformation}"
    )
    return TransformRun.objects.create(
        dataset=dataset,
        transformation=transformation,
        generator=generator,
        seed=1,
        run_hash="h" * 64,
        status=TransformRun.Status.SUCCEEDED,
        total=1,
        done=1,
    )


# --- 1. generator parameters and models ---------------------------------------------------------


def test_run_pages_show_parameters_in_words_and_the_model_by_name(client, researcher, sts):
    run = _run(sts, model="qwen2.5-coder-1.5b-instruct")
    client.force_login(researcher)
    detail = client.get(reverse("transforms:run", args=[run.pk])).content.decode()
    assert PARAMS_TEXT in detail and "{&#x27;temperature&#x27;" not in detail and "'temperature'" not in detail
    assert 'qwen2.5-coder-1.5b-instruct <span class="muted">(default)</span>' in detail
    assert "1/1 text " in detail or "1/1 text<" in detail  # not "1/1 texts"
    listing = client.get(reverse("transforms:runs")).content.decode()
    assert 'qwen2.5-coder-1.5b-instruct <span class="muted">(default)</span>' in listing


def test_a_generator_without_a_model_shows_the_model_its_alias_is_configured_with(client, researcher, sts, settings):
    settings.TRANSFORM_BACKENDS = {
        "small": {"BACKEND": "transforms.backends.openai_compat.OpenAICompatBackend", "OPTIONS": {"model": "smollm2"}}
    }
    run = _run(sts, model="", alias="small")
    client.force_login(researcher)
    detail = client.get(reverse("transforms:run", args=[run.pk])).content.decode()
    assert 'smollm2 <span class="muted">(small)</span>' in detail
    judge_page = client.get(reverse("transforms:judge-reports")).content.decode()
    assert '<option value="small">smollm2 (small)</option>' in judge_page  # forms name models too


def test_judge_report_page_shows_options_and_judge_parameters_in_words(client, researcher, sts):
    report = _stored_run_report(sts, scores=[1.0, 2.0, 4.0, 5.0, 3.0])
    client.force_login(researcher)
    page = client.get(reverse("transforms:judge-report", args=[report.pk])).content.decode()
    assert "temperature 0 · top-p 1 · max 16 tokens · up to 3 attempts" in page
    assert "seed 0 · 1000 bootstrap resamples" in page and "judge_params" not in page
    assert 'qwen-judge <span class="muted">(default)</span>' in page  # the stored model, alias secondary
    listing = client.get(reverse("transforms:judge-reports")).content.decode()
    assert 'qwen-judge <span class="muted">(default)</span>' in listing


# --- 2. the site's 404 page, also with DEBUG on -------------------------------------------------


def test_unknown_address_gets_the_sites_404_page_even_with_debug_on(client, researcher, settings):
    settings.DEBUG = True
    for logged_in in (False, True):
        if logged_in:
            client.force_login(researcher)
        response = client.get("/no-such-page/")
        html = response.content.decode()
        assert response.status_code == 404
        assert "URL patterns" not in html and "urlpatterns" not in html
        assert "<h1>Page not found</h1>" in html and reverse("home") in html
        assert response["Content-Security-Policy"] == settings.SHIFTLAB_CSP


def test_a_missing_object_gets_the_sites_404_page_and_the_api_keeps_json(client, researcher, settings):
    settings.DEBUG = True
    client.force_login(researcher)
    missing = client.get(reverse("transforms:run", args=[999999]))
    assert missing.status_code == 404 and "<h1>Page not found</h1>" in missing.content.decode()
    assert "Raised by" not in missing.content.decode()
    for url in ("/api/transform-runs/999999/", "/api/no-such-endpoint/"):
        api = client.get(url)
        assert api.status_code == 404 and api["Content-Type"].startswith("application/json"), url
        assert set(api.json()) == {"detail"}, url  # DRF's own answer, or the middleware's for no route


def test_the_500_page_extends_the_site_without_a_request():
    html = render_to_string("500.html")  # Django's server_error view renders it with no context
    assert "<h1>Something went wrong</h1>" in html and 'href="/"' in html and "shiftlab.css" in html


# --- 3. wording and plurals -----------------------------------------------------------------------


@pytest.fixture
def benchmark_run(db):
    return benchmark_run_with_results()


def test_robustness_page_says_holm_across_the_rows_not_axiss(client, researcher, benchmark_run):
    client.force_login(researcher)
    html = client.get(reverse("evaluation:robustness", args=[benchmark_run.pk])).content.decode()
    assert "axiss" not in html and "transformations of this table" not in html
    assert "Holm across the rows of this table (one per axis)" in html


def test_benchmark_page_agrees_plurals_with_one(client, researcher, benchmark_run):
    benchmark_run.total = benchmark_run.done = 1
    benchmark_run.item_limit = 1
    benchmark_run.save()
    client.force_login(researcher)
    html = client.get(reverse("evaluation:benchmark", args=[benchmark_run.pk])).content.decode()
    assert "1/1 unit<" in html or "1/1 unit " in html
    assert "first 1 example)" in html and "1 examples" not in html and "1/1 units" not in html


# --- 4. degenerate judges -------------------------------------------------------------------------


def _stored_run_report(dataset, *, scores: list[float]) -> JudgeReport:
    """A judged-run report stored as the service stores it, from the pure summaries."""
    run = _run(dataset, model="qwen2.5-coder-1.5b-instruct", transformation=f"paraphrase-{len(scores)}-{scores[0]}")
    run.transformation = "paraphrase"
    run.save()
    summary = summarize_run(
        judge="default",
        scores={"quality": scores, "fluency": scores},
        languages=["en"] * len(scores),
        seed=0,
        n_resamples=200,
    )
    result = {
        "run": run.pk,
        "transformation": "paraphrase",
        "dataset": dataset.name,
        "n_texts": len(scores),
        "n_ok": len(scores),
        "judges": [{"model": "qwen-judge", **asdict(summary)}],
        "degenerate_judges": degenerate_judges({("default", "quality"): scores, ("default", "fluency"): scores}),
    }
    options = {
        "seed": 0,
        "judge_params": {"temperature": 0.0, "top_p": 1.0, "max_tokens": 16, "max_attempts": 3},
        "n_resamples": 1000,
    }
    report = JudgeReport.objects.create(
        kind=JudgeReport.Kind.RUN,
        dataset=dataset,
        judges=["default"],
        options=options,
        status="succeeded",
        result=result,
    )
    report.runs.set([run])
    return report


def test_judge_report_page_warns_about_a_judge_with_one_score_for_every_text(client, researcher, sts):
    degenerate = _stored_run_report(sts, scores=[4.0] * 20)
    varied = _stored_run_report(sts, scores=[1.0, 2.0, 3.0, 4.0, 5.0] * 4)
    client.force_login(researcher)
    page = client.get(reverse("transforms:judge-report", args=[degenerate.pk])).content.decode()
    assert '<p class="warning" role="alert">Degenerate judge: qwen-judge (default) gave quality 4 to every one' in page
    assert "of its 20 scored texts (no variance)" in page
    calm = client.get(reverse("transforms:judge-report", args=[varied.pk])).content.decode()
    assert "Degenerate judge" not in calm and 'class="warning"' not in calm


def test_an_old_stored_report_with_zero_variance_is_flagged_from_its_summaries(sts):
    report = _stored_run_report(sts, scores=[4.0] * 10)
    legacy = {k: v for k, v in report.result.items() if k != "degenerate_judges"}
    warnings = report_warnings("run", legacy)
    assert len(warnings) == 2 and all("every one of its 10 scored texts" in w for w in warnings)


def _stored_selection_report(dataset, *, judge_scores: dict[str, list[float]]) -> JudgeReport:
    runs = [_run(dataset, model=f"model-{c}", alias=c) for c in ("a", "b")]
    candidates = [CandidateStats(c, f"model-{c}", r.pk, 10, 0.0, {}, 0.1, 0.5) for c, r in zip("ab", runs, strict=True)]
    scores = {
        (kind, judge, c): {i: s for i, s in enumerate(values)}
        for kind in ("quality", "fluency")
        for judge, values in judge_scores.items()
        for c in "ab"
    }
    kinds = {
        kind: compare_kind(
            kind=kind,
            candidates=["a", "b"],
            judges=list(judge_scores),
            scores={(j, c): s for (k, j, c), s in scores.items() if k == kind},
            seed=0,
            n_resamples=200,
        )
        for kind in ("quality", "fluency")
    }
    pooled: dict[tuple[str, str], list[float]] = {}
    for (kind, judge, _), judged in scores.items():
        pooled.setdefault((judge, kind), []).extend(judged.values())
    selection = SelectionReport(candidates, list(judge_scores), kinds, alpha=0.05, n_resamples=200, seed=0)
    result = {
        "dataset": dataset.name,
        "transformation": "paraphrase",
        "judge_models": {j: f"model-{j}" for j in judge_scores},
        **asdict(selection),
        "degenerate_judges": degenerate_judges(pooled),
    }
    options = {"seed": 0, "judge_params": {"temperature": 0.0}, "n_resamples": 200, "alpha": 0.05}
    report = JudgeReport.objects.create(
        kind=JudgeReport.Kind.SELECTION,
        dataset=dataset,
        judges=list(judge_scores),
        options=options,
        status="succeeded",
        result=result,
    )
    report.runs.set(runs)
    return report


def test_generator_selection_warns_on_the_page_and_in_judge_show(client, researcher, sts):
    report = _stored_selection_report(sts, judge_scores={"a": [4.0] * 10, "b": [1.0, 2.0, 3.0, 4.0, 5.0] * 2})
    client.force_login(researcher)
    page = client.get(reverse("transforms:judge-report", args=[report.pk])).content.decode()
    assert "Degenerate judge: model-a (a) gave quality 4 to every one of its 20 scored texts" in page
    assert "Degenerate judge: model-b" not in page
    out = io.StringIO()
    call_command("judge", "show", str(report.pk), stdout=out)
    text = out.getvalue()
    assert "Warning: Degenerate judge: model-a (a) gave fluency 4" in text and "crossover matrix" in text
    assert "model-b (b) gave" not in text


def test_a_generator_reads_in_words_wherever_it_is_named():
    generator = GeneratorConfig(
        backend_alias="default", model="qwen", params={"temperature": 0.7, "max_attempts": 1}, content_hash="x"
    )
    assert str(generator) == "qwen via default (temperature 0.7 · 1 attempt)"
