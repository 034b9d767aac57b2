"""The noise axis end to end (issue 30): typo runs at 2/5/10/20% on a slice of STS-B, benchmarked
with the packaged embedding model from a validated config; the robustness report carries the
severity curve, its area and its figure, on the page and in the files."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest
from django.urls import reverse
from scipy import stats

from core.hashing import sha256_text
from core.roles import Role
from corpora.services import ImportOptions, dataset_import
from evaluation.benchmark_services import benchmark_run_create_from_config
from evaluation.encoders import get_encoder
from evaluation.models import BenchmarkResult
from evaluation.report_robustness import robustness_report_files, robustness_report_get
from tests.support import config_text, make_user, page_as
from transforms.chunk_services import transform_run_execute_inline
from transforms.noise import perturb
from transforms.services import TransformRunsStartRequest, transform_runs_start

MODEL = "all-MiniLM-L6-v2"
SEVERITIES = (2, 5, 10, 20)
SEEDS = (1, 2)


@pytest.mark.heavy  # a real embedding model
@pytest.mark.django_db
def test_typos_at_four_severities_give_a_curve_and_its_area(
    shared_data, tmp_path, settings, django_user_model, django_capture_on_commit_callbacks
):
    settings.EMBEDDING_CACHE_DIR = tmp_path / "embeddings"
    settings.DATA_DIR = tmp_path
    lines = (shared_data / "stsb-multi-mt/stsb-en-test.csv").read_text(encoding="utf-8").splitlines(keepends=True)
    path = tmp_path / "stsb-en-test-30.csv"
    path.write_text("".join(lines[:30]), encoding="utf-8")  # headerless: sentence1, sentence2, score
    options = ImportOptions(columns=["sentence1", "sentence2", "score"])
    dataset_import(source=path, task="sts", name="stsb-en-test-30", options=options)
    runs = [
        transform_run_execute_inline(run_id=run.pk)
        for seed in SEEDS
        for run in transform_runs_start(
            actor=None,
            request=TransformRunsStartRequest(
                project=None, dataset="stsb-en-test-30", transformation="typos", seed=seed
            ),
        )
    ]
    assert sorted({r.transformation for r in runs}) == sorted(f"typos_{s}" for s in SEVERITIES)
    with django_capture_on_commit_callbacks(execute=True):
        run = benchmark_run_create_from_config(text=config_text(runs), fmt="yaml", models=[MODEL])
    run.refresh_from_db()
    assert run.status == "succeeded" and run.done == run.total == 1 + len(SEVERITIES) * len(SEEDS), run.error

    report = robustness_report_get(run=run)
    assert "noise" in report.axes
    (curve,) = report.severity_curves
    assert (curve.model, curve.kind, curve.n_units) == (MODEL, "typos", len(SEEDS))
    # Independently: the stored deltas, averaged per severity, and numpy's trapezoid over them.
    rows = BenchmarkResult.objects.filter(run=run, axis="noise")
    means = [np.mean([r.delta for r in rows if r.transformation == f"typos_{s}"]) for s in SEVERITIES]
    assert [p.delta for p in curve.points] == pytest.approx([0.0, *means], abs=1e-12)
    assert curve.area == pytest.approx(np.trapezoid([0.0, *means], [0, *SEVERITIES]) / 20, abs=1e-12)
    assert all(p.low <= p.delta <= p.high for p in curve.points)
    # More typos cost more: the 20% point lies below the 2% one, and the area is negative.
    assert curve.points[-1].delta < curve.points[1].delta and curve.area < 0

    # Seed 1 at 2% recomputed outside the benchmark: perturb, encode, cosine, scipy's Spearman.
    rows30 = list(csv.reader(io.StringIO("".join(lines[:30]))))
    noisy = [
        [perturb(t, kind="typos", severity=2, seed=1, text_id=sha256_text(t), language="en") for t in side]
        for side in ([r[0] for r in rows30], [r[1] for r in rows30])
    ]
    vectors = [np.asarray(get_encoder(MODEL).encode(side), dtype=float) for side in noisy]
    a, b = (v / np.linalg.norm(v, axis=1, keepdims=True) for v in vectors)
    expected = stats.spearmanr((a * b).sum(axis=1), [float(r[2]) for r in rows30]).statistic
    assert rows.get(transformation="typos_2", seed=1).main_score == pytest.approx(expected, abs=1e-4)

    files = robustness_report_files(report)
    assert "typos" in files["severity.svg"] and files["severity.png"][:4] == b"\x89PNG"
    assert f"severity curve area,unit: dataset × seed at every severity,{MODEL},typos,area," in files["robustness.csv"]
    rita = make_user(django_user_model, "rita", Role.RESEARCHER)
    page = page_as(rita).get(reverse("evaluation:robustness", args=[run.pk])).content.decode()
    assert 'id="severity-table"' in page and 'id="figure-severity"' in page
    assert f"{curve.area:.4f}" in page
