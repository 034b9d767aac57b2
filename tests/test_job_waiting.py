"""Work that waits on an LLM backend says so: a transformation run, a judge report or a benchmark
run whose backend does not answer shows since when it waits, why, retry k of N and when the next
retry is due (page, API, status commands); it fails with that reason once the retries are spent,
and the wait ends when the work succeeds again.

The backends are real sockets: a closed local port refuses connections at once; "answering again"
is a loopback OpenAI-style server started on that same port. Celery runs eagerly here: the
project's eager settings give up at once (an in-process task cannot wait); with more retries and
errors not propagated, Celery runs them at once. The last test runs a real Redis broker and worker.
"""

from __future__ import annotations

import html
import json
import os
import re
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.core.management import CommandError, call_command

from core.job_services import JobWait
from core.waiting import BackendUnavailable
from corpora.services import dataset_import
from evaluation.benchmark_execution import benchmark_run_waiting
from evaluation.benchmark_plan import transform_run_key
from evaluation.models import BenchmarkRun
from evaluation.tasks import execute_benchmark_unit
from shiftlab.celery import app
from tests.support import api_as, celery_sender, celery_worker_command, database_url_for_worker, page_as, wait_for
from transforms.backends import reset_backends
from transforms.backends.base import TransientBackendError
from transforms.judge_services import JudgeReportResumeRequest, judge_report_create_evaluation, judge_report_resume
from transforms.judgement_services import JudgeParams, judge_report_waiting
from transforms.models import JudgeReport, TransformRun
from transforms.params import GenerationParams
from transforms.services import (
    TransformRunResumeRequest,
    transform_run_create,
    transform_run_pending_chunks,
    transform_run_resume,
    transform_run_waiting,
)
from transforms.tasks import execute_chunk

SINCE = r"since \d\d:\d\d"


def closed_port() -> int:
    """A local port nothing listens on (connections to it are refused), free to serve later."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def backend_config(alias: str, port: int) -> dict:
    """An OpenAI-compatible backend at ``port`` that does not retry by itself: a refused request
    fails at once and the task's retry policy takes over. Each alias serves its own model, so that
    no backend's answers come from another's generation cache."""
    return {"base_url": f"http://127.0.0.1:{port}/v1", "model": f"stub-{alias}", "max_retries": 0}


def use_backends(settings, **ports: int) -> None:
    settings.TRANSFORM_BACKENDS = {
        **settings.TRANSFORM_BACKENDS,
        **{
            alias: {
                "BACKEND": "transforms.backends.openai_compat.OpenAICompatBackend",
                "OPTIONS": backend_config(alias, port),
            }
            for alias, port in ports.items()
        },
    }
    reset_backends()


@contextmanager
def answering(port: int, answer: str) -> Iterator[None]:
    """An OpenAI-style server on ``port`` that answers every chat request with ``answer``."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _send(self, payload: dict) -> None:
            body = json.dumps(payload).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            self._send({"data": [{"id": "stub"}]})

        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            self._send({"choices": [{"message": {"content": answer}, "finish_reason": "stop"}]})

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def sts(db, settings):
    settings.TRANSFORM_CHUNK_SIZE = 2
    yield dataset_import(source=settings.BASE_DIR / "fixtures/sts/demo-sts.csv", task="sts", name="waiting-sts")
    reset_backends()


def paraphrase_run(dataset, backend: str, *, dispatch: bool) -> TransformRun:
    return transform_run_create(
        dataset=dataset,
        transformation="paraphrase",
        seed=1,
        limit=2,
        backend_alias=backend,
        params=GenerationParams(max_tokens=16, max_attempts=1),
        dispatch=dispatch,
    )


# --- what a waiting job shows -------------------------------------------------------------------


def _transform_run(dataset):
    run = paraphrase_run(dataset, "default", dispatch=False)
    return run, transform_run_waiting(run_id=run.pk), ["transform", "--run"]


def _judge_report(dataset):
    report = judge_report_create_evaluation(dataset=dataset, dispatch=False)
    return report, judge_report_waiting(report_id=report.pk), ["judge", "status"]


