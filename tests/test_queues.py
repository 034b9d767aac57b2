"""Resource queues: where each task is routed, and that the compose file and the demo start a
consumer for every queue a task can be routed to (docs/deployment.md, "Worker pools")."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
import yaml
from django.conf import settings

ROUTES_SCRIPT = """
import json, django
django.setup()
from shiftlab.celery import app
app.loader.import_default_modules()
names = sorted(n for n in app.tasks if not n.startswith("celery."))
print(json.dumps({
    "routes": {n: app.amqp.router.route({}, n)["queue"].name for n in names},
    "queues": sorted(app.amqp.queues),
}))
"""


def _routes(*, single_queue: str | None) -> dict:
    """Task name -> queue and the queues a bare worker consumes, as a fresh process with a broker sees them."""
    env = {k: v for k, v in os.environ.items() if k != "SHIFTLAB_CELERY_QUEUE"}
    env |= {"DJANGO_SETTINGS_MODULE": "shiftlab.settings", "CELERY_BROKER_URL": "redis://127.0.0.1:1/0"}
    if single_queue:
        env["SHIFTLAB_CELERY_QUEUE"] = single_queue
    command = [sys.executable, "-c", ROUTES_SCRIPT]
    done = subprocess.run(command, cwd=settings.BASE_DIR, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def routed() -> dict:
    return _routes(single_queue=None)


def _worker_services(compose: dict) -> dict[str, dict]:
    return {
        name: service
        for name, service in compose["services"].items()
        if service.get("command", [])[:4] == ["celery", "-A", "shiftlab", "worker"]
    }


def _option(command: list[str], *flags: str) -> str | None:
    for index, part in enumerate(command):
        if part in flags:
            return command[index + 1]
    return None


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((settings.BASE_DIR / "docker-compose.yml").read_text())


def test_tasks_go_to_the_queue_of_the_resource_they_need(routed):
    routes = routed["routes"]
    assert routes["transforms.execute_chunk"] == routes["transforms.execute_judge_report"] == "llm"
    assert routes["evaluation.execute_benchmark_unit"] == "encode"
    assert routes["annotation.baseline_llm_answer"] == "llm"  # an LLM answering a baseline (issue 31)
    for name in (
        "corpora.run_dataset_import",
        "annotation.sync_study",
        "annotation.sync_baseline",
        "annotation.sync_published_studies",
        "transforms.start_run",
        "transforms.finalize_run",
        "evaluation.start_benchmark_run",
        "evaluation.finalize_benchmark_run",
    ):
        assert routes[name] == "default", name
    # A bare `celery worker` consumes all three; no route names a task that does not exist.
    assert routed["queues"] == ["default", "encode", "llm"]
    named = {name for names in settings.SHIFTLAB_QUEUE_TASKS.values() for name in names}
    assert named <= set(routes), named - set(routes)


def test_one_named_queue_takes_every_task():
    single = _routes(single_queue="shiftlab-test-single")
    assert set(single["routes"].values()) == {"shiftlab-test-single"}
    assert single["queues"] == ["shiftlab-test-single"]


def test_compose_starts_a_consumer_for_every_routed_queue_without_the_gpu_profile(routed, compose):
    workers = _worker_services(compose)
    always = {_option(s["command"], "-Q", "--queues") for s in workers.values() if not s.get("profiles")}
    assert set(routed["routes"].values()) <= always
    gpu_only = {_option(s["command"], "-Q", "--queues") for s in workers.values() if s.get("profiles")}
    assert gpu_only <= always, "a GPU pool's queue needs a CPU consumer when the gpu profile is off"


def test_every_worker_is_explicit_about_its_pool_and_takes_one_task_at_a_time(compose):
    names = []
    for name, service in _worker_services(compose).items():
        command = service["command"]
        queue = _option(command, "-Q", "--queues")
        assert _option(command, "--prefetch-multiplier") == "1", name
        assert _option(command, "--pool") in {"prefork", "solo", "threads"}, name
        assert _option(command, "--concurrency"), name
        node = _option(command, "-n", "--hostname")
        # Named after its queue (encode-gpu0@host for a GPU pool of "encode"), unique per host.
        prefix = node.removesuffix("@%h")
        assert node.endswith("@%h") and (prefix == queue or prefix.startswith(f"{queue}-")), name
        assert queue.split(",") == [queue], f"{name}: one queue per pool"
        # The health check pings this worker by its own node name.
        assert f'-d \\"{node.removesuffix("%h")}$${{HOSTNAME}}\\"' in json.dumps(service["healthcheck"]["test"])
        names.append(node)
    assert len(names) == len(set(names))


def test_gpu_pools_are_solo_and_pinned_to_one_device(compose):
    gpu_workers = {n: s for n, s in _worker_services(compose).items() if "gpu" in s.get("profiles", [])}
    assert gpu_workers
    for name, service in gpu_workers.items():
        command = service["command"]
        assert _option(command, "--pool") == "solo" and _option(command, "--concurrency") == "1", name
        device = service["environment"]["CUDA_VISIBLE_DEVICES"]
        assert re.fullmatch(r"\d+", device), name
        (reservation,) = service["deploy"]["resources"]["reservations"]["devices"]
        assert reservation["device_ids"] == [device], name
        # The rest of the Shiftlab environment is kept (merged, not replaced).
        assert service["environment"]["DJANGO_SETTINGS_MODULE"] == "shiftlab.settings_production"


def test_the_demo_worker_consumes_every_queue(routed):
    demo = (settings.BASE_DIR / "scripts/demo.sh").read_text()
    (queues,) = re.findall(r"celery -A shiftlab worker -Q (\S+)", demo)
    assert sorted(queues.split(",")) == routed["queues"]


@pytest.mark.heavy
@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_one_worker_on_the_three_queues_runs_llm_and_encode_work(redis_url, tmp_path, settings):
    """The demo's layout with a real broker: tasks fanned out by a worker without
    SHIFTLAB_CELERY_QUEUE go to "llm" and "encode" and are consumed there."""
    import redis

    from corpora.services import dataset_import
    from evaluation.benchmark_services import benchmark_run_create_from_datasets
    from evaluation.models import BenchmarkRun
    from evaluation.tasks import start_benchmark_run
    from shiftlab.celery import app
    from tests.support import celery_worker, wait_for
    from transforms.models import TransformRun
    from transforms.services import transform_run_create
    from transforms.tasks import start_run

    settings.EMBEDDING_CACHE_DIR = tmp_path / "embeddings"
    dataset = dataset_import(source=settings.BASE_DIR / "fixtures/sts/demo-sts.csv", task="sts", name="queues-sts")
    # random_keywords needs no LLM server, but its chunks are routed to "llm" all the same.
    transform = transform_run_create(dataset=dataset, transformation="random_keywords", seed=1, limit=8, dispatch=False)
    benchmark = benchmark_run_create_from_datasets(datasets=[dataset.name], models=["all-MiniLM-L6-v2"], dispatch=False)
    queues = ["default", "llm", "encode"]
    redis.Redis.from_url(redis_url).delete(*queues)  # nothing left over from an interrupted run
    env = {"SHIFTLAB_CELERY_QUEUE": "", "SHIFTLAB_EMBEDDING_CACHE_DIR": str(settings.EMBEDDING_CACHE_DIR)}
    log_path = tmp_path / "worker.log"
    previous = app.conf.task_always_eager, app.conf.broker_url
    app.conf.task_always_eager, app.conf.broker_url = False, redis_url
    try:
        with celery_worker(redis_url=redis_url, queue=",".join(queues), log_path=log_path, env=env):
            with app.connection_for_write(redis_url) as conn:
                start_run.apply_async(args=[transform.pk], queue="default", connection=conn)
                start_benchmark_run.apply_async(args=[benchmark.pk], queue="default", connection=conn)
            finished = ("succeeded", "failed")
            wait_for(lambda: TransformRun.objects.get(pk=transform.pk).status in finished, 120, "the run", log_path)
            wait_for(lambda: BenchmarkRun.objects.get(pk=benchmark.pk).status in finished, 180, "the unit", log_path)
    finally:
        app.conf.task_always_eager, app.conf.broker_url = previous
    assert TransformRun.objects.get(pk=transform.pk).status == "succeeded"
    assert BenchmarkRun.objects.get(pk=benchmark.pk).status == "succeeded"
    log = log_path.read_text()
    for name in ("transforms.execute_chunk", "evaluation.execute_benchmark_unit"):
        assert name in log, f"{name} never reached the worker"
