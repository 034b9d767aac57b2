"""Encoder configuration, model identity and prompt choice (no model is loaded here)."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from evaluation.apps import check_encoders
from evaluation.encoders import (
    EncoderError,
    SentenceTransformerEncoder,
    _hash_model_dir,
    get_encoder,
    prompt_name_for,
    reset_encoders,
)


@pytest.fixture
def encoders_setting(settings):
    def configure(options: dict, backend: str = "evaluation.encoders.SentenceTransformerEncoder"):
        settings.EVALUATION_ENCODERS = {"default": {"BACKEND": backend, "OPTIONS": options}}
        reset_encoders()

    yield configure
    reset_encoders()


def test_packaged_alias_resolves_offline_to_the_canonical_id():
    encoder = get_encoder("all-MiniLM-L6-v2")
    assert encoder is get_encoder("all-MiniLM-L6-v2")  # one instance per process
    assert encoder.model_id == "sentence-transformers/all-MiniLM-L6-v2"
    assert encoder.model_path.name == "model" and (encoder.model_path / "modules.json").is_file()
    assert len(encoder.revision) == 64 and encoder.similarity_fn_name == "cosine"
    assert get_encoder("sentence-transformers/all-MiniLM-L6-v2").revision == encoder.revision


def test_a_model_name_uses_the_default_alias_options(encoders_setting):
    encoders_setting({"model": "all-MiniLM-L6-v2", "batch_size": 7, "dtype": "float32"})
    encoder = get_encoder("some/other-model")
    assert encoder.alias == "default" and encoder.model == "some/other-model" and encoder.batch_size == 7


@pytest.mark.parametrize(
    "options,message",
    [
        ({"model": "m", "dtype": "float8"}, "dtype"),
        ({"model": "m", "batch_size": 0}, "batch_size"),
        ({"model": ""}, "model"),
        ({"model": "m", "colour": "red"}, "not accepted"),
    ],
)
def test_bad_options_are_improperly_configured(encoders_setting, options, message):
    encoders_setting(options)
    with pytest.raises(ImproperlyConfigured, match=message):
        get_encoder("default")
    assert check_encoders(None) and check_encoders(None)[0].id == "evaluation.E001"


def test_unloadable_backend_is_reported(encoders_setting):
    encoders_setting({"model": "m"}, backend="evaluation.encoders.NoSuchEncoder")
    with pytest.raises(ImproperlyConfigured, match="cannot be loaded"):
        get_encoder("default")


def test_unknown_model_says_what_was_tried(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    encoder = SentenceTransformerEncoder(alias="default", model="no-such-org/no-such-model")
    with pytest.raises(EncoderError, match="Unknown model 'no-such-org/no-such-model'.*local folder"):
        _ = encoder.revision


def test_revision_follows_model_files_and_output_options(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (model / "README.md").write_text("docs")
    before = SentenceTransformerEncoder(alias="x", model=str(model)).revision
    (model / "README.md").write_text("other docs")
    _hash_model_dir.cache_clear()
    assert SentenceTransformerEncoder(alias="x", model=str(model)).revision == before
    assert SentenceTransformerEncoder(alias="x", model=str(model), dtype="float16").revision != before
    (model / "config.json").write_text('{"hidden_size": 8}')
    _hash_model_dir.cache_clear()
    assert SentenceTransformerEncoder(alias="x", model=str(model)).revision != before


def test_prompt_choice_follows_mteb_priority():
    prompts = {"query": "q: ", "document": "d: ", "Retrieval-query": "Find: ", "STS": "Similar: "}
    assert prompt_name_for(prompts, task_type="retrieval", prompt_type="query") == "Retrieval-query"
    assert prompt_name_for(prompts, task_type="retrieval", prompt_type="document") == "document"
    assert prompt_name_for(prompts, task_type="str", prompt_type=None) == "STS"
    assert prompt_name_for(prompts, task_type="clustering", prompt_type=None) is None
    assert prompt_name_for({}, task_type="reranking", prompt_type="query") is None


@pytest.mark.heavy
def test_a_float16_checkpoint_runs_in_the_dtype_asked_for(tmp_path):
    """transformers 5 keeps a checkpoint's stored dtype: the worker must cast, or float32 vectors
    (cached under the float32 revision) would come from float16 weights."""
    import shutil

    import torch
    from safetensors.torch import load_file, save_file

    source = get_encoder("all-MiniLM-L6-v2").model_path
    folder = tmp_path / "minilm-fp16"
    shutil.copytree(source, folder)
    weights = load_file(folder / "model.safetensors")
    save_file({k: v.to(torch.float16).contiguous() for k, v in weights.items()}, folder / "model.safetensors")
    for dtype in ("float32", "bfloat16"):
        encoder = SentenceTransformerEncoder(alias="x", model=str(folder), dtype=dtype, device="cpu")
        try:
            vectors = encoder.encode(["a sentence", "another one"])
            assert encoder._worker.dtype == dtype and vectors.dtype == "float32" and vectors.shape == (2, 384)
        finally:
            encoder.close()
