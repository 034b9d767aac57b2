"""Robustness report of a benchmark run built directly from result rows (no LLM, no Celery): the
page, its exports, the API action and the management command."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from corpora.models import Dataset
from evaluation.item_scores import ItemScores
from evaluation.models import BenchmarkResult, BenchmarkRun
from evaluation.report_robustness import robustness_report_get
from tests.support import RESULT_MODELS as MODELS
from tests.support import benchmark_run_with_results


@pytest.fixture
def run(db) -> BenchmarkRun:
    return benchmark_run_with_results()


def test_report_page_renders_tables_figures_and_export_links(client, researcher, run):
    client.force_login(researcher)
    detail = client.get(reverse("evaluation:benchmark", args=[run.pk]))
    assert reverse("evaluation:robustness", args=[run.pk]) in detail.content.decode()
    page = client.get(reverse("evaluation:robustness", args=[run.pk]))
    assert page.status_code == 200
    html = page.content.decode()
    for title in (
        "Scores per model and axis",
        "Original vs transformed",
        "Model vs baseline",
        "Kendall",
        "Split-half reliability",
        "Embedding drift vs human quality",
        "Rankings with rank intervals and letter groups",
    ):
        assert title in html
    assert "<svg" in html and "unit: dataset, scores averaged over seeds first" in html
    assert "no transformed item of this run has human quality ratings" in html
    assert "robustness.csv" in html and "robustness-axes.tex" in html
    assert all(f"heatmap.{fmt}" in html for fmt in ("svg", "png", "pdf"))
    assert "robustness-ranks.tex?tau_unit=seed_mean" in html and 'id="figure-ranks"' in html
    assert "With 3 datasets no pair can reach p &lt; 0.05" in html
    # run-aggregated, 3 datasets: the Walsh interval is their range, marked with the coverage it has
    assert "(75% only)" in html
    chosen = client.get(reverse("evaluation:robustness", args=[run.pk]), {"baseline_compare": "transformed"})
    assert "the model's transformed score minus the baseline" in chosen.content.decode()
    refused = client.get(reverse("evaluation:robustness", args=[run.pk]), {"tau_unit": "nonsense"})
    assert refused.status_code == 200 and "use one of seed_mean, per_seed" in refused.content.decode()


def test_exports(client, researcher, run):
    client.force_login(researcher)
    url = lambda name: reverse("evaluation:robustness-export", args=[run.pk, name])  # noqa: E731
    rows = list(csv.DictReader(io.StringIO(client.get(url("robustness.csv")).content.decode())))
    assert {"shift per transformation", "model vs baseline", "split-half reliability"} <= {r["table"] for r in rows}
    latex = client.get(url("robustness-axes.tex")).content.decode()
    assert r"\toprule" in latex and "alpha" in latex and r"$\pm$" in latex
    svg = client.get(url("shifts.svg"))
    assert svg["Content-Type"].startswith("image/svg+xml") and b"paraphrase" in svg.content
    png = client.get(url("heatmap.png"))
    assert png["Content-Type"] == "image/png" and png.content.startswith(b"\x89PNG\r\n\x1a\n")
    assert 'filename="run-' in png["Content-Disposition"]
    pdf = client.get(url("dumbbell.pdf"))
    assert pdf["Content-Type"] == "application/pdf" and pdf.content.startswith(b"%PDF-")
    assert client.get(url("drift.png")).status_code == 404  # no rated items: no drift figure
    assert client.get(url("nothing.exe")).status_code == 404
    ranks = client.get(url("robustness-ranks.tex"), {"split_half_splits": "40"}).content.decode()
    assert ranks.startswith("% Shiftlab robustness report") and "split_half_splits=40" in ranks
    assert r"\textsuperscript{a}" in ranks
    bad = client.get(url("robustness.csv"), {"split_half_splits": "-1"})
    assert bad.status_code == 400 and "split_half_splits" in bad.content.decode()


def test_page_is_for_researchers(client, annotator, run):
    client.force_login(annotator)
    assert client.get(reverse("evaluation:robustness", args=[run.pk])).status_code in (302, 403)


def test_api_action(researcher_client, run):
    response = researcher_client.get(f"/api/benchmark-runs/{run.pk}/robustness/")
    assert response.status_code == 200
    data = response.json()
    assert data["model_comparisons"]["baseline"] == "alpha"
    n = {
        t["unit"]: {r["n"] for r in t["rows"]}
        for t in data["shifts"]
        if t["scope"] == "all models" and t["level"] == "transformation"
    }
    assert n == {"pooled": {6}, "run-aggregated": {3}}  # 3 datasets (x 2 seeds), the 3 models averaged
    assert data["options"]["wilcoxon_unit"] == "model_mean"
    assert [r["scope"] for r in data["rankings"]] == ["original", "lexical", "length"]
    assert [row["model"] for row in data["rankings"][0]["rows"]] == list(reversed(MODELS))  # originals rise with m

    response = researcher_client.get(
        f"/api/benchmark-runs/{run.pk}/robustness/", {"wilcoxon_unit": "per_model", "tau_unit": "seed_mean"}
    )
    data = response.json()
    n = {
        t["unit"]: {r["n"] for r in t["rows"]}
        for t in data["shifts"]
        if t["scope"] == "all models" and t["level"] == "transformation"
    }
    assert n == {"pooled": {18}, "run-aggregated": {9}}  # every model x dataset (x seed) a unit
    assert data["options"]["tau_unit"] == "seed_mean" and {t["n"] for t in data["kendall_tau"]} >= {3}
    bad = researcher_client.get(f"/api/benchmark-runs/{run.pk}/robustness/", {"axis_tau": "mean"})
    assert bad.status_code == 400 and "axis_tau" in bad.json()


def test_command_writes_the_files(run, tmp_path):
    out = io.StringIO()
    call_command("benchmark", "report", str(run.pk), "--out", str(tmp_path), stdout=out)
    names = {p.name for p in tmp_path.iterdir()}
    assert {
        "robustness.csv",
        "robustness.json",
        "robustness-axes.tex",
        "dumbbell.svg",
        "shifts.svg",
        "heatmap.svg",
        "heatmap.png",
        "shifts.pdf",
    } <= names
    assert json.loads((tmp_path / "robustness.json").read_text())["models"] == MODELS
    assert "robustness-ranks.tex" in names and "ranks.svg" in names
    call_command(
        "benchmark", "report", str(run.pk), "--out", str(tmp_path / "paper"), "--split-half-on", "scores",
        "--split-half-splits", "1000", stdout=io.StringIO(),
    )  # fmt: skip
    options = json.loads((tmp_path / "paper" / "robustness.json").read_text())["options"]
    assert options["split_half_on"] == "scores" and options["split_half_splits"] == 1000
    first = {name: (tmp_path / name).read_bytes() for name in ("heatmap.svg", "heatmap.png", "shifts.pdf")}
    call_command("benchmark", "report", str(run.pk), "--out", str(tmp_path), stdout=io.StringIO())
    assert {name: (tmp_path / name).read_bytes() for name in first} == first  # deterministic files


class CountingEncoder:
    """A tiny deterministic encoder: letter counts of a few letters (no model download)."""

    model_id, revision, prompts, similarity_fn_name = "counting", "v1", {}, "cosine"

    def __init__(self, alias: str, **_):
        self.alias = alias

    def encode(self, texts, *, batch_size=None, prompt_name=None):
        return np.array([[t.count(c) + 0.5 for c in "aeiost"] for t in texts], dtype=np.float32)


def _rated_paraphrases(run, researcher, *, settings, tmp_path, extra_rater=None):
    """Five paraphrased items of ``sts_a`` (seed 1) rated 5, 4, 3, 2, 1 for quality by ``researcher``
    in a study without controls; ``extra_rater`` (a user) rates them 1, 2, 3, 4, 5. Returns the
    study's annotators."""
    from annotation.models import Annotator, Rating, Study, StudyItem
    from corpora.models import DatasetItem
    from evaluation.encoders import reset_encoders
    from transforms.models import GeneratorConfig, TransformedItem, TransformRun

    settings.EVALUATION_ENCODERS = {"alpha": {"BACKEND": f"{__name__}.CountingEncoder", "OPTIONS": {}}}
    settings.EMBEDDING_CACHE_DIR = tmp_path
    reset_encoders()
    dataset = Dataset.objects.get(name="sts_a")
    generator = GeneratorConfig.objects.create(backend_alias="fake", model="m", params={}, content_hash="g" * 64)
    transform_run = TransformRun.objects.create(
        dataset=dataset, transformation="paraphrase", generator=generator, seed=1, run_hash="h" * 64
    )
    BenchmarkResult.objects.filter(run=run, transformation="paraphrase", seed=1).update(transform_run=transform_run)
    # no controls: every rater's control check passes, so only the rater's status decides what counts
    study = Study.objects.create(
        name="study", design={"controls_per_batch": 0, "min_control_ratings": 0}, design_hash="d" * 64
    )
    annotators = [Annotator.objects.create(study=study, user=researcher)]
    if extra_rater is not None:
        annotators.append(Annotator.objects.create(study=study, user=extra_rater))
    texts = [
        ("a cat sat", "a cat sat"),
        ("the sea is east", "the sea is to the east"),
        ("oats", "stoats at tea"),
        ("it is so", "xyz"),
        ("a test", "a best"),
    ]
    for i, (source, output) in enumerate(texts):
        item = DatasetItem.objects.create(
            dataset=dataset, split="test", item_id=str(i), position=i, payload={}, language="en", content_hash=str(i)
        )
        transformed = TransformedItem.objects.create(
            run=transform_run,
            item=item,
            side="sentence1",
            source_text=source,
            output_text=output,
            ok=True,
            attempts=1,
            target_language="en",
        )
        study_item = StudyItem.objects.create(
            study=study,
            position=i,
            kind="real",
            transformed_item=transformed,
            transformation="paraphrase",
            text_a=source,
            text_b=output,
        )
        for annotator, value in zip(annotators, (5 - i, 1 + i), strict=False):
            Rating.objects.create(
                study_item=study_item, annotator=annotator, question="quality", value=value, submitted_at=timezone.now()
            )
    return annotators


