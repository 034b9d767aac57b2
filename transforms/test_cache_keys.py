"""Cache keys are pinned: these values were computed by the key code that filled existing caches.

If one of these tests fails, every stored generation or judgement would be missed (and paid for
again): restore the key, do not update the literal.
"""

from __future__ import annotations

import hashlib
import json

import pytest

from transforms.cache_keys import generation_key, judgement_key

DEFAULT_SAMPLING = "45e2870db840c4b06c5bf3725f3e133cd4264972a3eca4e07d7d6a541d340488"  # GenerationParams()
JUDGE_SAMPLING = "878a736dfbaff81034f2297ab7b5a8adfee019c6f131c4bfc35e056274ee9a4f"  # JudgeParams()
PARAPHRASE_PROMPT = "4dc54fed06306cbee31958f6a284ab295f53b0069b9cba2854cf50b4d48c422d"
TRANSLATE_PROMPT = "0b6c762ced38917884bdf96d0056f8f2af644be00aa439395c914f97e0e39ba7"
SIMILARITY_PROMPT = "51d7f7208e594ff53bfafcb503f65d9f6184da7d173d758ac9525f2c0caec508"
QUALITY_PROMPT = "4bc68acf88dcd01e2a8a654c006e5af1be2065a66c843a8eb388a51605820d52"


@pytest.mark.parametrize(
    ("fields", "key"),
    [
        (
            dict(
                input_text="A man is playing a guitar.",
                transformation="paraphrase",
                step=0,
                prompt_hash=PARAPHRASE_PROMPT,
                model="smollm2-135m-instruct",
                params_hash=DEFAULT_SAMPLING,
                seed=42,
                attempt=0,
                language="en",
                input_language="en",
            ),
            "55e3239fd89c090282a7b50d1ecd0a4820cc0e72f41c799c65921ae869d06224",
        ),
        (
            dict(
                input_text="Ein Mann spielt Gitarre \u2013 sch\u00f6n!",
                transformation="backtranslation",
                step=1,
                prompt_hash=TRANSLATE_PROMPT,
                model="qwen2.5-coder-1.5b-instruct",
                params_hash=DEFAULT_SAMPLING,
                seed=7,
                attempt=2,
                language="de",
                input_language="fr",
            ),
            "4e0957e50918f9e6b55507699de9f6dc7013d58d0fe18fed592f25e40540a845",
        ),
        (
            dict(
                input_text="",
                transformation="expansion",
                step=0,
                prompt_hash="0" * 64,
                model="m",
                params_hash=JUDGE_SAMPLING,
                seed=0,
                attempt=0,
                language="",
                input_language="",
            ),
            "8fa001a3203c6be14ca595c12ec6e97adc225f4145b2e78da5fb31f2507524e2",
        ),
    ],
)
def test_generation_key_is_pinned(fields, key):
    assert generation_key(**fields) == key


@pytest.mark.parametrize(
    ("fields", "key"),
    [
        (
            dict(
                kind="quality",
                model="smollm2-135m-instruct",
                prompt_hash=QUALITY_PROMPT,
                params_hash=JUDGE_SAMPLING,
                text_a="A man is playing a guitar.",
                text_b="A man plays the guitar.",
                seed=0,
                attempt=0,
            ),
            "f39c03c21f2c9bb91e364971fc54dcc6f46f71dc779964f9f700b39e8ec0d60b",
        ),
        (
            dict(
                kind="similarity",
                model="qwen",
                prompt_hash=SIMILARITY_PROMPT,
                params_hash=JUDGE_SAMPLING,
                text_a="\u65e5\u672c\u8a9e\u306e\u6587\u3067\u3059\u3002",
                text_b="\u00c7a va tr\u00e8s bien.",
                seed=3,
                attempt=2,
            ),
            "64428c4b3fdd40b6386a2f169b6c61a8213454eda0356f3866a0683926f53b2f",
        ),
        (
            dict(
                kind="fluency",
                model="m",
                prompt_hash="f" * 64,
                params_hash=DEFAULT_SAMPLING,
                text_a="",
                text_b="x",
                seed=0,
                attempt=1,
            ),
            "e9179866ab5a4b829020de6364d52226dfc7ced6187023f99af62d9b390c874f",
        ),
    ],
)
def test_judgement_key_is_pinned(fields, key):
    assert judgement_key(**fields) == key


def test_judgement_key_depends_on_pair_order():
    fields = dict(kind="quality", model="m", prompt_hash="p", params_hash="s", seed=0, attempt=0)
    assert judgement_key(text_a="a", text_b="b", **fields) != judgement_key(text_a="b", text_b="a", **fields)


PINNED_GENERATION = dict(
    input_text="A man is playing a guitar.",
    transformation="paraphrase",
    step=0,
    prompt_hash=PARAPHRASE_PROMPT,
    model="smollm2-135m-instruct",
    params_hash=DEFAULT_SAMPLING,
    seed=42,
    attempt=0,
    language="en",
    input_language="en",
)


def test_a_run_without_model_identity_keeps_the_old_key():
    old = "55e3239fd89c090282a7b50d1ecd0a4820cc0e72f41c799c65921ae869d06224"
    assert generation_key(**PINNED_GENERATION, model_identity="") == old


def test_the_model_identity_separates_weights_served_under_one_name():
    first = generation_key(**PINNED_GENERATION, model_identity="sha256:" + "a" * 64)
    second = generation_key(**PINNED_GENERATION, model_identity="sha256:" + "b" * 64)
    assert len({first, second, generation_key(**PINNED_GENERATION)}) == 3
    # Pinned too, and written out independently: the old fields plus "model_identity".
    document = {
        "input": hashlib.sha256(b"A man is playing a guitar.").hexdigest(),
        "transformation": "paraphrase",
        "step": 0,
        "prompt": PARAPHRASE_PROMPT,
        "model": "smollm2-135m-instruct",
        "params": DEFAULT_SAMPLING,
        "seed": 42,
        "attempt": 0,
        "language": "en",
        "from": "en",
        "model_identity": "sha256:" + "a" * 64,
    }
    text = json.dumps(document, sort_keys=True, separators=(",", ":"))
    assert first == hashlib.sha256(text.encode()).hexdigest()
    assert first == "757a800e4efddb685455d7264dd1dd0275acd7a147a1baaa5d3e44a9aebb8ee3"
