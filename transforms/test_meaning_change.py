"""The sensitivity axis: meaning-changing rewrites, their prompts and their error checks (issue 30)."""

from __future__ import annotations

import pytest

from transforms.error_checks import ErrorType, analyse_output, output_errors
from transforms.prompts import DEFAULT_PROMPTS, default_prompt, validate_template
from transforms.registry import TRANSFORMATIONS, Axis, LanguagePlan

MEANING_CHANGES = ("negation", "antonym", "number_entity_swap", "role_swap")


@pytest.mark.parametrize("name", MEANING_CHANGES)
def test_each_meaning_change_is_one_llm_call_in_the_source_language_on_the_sensitivity_axis(name):
    spec = TRANSFORMATIONS[name]
    assert spec.axis is Axis.SENSITIVITY and spec.changes_meaning
    assert spec.language_plan is LanguagePlan.SAME and spec.n_llm_steps == 1
    assert spec.prompt_keys == (name,) and spec.keeps_sentence_type
    assert not (spec.may_grow or spec.may_shrink or spec.keyword_output)


def test_only_the_sensitivity_axis_changes_meaning():
    assert {n for n, t in TRANSFORMATIONS.items() if t.changes_meaning} == set(MEANING_CHANGES)
    assert {n for n, t in TRANSFORMATIONS.items() if t.axis is Axis.SENSITIVITY} == set(MEANING_CHANGES)


@pytest.mark.parametrize("name", MEANING_CHANGES)
def test_each_prompt_renders_and_asks_for_a_change_of_meaning(name):
    system, user = DEFAULT_PROMPTS[name]
    validate_template(system, user)
    messages = default_prompt(name).messages(text="The dog bit the man.", language="English", source_language="English")
    assert messages[1]["content"].endswith("Text: The dog bit the man.")
    assert "English" in messages[1]["content"]


@pytest.mark.parametrize(
    ("source", "output", "expected"),
    [
        ("The museum is open on Mondays.", "The museum is not open on Mondays.", ()),
        ("The dog bit the man.", "The man bit the dog.", ()),
        # The same text once case and punctuation are set aside: no meaning changed.
        ("The dog bit the man.", "the dog bit the man", (ErrorType.IDENTICAL,)),
        # Five extra words on a five-word text: beyond the slack of four words (four are fine).
        ("The dog bit the man.", "The dog bit the man who walked home.", ()),
        ("The dog bit the man.", "The dog bit the man who walked home alone tonight.", (ErrorType.LENGTH_CHANGED,)),
        # A 20-word text may move by up to half its length (10 words): 9 words off is fine, 11 is not.
        (" ".join(["word"] * 20), " ".join(["word"] * 10) + " changed", ()),
        (" ".join(["word"] * 20), " ".join(["word"] * 9), (ErrorType.LENGTH_CHANGED,)),
    ],
)
def test_a_meaning_change_must_differ_from_its_source_and_keep_close_to_its_length(source, output, expected):
    assert output_errors(source, output, expected=None, detected=None, keep_length=True) == expected


def test_the_length_check_is_only_for_meaning_changes():
    long = "The dog bit the man who was walking home late at night."
    assert output_errors("The dog bit the man.", long, expected=None, detected=None) == ()


def test_a_meaning_change_in_another_language_is_an_error():
    source = "The museum is open on Mondays and the entrance is free for every visitor."
    output = "El museo no está abierto los lunes y la entrada es gratuita para todos los visitantes."
    analysis = analyse_output(source, output, expected_language="en", keep_length=True, keep_sentence_type=True)
    assert analysis.error is ErrorType.WRONG_LANGUAGE
