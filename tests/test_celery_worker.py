"""A real Redis broker and a real Celery worker process: a dataset import dispatched over Redis
is executed by the worker and its result is visible in the database."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from datasets.models import Dataset, DatasetImport
from shiftlab.celery import app
from tests.conftest import require_or_skip

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def redis_url() -> str:
    import redis

    url = os.environ.get("SHIFTLAB_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
    try:
        redis.Redis.from_url(url, socket_connect_timeout=2).ping()
    except redis.RedisError as exc:
        require_or_skip(f"Redis not reachable at {url} ({exc}); run scripts/services.sh or set SHIFTLAB_TEST_REDIS_URL")
    return url


def _database_url_for_worker() -> str:
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    return f"postgres://{db['USER']}:{db['PASSWORD']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


@pytest.fixture
def worker(redis_url, tmp_path):
    queue = f"shiftlab-test-{uuid.uuid4().hex[:8]}"
    env = {
        **os.environ,
        "CELERY_BROKER_URL": redis_url,
        "DATABASE_URL": _database_url_for_worker(),
        "SHIFTLAB_DATA_DIR": str(settings.DATA_DIR),
    }
    log = (tmp_path / "worker.log").open("w")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "shiftlab",
            "worker",
            "--pool=solo",
            "--queues",
            queue,
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "--loglevel=INFO",
        ],
        cwd=settings.BASE_DIR,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        yield queue, redis_url, tmp_path / "worker.log"
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


def test_import_task_runs_on_a_real_worker_over_redis(worker, researcher):
    from datasets.tasks import run_dataset_import

    queue, redis_url, log_path = worker
    upload_dir = Path(settings.MEDIA_ROOT) / "imports" / uuid.uuid4().hex
    upload_dir.mkdir(parents=True)
    shutil.copy(settings.BASE_DIR / "fixtures/sts/demo-sts.csv", upload_dir / "demo-sts.csv")
    job = DatasetImport.objects.create(
        name="over-redis",
        task_type="sts",
        upload_dir=str(upload_dir),
        options={"language": "en"},
        created_by=researcher,
    )

    previous = app.conf.task_always_eager, app.conf.broker_url
    app.conf.task_always_eager, app.conf.broker_url = False, redis_url
    try:
        with app.connection_for_write(redis_url) as conn:
            run_dataset_import.apply_async(args=[job.pk], queue=queue, connection=conn)
    finally:
        app.conf.task_always_eager, app.conf.broker_url = previous

    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        job.refresh_from_db()
        if job.status in (DatasetImport.Status.SUCCEEDED, DatasetImport.Status.FAILED):
            break
        time.sleep(0.5)
    assert job.status == DatasetImport.Status.SUCCEEDED, f"{job.status}: {job.error}\n{log_path.read_text()[-3000:]}"
    dataset = Dataset.objects.get(name="over-redis")
    assert dataset.n_items == dataset.items.count() == 40
    assert job.dataset_id == dataset.pk and job.started_at and job.finished_at
    assert "datasets.run_dataset_import" in log_path.read_text()