@pytest.fixture
def fresh_encoders():
    from evaluation.encoders import reset_encoders

    yield
    reset_encoders()


def test_drift_vs_quality_from_rated_transformed_items(researcher, run, settings, tmp_path, fresh_encoders):
    _rated_paraphrases(run, researcher, settings=settings, tmp_path=tmp_path)
    report = robustness_report_get(run=run)
    (summary,) = report.drift
    assert summary.transformation == "paraphrase" and summary.correlation.n == 5
    assert summary.qualities == (5.0, 4.0, 3.0, 2.0, 1.0) and summary.drifts[0] == pytest.approx(0, abs=1e-6)
    assert "drift" not in report.notes


def test_drift_vs_quality_leaves_out_rejected_raters(researcher, annotator, run, settings, tmp_path, fresh_encoders):
    from annotation.models import Annotator

    _, second = _rated_paraphrases(run, researcher, settings=settings, tmp_path=tmp_path, extra_rater=annotator)
    both = robustness_report_get(run=run).drift[0].qualities
    assert both == (3.0, 3.0, 3.0, 3.0, 3.0)  # the two raters' means, while both count
    Annotator.objects.filter(pk=second.pk).update(status=Annotator.Status.REJECTED)
    (summary,) = robustness_report_get(run=run).drift
    assert summary.qualities == (5.0, 4.0, 3.0, 2.0, 1.0)  # the rejected rater's ratings no longer count


