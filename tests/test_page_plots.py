"""Pictures where they read faster than tables (issue 20): a run's edit-distance histogram, a judge
report's score distributions, and one sentence instead of empty tables on the robustness report of
a run that scored the original data only. Rows are built directly: no LLM, no encoder."""

from __future__ import annotations

from dataclasses import asdict

import pytest
from django.conf import settings
from django.urls import reverse

from corpora.services import dataset_import
from evaluation.models import BenchmarkResult, BenchmarkRun
from tests.support import benchmark_run_with_results, keyword_run
from transforms.judging import degenerate_judges, score_counts, summarize_run
from transforms.models import JudgeReport, TransformedItem

pytestmark = pytest.mark.django_db


@pytest.fixture
def sts(db):
    return dataset_import(source=settings.BASE_DIR / "fixtures/sts/demo-sts.csv", task="sts", name="demo-sts")


def test_run_page_shows_the_edit_distance_histogram(client, researcher, sts):
    run = keyword_run(sts, seed=3)
    n_ok = TransformedItem.objects.filter(run=run, ok=True).count()
    client.force_login(researcher)
    page = client.get(reverse("transforms:run", args=[run.pk])).content.decode()
    assert 'id="figure-edit-distance"' in page
    assert f"Histogram of edit distances over {n_ok} texts" in page
    assert ' style="' not in page.split('id="figure-edit-distance"')[1].split("</figure>")[0]


def test_run_page_without_successful_texts_has_no_histogram(client, researcher, sts):
    run = keyword_run(sts, seed=3)
    TransformedItem.objects.filter(run=run).update(ok=False, error_type="empty")
    client.force_login(researcher)
    page = client.get(reverse("transforms:run", args=[run.pk])).content.decode()
    assert "figure-edit-distance" not in page


def test_judge_report_page_shows_score_distributions(client, researcher, sts):
    scores = {("default", "quality"): [4.0] * 19 + [5.0], ("default", "fluency"): [1.0, 3.0, 5.0, 5.0] * 5}
    summary = summarize_run(
        judge="default",
        scores={kind: values for (_, kind), values in scores.items()},
        languages=["en"] * 20,
        seed=0,
        n_resamples=200,
    )
    report = JudgeReport.objects.create(
        kind=JudgeReport.Kind.RUN,
        dataset=sts,
        judges=["default"],
        options={"seed": 0, "judge_params": {"temperature": 0.0}, "n_resamples": 200},
        status="succeeded",
        result={
            "run": 1,
            "transformation": "paraphrase",
            "dataset": sts.name,
            "n_texts": 20,
            "n_ok": 20,
            "judges": [{"model": "qwen-judge", **asdict(summary)}],
            "degenerate_judges": degenerate_judges(scores),
            "score_counts": score_counts(scores),
        },
    )
    client.force_login(researcher)
    page = client.get(reverse("transforms:judge-report", args=[report.pk])).content.decode()
    assert 'id="figure-scores-quality"' in page and 'id="figure-scores-fluency"' in page
    assert "qwen-judge (default) (n=20)" in page
    # The degeneracy warning and the picture that shows it sit on the same page.
    assert "Degenerate judge" in page


def test_robustness_report_of_an_original_only_run_says_what_to_add(client, researcher):
    full = benchmark_run_with_results()
    original_only = BenchmarkRun.objects.create(source=BenchmarkRun.Source.CONFIG, model_names=["alpha"], status="done")
    for result in full.results.filter(transformation="original", model="alpha"):
        result.pk, result.run = None, original_only
        result.save()
    assert not BenchmarkResult.objects.filter(run=original_only).exclude(transformation="original").exists()
    client.force_login(researcher)

    page = client.get(reverse("evaluation:robustness", args=[original_only.pk])).content.decode()
    assert 'id="original-only"' in page and "scored the original data only" in page
    assert "add transformations" in page and reverse("annotation:exports") in page
    assert "<table" not in page and "Figures" not in page

    complete = client.get(reverse("evaluation:robustness", args=[full.pk])).content.decode()
    assert "original-only" not in complete and 'id="axis-table"' in complete
    # Inline figures carry no style attribute (the CSP would block it and the figure turn black).
    assert "<svg" in complete and ' style="' not in complete
