"""The generation cache knows the model's weights, not only its name: new weights served under
the same name miss the cache (real embedded llama.cpp server with SmolLM2)."""

from __future__ import annotations

import copy
import hashlib

import pytest
from django.conf import settings as django_settings

from corpora.services import dataset_import
from transforms.attempts import plan_step, plan_text
from transforms.backends import reset_backends
from transforms.chunk_services import transform_run_execute_inline
from transforms.embedded import TEST_MODEL, get_model
from transforms.models import Generation, TransformedItem, TransformRun
from transforms.params import GenerationParams
from transforms.registry import LanguagePlan, transformation_get
from transforms.services import transform_run_create

pytestmark = pytest.mark.django_db
PARAMS = GenerationParams(max_tokens=32, max_attempts=1)


def run_now(dataset) -> TransformRun:
    run = transform_run_create(
        dataset=dataset, transformation="paraphrase", seed=5, limit=1, params=PARAMS, dispatch=False
    )
    return transform_run_execute_inline(run_id=run.pk)


def test_a_changed_model_file_misses_the_cache(llm_backend, settings, tmp_path):
    dataset = dataset_import(source=django_settings.BASE_DIR / "fixtures/sts/demo-sts.csv", task="sts", name="demo-sts")
    first = run_now(dataset)
    # llama-cpp-python reports nothing about the weights: the embedded model's pinned hash stands in.
    assert first.model_identity == f"sha256:{get_model(TEST_MODEL).sha256}"
    assert first.llm_calls == 2 and first.cache_hits == 0
    assert run_now(dataset).llm_calls == 0  # same weights: every generation comes from the cache

    # The deployer replaced the served file; the backend is told which file it serves.
    weights = tmp_path / "smollm2-finetuned.gguf"
    weights.write_bytes(b"GGUF" + bytes(range(256)) * 64)
    backends = copy.deepcopy(settings.TRANSFORM_BACKENDS)
    backends["default"]["OPTIONS"]["model_file"] = str(weights)
    settings.TRANSFORM_BACKENDS = backends
    reset_backends()
    changed = run_now(dataset)
    assert changed.model_identity == "sha256:" + hashlib.sha256(weights.read_bytes()).hexdigest()
    assert changed.llm_calls == 2 and changed.cache_hits == 0
    assert changed.run_hash != first.run_hash
    assert Generation.objects.count() == 4  # two per set of weights, under the same model name
    assert set(Generation.objects.values_list("model", flat=True)) == {TEST_MODEL}


def test_a_run_without_an_identity_reads_the_generations_cached_before_identities(llm_backend):
    dataset = dataset_import(source=django_settings.BASE_DIR / "fixtures/sts/demo-sts.csv", task="sts", name="demo-sts")
    run = transform_run_create(
        dataset=dataset, transformation="paraphrase", seed=5, limit=1, params=PARAMS, dispatch=False
    )
    TransformRun.objects.filter(pk=run.pk).update(model_identity="")  # as a run made before identities
    run = transform_run_execute_inline(run_id=run.pk)
    spec = transformation_get("paraphrase")
    for out in TransformedItem.objects.filter(run=run):
        text = plan_text(
            out.source_text,
            Generation.objects.get(key=out.generation_keys[0]).input_hash,
            "en",
            language_plan=LanguagePlan.SAME,
            run_language="",
            seed=5,
            languages=run.languages,
        )
        text.start_attempt()
        (call,) = plan_step(
            [text],
            step=spec.steps[0],
            step_index=0,
            transformation="paraphrase",
            prompt_hash=run.prompt_hashes["paraphrase"],
            model=TEST_MODEL,
            params_hash=PARAMS.sampling_hash,
            seed=5,
        )
        assert out.generation_keys == [call.key]  # the key without an identity: the old format
