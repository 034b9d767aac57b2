"""The embedded LLM on llama.cpp's own llama-server: the engine fills its parallel slots, and
``llm_server`` runs it where it is built and falls back to llama-cpp-python's server where it does
not start. Real servers on SmolLM2-135M; the llama-server tests skip only when the binary is not
built (``scripts/build_llama_server.sh``, run by ``make install``), and fail then under
``SHIFTLAB_REQUIRE_SERVICES=1`` (CI)."""

from __future__ import annotations

import io
import json
import stat
import threading
import time
from pathlib import Path

import pytest
import requests
from django.core.management import call_command

from tests.llm_fixtures import skip_or_fail
from transforms.backends.base import ChatRequest, ChatResult
from transforms.backends.openai_compat import OpenAICompatBackend
from transforms.embedded import TEST_MODEL, LlamaServer, free_port
from transforms.llama_build import BINARY_ENV, CHOICE_ENV, choose_binary
from transforms.management.commands.llm_server import Command as LlmServerCommand
from transforms.prompts import default_prompt
from transforms.test_embedded import wait_for

SENTENCES = [
    "A man is playing a guitar on the street.",
    "Two dogs run across a snowy field.",
    "The train to the airport leaves every ten minutes.",
    "She poured the tea before the guests arrived.",
    "A child is drawing a house with a red roof.",
    "The market closes early on Sundays.",
    "Heavy rain flooded the old bridge last night.",
    "He fixed the bicycle with a borrowed wrench.",
    "The museum opened a new wing for modern art.",
]


@pytest.fixture(scope="module")
def llama_server_binary() -> Path:
    choice = choose_binary()
    if choice.binary is None:
        skip_or_fail(f"llama.cpp's llama-server is not built: {choice.reason}")
    return choice.binary


def serve(binary: Path, model: Path, tmp_path: Path, *, slots: int) -> LlamaServer:
    return LlamaServer(
        model, model_alias=TEST_MODEL, n_ctx=512, binary=binary, slots=slots, log_path=tmp_path / "s.log"
    )


def paraphrase(text: str) -> ChatRequest:
    messages = [
        {"role": "system", "content": "Rewrite the user's sentence in other words; keep its meaning."},
        {"role": "user", "content": text},
    ]
    return ChatRequest(messages=messages, seed=11, temperature=0.0, top_p=1.0, max_tokens=40)


@pytest.mark.services
def test_the_engine_keeps_as_many_requests_in_flight_as_the_server_has_slots(
    llama_server_binary, llm_test_model, tmp_path
):
    server = serve(llama_server_binary, llm_test_model, tmp_path, slots=3)
    with server:
        root = server.base_url.removesuffix("/v1")
        backend = OpenAICompatBackend(alias="t", model=TEST_MODEL, base_url=server.base_url)
        assert backend.in_flight() == 3  # from the server's /props, no option set
        busy: list[int] = []
        done = threading.Event()

        def watch() -> None:  # how many slots decode at once, as the server reports them
            while not done.is_set():
                slots = requests.get(f"{root}/slots", timeout=5).json()
                busy.append(sum(bool(slot["is_processing"]) for slot in slots))
                time.sleep(0.01)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        try:
            results = backend.generate([paraphrase(text) for text in SENTENCES])
        finally:
            done.set()
            watcher.join(10)
        assert all(isinstance(result, ChatResult) and result.text.strip() for result in results), results
        assert max(busy) == 3, f"slots busy at once over the run: {sorted(set(busy))}"
        # The request the engine sends first (the shared system prompt first) is what the server caches.
        assert "--cont-batching" in server.command() and server.running


