"""A real Redis broker and a real Celery worker process: a dataset import dispatched over Redis
is executed by the worker and its result is visible in the database."""

from __future__ import annotations

import shutil
import time
import uuid
from pathlib import Path

import pytest
from django.conf import settings

from corpora.models import Dataset, DatasetImport
from shiftlab.celery import app
from tests.support import celery_worker

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def worker(redis_url, tmp_path):
    queue = f"shiftlab-test-{uuid.uuid4().hex[:8]}"
    with celery_worker(redis_url=redis_url, queue=queue, log_path=tmp_path / "worker.log"):
        yield queue, redis_url, tmp_path / "worker.log"


def test_import_task_runs_on_a_real_worker_over_redis(worker, researcher):
    from corpora.tasks import run_dataset_import

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
    assert "corpora.run_dataset_import" in log_path.read_text()
