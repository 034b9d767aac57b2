"""Several hosts on one machine (issue 19): a benchmark run, and a transformation run with the
embedded LLM, each shared by two worker hosts, each a network namespace with its own Celery worker,
temporary and data directories, reaching Redis, PostgreSQL (and the LLM server) only over its own
link (tests/netns_hosts.py); the embedding cache is a directory both share. Results equal a
single-host run of the same plan, and when one whole host is killed mid-run (every process
SIGKILLed) the other finishes it with no result lost or duplicated.

PostgreSQL only: a SQLite file cannot be shared between hosts, so the SQLite pass skips it.
"""

from __future__ import annotations

import time
import uuid

import pytest
from django.db import connection
from django.db.models import Count

from evaluation.benchmark_services import benchmark_run_create_from_config
from evaluation.models import BenchmarkResult, BenchmarkRun
from evaluation.tasks import start_benchmark_run
from shiftlab.celery import app
from tests.netns_hosts import netns_available, worker_hosts
from tests.support import celery_worker_command, config_text, private_redis_url, require_or_skip, wait_for
from transforms.services import transform_run_create

pytestmark = [pytest.mark.services, pytest.mark.heavy, pytest.mark.django_db(transaction=True)]
MODEL = "all-MiniLM-L6-v2"
SEEDS = (1, 2, 3, 4, 5, 6)
PAIRS = 300  # STS-B test pairs: each unit encodes 600 texts, a few seconds on this CPU
VISIBILITY_TIMEOUT = 5  # seconds until an unacknowledged task of a dead host is handed out again
CLAIM_SECONDS = 30  # seconds until the embedding-cache claims of a dead host lapse


@pytest.fixture
def multihost(redis_url):
    if connection.vendor != "postgresql":
        pytest.skip("several hosts need a shared database: runs in the PostgreSQL pass")
    why = netns_available()
    if why:
        require_or_skip(why)
    return private_redis_url(redis_url, 9)  # its own database: no other test's unacked tasks or locks


def _import_stsb(shared_data, tmp_path):
    from corpora.services import ImportOptions, dataset_import

    lines = (shared_data / "stsb-multi-mt/stsb-en-test.csv").read_text(encoding="utf-8").splitlines(keepends=True)
    path = tmp_path / "stsb-en-test-part.csv"
    path.write_text("".join(lines[:PAIRS]), encoding="utf-8")
    return dataset_import(
        source=path,
        task="sts",
        name="stsb-multihost",
        options=ImportOptions(columns=["sentence1", "sentence2", "score"]),
    )


def _plan(dataset):
    runs = [
        transform_run_create(dataset=dataset, transformation="random_keywords", seed=seed, dispatch=False)
        for seed in SEEDS
    ]
    return config_text(runs)


def _scores(run: BenchmarkRun) -> dict[tuple, float]:
    return {
        (r.model, r.dataset, r.transformation, r.seed): r.main_score for r in BenchmarkResult.objects.filter(run=run)
    }


def _ports(redis_url: str) -> tuple[int, int, str]:
    """PostgreSQL's port, Redis's port and Redis database of this test run."""
    db = connection.settings_dict
    return int(db["PORT"] or 5432), int(redis_url.rsplit(":", 1)[1].split("/", 1)[0]), redis_url.rsplit("/", 1)[1]


def _worker_env(host, *, redis_url: str, queue: str, shared_cache, **extra: str) -> dict[str, str]:
    """A worker host's environment: every service reached through its own link's gateway."""
    db = connection.settings_dict
    pg_port, redis_port, redis_db = _ports(redis_url)
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "DJANGO_SETTINGS_MODULE": "shiftlab.settings",
        "CELERY_BROKER_URL": f"redis://{host.gateway}:{redis_port}/{redis_db}",
        "DATABASE_URL": f"postgres://{db['USER']}:{db['PASSWORD']}@{host.gateway}:{pg_port}/{db['NAME']}",
        "SHIFTLAB_DATA_DIR": str(host.root / "data"),
        "SHIFTLAB_EMBEDDING_CACHE_DIR": str(shared_cache),
        # The lost host's claims on texts it was encoding lapse after this (600 s by default, longer
        # than the test waits); a live host renews its claim after every chunk, well within it.
        "SHIFTLAB_EMBEDDING_CLAIM_SECONDS": str(CLAIM_SECONDS),
        "SHIFTLAB_CELERY_QUEUE": queue,
        "SHIFTLAB_BROKER_VISIBILITY_TIMEOUT": str(VISIBILITY_TIMEOUT),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        **extra,
    }


