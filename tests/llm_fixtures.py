"""Pytest plugin: a real embedded LLM server for the tests that need one.

The ``llm_server`` fixture serves SmolLM2-135M-Instruct (98 MB, fast, tiny: good for plumbing, not
for judging rewrites) with llama.cpp on a free local port, once per test session. The model is kept
in the per-machine cache (``SHIFTLAB_MODELS_DIR``, else ``~/.cache/shiftlab/models``) rather than the
per-run test data directory, so it is downloaded once. Without a server to run it (llama-server, built by
``make install``, or the optional llama-cpp-python), or when the model
cannot be fetched, the tests that use the fixture are skipped, or fail when
``SHIFTLAB_REQUIRE_SERVICES=1``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from transforms.embedded import (
    INSTALL_HINT,
    TEST_MODEL,
    EmbeddedModelError,
    LlamaServer,
    default_models_dir,
    ensure_model,
    llama_cpp_available,
)
from transforms.llama_build import cached_tool, choose_binary

REPO_DIR = Path(__file__).resolve().parent.parent


def models_dir() -> Path:
    """The per-machine model cache shared by every test run."""
    return default_models_dir()


def skip_or_fail(reason: str) -> None:
    if os.environ.get("SHIFTLAB_REQUIRE_SERVICES") == "1":
        pytest.fail(f"{reason} (SHIFTLAB_REQUIRE_SERVICES=1)", pytrace=False)
    pytest.skip(reason)


def fetch_test_model() -> Path:
    """The verified test model, fetched on first use; skips (or fails) the calling test otherwise."""
    if choose_binary().binary is None and not llama_cpp_available():
        skip_or_fail(f"no LLM server to run the test model: {INSTALL_HINT}")
    try:
        return ensure_model(TEST_MODEL, models_dir=models_dir())
    except EmbeddedModelError as exc:
        skip_or_fail(f"could not fetch the test model {TEST_MODEL} into {models_dir()}: {exc}")


@dataclass(frozen=True)
class LLMEndpoint:
    """What a test needs to talk to the server: an OpenAI-style base URL and the model name."""

    base_url: str
    model: str
    server: LlamaServer


@pytest.fixture(scope="session")
def llm_test_model() -> Path:
    """Path of the verified SmolLM2 GGUF; skips (or fails) when no server can run it or the model is missing."""
    return fetch_test_model()


@pytest.fixture(scope="session")
def llm_server(llm_test_model, tmp_path_factory) -> LLMEndpoint:
    path = llm_test_model
    log = tmp_path_factory.mktemp("llm-server") / "llama-server.log"
    server = LlamaServer(path, model_alias=TEST_MODEL, n_ctx=2048, log_path=log)
    with server:
        yield LLMEndpoint(base_url=server.base_url, model=TEST_MODEL, server=server)


@pytest.fixture(scope="session")
def llm_test_model_q4k(llm_test_model, tmp_path_factory) -> Path:
    """The test model requantised to Q4_K_M, the weight type of the demo's model, with llama.cpp's own
    quantiser (``llama-quantize`` from the same build as llama-server; about 2 s): Q4_K is what llama.cpp
    repacks into its AMX buffer type and what crashed there (llama.cpp issue 20824), so generating with
    it exercises that path without a 1 GB download."""
    import subprocess

    quantize = cached_tool("llama-quantize")
    if not quantize.is_file():
        skip_or_fail(f"no llama-quantize at {quantize}: {INSTALL_HINT}")
    target = tmp_path_factory.mktemp("q4k") / "SmolLM2-135M-Instruct.Q4_K_M.gguf"
    cmd = [str(quantize), "--allow-requantize", str(llm_test_model), str(target), "Q4_K_M", "2"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0 or not target.is_file():
        pytest.fail(f"llama-quantize could not requantise {llm_test_model} to Q4_K_M: {proc.stderr[-2000:]}")
    return target
