"""How fast a task lost with its worker comes back, and that a long task is not taken from a live
worker, on real workers over Redis with a short visibility timeout.

Two workers share a queue; a transformation chunk waits on a slow loopback LLM server for longer
than the visibility timeout. With the heartbeat (core/broker.py) the live worker keeps its task
(no text is asked of the LLM twice). Killed with SIGKILL, the worker's task goes to the other
worker after about the visibility timeout (the figure is printed; run with -s to see it)."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from corpora.services import dataset_import
from shiftlab.celery import app
from tests.support import celery_sender, celery_worker, private_redis_url, wait_for
from transforms.backends import reset_backends
from transforms.models import TransformRun
from transforms.params import GenerationParams
from transforms.services import transform_run_create

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]
VISIBILITY_TIMEOUT = 4
# Each LLM answer takes this long: a chunk outlives the visibility timeout.
ANSWER_SECONDS = 15  # well past the visibility timeout and the checks below, even on a loaded machine


@pytest.fixture
def slow_llm():
    """An OpenAI-compatible loopback server answering slowly; it records when each prompt arrived."""
    arrivals: list[tuple[float, str]] = []
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            self._reply({"data": [{"id": "slow"}]})

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with lock:
                arrivals.append((time.monotonic(), body["messages"][-1]["content"]))
            time.sleep(ANSWER_SECONDS)
            self._reply({"choices": [{"message": {"content": "A reworded sentence."}, "finish_reason": "stop"}]})

        def _reply(self, payload):
            data = json.dumps(payload).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", arrivals
    httpd.shutdown()


@pytest.fixture
def redis_url(redis_url):
    """Redis database 10, emptied: a restore lock left in the shared database by another test's
    killed worker (held for its 300 s visibility timeout) would delay the redelivery measured here."""
    return private_redis_url(redis_url, 10)


@pytest.fixture
def queue_setup(redis_url, slow_llm, settings):
    base_url, _ = slow_llm
    settings.TRANSFORM_BACKENDS = {
        "default": {
            "BACKEND": "transforms.backends.openai_compat.OpenAICompatBackend",
            "OPTIONS": {"base_url": base_url, "model": "slow"},
        }
    }
    reset_backends()
    queue = f"shiftlab-redeliver-{uuid.uuid4().hex[:8]}"
    env = {
        "SHIFTLAB_LLM_BASE_URL": base_url,
        "SHIFTLAB_LLM_MODEL": "slow",
        "SHIFTLAB_BROKER_VISIBILITY_TIMEOUT": str(VISIBILITY_TIMEOUT),
        "SHIFTLAB_CELERY_QUEUE": queue,
        "SHIFTLAB_TRANSFORM_CHUNK_SIZE": "1",
        "PYTHONUNBUFFERED": "1",  # the logs tell which worker holds the chunk: write them at once
    }
    with celery_sender(broker_url=redis_url, queue=queue):
        yield queue, env
    reset_backends()


def _one_chunk_run(name: str, settings) -> TransformRun:
    dataset = dataset_import(source=settings.BASE_DIR / "fixtures/sts/demo-sts.csv", task="sts", name=name)
    # One pair: one chunk asking the LLM for its two texts.
    return transform_run_create(
        dataset=dataset,
        transformation="paraphrase",
        seed=5,
        limit=1,
        dispatch=False,
        params=GenerationParams(max_tokens=16, max_attempts=1),
    )


def _start(run: TransformRun, queue: str, redis_url: str) -> None:
    from transforms.tasks import start_run

    with app.connection_for_write(redis_url) as conn:
        start_run.apply_async(args=[run.pk], queue=queue, connection=conn)


def test_a_held_task_stays_with_its_live_worker_and_a_lost_one_comes_back_soon(
    queue_setup, slow_llm, redis_url, tmp_path, settings
):
    queue, env = queue_setup
    _, arrivals = slow_llm
    run = _one_chunk_run("lost-task", settings)
    logs = [tmp_path / "worker-a.log", tmp_path / "worker-b.log"]
    with (
        celery_worker(redis_url=redis_url, queue=queue, log_path=logs[0], env=env) as worker_a,
        celery_worker(redis_url=redis_url, queue=queue, log_path=logs[1], env=env) as worker_b,
    ):
        for log in logs:
            wait_for(lambda log=log: log.exists() and " ready." in log.read_text(), 60, "a worker to start", log)
        _start(run, queue, redis_url)
        wait_for(lambda: len(arrivals) >= 1, 60, "the chunk's LLM requests", logs[0])
        # Past the visibility timeout and a restore scan, while the chunk still waits on the LLM:
        # the idle worker has not been handed the chunk (it would ask the LLM again).
        time.sleep(VISIBILITY_TIMEOUT + 1.5)
        assert len({prompt for _, prompt in arrivals}) == len(arrivals), arrivals
        held = len(arrivals)
        # "execute_chunk[<id>] received": the banner of every worker lists the task's bare name too.
        took = "transforms.execute_chunk["
        wait_for(lambda: any(took in log.read_text() for log in logs), 30, "the chunk's worker", logs[0])
        holder, log = (worker_a, logs[0]) if took in logs[0].read_text() else (worker_b, logs[1])
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=10)
        killed_at = time.monotonic()
        wait_for(lambda: len(arrivals) > held, 120, "the lost chunk to be handed out again", log)
        redelivered_after = arrivals[held][0] - killed_at
        wait_for(lambda: TransformRun.objects.get(pk=run.pk).status == "succeeded", 90, "the run", log)
    print(
        f"\nlost task redelivered {redelivered_after:.1f} s after its worker was killed "
        f"(visibility timeout {VISIBILITY_TIMEOUT} s)"
    )
    # About the timeout plus the transport's scan interval: seconds, where it used to be hours.
    assert redelivered_after < VISIBILITY_TIMEOUT + 30
