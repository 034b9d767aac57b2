"""A benchmark run over real transformation runs (SmolLM2) through a real Redis broker and real
Celery worker processes: it survives a worker killed with SIGKILL mid-run, without lost or
duplicated results."""

from __future__ import annotations

import json
import os
import signal
import uuid
from pathlib import Path

import pytest
from django.db.models import Count

from corpora.services import dataset_import
from evaluation.benchmark_services import benchmark_run_create_from_config
from evaluation.models import BenchmarkResult, BenchmarkRun
from evaluation.selectors import benchmark_run_aggregates
from shiftlab.celery import app
from tests.support import celery_worker, config_text, private_redis_url, wait_for
from transforms.models import Generation, TransformedItem
from transforms.params import GenerationParams
from transforms.services import transform_run_create

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]
VISIBILITY_TIMEOUT = 5
LIMIT = 12
SEEDS = (11, 12)
TRANSFORMATIONS = ("style_change", "expansion")
MODEL = "all-MiniLM-L6-v2"


@pytest.fixture
def benchmark_redis_url(redis_url) -> str:
    """Redis database 12: the benchmark worker tests' own (others use 13 and 15)."""
    return private_redis_url(redis_url, 12)


def test_benchmark_run_survives_a_killed_worker(llm_backend, benchmark_redis_url, tmp_path, settings):
    redis_url = benchmark_redis_url
    settings.EMBEDDING_CACHE_DIR = tmp_path / "embeddings"
    dataset = dataset_import(source=settings.BASE_DIR / "fixtures/sts/demo-sts.csv", task="sts", name="bench-sts")
    params = GenerationParams(max_tokens=48, max_attempts=1)
    runs = [
        transform_run_create(
            dataset=dataset, transformation=name, seed=seed, limit=LIMIT, params=params, dispatch=False
        )
        for name in TRANSFORMATIONS
        for seed in SEEDS
    ]
    run = benchmark_run_create_from_config(
        text=config_text(runs), fmt="yaml", models=[MODEL], limit=LIMIT, dispatch=False
    )
    assert run.total == 1 + len(TRANSFORMATIONS) * len(SEEDS)
    # The config's runs are reused (same generator, prompts, seed and limit), not duplicated.
    assert sorted(run.plan["transform_runs"].values()) == sorted(r.pk for r in runs)

    queue = f"shiftlab-bench-{uuid.uuid4().hex[:8]}"
    env = {
        "SHIFTLAB_LLM_BASE_URL": llm_backend.base_url,
        "SHIFTLAB_LLM_MODEL": llm_backend.model,
        "SHIFTLAB_BROKER_VISIBILITY_TIMEOUT": str(VISIBILITY_TIMEOUT),
        "SHIFTLAB_CELERY_QUEUE": queue,
        "SHIFTLAB_EMBEDDING_CACHE_DIR": str(settings.EMBEDDING_CACHE_DIR),
    }
    log_path = tmp_path / "workers.log"
    from evaluation.tasks import start_benchmark_run

    previous = app.conf.task_always_eager, app.conf.broker_url, app.conf.task_default_queue
    app.conf.task_always_eager, app.conf.broker_url, app.conf.task_default_queue = False, redis_url, queue
    app.conf.broker_transport_options = {"visibility_timeout": VISIBILITY_TIMEOUT}
    done = lambda: BenchmarkRun.objects.get(pk=run.pk).done  # noqa: E731
    try:
        with celery_worker(redis_url=redis_url, queue=queue, log_path=log_path, env=env) as first:
            with app.connection_for_write(redis_url) as conn:
                start_benchmark_run.apply_async(args=[run.pk], queue=queue, connection=conn)
            # Kill while a transformed unit is generating its texts (after the first results).
            wait_for(lambda: done() >= 2, 240, "the first results", log_path)
            assert done() < run.total, "the run finished before the worker could be killed: make it longer"
            os.kill(first.pid, signal.SIGKILL)
            first.wait(timeout=10)
        killed_at = done()
        with celery_worker(redis_url=redis_url, queue=queue, log_path=log_path, env=env):
            wait_for(
                lambda: BenchmarkRun.objects.get(pk=run.pk).status in ("succeeded", "failed"),
                300,
                "run completion",
                log_path,
            )
    finally:
        app.conf.task_always_eager, app.conf.broker_url, app.conf.task_default_queue = previous

    run.refresh_from_db()
    assert run.status == "succeeded", run.error
    assert killed_at < run.total == run.done == BenchmarkResult.objects.filter(run=run).count() == 5
    per_unit = BenchmarkResult.objects.filter(run=run).values("model", "dataset", "transformation", "seed")
    assert {row["n"] for row in per_unit.annotate(n=Count("id"))} == {1}
    # Every transformation output exactly once, every generation once.
    per_side = TransformedItem.objects.filter(run__in=runs).values("run", "item", "side").annotate(n=Count("id"))
    assert len(per_side) == len(runs) * LIMIT * 2 and {row["n"] for row in per_side} == {1}
    keys = [
        k for ks in TransformedItem.objects.filter(run__in=runs).values_list("generation_keys", flat=True) for k in ks
    ]
    assert Generation.objects.filter(key__in=keys).count() == len(set(keys))

    original = BenchmarkResult.objects.get(run=run, transformation="original")
    assert original.n_items == LIMIT and original.original_main_score is None
    for result in BenchmarkResult.objects.filter(run=run).exclude(transformation="original"):
        failed = TransformedItem.objects.filter(run=result.transform_run, ok=False)
        failed_items = set(failed.values_list("item", flat=True))
        assert result.n_left_out == len(failed_items) and result.n_items + result.n_left_out == LIMIT
        assert result.original_main_score is not None
        document = json.loads(Path(result.result_path).read_text())
        assert document["task_name"] == "bench-sts" and document["shiftlab"]["seed"] == result.seed
        assert document["scores"]["test"][0]["main_score"] == pytest.approx(result.main_score)
    aggregates = benchmark_run_aggregates(run=run)[MODEL]
    assert set(aggregates.axes) == {"lexical", "length"} and not aggregates.complete
    assert aggregates.transformations["style_change"].n_seeds == 2
    assert aggregates.transformations["style_change"].sd is not None