@pytest.mark.services
def test_the_shared_system_prompt_is_evaluated_once_per_slot(llama_server_binary, llm_test_model, tmp_path):
    """The engine's paraphrase requests (system prompt first, identical in each) reuse the slot's cached
    prefix: after the first, the server computes only what follows the prefix two prompts share. The
    shared prefix is counted independently, from the server's own template and tokenizer endpoints."""
    prompt = default_prompt("paraphrase")
    server = serve(llama_server_binary, llm_test_model, tmp_path, slots=1)
    with server:
        root = server.base_url.removesuffix("/v1")
        previous: list[int] = []
        for index, text in enumerate(SENTENCES[:3]):
            messages = prompt.messages(text=text, language="English", source_language="English")
            rendered = requests.post(f"{root}/apply-template", json={"messages": messages}, timeout=30).json()["prompt"]
            tokens = requests.post(f"{root}/tokenize", json={"content": rendered}, timeout=30).json()["tokens"]
            body = {"model": TEST_MODEL, "messages": messages, "max_tokens": 4, "temperature": 0.0}
            reply = requests.post(f"{server.base_url}/chat/completions", json=body, timeout=120).json()
            computed, sent = reply["timings"]["prompt_n"], reply["usage"]["prompt_tokens"]
            if index:
                pairs = enumerate(zip(previous, tokens, strict=False))
                shared = next((i for i, (a, b) in pairs if a != b), min(len(previous), len(tokens)))
                assert shared > sent / 2, "the system prompt should be most of a paraphrase prompt"
                assert sent - shared <= computed <= sent - shared + 1, (computed, sent, shared)
            previous = tokens


def prompt_tokens(root: str, messages: list[dict[str, str]]) -> list[int]:
    """The tokens the server evaluates for ``messages``: its own chat template, then its tokenizer."""
    rendered = requests.post(f"{root}/apply-template", json={"messages": messages}, timeout=30).json()["prompt"]
    return requests.post(f"{root}/tokenize", json={"content": rendered}, timeout=30).json()["tokens"]


