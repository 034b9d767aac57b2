"""The sensitivity section of the robustness report with a real embedding model (issue 30): the
similarity drop of negated demo STS pairs is checked against the pairs read from the file,
encoded by sentence-transformers without the cache and compared with scipy's cosine; the
invariance comes from the run's paraphrase results, the summary is their harmonic mean, and the
page and the figures show it."""

from __future__ import annotations

import csv

import numpy as np
import pytest
from django.conf import settings as django_settings
from django.urls import reverse
from scipy import stats
from scipy.spatial.distance import cosine

from corpora.services import dataset_import
from evaluation.encoders import get_encoder
from evaluation.figures import report_figures
from evaluation.models import BenchmarkResult, BenchmarkRun
from evaluation.report_robustness import robustness_report_get
from tests.meaning_change_support import negated, negation_run

pytestmark = pytest.mark.django_db

MODEL = "all-MiniLM-L6-v2"
LIMIT = 8


def test_the_report_measures_how_far_a_model_moves_negated_pairs_apart(client, researcher, settings, tmp_path):
    settings.EMBEDDING_CACHE_DIR = tmp_path / "embeddings"
    demo = django_settings.BASE_DIR / "fixtures/sts/demo-sts.csv"
    sts = dataset_import(source=demo, task="sts", name="demo-sts")
    negations = negation_run(sts, limit=LIMIT, sides=("sentence2",))
    run = BenchmarkRun.objects.create(source=BenchmarkRun.Source.CONFIG, model_names=[MODEL], status="done")
    common = {"run": run, "model": MODEL, "model_id": MODEL, "model_revision": "r", "dataset": sts, "n_items": LIMIT}
    common["main_metric"] = "cosine_spearman"
    BenchmarkResult.objects.create(**common, transformation="original", axis="", seed=0, main_score=0.8)
    BenchmarkResult.objects.create(
        **common, transformation="paraphrase", axis="lexical", seed=1, main_score=0.72, original_main_score=0.8
    )
    BenchmarkResult.objects.create(
        **common,
        transformation="negation",
        axis="sensitivity",
        seed=1,
        main_score=0.5,
        original_main_score=0.8,
        transform_run=negations,
    )

    report = robustness_report_get(run=run)
    assert "sensitivity" not in report.notes
    [row] = report.sensitivity
    [(dataset, transformation, drop)] = row.drops

    # Independent: the first pairs of the file, encoded without the cache, scipy's cosine.
    with demo.open(newline="") as f:
        pairs = [(r["sentence1"], r["sentence2"]) for r in csv.DictReader(f)][:LIMIT]
    vectors = get_encoder(MODEL).encode([t for a, b in pairs for t in (a, b, negated(b))])
    before = np.array([1 - cosine(vectors[3 * i], vectors[3 * i + 1]) for i in range(LIMIT)])
    after = np.array([1 - cosine(vectors[3 * i], vectors[3 * i + 2]) for i in range(LIMIT)])
    assert (dataset, transformation, drop.n) == ("demo-sts", "negation", LIMIT)
    assert drop.mean_drop.estimate == pytest.approx(float(np.mean(before - after)), abs=1e-5)
    assert drop.share_dropped.estimate == pytest.approx(float(np.mean(after < before)))
    assert drop.mean_drop.low <= drop.mean_drop.estimate <= drop.mean_drop.high
    # Invariance: the paraphrase kept 0.72 / 0.8 of the score; the summary is the harmonic mean.
    assert row.invariance == pytest.approx(0.9)
    assert row.sensitivity == pytest.approx(float(np.mean(after < before)))
    assert row.summary == pytest.approx(stats.hmean([0.9, row.sensitivity]))

    assert "invariance_sensitivity" in report_figures(report)
    assert report.as_dict()["invariance_sensitivity"][0]["summary"] == pytest.approx(row.summary)
    client.force_login(researcher)
    page = client.get(reverse("evaluation:robustness", args=[run.pk])).content.decode()
    assert 'id="sensitivity-table"' in page and 'id="figure-invariance_sensitivity"' in page
    print(f"\n{MODEL} on {LIMIT} negated demo STS pairs: mean drop {drop.mean_drop}, share {drop.share_dropped}")
