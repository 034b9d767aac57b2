"""A 200 reply whose body is not JSON (a proxy's error page, a body cut off) is a transient failure:
the client retries it, and a chunk that still gets no JSON raises TransientBackendError, so the
Celery task retries it like any other transient error instead of failing with a decoding error."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from corpora.services import dataset_import
from transforms.backends import reset_backends
from transforms.backends.base import ChatFailure, ChatRequest, ChatResult, TransientBackendError
from transforms.backends.openai_compat import OpenAICompatBackend
from transforms.chunk_services import transform_run_execute_chunk
from transforms.models import Generation, TransformedItem
from transforms.params import GenerationParams
from transforms.services import transform_run_create, transform_run_pending_chunks

GATEWAY_PAGE = b"<html><body>502 Bad Gateway</body></html>"


@pytest.fixture
def html_then_json():
    """A loopback server that answers 200 with an HTML page ``state["html_left"]`` times, then JSON."""
    state = {"html_left": 0, "calls": 0}
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            with lock:
                state["calls"] += 1
                html = state["html_left"] > 0
                state["html_left"] -= html
            body = GATEWAY_PAGE if html else json.dumps({"choices": [{"message": {"content": "fine"}}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html" if html else "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", state
    httpd.shutdown()


def _request() -> ChatRequest:
    return ChatRequest(messages=[{"role": "user", "content": "x"}], seed=1, temperature=0.0, top_p=1.0, max_tokens=5)


def test_a_non_json_200_is_retried_then_succeeds(html_then_json):
    url, state = html_then_json
    state["html_left"] = 2
    backend = OpenAICompatBackend(alias="t", model="m", base_url=url, max_retries=3, backoff_seconds=0.01)
    (result,) = backend.generate([_request()])
    assert isinstance(result, ChatResult) and result.text == "fine"
    assert state["calls"] == 3


def test_a_server_that_never_answers_json_is_a_transient_failure(html_then_json):
    url, state = html_then_json
    state["html_left"] = 99
    backend = OpenAICompatBackend(alias="t", model="m", base_url=url, max_retries=2, backoff_seconds=0.01)
    (result,) = backend.generate([_request()])
    assert isinstance(result, ChatFailure) and result.transient
    assert "not JSON" in result.message and "Bad Gateway" in result.message and state["calls"] == 3


@pytest.mark.django_db
def test_a_chunk_meeting_non_json_replies_takes_the_retry_path(html_then_json, settings):
    url, state = html_then_json
    state["html_left"] = 10**6
    settings.TRANSFORM_BACKENDS = {
        "default": {
            "BACKEND": "transforms.backends.openai_compat.OpenAICompatBackend",
            "OPTIONS": {"base_url": url, "model": "m", "max_retries": 1, "backoff_seconds": 0.01},
        }
    }
    reset_backends()
    try:
        dataset = dataset_import(source=settings.BASE_DIR / "fixtures/sts/demo-sts.csv", task="sts", name="html-sts")
        run = transform_run_create(
            dataset=dataset,
            transformation="paraphrase",
            seed=1,
            limit=2,
            dispatch=False,
            params=GenerationParams(max_tokens=8, max_attempts=1),
        )
        (chunk,) = transform_run_pending_chunks(run_id=run.pk)
        with pytest.raises(TransientBackendError, match="not JSON"):
            transform_run_execute_chunk(run_id=run.pk, item_ids=chunk)
    finally:
        reset_backends()
    # Nothing was recorded as a permanent outcome: a retry (or a resume) starts these texts afresh.
    assert not TransformedItem.objects.filter(run=run).exists()
    assert not Generation.objects.exists()