def _benchmark_run(dataset):
    run = BenchmarkRun.objects.create(source=BenchmarkRun.Source.DATASETS, total=1, plan={"units": []})
    return run, benchmark_run_waiting(run_id=run.pk), ["benchmark", "status"]


# Each kind of job: how to make one (with how its tasks record a wait, and its status command),
# its API address and its page.
JOBS = {
    "transformation run": (_transform_run, "/api/transform-runs/{}/", "/transforms/runs/{}/"),
    "judge report": (_judge_report, "/api/judge-reports/{}/", "/transforms/judge/{}/"),
    "benchmark run": (_benchmark_run, "/api/benchmark-runs/{}/", "/benchmarks/{}/"),
}
REFUSED = BackendUnavailable("4 requests failed", backend="the LLM backend 'default'", reason="connection refused")


def shown(job, api_path: str, page_path: str, command: list[str], researcher) -> tuple[dict, str, str]:
    """The job as the API, its page and its status command show it."""
    api = api_as(researcher).get(api_path.format(job.pk)).json()
    page = html.unescape(page_as(researcher).get(page_path.format(job.pk)).content.decode())
    out = StringIO()
    call_command(*command, str(job.pk), stdout=out)
    return api, page, out.getvalue()


@pytest.mark.parametrize("kind", list(JOBS))
def test_a_waiting_job_says_so_on_its_page_in_the_api_and_in_its_status_command(kind, sts, researcher):
    make, api_path, page_path = JOBS[kind]
    job, waits, command = make(sts)
    type(job).objects.filter(pk=job.pk).update(status="running")

    waits.wait(REFUSED, retry=1, max_retries=8, countdown=40)
    expected = re.compile(
        rf"Waiting for the LLM backend 'default' {SINCE}: connection refused; retry 1 of 8, next in (39|40) s"
    )
    api, page, out = shown(job, api_path, page_path, command, researcher)
    assert expected.fullmatch(api["waiting_message"]), api["waiting_message"]
    assert api["waiting"]["backend"] == "the LLM backend 'default'" and api["waiting"]["reason"] == "connection refused"
    assert (api["waiting"]["retry"], api["waiting"]["max_retries"]) == (1, 8)
    assert expected.search(page), page
    assert expected.search(out), out

    # The next retry keeps the wait's start.
    waits.wait(REFUSED, retry=2, max_retries=8, countdown=0)
    again, _, out = shown(job, api_path, page_path, command, researcher)
    assert again["waiting"]["since"] == api["waiting"]["since"] and again["waiting"]["retry"] == 2
    assert again["waiting_message"].endswith("retry 2 of 8, due now") and "retry 2 of 8, due now" in out

    # A finished job waits for nothing, whatever its row still holds.
    type(job).objects.filter(pk=job.pk).update(status="succeeded")
    api, page, out = shown(job, api_path, page_path, command, researcher)
    assert api["waiting"] is None and api["waiting_message"] is None
    assert "Waiting for" not in page and "Waiting for" not in out


# --- giving up ----------------------------------------------------------------------------------


@pytest.fixture
def snapshots(monkeypatch):
    """The waiting message of each job each time a retry is recorded."""
    seen: list[str] = []
    record = JobWait.wait

    def wait_and_look(self, *args, **kwargs):
        record(self, *args, **kwargs)
        seen.append(self.model.objects.get(pk=self.job_id).waiting_message)

    monkeypatch.setattr(JobWait, "wait", wait_and_look)
    return seen


