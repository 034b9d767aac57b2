"""What identifies a generator's weights for the cache: options, a GGUF file's hash, what an
OpenAI-compatible server reports (a real local HTTP server stands in for vLLM / llama.cpp)."""

from __future__ import annotations

import hashlib
import itertools
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from transforms.backends.openai_compat import OpenAICompatBackend
from transforms.backends.vllm_offline import VLLMOfflineBackend
from transforms.embedded import TEST_MODEL, get_model

_CLOCK = itertools.count(1_700_000_000)


class _ModelsServer:
    """Serves ``GET /v1/models`` with the entries in ``self.entries``; "created" changes on every
    request, as vLLM's does."""

    def __init__(self):
        self.entries: list[dict] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                if self.path != "/v1/models":
                    self.send_error(404)
                    return
                data = [{**entry, "created": next(_CLOCK)} for entry in owner.entries]
                body = json.dumps({"object": "list", "data": data}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"


@pytest.fixture
def models_server() -> Iterator[_ModelsServer]:
    server = _ModelsServer()
    thread = threading.Thread(target=server.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield server
    server.httpd.shutdown()
    server.httpd.server_close()


def backend(base_url: str, model: str = "served-model", **options) -> OpenAICompatBackend:
    return OpenAICompatBackend(alias="t", model=model, base_url=base_url, **options)


def test_the_identity_option_wins(models_server):
    assert backend(models_server.base_url, identity="weights-2026-11").model_identity() == "weights-2026-11"


def test_a_model_file_is_identified_by_its_sha256_and_a_changed_file_by_another(tmp_path):
    path = tmp_path / "model.gguf"
    path.write_bytes(b"GGUF weights, first version")
    first = backend("http://127.0.0.1:9/v1", model_file=str(path)).model_identity()
    assert first == "sha256:" + hashlib.sha256(b"GGUF weights, first version").hexdigest()
    path.write_bytes(b"GGUF weights, the second version")  # same name, new weights
    second = backend("http://127.0.0.1:9/v1", model_file=str(path)).model_identity()
    assert second == "sha256:" + hashlib.sha256(b"GGUF weights, the second version").hexdigest()


def test_what_a_vllm_server_reports_identifies_the_weights(models_server):
    models_server.entries = [
        {"id": "other", "object": "model", "root": "org/other"},
        {"id": "served-model", "object": "model", "root": "org/model-7b", "parent": None, "max_model_len": 8192},
    ]
    first = backend(models_server.base_url).model_identity()
    assert first.startswith("server:")
    assert backend(models_server.base_url).model_identity() == first  # "created" is left out
    models_server.entries[1]["root"] = "org/model-7b-v2"
    assert backend(models_server.base_url).model_identity() not in {first, ""}


def test_llama_cpp_server_metadata_counts(models_server):
    meta = {"n_params": 134515008, "size": 98000000, "n_vocab": 49152}
    models_server.entries = [{"id": "served-model", "object": "model", "owned_by": "llamacpp", "meta": meta}]
    first = backend(models_server.base_url).model_identity()
    models_server.entries[0]["meta"] = {**meta, "size": 99000000}
    assert first.startswith("server:") and backend(models_server.base_url).model_identity() != first


def test_an_embedded_model_falls_back_to_its_pinned_hash(models_server):
    # llama-cpp-python's server reports nothing about the weights; llm_server serves only files
    # verified against the pinned SHA-256, so the pin identifies them.
    models_server.entries = [{"id": TEST_MODEL, "object": "model", "owned_by": "me", "permissions": []}]
    assert (
        backend(models_server.base_url, model=TEST_MODEL).model_identity() == f"sha256:{get_model(TEST_MODEL).sha256}"
    )
    models_server.entries = [{"id": "served-model", "object": "model", "owned_by": "me"}]
    assert backend(models_server.base_url).model_identity() == ""


def test_an_unreachable_server_gives_no_identity():
    assert backend("http://127.0.0.1:9/v1").model_identity() == ""


def test_vllm_offline_identity_is_its_revision():
    assert VLLMOfflineBackend(alias="v", model="org/m").model_identity() == ""
    assert VLLMOfflineBackend(alias="v", model="org/m", engine_options={"revision": "abc123"}).model_identity() == (
        "revision:abc123"
    )
    assert VLLMOfflineBackend(alias="v", model="org/m", identity="mine").model_identity() == "mine"


def test_an_embedded_model_keeps_its_identity_whichever_llama_cpp_server_serves_it(models_server):
    # llm_server serves the same verified GGUF with llama-server (which reports "meta") or with
    # llama-cpp-python's server (which reports nothing): the generation cache must not split.
    pinned = f"sha256:{get_model(TEST_MODEL).sha256}"
    models_server.entries = [{"id": TEST_MODEL, "object": "model", "owned_by": "me"}]
    assert backend(models_server.base_url, model=TEST_MODEL).model_identity() == pinned
    meta = {"n_params": 134515008, "size": 98000000, "n_vocab": 49152}
    models_server.entries = [{"id": TEST_MODEL, "object": "model", "owned_by": "llamacpp", "meta": meta}]
    assert backend(models_server.base_url, model=TEST_MODEL).model_identity() == pinned
