"""The OpenAI-compatible client against a real HTTP server on loopback that misbehaves on purpose
(transient 503s, a permanent 400) and counts concurrent requests."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from transforms.backends.base import ChatFailure, ChatRequest, ChatResult
from transforms.backends.openai_compat import OpenAICompatBackend


class _State:
    def __init__(self):
        self.lock = threading.Lock()
        self.active = 0
        self.max_active = 0
        self.calls: list[dict] = []
        self.failures_left: dict[str, int] = {}
        self.props: dict | None = None  # GET /props (llama-server's); None: 404, as vLLM answers
        self.props_calls = 0


@pytest.fixture
def server():
    state = _State()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            if self.path != "/props" or state.props is None:
                return self._reply(404, {"error": "not found"})
            state.props_calls += 1
            self._reply(200, state.props)

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            text = body["messages"][-1]["content"]
            with state.lock:
                state.calls.append(body)
                state.active += 1
                state.max_active = max(state.max_active, state.active)
                fail = state.failures_left.get(text, 0)
                if fail:
                    state.failures_left[text] = fail - 1
            time.sleep(0.05)
            with state.lock:
                state.active -= 1
            if text == "bad":
                return self._reply(400, {"error": "prompt too long"})
            if fail:
                return self._reply(503, {"error": "overloaded"})
            self._reply(
                200,
                {
                    "choices": [
                        {
                            "message": {"role": "assistant", "content": f"echo {text} seed={body['seed']}"},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {"prompt_tokens": 7, "completion_tokens": 3},
                },
            )

        def _reply(self, status, payload):
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", state
    httpd.shutdown()


def request(text: str, seed: int = 1) -> ChatRequest:
    return ChatRequest(
        messages=[{"role": "user", "content": text}], seed=seed, temperature=0.7, top_p=0.9, max_tokens=20
    )


def test_results_come_back_in_order_with_seed_and_usage(server):
    url, state = server
    backend = OpenAICompatBackend(alias="t", model="m", base_url=url, max_concurrency=4)
    results = backend.generate([request(f"t{i}", seed=i) for i in range(10)])
    assert [r.text for r in results] == [f"echo t{i} seed={i}" for i in range(10)]
    assert all(isinstance(r, ChatResult) and r.prompt_tokens == 7 and r.completion_tokens == 3 for r in results)
    assert {c["model"] for c in state.calls} == {"m"} and state.calls[0]["max_tokens"] == 20


def test_concurrency_is_bounded_and_used(server):
    url, state = server
    OpenAICompatBackend(alias="t", model="m", base_url=url, max_concurrency=3).generate(
        [request(f"c{i}") for i in range(12)]
    )
    assert state.max_active == 3


def test_transient_errors_are_retried_then_succeed(server):
    url, state = server
    state.failures_left["flaky"] = 2
    backend = OpenAICompatBackend(alias="t", model="m", base_url=url, max_retries=3, backoff_seconds=0.01)
    (result,) = backend.generate([request("flaky")])
    assert isinstance(result, ChatResult) and len(state.calls) == 3


def test_transient_errors_give_up_after_the_limit(server):
    url, state = server
    state.failures_left["down"] = 99
    backend = OpenAICompatBackend(alias="t", model="m", base_url=url, max_retries=2, backoff_seconds=0.01)
    (result,) = backend.generate([request("down")])
    assert isinstance(result, ChatFailure) and result.transient and len(state.calls) == 3


def test_permanent_errors_are_not_retried(server):
    url, state = server
    backend = OpenAICompatBackend(alias="t", model="m", base_url=url, max_retries=3, backoff_seconds=0.01)
    (result,) = backend.generate([request("bad")])
    assert isinstance(result, ChatFailure) and not result.transient and "HTTP 400" in result.message
    assert len(state.calls) == 1


def test_unreachable_server_is_a_transient_failure():
    backend = OpenAICompatBackend(
        alias="t", model="m", base_url="http://127.0.0.1:9/v1", max_retries=1, backoff_seconds=0.01, timeout=2
    )
    (result,) = backend.generate([request("x")])
    assert isinstance(result, ChatFailure) and result.transient


def test_a_refused_connection_says_so():
    """httpx only says "All connection attempts failed"; the waiting message should say why."""
    from core.local_server import free_port

    backend = OpenAICompatBackend(alias="down", model="m", base_url=f"http://127.0.0.1:{free_port()}/v1", max_retries=0)
    request = ChatRequest(messages=[{"role": "user", "content": "x"}], seed=1, temperature=0, top_p=1, max_tokens=2)
    (failure,) = backend.generate([request])
    assert failure.transient
    assert failure.message == "gave up after 1 try: ConnectError: connection refused"


def test_in_flight_requests_follow_the_slots_the_server_reports(server):
    url, state = server
    state.props = {"total_slots": 5, "default_generation_settings": {"n_ctx": 2048}}
    backend = OpenAICompatBackend(alias="t", model="m", base_url=url)
    assert backend.in_flight() == 5
    backend.generate([request(f"s{i}") for i in range(15)])
    assert state.max_active == 5


def test_an_explicit_max_concurrency_wins_over_the_server_slots(server):
    url, state = server
    state.props = {"total_slots": 5}
    backend = OpenAICompatBackend(alias="t", model="m", base_url=url, max_concurrency=2)
    backend.generate([request(f"e{i}") for i in range(8)])
    assert state.max_active == 2  # /props is still asked: its slots decide whether a prefix is shared


def test_a_server_without_slots_gets_the_default_in_flight_count(server):
    from transforms.backends.openai_compat import DEFAULT_IN_FLIGHT

    url, state = server
    assert OpenAICompatBackend(alias="t", model="m", base_url=url).in_flight() == DEFAULT_IN_FLIGHT
    state.props = {"build_info": "b1"}  # a /props without total_slots
    assert OpenAICompatBackend(alias="t", model="m", base_url=url).in_flight() == DEFAULT_IN_FLIGHT
