"""/health/ says the LLM is ok only while it generates.

A real embedded server under ``manage.py llm_server`` is killed with SIGSEGV (what llama.cpp's AMX
path did to it): /health/ turns to "crash-looping" with the exit signal and the last log line, and
back to ok once the supervisor's restarted server has answered its warm-up generation. A server
without a local supervisor must answer a one-token generation: the real test server does, a
stand-in that answers /v1/models but fails generations (HTTP 500) does not.
"""

from __future__ import annotations

import io
import json
import os
import signal
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from django.core.management import call_command

from core.health import probe_llm
from core.local_server import free_port, supervisor_state_path, supervisor_state_write
from tests.support import wait_for
from transforms.embedded import TEST_MODEL
from transforms.management.commands.llm_server import Command as LlmServerCommand


def point_llm_at(settings, base_url: str, model: str = TEST_MODEL) -> None:
    settings.TRANSFORM_BACKENDS = {
        "default": {
            "BACKEND": "transforms.backends.openai_compat.OpenAICompatBackend",
            "OPTIONS": {"base_url": base_url, "model": model},
        }
    }


def llm_check(admin_client) -> dict:
    return admin_client.get("/health/").json()["checks"]["llm"]


def llm_check_when(admin_client, holds, what: str, log_path) -> dict:
    """The LLM's /health/ check once ``holds(check)`` (fails with the server's log after 90 s)."""
    seen: list[dict] = []
    wait_for(lambda: holds(seen.append(llm_check(admin_client)) or seen[-1]), 90, what, log_path)
    return seen[-1]


@pytest.mark.services
@pytest.mark.django_db
def test_health_follows_a_crashing_supervised_server(llm_test_model, tmp_path, settings, admin_client):
    settings.DATA_DIR = tmp_path
    port = free_port()
    point_llm_at(settings, f"http://127.0.0.1:{port}/v1")
    command = LlmServerCommand(stdout=io.StringIO(), stderr=io.StringIO())
    command.BACKOFF_FIRST_S = 5.0  # long enough to see the crash-looping state
    args = ["--model", TEST_MODEL, "--models-dir", str(llm_test_model.parent), "--port", str(port)]
    args += ["--n-ctx", "512", "--log-file", str(tmp_path / "server.log")]
    thread = threading.Thread(target=call_command, args=(command, *args), daemon=True)
    thread.start()
    try:
        log = tmp_path / "server.log"
        ok = llm_check_when(admin_client, lambda c: c["status"] == "ok", "the LLM ok", log)
        assert "generating" in ok["detail"] and "warm-up generation" in ok["detail"]

        crashed = command.server
        os.kill(crashed.process.pid, signal.SIGSEGV)
        down = llm_check_when(admin_client, lambda c: "crash-looping" in c["detail"], "crash-looping", log)
        assert crashed.slot_dir is None  # llama-server's slot directory went with the crashed server
        assert down["status"] == "error"
        assert "signal SIGSEGV (exit -11)" in down["detail"]
        assert "Last log line:" in down["detail"]
        assert admin_client.get("/health/").json()["status"] == "degraded"

        back = llm_check_when(admin_client, lambda c: c["status"] == "ok", "the LLM ok again", log)
        assert "restarted 1 time(s)" in back["detail"]
    finally:
        command.stop_event.set()
        thread.join(30)
    state = json.loads(supervisor_state_path(tmp_path, "llm-server", port).read_text())
    assert state["state"] == "stopped"


@pytest.mark.django_db
def test_a_supervisor_that_gave_up_is_an_error_with_its_reason(tmp_path, settings):
    settings.DATA_DIR = tmp_path
    port = free_port()
    point_llm_at(settings, f"http://127.0.0.1:{port}/v1")
    reason = "giving up: the server crashed 5 times in a row within 60 s of starting; last log line: amx repack"
    supervisor_state_write(supervisor_state_path(tmp_path, "llm-server", port), state="given_up", detail=reason)
    probe = probe_llm()
    assert probe.status == "error"
    assert "its supervisor gave up" in probe.detail and "amx repack" in probe.detail


@pytest.mark.django_db
def test_a_state_left_by_a_dead_supervisor_is_ignored(tmp_path, settings):
    settings.DATA_DIR = tmp_path
    port = free_port()
    point_llm_at(settings, f"http://127.0.0.1:{port}/v1")
    path = supervisor_state_path(tmp_path, "llm-server", port)
    supervisor_state_write(path, state="ready", detail="answered a warm-up generation")
    record = json.loads(path.read_text())
    path.write_text(json.dumps({**record, "pid": 2**22 + 12345}))  # no such process
    probe = probe_llm()
    assert probe.status == "error" and "unreachable" in probe.detail  # judged by the server itself


@pytest.mark.services
@pytest.mark.django_db
def test_an_unsupervised_server_must_answer_a_generation(llm_server, settings):
    point_llm_at(settings, llm_server.base_url)
    probe = probe_llm()
    assert probe.status == "ok" and "generating" in probe.detail


class _ModelsOnly(BaseHTTPRequestHandler):
    def do_GET(self):
        self._answer(200, {"object": "list", "data": [{"id": "m"}]})

    def do_POST(self):
        self._answer(500, {"error": "the model crashed"})

    def _answer(self, status: int, payload: dict) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.mark.django_db
def test_a_server_that_lists_models_but_cannot_generate_is_an_error(settings):
    httpd = HTTPServer(("127.0.0.1", 0), _ModelsOnly)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        point_llm_at(settings, f"http://127.0.0.1:{httpd.server_port}/v1", model="m")
        probe = probe_llm()
    finally:
        httpd.shutdown()
    assert probe.status == "error"
    assert "answers /models, but a generation got HTTP 500" in probe.detail