def test_a_benchmark_run_shared_by_two_hosts_survives_losing_one(multihost, shared_data, tmp_path, settings):
    redis_url = multihost
    dataset = _import_stsb(shared_data, tmp_path)
    text = _plan(dataset)
    distributed = benchmark_run_create_from_config(text=text, fmt="yaml", models=[MODEL], dispatch=False)
    assert distributed.total == 1 + len(SEEDS)

    pg_port, redis_port, _ = _ports(redis_url)
    queue = f"shiftlab-multihost-{uuid.uuid4().hex[:8]}"
    shared_cache = tmp_path / "shared-embedding-cache"

    def worker_env(host) -> dict[str, str]:
        return _worker_env(host, redis_url=redis_url, queue=queue, shared_cache=shared_cache)

    worker = celery_worker_command(queue)
    done = lambda: BenchmarkRun.objects.get(pk=distributed.pk).done  # noqa: E731
    previous = app.conf.task_always_eager, app.conf.broker_url
    app.conf.task_always_eager, app.conf.broker_url = False, redis_url
    app.conf.broker_transport_options = {"visibility_timeout": VISIBILITY_TIMEOUT}
    try:
        with worker_hosts(2, base=tmp_path, forward={pg_port: pg_port, redis_port: redis_port}) as (first, second):
            logs = {host.name: tmp_path / f"{host.name}.log" for host in (first, second)}
            for host in (first, second):
                (host.root / "data").mkdir(parents=True, exist_ok=True)
                host.start(worker, env=worker_env(host), cwd=settings.BASE_DIR, log_path=logs[host.name])
            with app.connection_for_write(redis_url) as conn:
                start_benchmark_run.apply_async(args=[distributed.pk], queue=queue, connection=conn)
            wait_for(lambda: done() >= 2, 300, "the first results", logs[first.name])
            assert done() < distributed.total, "the run ended before a host could be lost: make it longer"
            killed = first.kill_everything()
            killed_at, lost_at = done(), time.monotonic()
            assert killed >= 1 and not first.pids()
            wait_for(
                lambda: BenchmarkRun.objects.get(pk=distributed.pk).status in ("succeeded", "failed"),
                420,
                "the surviving host to finish the run",
                logs[second.name],
            )
            recovery = time.monotonic() - lost_at
            received = {name: path.read_text().count("] received") for name, path in logs.items()}
    finally:
        app.conf.task_always_eager, app.conf.broker_url = previous

    distributed.refresh_from_db()
    assert distributed.status == "succeeded", distributed.error
    results = BenchmarkResult.objects.filter(run=distributed)
    # 0 lost, 0 duplicated: one result per unit, as many as the plan has.
    assert killed_at < distributed.total == distributed.done == results.count()
    per_unit = results.values("model", "dataset", "transformation", "seed").annotate(n=Count("id"))
    assert {row["n"] for row in per_unit} == {1}
    # Both hosts took work from the broker.
    assert all(n >= 1 for n in received.values()), received
    print(f"\nmulti-host: {distributed.total} units; host lost after {killed_at}; recovered in {recovery:.1f} s")

    # The same plan on one host (in this process, with a cache of its own): the same scores.
    settings.EMBEDDING_CACHE_DIR = tmp_path / "single-host-cache"
    single = benchmark_run_create_from_config(text=text, fmt="yaml", models=[MODEL], dispatch=False)
    app.conf.task_always_eager = True
    try:
        start_benchmark_run.delay(single.pk)
    finally:
        app.conf.task_always_eager = previous[0]
    single.refresh_from_db()
    assert single.status == "succeeded", single.error
    multi, alone = _scores(distributed), _scores(single)
    assert multi.keys() == alone.keys()
    for key, value in alone.items():
        assert multi[key] == pytest.approx(value, abs=1e-6), key


LLM_TEXTS = 16  # demo STS pairs: 32 texts to rewrite, chunks of 2, a few seconds each on this CPU