def common_length(a: list[int], b: list[int]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


@pytest.mark.services
def test_a_batch_evaluates_its_shared_prompt_prefix_once_for_all_slots(llama_server_binary, llm_test_model, tmp_path):
    """A fresh 4-slot server and a batch of the active paraphrase prompt: the prefix the requests share
    is evaluated in one slot and copied into the three others, so that every request, whichever slot
    serves it, evaluates only what follows the prefix. Counted from the server's own log lines
    ("prompt eval time ... / N tokens") against the prefix measured with its template and tokenizer."""
    from transforms.backends.slot_sharing import shared_prefix

    prompt = default_prompt("paraphrase")
    batch = [
        ChatRequest(
            messages=prompt.messages(text=text, language="English", source_language="English"),
            seed=3,
            temperature=0.0,
            top_p=1.0,
            max_tokens=24,
        )
        for text in SENTENCES[:8]
    ]
    server = serve(llama_server_binary, llm_test_model, tmp_path, slots=4)
    with server:
        root = server.base_url.removesuffix("/v1")
        assert server.slot_dir is not None and server.slot_dir.is_dir()
        backend = OpenAICompatBackend(alias="t", model=TEST_MODEL, base_url=server.base_url)
        log_lines_before = server.log_path.read_text().count("prompt eval time")
        results = backend.generate(batch)
        assert all(isinstance(result, ChatResult) for result in results), results
        share = backend.last_share
        assert share is not None and len(share.restored) == 3, share
        evaluated = [
            int(line.split("/")[-1].split("tokens")[0])
            for line in server.log_path.read_text().splitlines()
            if "prompt eval time" in line
        ][log_lines_before:]
        prefix = prompt_tokens(root, shared_prefix(batch))
        assert evaluated[0] >= len(prefix) - 2  # the prefix itself, evaluated once
        sent = [prompt_tokens(root, request.messages) for request in batch]
        shared = [common_length(prefix, tokens) for tokens in sent]
        assert min(shared) > len(prefix) - 8  # the prefix is almost all shared (its template tail differs)
        # ... and it is all the requests have in common, counted from their own tokens alone
        in_common = min(common_length(sent[0], tokens) for tokens in sent[1:])
        assert min(shared) >= in_common - 1, (shared, in_common)
        # Each request evaluates only its own part; without sharing, the first request in each of the
        # three other slots evaluated the whole prompt.
        suffixes = sorted(len(tokens) - n for tokens, n in zip(sent, shared, strict=True))
        assert len(evaluated) == 1 + len(batch) and max(evaluated[1:]) <= max(suffixes) + 1, (evaluated, suffixes)
        assert sum(evaluated[1:]) <= sum(suffixes) + len(batch), (evaluated, suffixes)
        slot_dir = server.slot_dir
    assert not slot_dir.exists()  # removed with the server


def run_llm_server(command: LlmServerCommand, args: list[str]) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            call_command(command, *args)
        except BaseException as exc:  # surfaced by the test
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, errors


def serve_args(model: Path, tmp_path: Path, port: int) -> list[str]:
    args = ["--model", TEST_MODEL, "--models-dir", str(model.parent), "--port", str(port), "--n-ctx", "512"]
    return args + ["--log-file", str(tmp_path / "server.log"), "--state-file", str(tmp_path / "state.json")]


@pytest.mark.services
def test_llm_server_serves_with_llama_server_and_the_slots_asked_for(
    llama_server_binary, llm_test_model, tmp_path, monkeypatch
):
    monkeypatch.delenv(CHOICE_ENV, raising=False)
    monkeypatch.setenv(BINARY_ENV, str(llama_server_binary))
    out = io.StringIO()
    command = LlmServerCommand(stdout=out, stderr=io.StringIO())
    port = free_port()
    thread, errors = run_llm_server(command, [*serve_args(llm_test_model, tmp_path, port), "--parallel", "2"])
    try:
        wait_for(lambda: "SHIFTLAB_LLM_BASE_URL" in out.getvalue() or errors, timeout=120)
        assert errors == []
        props = requests.get(f"http://127.0.0.1:{port}/props", timeout=5).json()
        assert props["total_slots"] == 2
        state = json.loads((tmp_path / "state.json").read_text())
        assert state["state"] == "ready" and state["server"] == "llama-server" and state["slots"] == 2
        assert "llama-server, 2 parallel slots" in state["detail"]
    finally:
        command.stop_event.set()
        thread.join(30)
    assert "Serving with llama.cpp's llama-server, 2 parallel slots (--parallel)" in out.getvalue()


@pytest.mark.services
def test_llm_server_falls_back_to_llama_cpp_python_when_llama_server_does_not_start(
    llm_test_model, tmp_path, monkeypatch
):
    """A binary that answers --version but exits at start (built for another CPU, say). The fallback
    is llama-cpp-python, which make install no longer installs: this runs where someone added it."""
    pytest.importorskip("llama_cpp.server", reason="llama-cpp-python (optional: requirements-embedded.txt)")
    fake = tmp_path / "llama-server"
    fake.write_text(
        '#!/bin/sh\nif [ "$1" = --version ]; then echo "version: 1 (stand-in)"; exit 0; fi\n'
        'echo "error: illegal instruction" >&2; exit 132\n'
    )
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.delenv(CHOICE_ENV, raising=False)
    monkeypatch.setenv(BINARY_ENV, str(fake))
    out = io.StringIO()
    command = LlmServerCommand(stdout=out, stderr=io.StringIO())
    port = free_port()
    thread, errors = run_llm_server(command, serve_args(llm_test_model, tmp_path, port))
    try:
        wait_for(lambda: "SHIFTLAB_LLM_BASE_URL" in out.getvalue() or errors, timeout=120)
        assert errors == []
        state = json.loads((tmp_path / "state.json").read_text())
        assert state["state"] == "ready" and state["server"] == "llama-cpp-python" and state["slots"] == 1
        assert "one request at a time (llama-server did not start" in state["detail"]  # what /health/ shows
        assert command.server.kind == "llama-cpp-python" and command.restarts == 0
    finally:
        command.stop_event.set()
        thread.join(30)
    output = out.getvalue()
    assert "Serving with llama-cpp-python's server, one request at a time: llama-server did not start" in output
