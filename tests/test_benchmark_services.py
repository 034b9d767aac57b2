"""Benchmark services: config verification and planning, paired deltas, result files, resume.

``tests.support.config_text`` builds a validated config in the exact shape ``annotation`` exports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from django.conf import settings

from annotation.configs.config_schema import config_read
from core.errors import ShiftlabError
from corpora.models import Dataset, DatasetItem
from corpora.services import dataset_import
from evaluation.benchmark_execution import BenchmarkRunResumeRequest, benchmark_run_pending_units, benchmark_run_resume
from evaluation.benchmark_plan import PlanError, plan_from_config
from evaluation.benchmark_services import benchmark_run_create_from_config, benchmark_run_create_from_datasets
from evaluation.encoders import get_encoder
from evaluation.item_scores import ItemScores
from evaluation.models import BenchmarkResult, BenchmarkRun
from evaluation.services import examples_evaluate
from tests.support import LIMIT, config_text, keyword_run
from transforms.models import TransformedItem

MODEL = "all-MiniLM-L6-v2"


@pytest.fixture
def sts(db, tmp_path, settings) -> Dataset:
    settings.EMBEDDING_CACHE_DIR = tmp_path / "embeddings"
    settings.DATA_DIR = tmp_path
    return dataset_import(source=settings.BASE_DIR / "fixtures/sts/demo-sts.csv", task="sts", name="bench-sts")


def test_a_tampered_config_is_refused(sts):
    text = config_text([keyword_run(sts, 1)])
    tampered = text.replace("seed: 1\n", "seed: 2\n")
    assert tampered != text
    with pytest.raises(ShiftlabError, match="does not verify.*hash mismatch"):
        benchmark_run_create_from_config(text=tampered, fmt="yaml", models=[MODEL], dispatch=False)
    assert not BenchmarkRun.objects.exists()


def test_plan_takes_only_approved_transformations(sts):
    runs = [keyword_run(sts, 1), keyword_run(sts, 2)]
    plan = plan_from_config(config_read(yaml.safe_load(config_text(runs))))
    assert [(s.transformation, s.seeds) for s in plan.transformations] == [("random_keywords", (1, 2))]
    assert [u.transformation for u in plan.units(["a", "b"])] == ["original", "random_keywords", "random_keywords"] * 2
    rejected = config_read(yaml.safe_load(config_text(runs, rejected=("random_keywords",))))
    with pytest.raises(PlanError, match="approves no transformation"):
        plan_from_config(rejected)


@pytest.mark.heavy  # a real embedding model
def test_paired_delta_leaves_failed_items_out_of_both(sts, django_capture_on_commit_callbacks):
    runs = [keyword_run(sts, 1, fail_items=(0, 3)), keyword_run(sts, 2)]
    with django_capture_on_commit_callbacks(execute=True):
        run = benchmark_run_create_from_config(
            text=config_text(runs, fmt="json"), fmt="json", models=[MODEL], limit=LIMIT
        )
    run.refresh_from_db()
    assert run.status == "succeeded" and run.done == run.total == 3, run.error
    assert set(run.plan["transform_runs"].values()) == {r.pk for r in runs}
    result = BenchmarkResult.objects.get(run=run, seed=1)
    assert (result.n_items, result.n_left_out) == (LIMIT - 2, 2)
    # The original side is scored on the same 8 items, with their original texts.
    items = list(DatasetItem.objects.filter(dataset=sts, kind="example").order_by("position")[:LIMIT])
    kept = [(i.item_id, i.payload, i.gold) for n, i in enumerate(items) if n not in (0, 3)]
    original = examples_evaluate(dataset=sts, split="test", examples=kept, encoder=get_encoder(MODEL))
    assert result.original_main_score == pytest.approx(original.main_score)
    # per-pair scores of both sides, keyed by item id, give back each main score
    kept_ids = [item_id for item_id, *_ in kept]
    for stored, score in ((result.item_scores, result.main_score), (result.original_item_scores, original.main_score)):
        assert stored["kind"] == "spearman" and stored["ids"] == kept_ids
        assert ItemScores.from_json(stored).score() == pytest.approx(score, abs=1e-6)
    outputs = {(o.item_id, o.side): o.output_text for o in TransformedItem.objects.filter(run=runs[0])}
    transformed = [
        (
            i.item_id,
            {**i.payload, "sentence1": outputs[(i.pk, "sentence1")], "sentence2": outputs[(i.pk, "sentence2")]},
            i.gold,
        )
        for n, i in enumerate(items)
        if n not in (0, 3)
    ]
    expected = examples_evaluate(dataset=sts, split="test", examples=transformed, encoder=get_encoder(MODEL))
    assert result.main_score == pytest.approx(expected.main_score)
    assert result.delta == pytest.approx(expected.main_score - original.main_score)
    failed_on_their_own = TransformedItem.objects.filter(run=runs[1], ok=False).values("item").distinct().count()
    assert BenchmarkResult.objects.get(run=run, seed=2).n_left_out == failed_on_their_own
    assert BenchmarkResult.objects.get(run=run, transformation="original").n_items == LIMIT


@pytest.mark.heavy  # a real embedding model
def test_original_only_run_writes_mteb_files_and_resumes_missing_units(sts, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        run = benchmark_run_create_from_datasets(datasets=["bench-sts"], models=[MODEL], limit=LIMIT)
    result = BenchmarkResult.objects.get(run=run)
    document = json.loads(Path(result.result_path).read_text())
    assert Path(result.result_path).is_relative_to(settings.DATA_DIR / "results" / str(run.pk))
    assert document["task_name"] == "bench-sts" and document["dataset_revision"] == sts.content_hash
    assert document["scores"]["test"][0]["main_score"] == pytest.approx(result.main_score)
    score = result.main_score
    result.delete()
    BenchmarkRun.objects.filter(pk=run.pk).update(done=0, status="failed")
    assert benchmark_run_pending_units(run_id=run.pk) == run.plan["units"]
    with django_capture_on_commit_callbacks(execute=True):
        benchmark_run_resume(request=BenchmarkRunResumeRequest(run=run.pk))
    run.refresh_from_db()
    assert run.status == "succeeded" and run.done == 1
    assert BenchmarkResult.objects.get(run=run).main_score == pytest.approx(score)


def test_unknown_dataset_and_model_are_clear_errors(sts):
    with pytest.raises(ShiftlabError, match="no dataset named 'nope'"):
        benchmark_run_create_from_datasets(datasets=["nope"], models=[MODEL], dispatch=False)
    with pytest.raises(ShiftlabError, match="name at least one model"):
        benchmark_run_create_from_datasets(datasets=["bench-sts"], models=[" "], dispatch=False)
