"""A task of a job that fails for good (not a transient error it retries) fails its job with the
task's error, on a real worker over Redis: a chunk of a transformation run, a unit of a benchmark
run, and a judge report's task. Without the errbacks the chord never calls its final task and each
job stays "running" with no error."""

from __future__ import annotations

import uuid

import pytest

from corpora.models import DatasetItem
from corpora.services import dataset_import
from evaluation.benchmark_execution import BenchmarkRunResumeRequest, benchmark_run_resume
from evaluation.models import BenchmarkRun
from tests.support import celery_sender, celery_worker, wait_for
from transforms.judge_services import JudgeReportResumeRequest, judge_report_resume
from transforms.models import JudgeReport, TransformRun
from transforms.services import transform_run_create

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def _finished(model, pk):
    return lambda: model.objects.get(pk=pk).status in ("succeeded", "failed")


def test_a_failed_member_fails_its_job_with_the_members_error(redis_url, tmp_path, settings):
    dataset = dataset_import(source=settings.BASE_DIR / "fixtures/sts/demo-sts.csv", task="sts", name="chord-sts")
    # One example lost its text: the chunk holding it raises KeyError, which no retry can mend.
    broken = DatasetItem.objects.filter(dataset=dataset, kind="example").order_by("position")[3]
    DatasetItem.objects.filter(pk=broken.pk).update(payload={"sentence2": broken.payload["sentence2"]})
    bad_unit = {"model": "m", "dataset": dataset.name, "transformation": "original", "seed": "not-a-seed"}
    benchmark = BenchmarkRun.objects.create(source="datasets", total=2, plan={"units": [bad_unit, bad_unit]})
    report = JudgeReport.objects.create(kind="no-such-kind", dataset=dataset)

    queue = f"shiftlab-chord-{uuid.uuid4().hex[:8]}"
    log_path = tmp_path / "worker.log"
    env = {"SHIFTLAB_TRANSFORM_CHUNK_SIZE": "2", "SHIFTLAB_CELERY_QUEUE": queue}
    with (
        celery_sender(broker_url=redis_url, queue=queue),
        celery_worker(redis_url=redis_url, queue=queue, log_path=log_path, env=env),
    ):
        run = transform_run_create(dataset=dataset, transformation="random_keywords", seed=3, limit=8)
        benchmark_run_resume(request=BenchmarkRunResumeRequest(run=benchmark.pk))
        judge_report_resume(request=JudgeReportResumeRequest(report=report.pk))
        wait_for(_finished(TransformRun, run.pk), 60, "the transformation run to end", log_path)
        wait_for(_finished(BenchmarkRun, benchmark.pk), 60, "the benchmark run to end", log_path)
        wait_for(_finished(JudgeReport, report.pk), 60, "the judge report to end", log_path)

    run.refresh_from_db()
    assert run.status == TransformRun.Status.FAILED
    assert "KeyError" in run.error and "sentence1" in run.error and f"--run {run.pk} --resume" in run.error
    # The other chunks' texts are kept: 3 of the 4 chunks (2 items x 2 sides each) succeeded.
    assert run.done == 12 and run.total == 16
    benchmark.refresh_from_db()
    assert benchmark.status == BenchmarkRun.Status.FAILED
    assert "not-a-seed" in benchmark.error and f"benchmark resume {benchmark.pk}" in benchmark.error
    report.refresh_from_db()
    assert report.status == JudgeReport.Status.FAILED
    assert "no-such-kind" in report.error and "resume" in report.error