def test_original_only_run_still_ranks_its_models(client, researcher, run):
    original_only = BenchmarkRun.objects.create(source=BenchmarkRun.Source.DATASETS, model_names=MODELS, status="done")
    for result in run.results.filter(transformation="original"):
        result.pk, result.run = None, original_only
        result.save()
    client.force_login(researcher)
    html = client.get(reverse("evaluation:robustness", args=[original_only.pk])).content.decode()
    assert 'id="original-only"' in html and 'id="rankings"' in html and 'class="rank-table"' in html
    assert "[1, 1]" in html  # gamma leads on every dataset: its interval is the single rank 1


def test_stored_item_scores_make_the_original_ranking_resample_items(client, researcher, run):
    rng = np.random.default_rng(0)
    for result in run.results.filter(transformation="original"):
        values = result.main_score + rng.normal(0, 0.05, 10)
        values += result.main_score - values.mean()  # their mean is the stored main score
        result.item_scores = ItemScores("mean", tuple(f"i{k}" for k in range(10)), tuple(values)).as_json()
        result.save(update_fields=["item_scores"])
    original, lexical, _ = robustness_report_get(run=run).rankings
    assert (original.resampled, original.n_items) == ("item (within each dataset)", (10, 10, 10))
    assert lexical.resampled == "dataset"  # its transformed units have no item scores
    client.force_login(researcher)
    html = client.get(reverse("evaluation:robustness", args=[run.pk])).content.decode()
    assert "unit resampled: item (within each dataset; 30 items in 3 datasets" in html
    assert "unit resampled: dataset (3)" in html


