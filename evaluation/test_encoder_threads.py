"""The encoder's torch threads beside an LLM server on the same machine (issue 41, item 5)."""

from __future__ import annotations

import socket

import pytest

from core.local_server import available_cpus
from evaluation.encoder_threads import encoder_threads
from evaluation.encoders import SentenceTransformerEncoder, encoder_process_threads
from transforms.embedded import default_llm_threads


@pytest.mark.parametrize(
    "cpus,setting,expected",
    [(1, 0, 1), (2, 0, 1), (4, 0, 3), (16, 0, 15), (2, 2, 2), (16, 4, 4), (1, 3, 3)],
)
def test_llm_threads_are_the_setting_else_all_cpus_but_one(cpus, setting, expected):
    assert default_llm_threads(cpus, setting) == expected


@pytest.mark.parametrize(
    "cpus,setting,llm_threads,expected",
    [
        (2, 0, 1, 1),  # the demo on 2 cores: one core each
        (2, 0, 2, 1),  # an LLM on every core still leaves the encoder one thread
        (8, 0, 7, 1),
        (8, 0, 4, 4),  # SHIFTLAB_LLM_THREADS=4 on 8 cores: the other 4
        (1, 0, 1, 1),
        (2, 0, None, None),  # no LLM on this machine: torch's default
        (16, 0, None, None),
        (2, 3, 1, 3),  # a positive setting wins, LLM or not
        (2, 2, None, 2),
    ],
)
def test_encoder_takes_the_cores_the_llm_leaves(cpus, setting, llm_threads, expected):
    assert encoder_threads(cpus=cpus, setting=setting, llm_threads=llm_threads) == expected


def test_a_negative_setting_is_refused():
    with pytest.raises(ValueError, match="0 \\(automatic\\) or positive"):
        encoder_threads(cpus=2, setting=-1, llm_threads=1)


@pytest.fixture
def listening_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        yield server.getsockname()[1]


def _llm_at(settings, url: str) -> None:
    settings.TRANSFORM_BACKENDS = {"default": {"BACKEND": "x", "OPTIONS": {"base_url": url, "model": "m"}}}


def test_a_listening_loopback_llm_leaves_the_encoder_the_other_cores(settings, listening_port):
    settings.ENCODER_THREADS, settings.EMBEDDED_LLM_THREADS = 0, 0
    _llm_at(settings, f"http://127.0.0.1:{listening_port}/v1")
    assert encoder_process_threads() == max(1, available_cpus() - default_llm_threads(available_cpus()))
    settings.EMBEDDED_LLM_THREADS = 1
    assert encoder_process_threads() == max(1, available_cpus() - 1)
    settings.ENCODER_THREADS = 5
    assert encoder_process_threads() == 5


def test_no_local_llm_keeps_torchs_default(settings, listening_port):
    settings.ENCODER_THREADS = 0
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]  # bound, not listening: nothing answers
    _llm_at(settings, f"http://127.0.0.1:{closed_port}/v1")
    assert encoder_process_threads() is None
    _llm_at(settings, f"http://vllm.example.org:{listening_port}/v1")  # another host's server
    assert encoder_process_threads() is None
    _llm_at(settings, "http://127.0.0.1:notaport/v1")
    assert encoder_process_threads() is None


def test_the_model_process_runs_the_threads_it_is_given(settings):
    settings.ENCODER_THREADS = 1
    encoder = SentenceTransformerEncoder(alias="threads", model="all-MiniLM-L6-v2", device="cpu")
    try:
        assert encoder.encode(["one thread"]).shape == (1, 384)
        assert encoder._worker.threads == 1
    finally:
        encoder.close()