def test_a_run_whose_backend_stays_down_fails_with_the_reason_once_its_retries_are_spent(
    sts, settings, monkeypatch, snapshots
):
    use_backends(settings, dead=closed_port())
    run = paraphrase_run(sts, "dead", dispatch=False)
    (chunk,) = transform_run_pending_chunks(run_id=run.pk)
    monkeypatch.setattr(execute_chunk, "max_retries", 2)  # the settings give eager tasks 0
    # Eager retries run at once when eager errors do not propagate (the settings propagate them).
    monkeypatch.setitem(app.conf, "task_eager_propagates", False)
    assert execute_chunk.apply(args=(run.pk, chunk)).failed()

    run = TransformRun.objects.get()
    first, second = snapshots
    assert re.match(rf"Waiting for the LLM backend 'dead' {SINCE}: .*ConnectError.*; retry 1 of 2, next in", first)
    assert "retry 2 of 2" in second
    since = re.search(SINCE, first).group()
    assert run.status == TransformRun.Status.FAILED and run.waiting is None and run.waiting_message is None
    assert re.match(
        rf"Gave up after 2 retries: the LLM backend 'dead' did not answer {since} \(.*ConnectError", run.error
    )
    assert f"--run {run.pk} --resume" in run.error


def test_eager_mode_gives_up_at_once_and_says_why(sts, settings, snapshots, django_capture_on_commit_callbacks):
    use_backends(settings, dead=closed_port())
    with pytest.raises(TransientBackendError), django_capture_on_commit_callbacks(execute=True):
        paraphrase_run(sts, "dead", dispatch=True)
    run = TransformRun.objects.get()
    assert snapshots == [] and run.status == TransformRun.Status.FAILED
    assert run.error.startswith("Gave up at once, without retrying: the LLM backend 'dead' did not answer since")


def test_a_benchmark_unit_waits_for_the_backend_of_its_transformations(sts, settings, monkeypatch, snapshots):
    use_backends(settings, dead=closed_port())
    transform_run = paraphrase_run(sts, "dead", dispatch=False)
    unit = {"model": "default", "dataset": sts.name, "transformation": "paraphrase", "seed": 1}
    run = BenchmarkRun.objects.create(
        source=BenchmarkRun.Source.DATASETS,
        total=1,
        item_limit=2,
        plan={"units": [unit], "transform_runs": {transform_run_key(sts.name, "paraphrase", 1): transform_run.pk}},
    )
    monkeypatch.setattr(execute_benchmark_unit, "max_retries", 1)
    monkeypatch.setitem(app.conf, "task_eager_propagates", False)
    assert execute_benchmark_unit.apply(args=(run.pk, unit)).failed()
    assert len(snapshots) == 1 and "Waiting for the LLM backend 'dead'" in snapshots[0]
    assert "retry 1 of 1" in snapshots[0]
    run.refresh_from_db()
    assert run.status == BenchmarkRun.Status.FAILED and run.waiting is None
    assert run.error.startswith("Gave up after 1 retry: the LLM backend 'dead' did not answer since")
    assert f"benchmark resume {run.pk}" in run.error


def test_the_judge_command_fails_a_report_whose_backend_does_not_answer(sts, settings):
    use_backends(settings, dead=closed_port())
    with pytest.raises(CommandError, match="ConnectError"):
        call_command("judge", "evaluate", "--dataset", sts.name, "--judge", "dead", "--limit", "3", stdout=StringIO())
    report = JudgeReport.objects.get()
    assert report.status == JudgeReport.Status.FAILED and "ConnectError" in report.error


# --- the wait ends when the work succeeds -------------------------------------------------------


def test_work_that_succeeds_again_ends_the_wait(sts, settings, django_capture_on_commit_callbacks):
    port = closed_port()
    use_backends(settings, returning=port)
    run = paraphrase_run(sts, "returning", dispatch=False)
    report = judge_report_create_evaluation(
        dataset=sts, judge="returning", limit=3, params=JudgeParams(max_attempts=1), dispatch=False
    )
    for job, waiting in (
        (run, transform_run_waiting(run_id=run.pk)),
        (report, judge_report_waiting(report_id=report.pk)),
    ):
        type(job).objects.filter(pk=job.pk).update(status="running")
        waiting.wait(REFUSED, retry=1, max_retries=8, countdown=30)
    with answering(port, "4"), django_capture_on_commit_callbacks(execute=True):
        transform_run_resume(request=TransformRunResumeRequest(run=run.pk))
        judge_report_resume(request=JudgeReportResumeRequest(report=report.pk))
    run.refresh_from_db()
    report.refresh_from_db()
    assert run.status == TransformRun.Status.SUCCEEDED and run.waiting is None, run.error
    assert report.status == JudgeReport.Status.SUCCEEDED and report.waiting is None, report.error