def test_a_transformation_run_shared_by_two_hosts_survives_losing_one(
    multihost, llm_server, tmp_path, settings, request
):
    """The embedded LLM (llama.cpp's server, on the broker/database host) rewrites for workers on
    two hosts; one host is lost mid-run and the other finishes: one outcome per (item, side), one
    cached generation per (text, step, attempt), and the same texts as a run on one host."""
    from corpora.services import dataset_import
    from transforms.backends import reset_backends
    from transforms.models import Generation, TransformedItem, TransformRun
    from transforms.params import GenerationParams
    from transforms.tasks import start_run

    redis_url = multihost
    settings.TRANSFORM_BACKENDS = {
        "default": {
            "BACKEND": "transforms.backends.openai_compat.OpenAICompatBackend",
            "OPTIONS": {"base_url": llm_server.base_url, "model": llm_server.model},
        }
    }
    reset_backends()
    request.addfinalizer(reset_backends)  # the next test gets the backends of its own settings
    dataset = dataset_import(source=settings.BASE_DIR / "fixtures/sts/demo-sts.csv", task="sts", name="multihost-sts")
    params = GenerationParams(temperature=0.0, max_tokens=24, max_attempts=1)
    run = transform_run_create(
        dataset=dataset, transformation="paraphrase", seed=7, limit=LLM_TEXTS, dispatch=False, params=params
    )
    pg_port, redis_port, _ = _ports(redis_url)
    llm_port = int(llm_server.base_url.split(":")[2].split("/")[0])
    queue = f"shiftlab-multihost-llm-{uuid.uuid4().hex[:8]}"

    def worker_env(host) -> dict[str, str]:
        return _worker_env(
            host,
            redis_url=redis_url,
            queue=queue,
            shared_cache=tmp_path / "cache",
            SHIFTLAB_LLM_BASE_URL=f"http://{host.gateway}:{llm_port}/v1",
            SHIFTLAB_LLM_MODEL=llm_server.model,
            SHIFTLAB_TRANSFORM_CHUNK_SIZE="2",
        )

    done = lambda: TransformRun.objects.get(pk=run.pk).done  # noqa: E731
    previous = app.conf.task_always_eager, app.conf.broker_url
    app.conf.task_always_eager, app.conf.broker_url = False, redis_url
    app.conf.broker_transport_options = {"visibility_timeout": VISIBILITY_TIMEOUT}
    forward = {pg_port: pg_port, redis_port: redis_port, llm_port: llm_port}
    try:
        with worker_hosts(2, base=tmp_path, forward=forward) as (first, second):
            logs = {host.name: tmp_path / f"{host.name}.log" for host in (first, second)}
            for host in (first, second):
                (host.root / "data").mkdir(parents=True, exist_ok=True)
                host.start(
                    celery_worker_command(queue), env=worker_env(host), cwd=settings.BASE_DIR, log_path=logs[host.name]
                )
            with app.connection_for_write(redis_url) as conn:
                start_run.apply_async(args=[run.pk], queue=queue, connection=conn)
            wait_for(lambda: done() >= 4, 300, "the first rewrites", logs[first.name])
            assert done() < run.total, "the run ended before a host could be lost: make it longer"
            first.kill_everything()
            killed_at, lost_at = done(), time.monotonic()
            assert not first.pids()
            wait_for(
                lambda: TransformRun.objects.get(pk=run.pk).status in ("succeeded", "failed"),
                420,
                "the surviving host to finish the run",
                logs[second.name],
            )
            recovery = time.monotonic() - lost_at
            received = {name: path.read_text().count("] received") for name, path in logs.items()}
    finally:
        app.conf.task_always_eager, app.conf.broker_url = previous

    run.refresh_from_db()
    assert run.status == "succeeded", run.error
    assert killed_at < run.total == run.done == 2 * LLM_TEXTS
    per_side = TransformedItem.objects.filter(run=run).values("item", "side").annotate(n=Count("id"))
    assert len(per_side) == 2 * LLM_TEXTS and {row["n"] for row in per_side} == {1}
    keys = {k for ks in TransformedItem.objects.filter(run=run).values_list("generation_keys", flat=True) for k in ks}
    steps = Generation.objects.filter(key__in=keys).values("input_hash", "step", "attempt").annotate(n=Count("id"))
    assert {row["n"] for row in steps} == {1}
    assert all(n >= 1 for n in received.values()), received
    print(f"\nmulti-host LLM: {run.total} texts; host lost after {killed_at}; recovered in {recovery:.1f} s")

    # The same run on one host, generating afresh (the cache emptied): the same texts (greedy decoding).
    outputs = {(t.item_id, t.side): (t.ok, t.output_text) for t in TransformedItem.objects.filter(run=run)}
    Generation.objects.all().delete()
    single = transform_run_create(
        dataset=dataset, transformation="paraphrase", seed=7, limit=LLM_TEXTS, dispatch=False, params=params
    )
    start_run.delay(single.pk)  # eager: in this process
    single.refresh_from_db()
    assert single.status == "succeeded", single.error
    alone = {(t.item_id, t.side): (t.ok, t.output_text) for t in TransformedItem.objects.filter(run=single)}
    assert alone == outputs
