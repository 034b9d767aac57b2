"""The fingerprint of a study's judging (``judge_population_services.judging_fingerprint``): the
gate's evidence stores it, so it must change with every input that changes the judges' estimates,
and only with those."""

from dataclasses import asdict

import pytest

from annotation.studies.judge_population_services import judging_fingerprint
from transforms.judgement_services import JudgeParams

BASE = dict(
    judges=("default", "second"),
    models={"default": "qwen2.5-1.5b", "second": "smollm2-135m"},
    prompt_hashes={"quality": "a" * 64, "fluency": "b" * 64},
    params=asdict(JudgeParams()),
    seed=3,
)


def test_the_same_judging_has_the_same_short_fingerprint_whatever_the_key_order():
    first = judging_fingerprint(**BASE)
    reordered = {
        **BASE,
        "models": dict(reversed(BASE["models"].items())),
        "prompt_hashes": dict(reversed(BASE["prompt_hashes"].items())),
    }
    assert judging_fingerprint(**reordered) == first
    assert len(first) == 16 and int(first, 16) >= 0


@pytest.mark.parametrize(
    "change",
    [
        {"judges": ("default",)},
        {"models": {"default": "qwen2.5-1.5b", "second": "smollm2-135m-v2"}},
        {"prompt_hashes": {"quality": "c" * 64, "fluency": "b" * 64}},
        {"params": asdict(JudgeParams(max_tokens=8))},
        {"params": asdict(JudgeParams(max_attempts=1))},
        {"seed": 4},
    ],
)
def test_any_change_of_judge_model_prompt_parameters_or_seed_changes_it(change):
    assert judging_fingerprint(**{**BASE, **change}) != judging_fingerprint(**BASE)
