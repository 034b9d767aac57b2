"""Hardening of dataset imports and transformation parameters (issue 16): upload and decoded-size
limits, crash-looping import jobs, deletion of datasets still in use, bounded generation parameters."""

from __future__ import annotations

import html
import io
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command

from core.errors import ShiftlabError
from core.models import AuditEvent
from corpora.models import Dataset, DatasetImport, DatasetItem
from corpora.services import dataset_import
from corpora.tasks import run_dataset_import
from transforms.models import GeneratorConfig, TransformRun
from transforms.params import GenerationParams

FIXTURES = settings.BASE_DIR / "fixtures"
pytestmark = pytest.mark.django_db


@pytest.fixture
def demo_sts(researcher) -> Dataset:
    return dataset_import(source=FIXTURES / "sts/demo-sts.csv", task="sts", name="demo-sts", created_by=researcher)


@pytest.fixture
def page_client(client, researcher):
    client.force_login(researcher)
    return client


def _stored_uploads() -> set[Path]:
    imports = Path(settings.MEDIA_ROOT) / "imports"
    return set(imports.iterdir()) if imports.is_dir() else set()


def _big_csv() -> SimpleUploadedFile:
    # 1.5 MB of valid rows: refused for its size alone.
    rows = "".join(f"A sentence number {k:07d} here.,Another one {k:07d}.,3\n" for k in range(30_000))
    content = ("sentence1,sentence2,score\n" + rows).encode()[: 3 * 1024 * 1024 // 2]
    return SimpleUploadedFile("big.csv", content[: content.rfind(b"\n") + 1])


# --- 1. upload size limit -----------------------------------------------------------------------


def test_api_refuses_an_upload_over_the_limit_and_stores_nothing(researcher_client, settings):
    settings.DATASET_MAX_UPLOAD_MB = 1
    before = _stored_uploads()
    response = researcher_client.post(
        "/api/dataset-imports/", {"files": [_big_csv()], "name": "big", "task_type": "sts"}
    )
    assert response.status_code == 413, response.content
    detail = response.json()["detail"]
    assert "The upload is 1.5 MB (big.csv), over the 1 MB limit (SHIFTLAB_MAX_UPLOAD_MB)" in detail
    assert "python manage.py corpora import" in detail
    assert not DatasetImport.objects.exists() and _stored_uploads() == before


def test_page_refuses_an_upload_over_the_limit_and_stores_nothing(page_client, settings):
    settings.DATASET_MAX_UPLOAD_MB = 1
    before = _stored_uploads()
    response = page_client.post("/datasets/", {"files": [_big_csv()], "name": "big", "task": "sts", "language": "en"})
    assert response.status_code == 200
    assert "The upload is 1.5 MB (big.csv), over the 1 MB limit" in response.content.decode()
    assert not DatasetImport.objects.exists() and _stored_uploads() == before


# --- 2. decoded size of Parquet files -------------------------------------------------------------


def test_import_refuses_a_parquet_file_that_decompresses_past_the_limit(tmp_path, settings):
    settings.DATASET_MAX_UNCOMPRESSED_MB = 1
    texts = pa.array(["A long sentence said again and again. " * 4] * 20_000)
    pq.write_table(
        pa.table({"sentence1": texts, "sentence2": texts, "score": [1.0] * 20_000}),
        tmp_path / "bomb.parquet",
        use_dictionary=False,
    )
    with pytest.raises(ShiftlabError, match=r"bomb\.parquet: holds 6\.1 MB uncompressed .* over the 1 MB limit"):
        dataset_import(source=tmp_path / "bomb.parquet", task="sts", name="bomb")
    assert not Dataset.objects.exists()


# --- 3. an import that kills its worker -----------------------------------------------------------


def _deliver(job_id: int, *, redelivered: bool) -> None:
    """Hand the task to this process as the broker would (a redelivery after a worker died)."""
    run_dataset_import.push_request(delivery_info={"redelivered": redelivered})
    try:
        run_dataset_import.run(job_id)
    finally:
        run_dataset_import.pop_request()


def _queued_job(tmp_path, researcher) -> DatasetImport:
    upload_dir = tmp_path / "upload"
    upload_dir.mkdir()
    (upload_dir / "demo.csv").write_bytes((FIXTURES / "sts/demo-sts.csv").read_bytes())
    return DatasetImport.objects.create(
        name="crashy", task_type="sts", upload_dir=str(upload_dir), created_by=researcher
    )


def _crash_the_worker(**kwargs):
    raise SystemExit("worker killed while importing")  # escapes the job's error handling, as a dead process does


def test_an_import_that_crashes_its_worker_fails_after_three_attempts(tmp_path, researcher, monkeypatch):
    job = _queued_job(tmp_path, researcher)
    monkeypatch.setattr("corpora.services.dataset_import", _crash_the_worker)
    for delivery in range(3):
        with pytest.raises(SystemExit):
            _deliver(job.pk, redelivered=delivery > 0)
        job.refresh_from_db()
        assert (job.status, job.attempts) == ("running", delivery + 1)
    _deliver(job.pk, redelivered=True)
    job.refresh_from_db()
    assert job.status == "failed" and job.attempts == 3 and job.finished_at is not None
    assert job.error.startswith("The import crashed its worker 3 times; check the file")
    assert not Path(job.upload_dir).exists()
    _deliver(job.pk, redelivered=True)  # a late copy of the message leaves the failed job alone
    job.refresh_from_db()
    assert job.status == "failed" and job.attempts == 3


def test_an_import_redelivered_after_one_crash_still_succeeds(tmp_path, researcher, monkeypatch):
    job = _queued_job(tmp_path, researcher)
    with monkeypatch.context() as patched:
        patched.setattr("corpora.services.dataset_import", _crash_the_worker)
        with pytest.raises(SystemExit):
            _deliver(job.pk, redelivered=False)
    _deliver(job.pk, redelivered=True)
    job.refresh_from_db()
    assert (job.status, job.attempts, job.dataset.n_items) == ("succeeded", 2, 40)


# --- 5. deleting a dataset still in use -----------------------------------------------------------


@pytest.fixture
def dataset_in_use(demo_sts) -> Dataset:
    generator = GeneratorConfig.objects.create(backend_alias="default", model="llm", params={}, content_hash="g")
    for seed in (1, 2):
        TransformRun.objects.create(
            dataset=demo_sts, transformation="paraphrase", generator=generator, seed=seed, run_hash=f"r{seed}"
        )
    return demo_sts


def _unchanged(dataset: Dataset) -> tuple:
    return Dataset.objects.filter(pk=dataset.pk).exists(), DatasetItem.objects.count(), AuditEvent.objects.count()


IN_USE = "Dataset 'demo-sts' is still used by 2 transform runs: delete those first"


def test_api_refuses_to_delete_a_dataset_in_use(researcher_client, dataset_in_use):
    before = _unchanged(dataset_in_use)
    response = researcher_client.delete("/api/datasets/demo-sts/")
    assert response.status_code == 409, response.content
    assert response.json()["detail"].startswith(IN_USE)
    assert _unchanged(dataset_in_use) == before


def test_page_refuses_to_delete_a_dataset_in_use(page_client, dataset_in_use):
    before = _unchanged(dataset_in_use)
    response = page_client.post("/datasets/demo-sts/delete/", follow=True)
    assert response.redirect_chain == [("/datasets/demo-sts/", 302)]
    assert IN_USE in html.unescape(response.content.decode())
    assert _unchanged(dataset_in_use) == before


def test_page_deletes_a_dataset_after_confirmation(page_client, demo_sts):
    confirm = page_client.get("/datasets/demo-sts/delete/").content.decode()
    assert "Delete demo-sts" in confirm and "40 items" in confirm
    response = page_client.post("/datasets/demo-sts/delete/", follow=True)
    assert response.redirect_chain == [("/datasets/", 302)]
    assert "Deleted demo-sts." in response.content.decode()
    assert not Dataset.objects.exists() and AuditEvent.objects.filter(verb="dataset.delete").count() == 1


def test_command_refuses_to_delete_a_dataset_in_use(dataset_in_use):
    before = _unchanged(dataset_in_use)
    with pytest.raises(CommandError, match=IN_USE):
        call_command("corpora", "delete", "demo-sts", stdout=io.StringIO())
    assert _unchanged(dataset_in_use) == before


# --- 6. bounded generation parameters -------------------------------------------------------------


@pytest.mark.parametrize(
    "params,message",
    [
        ({"max_tokens": 0}, "max_tokens must be between 1 and 8192, got 0"),
        ({"max_tokens": 8193}, "max_tokens must be between 1 and 8192, got 8193"),
        ({"max_attempts": 0}, "max_attempts must be between 1 and 10, got 0"),
        ({"max_attempts": 11}, "max_attempts must be between 1 and 10, got 11"),
    ],
)
def test_generation_params_are_bounded(params, message):
    with pytest.raises(ShiftlabError, match=message):
        GenerationParams(**params)


def test_generation_params_at_their_bounds_are_accepted():
    assert GenerationParams(max_tokens=8192, max_attempts=10).max_tokens == 8192
    assert GenerationParams(max_tokens=1, max_attempts=1).max_attempts == 1


def test_api_refuses_unbounded_generation_params(researcher_client, demo_sts):
    for field, value, message in [
        ("max_tokens", 1_000_000, "max_tokens must be between 1 and 8192, got 1000000"),
        ("max_attempts", 1_000, "max_attempts must be between 1 and 10, got 1000"),
    ]:
        body = {"dataset": "demo-sts", "transformation": "paraphrase", field: value}
        response = researcher_client.post("/api/transform-runs/", json.dumps(body), content_type="application/json")
        assert response.status_code == 400, response.content
        assert message in response.json()[field][0]  # the refusal names its input (issue 43)
    assert not TransformRun.objects.exists()


def test_command_refuses_unbounded_generation_params(demo_sts):
    with pytest.raises(CommandError, match="max_tokens must be between 1 and 8192, got 100000"):
        call_command("transform", "--dataset", "demo-sts", "--transformation", "paraphrase", "--max-tokens", "100000")
    assert not TransformRun.objects.exists()
