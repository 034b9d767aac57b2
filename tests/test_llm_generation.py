"""The embedded LLM generates on every CPU, and "ready" means it answered a generation.

Real llama.cpp servers (this machine's llama-server build, the embedded LLM's server) on the test model
requantised to Q4_K_M, the demo model's weight type. On a CPU with AMX the first two tests fail
with the code before the fix (the server segfaults in its first generation: llama.cpp issue
20824); on other CPUs the forced-AMX test checks that the switch is applied. The crashing server of
the last test is a stand-in (``tests/crashing_llm.py``): no real CPU here crashes on demand.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import requests

from core.local_server import LocalServer
from transforms.cpu_features import read_cpu_flags, weight_repacking
from transforms.embedded import LlamaServer, LlamaServerError

PARAPHRASE = [
    {"role": "system", "content": "Rewrite the user's sentence with other words; keep its meaning."},
    {"role": "user", "content": "The museum is open every day except Monday."},
]
AMX_CPUINFO = "processor\t: 0\nvendor_id\t: GenuineIntel\nflags\t\t: fpu sse2 avx2 avx512f amx_bf16 amx_tile amx_int8\n"
PLAIN_CPUINFO = "processor\t: 0\nvendor_id\t: AuthenticAMD\nflags\t\t: fpu sse2 avx avx2 fma avx512f\n"


def generate(server: LlamaServer, *, seed: int) -> dict:
    body = {"model": server.model_alias, "messages": PARAPHRASE, "max_tokens": 48, "temperature": 0.7, "seed": seed}
    response = requests.post(f"{server.base_url}/chat/completions", json=body, timeout=120)
    response.raise_for_status()
    return response.json()


def serve(model: Path, tmp_path: Path, name: str) -> LlamaServer:
    return LlamaServer(model, model_alias="smollm2-q4k", n_ctx=512, log_path=tmp_path / f"{name}.log")


@pytest.mark.services
def test_q4k_model_generates_through_the_embedded_server(llm_test_model_q4k, tmp_path):
    """The demo's weight type through the demo's server path, several generations in a row."""
    with serve(llm_test_model_q4k, tmp_path, "q4k") as server:
        for seed in range(3):
            reply = generate(server, seed=seed)
            assert reply["choices"][0]["message"]["content"].strip()
            assert reply["usage"]["completion_tokens"] > 0
        assert server.running, f"the server died after answering:\n{server.log_tail()}"
        log = server.log_path.read_text()
    decision = weight_repacking(read_cpu_flags())
    assert f"shiftlab: {decision.describe()}" in log
    assert "AMX model buffer" not in log  # the crashing buffer type is never used


@pytest.mark.services
def test_a_cpu_with_amx_loads_without_repacking(llm_test_model_q4k, tmp_path, monkeypatch):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(AMX_CPUINFO)
    monkeypatch.setenv("SHIFTLAB_CPUINFO", str(cpuinfo))
    monkeypatch.delenv("SHIFTLAB_LLAMA_REPACK", raising=False)
    with serve(llm_test_model_q4k, tmp_path, "amx") as server:
        assert generate(server, seed=1)["choices"][0]["message"]["content"].strip()
        log = server.log_path.read_text()
    assert "shiftlab: weight repacking off: AMX" in log
    assert "REPACK model buffer" not in log and "AMX model buffer" not in log


@pytest.mark.services
def test_other_cpus_keep_llama_cpp_repacking(llm_test_model_q4k, tmp_path, monkeypatch):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(PLAIN_CPUINFO)
    monkeypatch.setenv("SHIFTLAB_CPUINFO", str(cpuinfo))
    monkeypatch.delenv("SHIFTLAB_LLAMA_REPACK", raising=False)
    with serve(llm_test_model_q4k, tmp_path, "plain") as server:
        log = server.log_path.read_text()
    assert "shiftlab: weight repacking on" in log
    if "REPACK = 1" in log and "avx2" in read_cpu_flags():  # this build and CPU have the x86 repack kernels
        assert "CPU_REPACK model buffer" in log


@pytest.mark.services
def test_ready_means_answering_a_server_that_crashes_on_generation_is_not_ready(tmp_path):
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    crashing = Path(__file__).with_name("crashing_llm.py")
    server = LlamaServer(
        model, model_alias="crashing", python=str(crashing), binary=None, log_path=tmp_path / "crash.log"
    )
    server.start()
    try:
        LocalServer.wait_ready(server, 30)  # ready by the old rule: /v1/models answers
        with pytest.raises(LlamaServerError) as excinfo:
            server.wait_ready(30)
    finally:
        server.stop()
    message = str(excinfo.value)
    assert "crashed (signal SIGSEGV (exit -11)) on a generation" in message
    assert "ggml_backend_amx_mul_mat" in message  # the end of the log comes with it