# --- through a real broker and worker -----------------------------------------------------------


@contextmanager
def fast_retrying_worker(*, redis_url: str, queue: str, log_path: Path, env: dict[str, str]):
    """A real `celery worker` process whose backend retries come after 2-4 s, 3 at most."""
    command = [sys.executable, "-m", "tests.waiting_worker", "4", "3", *celery_worker_command(queue)[5:]]
    full_env = {
        **os.environ,
        "CELERY_BROKER_URL": redis_url,
        "DATABASE_URL": database_url_for_worker(),
        "SHIFTLAB_DATA_DIR": str(django_settings.DATA_DIR),
        "SHIFTLAB_CELERY_QUEUE": queue,
        **env,
    }
    with log_path.open("a") as log:
        process = subprocess.Popen(
            command, cwd=django_settings.BASE_DIR, env=full_env, stdout=log, stderr=subprocess.STDOUT
        )
        try:
            yield process
        finally:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_on_a_real_worker_a_run_waits_then_completes_or_gives_up(redis_url, tmp_path, settings, researcher):
    settings.TRANSFORM_CHUNK_SIZE = 2
    returning_port, dead_port = closed_port(), closed_port()
    use_backends(settings, returning=returning_port, dead=dead_port)
    dataset = dataset_import(source=settings.BASE_DIR / "fixtures/sts/demo-sts.csv", task="sts", name="wait-sts")
    queue = f"shiftlab-waiting-{uuid.uuid4().hex[:8]}"
    log_path = tmp_path / "worker.log"
    backends = {"returning": backend_config("returning", returning_port), "dead": backend_config("dead", dead_port)}
    env = {"SHIFTLAB_LLM_BACKENDS": json.dumps(backends), "SHIFTLAB_TRANSFORM_CHUNK_SIZE": "2"}
    with (
        celery_sender(broker_url=redis_url, queue=queue),
        fast_retrying_worker(redis_url=redis_url, queue=queue, log_path=log_path, env=env),
    ):
        returning = paraphrase_run(dataset, "returning", dispatch=True)
        dead = paraphrase_run(dataset, "dead", dispatch=True)

        # (a) The backend is down: the run says why, on every interface, while it waits.
        def first_wait():
            waiting = TransformRun.objects.get(pk=returning.pk).waiting
            return waiting is not None and waiting["retry"] == 1

        wait_for(first_wait, 60, "the run's first wait to be recorded", log_path)
        api, page, out = shown(
            returning, "/api/transform-runs/{}/", "/transforms/runs/{}/", ["transform", "--run"], researcher
        )
        expected = re.compile(rf"Waiting for the LLM backend 'returning' {SINCE}: .*ConnectError.*; retry 1 of 3, ")
        assert expected.match(api["waiting_message"]), api["waiting_message"]
        assert api["status"] == "running" and api["waiting"]["retry"] == 1
        assert expected.search(page) and expected.search(out), (page, out)

        # (c) The backend answers again: the next retry completes the run and the wait ends.
        with answering(returning_port, "A cat sits on a mat."):
            wait_for(lambda: TransformRun.objects.get(pk=returning.pk).status == "succeeded", 60, "the run", log_path)

        # (b) The other backend never answers: its run fails with the reason once 3 retries are spent.
        wait_for(lambda: TransformRun.objects.get(pk=dead.pk).status == "failed", 90, "the dead run to fail", log_path)

    returning.refresh_from_db()
    assert returning.done == returning.total and returning.waiting is None and returning.waiting_message is None
    dead.refresh_from_db()
    assert re.match(
        rf"Gave up after 3 retries: the LLM backend 'dead' did not answer {SINCE} \(.*ConnectError", dead.error
    ), dead.error
    assert dead.waiting is None