def test_the_run_page_api_and_command_apply_the_runs_preset(client, researcher, researcher_client, run, tmp_path):
    # issue 29: a run made with a paper's preset is reported in that paper's units everywhere
    run.plan = {**(run.plan or {}), "preset": "paraphrasing-paper"}  # its units: τ on seed means, transformed
    run.save(update_fields=["plan"])
    client.force_login(researcher)
    page = client.get(reverse("evaluation:robustness", args=[run.pk])).content.decode()
    assert "the model's transformed score minus the baseline" in page and "preset <strong>paraphrasing-paper" in page
    refused = client.get(reverse("evaluation:robustness", args=[run.pk]), {"baseline_compare": "delta"})
    html = refused.content.decode()
    assert "baseline_compare=&#x27;delta&#x27; conflicts with preset &#x27;paraphrasing-paper&#x27;" in html
    assert "the model's transformed score minus the baseline" in html  # the report keeps the run's units
    data = researcher_client.get(f"/api/benchmark-runs/{run.pk}/robustness/").json()
    assert data["options"]["baseline_compare"] == "transformed" and data["options"]["tau_unit"] == "seed_mean"
    bad = researcher_client.get(f"/api/benchmark-runs/{run.pk}/robustness/", {"baseline_compare": "delta"})
    assert bad.status_code == 400 and "conflicts with preset 'paraphrasing-paper'" in bad.json()["detail"]
    url = reverse("evaluation:robustness-export", args=[run.pk, "robustness.csv"])
    assert client.get(url, {"baseline_compare": "delta"}).status_code == 400
    call_command("benchmark", "report", str(run.pk), "--out", str(tmp_path), stdout=io.StringIO())
    options = json.loads((tmp_path / "robustness.json").read_text())["options"]
    assert options["baseline_compare"] == "transformed"


def test_a_run_without_preset_is_reported_in_the_papers_units(researcher_client, run):
    # the multi-axis paper's protocol, written out here: seeds averaged, datasets the units
    data = researcher_client.get(f"/api/benchmark-runs/{run.pk}/robustness/").json()
    assert {k: data["options"][k] for k in ("tau_unit", "axis_tau", "split_half_on", "split_half_splits")} == {
        "tau_unit": "seed_mean",
        "axis_tau": "axis_mean_scores",
        "split_half_on": "scores",
        "split_half_splits": 1000,
    }
    assert (data["options"]["shift_interval"], data["options"]["shift_figure_unit"]) == ("walsh", "run_aggregated")
    assert {t["n"] for t in data["kendall_tau"]} == {3}  # one τ per dataset (3), not per dataset × seed (6)
    assert all(r["ci_method"] == "walsh" for t in data["shifts"] for r in t["rows"])
