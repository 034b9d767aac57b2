"""The stuck-job sweeper (``core.sweep_stuck_jobs``, run by Celery beat): a job pending or running
past the age with no live task is resumed (and finishes), one the sweeper has resumed too often is
failed with a message saying what to check, and a job with a task still queued or held by a
worker on the real Redis broker is left alone."""

from __future__ import annotations

import shutil
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
import redis
from django.conf import settings
from django.utils import timezone

import corpora.tasks  # noqa: F401  (registers the kinds of job, as every worker does)
import evaluation.tasks  # noqa: F401
import transforms.tasks  # noqa: F401
from core.broker import UNACKED_KEY, live_tasks
from core.models import AuditEvent
from core.sweeper import MAX_RESUMES, SWEEP_VERB, stuck_job_kinds, stuck_jobs
from core.tasks import sweep_stuck_jobs
from corpora.models import Dataset, DatasetImport
from corpora.services import dataset_import
from shiftlab.celery import app
from tests.support import celery_sender
from transforms.models import TransformRun
from transforms.services import transform_run_create

DEMO_CSV = Path(settings.BASE_DIR) / "fixtures/sts/demo-sts.csv"
LONG_AGO = timedelta(minutes=settings.SHIFTLAB_STUCK_JOB_MINUTES + 5)


def _stuck_run(name: str, *, status: str = "running", since: timedelta = LONG_AGO) -> TransformRun:
    dataset = dataset_import(source=DEMO_CSV, task="sts", name=name)
    run = transform_run_create(dataset=dataset, transformation="random_keywords", seed=7, limit=4, dispatch=False)
    TransformRun.objects.filter(pk=run.pk).update(status=status, started_at=timezone.now() - since)
    return run


def _kind(label: str):
    return next(kind for kind in stuck_job_kinds() if kind.label == label)


@pytest.mark.django_db(transaction=True)
def test_a_run_stuck_past_the_age_is_resumed_and_finishes():
    stuck = _stuck_run("swept-sts")
    recent = _stuck_run("recent-sts", since=timedelta(minutes=1))
    result = sweep_stuck_jobs()
    assert result["resumed"] == {"transformation run": [stuck.pk]} and result["failed"] == {}
    stuck.refresh_from_db()
    # The resume ran in process here (no broker): the run is complete.
    assert stuck.status == TransformRun.Status.SUCCEEDED and stuck.done == stuck.total == 8
    assert AuditEvent.objects.filter(verb=SWEEP_VERB, object_id=str(stuck.pk)).count() == 1
    assert TransformRun.objects.get(pk=recent.pk).status == "running"


@pytest.mark.django_db(transaction=True)
def test_a_run_the_sweeper_resumed_too_often_is_failed_with_what_to_check():
    run = _stuck_run("hopeless-sts", status="pending")
    for _ in range(MAX_RESUMES):
        AuditEvent.objects.create(verb=SWEEP_VERB, object_type="transforms.transformrun", object_id=str(run.pk))
    result = sweep_stuck_jobs()
    assert result["failed"] == {"transformation run": [run.pk]}
    run.refresh_from_db()
    assert run.status == TransformRun.Status.FAILED and run.finished_at
    assert f"resumed {MAX_RESUMES} times" in run.error and "celery -A shiftlab worker" in run.error
    assert f"--run {run.pk} --resume" in run.error


@pytest.mark.django_db(transaction=True)
def test_an_import_left_pending_by_a_broker_outage_is_queued_again():
    upload_dir = Path(settings.MEDIA_ROOT) / "imports" / uuid.uuid4().hex
    upload_dir.mkdir(parents=True)
    shutil.copy(DEMO_CSV, upload_dir / "demo-sts.csv")
    job = DatasetImport.objects.create(
        name="swept-import", task_type="sts", upload_dir=str(upload_dir), options={"language": "en"}, error="not queued"
    )
    DatasetImport.objects.filter(pk=job.pk).update(created_at=timezone.now() - LONG_AGO)
    assert sweep_stuck_jobs()["resumed"] == {"dataset import": [job.pk]}
    job.refresh_from_db()
    assert job.status == DatasetImport.Status.SUCCEEDED and job.error == ""
    assert Dataset.objects.get(name="swept-import").n_items == 40 and not upload_dir.exists()


@pytest.mark.django_db(transaction=True)
def test_a_job_with_a_queued_or_held_task_on_the_broker_is_not_swept(redis_url):
    run = _stuck_run("live-sts")
    queue = f"shiftlab-sweep-{uuid.uuid4().hex[:8]}"
    client = redis.Redis.from_url(redis_url)
    names = _kind("transformation run").task_names
    with celery_sender(broker_url=redis_url, queue=queue):
        try:
            transforms.tasks.start_run.delay(run.pk)
            queued = live_tasks(app, names)
            assert ("transforms.start_run", run.pk) in queued
            assert stuck_jobs(_kind("transformation run"), last_activity_before=timezone.now(), live=queued) == []
            # A worker takes the message (it moves to the transport's "unacked" hash): still live.
            message = client.rpop(queue)
            client.hset(UNACKED_KEY, "tag-" + queue, f'[{message.decode()}, "", "{queue}"]')
            assert ("transforms.start_run", run.pk) in live_tasks(app, names)
            client.hdel(UNACKED_KEY, "tag-" + queue)
            # Acknowledged and gone, the run still unfinished: now it is stuck.
            assert ("transforms.start_run", run.pk) not in live_tasks(app, names)
        finally:
            client.delete(queue)
    stuck = stuck_jobs(_kind("transformation run"), last_activity_before=timezone.now(), live=set())
    assert [job.pk for job in stuck] == [run.pk]
