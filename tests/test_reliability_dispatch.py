"""Dispatch and finalisation under failure: a broker that cannot be reached when a job is queued,
and a worker that dies between an import's commit and the end of its task."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from corpora.models import Dataset, DatasetImport
from corpora.services import ImportOptions, dataset_import, dataset_import_job_create, dataset_import_job_run
from tests.support import celery_sender
from transforms.models import JudgeReport, TransformRun
from transforms.services import transform_run_create

DEMO_CSV = Path(settings.BASE_DIR) / "fixtures/sts/demo-sts.csv"
# Nothing listens on port 1 of loopback: connecting is refused at once.
CLOSED_BROKER = "redis://127.0.0.1:1/0"


@pytest.fixture
def broker_down():
    """Send tasks to a broker that refuses connections, as during a Redis outage."""
    with celery_sender(broker_url=CLOSED_BROKER):
        yield


def _upload() -> SimpleUploadedFile:
    return SimpleUploadedFile("demo-sts.csv", DEMO_CSV.read_bytes(), content_type="text/csv")


@pytest.mark.django_db(transaction=True)
def test_an_import_queued_while_the_broker_is_down_keeps_its_files_and_says_why(broker_down, researcher):
    job = dataset_import_job_create(
        actor=researcher, project=None, files=[_upload()], task="sts", name="queued-in-outage", options=ImportOptions()
    )
    assert job.status == DatasetImport.Status.PENDING
    assert "broker" in job.error and "queued again automatically" in job.error
    assert (Path(job.upload_dir) / "demo-sts.csv").read_bytes() == DEMO_CSV.read_bytes()
    # Once a worker gets the job (here: in process) it imports from the kept files.
    done = dataset_import_job_run(job_id=job.pk)
    assert done.status == DatasetImport.Status.SUCCEEDED and done.error == ""
    assert Dataset.objects.get(name="queued-in-outage").n_items == 40
    assert not Path(job.upload_dir).exists()


@pytest.mark.django_db(transaction=True)
def test_the_import_api_and_page_show_the_note_rather_than_an_error_page(broker_down, researcher, researcher_client):
    response = researcher_client.post(
        "/api/dataset-imports/", {"files": [_upload()], "name": "api-outage", "task_type": "sts"}, format="multipart"
    )
    assert response.status_code == 202, response.content
    body = response.json()
    assert body["status"] == "pending" and "broker" in body["error"]
    kept = Path(DatasetImport.objects.get(pk=body["id"]).upload_dir)
    assert (kept / "demo-sts.csv").exists()
    shutil.rmtree(kept)
    client = Client()
    client.force_login(researcher)
    page = client.get(reverse("corpora:import", args=[body["id"]])).content.decode()
    assert "could not be reached" in page and "queued again automatically" in page


@pytest.mark.django_db(transaction=True)
def test_a_run_queued_while_the_broker_is_down_fails_with_how_to_resume(broker_down):
    dataset = dataset_import(source=DEMO_CSV, task="sts", name="outage-sts")
    run = transform_run_create(dataset=dataset, transformation="random_keywords", seed=1, limit=2)
    run.refresh_from_db()
    assert run.status == TransformRun.Status.FAILED
    assert "broker" in run.error and f"--run {run.pk} --resume" in run.error


@pytest.mark.django_db(transaction=True)
def test_a_judge_report_queued_while_the_broker_is_down_fails_with_how_to_resume(broker_down):
    from transforms.judge_services import JudgeReportCreateRequest, judge_report_create

    dataset = dataset_import(source=DEMO_CSV, task="sts", name="outage-judge")
    report = judge_report_create(request=JudgeReportCreateRequest(kind="evaluation", dataset=dataset.name, limit=3))
    report.refresh_from_db()
    assert report.status == JudgeReport.Status.FAILED
    assert "broker" in report.error and f"/api/judge-reports/{report.pk}/resume/" in report.error


class _WorkerKilled(BaseException):
    """Stands for SIGKILL: nothing after the point of death runs, no ``except Exception`` sees it."""


@pytest.mark.django_db(transaction=True)
def test_an_import_whose_worker_dies_after_commit_is_finalised_once(researcher, monkeypatch):
    upload_dir = Path(settings.MEDIA_ROOT) / "imports" / "crash-window"
    upload_dir.mkdir(parents=True)
    shutil.copy(DEMO_CSV, upload_dir / "demo-sts.csv")
    job = DatasetImport.objects.create(
        name="crash-window", task_type="sts", upload_dir=str(upload_dir), options={"language": "en"}
    )
    # The worker dies at the first thing the import does after its transaction: tidying the upload.
    real_rmtree = shutil.rmtree

    def die(*args, **kwargs):
        monkeypatch.setattr(shutil, "rmtree", real_rmtree)
        raise _WorkerKilled

    monkeypatch.setattr(shutil, "rmtree", die)
    with pytest.raises(_WorkerKilled):
        dataset_import_job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == DatasetImport.Status.SUCCEEDED and Dataset.objects.filter(name="crash-window").count() == 1
    # The broker hands the task out again: the job is not imported twice, nor failed; the files go.
    again = dataset_import_job_run(job_id=job.pk, redelivered=True)
    assert again.status == DatasetImport.Status.SUCCEEDED and again.error == ""
    assert again.dataset_id == Dataset.objects.get(name="crash-window").pk
    assert Dataset.objects.count() == 1 and not upload_dir.exists()


@pytest.mark.django_db(transaction=True)
def test_an_import_whose_worker_dies_before_commit_is_imported_by_the_redelivery(monkeypatch):
    upload_dir = Path(settings.MEDIA_ROOT) / "imports" / "crash-before"
    upload_dir.mkdir(parents=True)
    shutil.copy(DEMO_CSV, upload_dir / "demo-sts.csv")
    job = DatasetImport.objects.create(
        name="crash-before", task_type="sts", upload_dir=str(upload_dir), options={"language": "en"}
    )
    import corpora.services as services

    real_store = services.dataset_store

    def die_after_store(*args, **kwargs):
        real_store(*args, **kwargs)
        raise _WorkerKilled

    monkeypatch.setattr(services, "dataset_store", die_after_store)
    with pytest.raises(_WorkerKilled):
        dataset_import_job_run(job_id=job.pk)
    monkeypatch.setattr(services, "dataset_store", real_store)
    assert not Dataset.objects.filter(name="crash-before").exists()
    again = dataset_import_job_run(job_id=job.pk, redelivered=True)
    assert again.status == DatasetImport.Status.SUCCEEDED and Dataset.objects.get(name="crash-before").n_items == 40
