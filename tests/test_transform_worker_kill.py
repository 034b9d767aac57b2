"""A transformation run survives a worker killed with SIGKILL mid-run: a second worker finishes it
with exactly one outcome per (item, field) and one cached generation per (text, step, attempt)."""

from __future__ import annotations

import os
import signal
import uuid

import pytest
from django.db.models import Count

from corpora.services import dataset_import
from shiftlab.celery import app
from tests.support import celery_worker, wait_for
from transforms.backends import reset_backends
from transforms.models import Generation, TransformedItem, TransformRun
from transforms.params import GenerationParams
from transforms.services import transform_run_create

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]
VISIBILITY_TIMEOUT = 5


def test_killed_worker_mid_run_then_a_new_worker_completes_it(llm_server, redis_url, tmp_path, settings):
    settings.TRANSFORM_BACKENDS = {
        "default": {
            "BACKEND": "transforms.backends.openai_compat.OpenAICompatBackend",
            "OPTIONS": {"base_url": llm_server.base_url, "model": llm_server.model},
        }
    }
    reset_backends()
    dataset = dataset_import(source=settings.BASE_DIR / "fixtures/sts/demo-sts.csv", task="sts", name="kill-sts")
    run = transform_run_create(
        dataset=dataset,
        transformation="paraphrase",
        seed=4242,
        limit=16,
        dispatch=False,
        params=GenerationParams(max_tokens=24, max_attempts=1),
    )
    queue = f"shiftlab-kill-{uuid.uuid4().hex[:8]}"
    env = {
        "SHIFTLAB_LLM_BASE_URL": llm_server.base_url,
        "SHIFTLAB_LLM_MODEL": llm_server.model,
        "SHIFTLAB_TRANSFORM_CHUNK_SIZE": "2",
        "SHIFTLAB_BROKER_VISIBILITY_TIMEOUT": str(VISIBILITY_TIMEOUT),
        "SHIFTLAB_CELERY_QUEUE": queue,
    }
    log_path = tmp_path / "workers.log"
    from transforms.tasks import start_run

    previous = app.conf.task_always_eager, app.conf.broker_url, app.conf.task_default_queue
    app.conf.task_always_eager, app.conf.broker_url, app.conf.task_default_queue = False, redis_url, queue
    app.conf.broker_transport_options = {"visibility_timeout": VISIBILITY_TIMEOUT}
    try:
        with celery_worker(redis_url=redis_url, queue=queue, log_path=log_path, env=env) as first:
            with app.connection_for_write(redis_url) as conn:
                start_run.apply_async(args=[run.pk], queue=queue, connection=conn)
            done = lambda: TransformRun.objects.get(pk=run.pk).done  # noqa: E731
            wait_for(lambda: done() >= 4, 180, "the first outputs", log_path)
            assert done() < run.total, "the run finished before the worker could be killed: make it longer"
            os.kill(first.pid, signal.SIGKILL)
            first.wait(timeout=10)
        killed_at = TransformRun.objects.get(pk=run.pk).done
        with celery_worker(redis_url=redis_url, queue=queue, log_path=log_path, env=env):
            wait_for(lambda: TransformRun.objects.get(pk=run.pk).status == "succeeded", 300, "run completion", log_path)
    finally:
        app.conf.task_always_eager, app.conf.broker_url, app.conf.task_default_queue = previous
        reset_backends()

    run.refresh_from_db()
    assert killed_at < run.total == run.done == 32
    per_side = TransformedItem.objects.filter(run=run).values("item", "side").annotate(n=Count("id"))
    assert len(per_side) == 32 and {row["n"] for row in per_side} == {1}
    keys = [
        k for keys in TransformedItem.objects.filter(run=run).values_list("generation_keys", flat=True) for k in keys
    ]
    assert Generation.objects.filter(key__in=keys).count() == len(set(keys))
    steps = Generation.objects.filter(key__in=keys).values("input_hash", "step", "attempt").annotate(n=Count("id"))
    assert {row["n"] for row in steps} == {1}
