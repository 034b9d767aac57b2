"""Tests of the error analysis of model answers (transforms.error_checks)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transforms.cleaning import clean_output
from transforms.error_checks import (
    ERROR_PRECEDENCE,
    RUNAWAY_RATIO,
    TRUNCATED_RATIO,
    ErrorSummary,
    ErrorType,
    OutputAnalysis,
    SentenceType,
    analyse_output,
    sentence_type,
    summarize_errors,
)
from transforms.registry import TRANSFORMATIONS
from transforms.test_cleaning import FRAGMENTS
from transforms.test_language_id import SENTENCES
from transforms.text_metrics import word_count

SOURCE = "The children were playing football in the park until it started to rain."
GOOD = "The kids played soccer in the park until the rain began."


def analyse(raw: str, source: str = SOURCE, **kwargs) -> OutputAnalysis:
    kwargs.setdefault("expected_language", "en")
    return analyse_output(source, raw, **kwargs)


# --------------------------------------------------------------------------------------------------
# API shape
# --------------------------------------------------------------------------------------------------


def test_error_types_and_precedence():
    assert [e.value for e in ErrorType] == [
        "empty",
        "ellipsis",
        "json_fragment",
        "reasoning_leak",
        "instruction_leak",
        "identical",
        "wrong_language",
        "runaway",
        "truncated",
        "summary_longer",
        "sentence_type",
        "length_changed",
    ]
    assert ERROR_PRECEDENCE == tuple(ErrorType)
    assert ErrorType.EMPTY == "empty"  # StrEnum: compares and stores as its value
    assert RUNAWAY_RATIO == 5.0 and TRUNCATED_RATIO == 0.2


def test_analysis_is_frozen():
    result = analyse(GOOD)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.text = "x"  # type: ignore[misc]


def test_good_output_has_no_error():
    result = analyse(GOOD)
    assert result.error is None
    assert result.all_errors == ()
    assert result.text == GOOD
    assert result.detected_language == "en"
    assert 0 < result.edit_distance <= 1
    assert result.length_ratio == pytest.approx(word_count(GOOD) / word_count(SOURCE))


# --------------------------------------------------------------------------------------------------
# Each error fires on a crafted example
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "kwargs", "expected"),
    [
        ("", {}, ErrorType.EMPTY),
        ("   \n\t ", {}, ErrorType.EMPTY),
        ("<think>I should keep it short.</think>", {}, ErrorType.EMPTY),
        ('""', {}, ErrorType.EMPTY),
        ("Paraphrase:", {}, ErrorType.EMPTY),
        ("...", {}, ErrorType.ELLIPSIS),
        ("\u2026", {}, ErrorType.ELLIPSIS),
        (". . .", {}, ErrorType.ELLIPSIS),
        ('{"paraphrase": "The kids played soccer in the park until the rain began."}', {}, ErrorType.JSON_FRAGMENT),
        ('{"paraphrase": "The kids played soccer', {}, ErrorType.JSON_FRAGMENT),
        ('"text": "The kids played soccer in the park."', {}, ErrorType.JSON_FRAGMENT),
        ('```json\n{"translation": "Die Kinder spielten"}\n```', {}, ErrorType.JSON_FRAGMENT),
        ('["football", "park", "rain"]', {}, ErrorType.JSON_FRAGMENT),
        ("<think>The user wants a paraphrase of the sentence about football", {}, ErrorType.REASONING_LEAK),
        ("Let me think about how to rephrase this sentence.", {}, ErrorType.REASONING_LEAK),
        ("Okay, so the user wants me to paraphrase the sentence.", {}, ErrorType.REASONING_LEAK),
        ("First, I need to understand the sentence. The kids played soccer.", {}, ErrorType.REASONING_LEAK),
        ("Step 1: Identify the main verb of the sentence.", {}, ErrorType.REASONING_LEAK),
        ("I need to paraphrase this while keeping the meaning.", {}, ErrorType.REASONING_LEAK),
        ("To paraphrase this sentence, I swap football for soccer.", {}, ErrorType.REASONING_LEAK),
        ("The user wants me to rewrite the text in a casual style.", {}, ErrorType.REASONING_LEAK),
        ("Sure! Here's a more casual version of the sentence.", {}, ErrorType.INSTRUCTION_LEAK),
        ("Certainly, I'd be happy to help with that.", {}, ErrorType.INSTRUCTION_LEAK),
        ("Here is the paraphrase. The kids played soccer in the park.", {}, ErrorType.INSTRUCTION_LEAK),
        ("As an AI language model, I cannot browse the web.", {}, ErrorType.INSTRUCTION_LEAK),
        ("I'm sorry, but I can't help with that request.", {}, ErrorType.INSTRUCTION_LEAK),
        ("I cannot translate this text.", {}, ErrorType.INSTRUCTION_LEAK),
        ("The kids played soccer in the park. Paraphrase the following sentence.", {}, ErrorType.INSTRUCTION_LEAK),
        ("Rewrite the text in a casual style: the kids played soccer.", {}, ErrorType.INSTRUCTION_LEAK),
        (
            "The kids played soccer in the park until the rain began (reply with the text only).",
            {},
            ErrorType.INSTRUCTION_LEAK,
        ),
        (SOURCE, {}, ErrorType.IDENTICAL),
        ("  the children were playing FOOTBALL in the park until it started to rain  ", {}, ErrorType.IDENTICAL),
        (f'"{SOURCE}"', {}, ErrorType.IDENTICAL),
        (SOURCE, {"expected_language": "de"}, ErrorType.IDENTICAL),
        ("Die Kinder spielten im Park Fußball, bis es anfing zu regnen.", {}, ErrorType.WRONG_LANGUAGE),
        (" ".join([GOOD] * 6), {}, ErrorType.RUNAWAY),
        ("Kids.", {}, ErrorType.TRUNCATED),
        (GOOD + " It was a cold and windy afternoon.", {"must_shrink": True}, ErrorType.SUMMARY_LONGER),
    ],
)
def test_each_error_fires(raw, kwargs, expected):
    result = analyse(raw, **kwargs)
    assert result.error == expected, result
    assert expected in result.all_errors


def test_flags_suppress_length_errors():
    long_output = " ".join([GOOD] * 6)
    assert ErrorType.RUNAWAY not in analyse(long_output, may_grow=True).all_errors
    assert ErrorType.TRUNCATED not in analyse("Kids.", may_shrink=True).all_errors
    short = "Kids played soccer until rain."
    result = analyse(short, must_shrink=True, may_shrink=True)
    assert result.error is None


def test_length_ratio_thresholds_are_strict():
    source = " ".join(f"w{i}" for i in range(10))
    exactly_five = " ".join(f"x{i}" for i in range(50))
    exactly_fifth = "x0 x1"
    assert analyse(exactly_five, source=source, expected_language=None).length_ratio == 5.0
    assert ErrorType.RUNAWAY not in analyse(exactly_five, source=source, expected_language=None).all_errors
    assert ErrorType.RUNAWAY in analyse(exactly_five + " x50", source=source, expected_language=None).all_errors
    assert ErrorType.TRUNCATED not in analyse(exactly_fifth, source=source, expected_language=None).all_errors
    assert ErrorType.TRUNCATED in analyse("x0", source=source, expected_language=None).all_errors


def test_summary_longer_only_when_strictly_longer():
    source = "one two three four"
    assert analyse("uno dos tres cuatro", source=source, expected_language=None, must_shrink=True).error is None
    result = analyse("uno dos tres cuatro cinco", source=source, expected_language=None, must_shrink=True)
    assert result.error == ErrorType.SUMMARY_LONGER


def test_cross_language_identical_output_is_an_error():
    source = "Die Kinder spielten im Park Fußball."
    result = analyse(source, source=source, expected_language="en")
    assert result.error == ErrorType.IDENTICAL


# --------------------------------------------------------------------------------------------------
# Precedence
# --------------------------------------------------------------------------------------------------


def test_empty_output_is_only_empty():
    result = analyse("", must_shrink=True)
    assert result.error == ErrorType.EMPTY
    assert result.all_errors == (ErrorType.EMPTY,)
    assert result.length_ratio == 0.0
    assert result.detected_language is None


def test_ellipsis_output_is_only_ellipsis():
    result = analyse("\u2026")
    assert result.all_errors == (ErrorType.ELLIPSIS,)


def test_several_errors_in_precedence_order():
    # Reasoning that also names the instruction, and is far too long.
    raw = "Let me think. " + " ".join(["Paraphrase the following sentence."] * 20)
    result = analyse(raw, source="Kids play.")
    assert result.all_errors[0] == ErrorType.REASONING_LEAK
    assert ErrorType.INSTRUCTION_LEAK in result.all_errors
    assert ErrorType.RUNAWAY in result.all_errors
    assert list(result.all_errors) == sorted(result.all_errors, key=ERROR_PRECEDENCE.index)
    assert result.error == result.all_errors[0]


def test_json_before_identical():
    source = '{"a": 1}'
    result = analyse(source, source=source, expected_language=None)
    assert result.all_errors[:2] == (ErrorType.JSON_FRAGMENT, ErrorType.IDENTICAL)


# --------------------------------------------------------------------------------------------------
# Leak checks do not fire on ordinary sentences
# --------------------------------------------------------------------------------------------------

ORDINARY = [
    "Let the dough rest.",
    "Let the dough rest for an hour.",
    "Let's go to the beach tomorrow.",
    "Let me know when you arrive.",
    "Let us pray for rain.",
    "First, I went to the bakery.",
    "I need to buy milk.",
    "I will translate books for a living one day.",
    "I can't translate Latin.",
    "Here is where we met.",  # decided: a "Here is" sentence is framing only when it names the answer
    "Here's the thing: we are late.",
    "Here is the plan.",
    "Sure enough, the bus was late.",
    "Of course, the weather was bad.",
    "Of course, the answer is no.",
    "Certainly the best film of the year.",
    "Great, the train is late again.",
    "Okay is a word borrowed by many languages.",
    "The user interface is slow.",
    "The user needs a new password.",
    "To summarize, the results are good.",
    "Step 1: Preheat the oven.",
    "I'm sorry for your loss.",
    "I cannot believe it.",
    "I can't help it.",
    "Note: the meeting moved to Friday.",
    "She had to rewrite the text twice.",
    "The answer is simple: no.",
    "[Laughter] Everybody joined in.",
]


@pytest.mark.parametrize("sentence", ORDINARY)
def test_no_false_leak_on_ordinary_sentences(sentence):
    # A paraphrase-like output of an unrelated source: only content checks may fire, never a leak.
    result = analyse(sentence, source="A completely different sentence about cooking and trains.")
    assert ErrorType.REASONING_LEAK not in result.all_errors
    assert ErrorType.INSTRUCTION_LEAK not in result.all_errors
    assert ErrorType.JSON_FRAGMENT not in result.all_errors
    assert clean_output(sentence) == sentence


def test_leak_wording_that_the_source_has_is_content():
    source = "Let me think about your offer until tomorrow."
    result = analyse("Let me think about what you offered until tomorrow.", source=source)
    assert ErrorType.REASONING_LEAK not in result.all_errors
    source = "Sure! Here is the text you asked for, the letter is attached."
    result = analyse("Sure! Here is the text you wanted; the letter is attached.", source=source)
    assert ErrorType.INSTRUCTION_LEAK not in result.all_errors


# --------------------------------------------------------------------------------------------------
# Language checks
# --------------------------------------------------------------------------------------------------


def test_wrong_language_not_flagged_for_short_text():
    result = analyse("Guten Tag.", source="Good day.", expected_language="en", may_shrink=True)
    assert ErrorType.WRONG_LANGUAGE not in result.all_errors
    assert result.detected_language is None


def test_wrong_language_with_candidates_and_codes():
    german = SENTENCES["de"]
    assert analyse(german, expected_language="de-AT").error is None
    # the expected language is always added to the candidates
    result = analyse(german, expected_language="en", language_candidates=["de", "fr"])
    assert result.error == ErrorType.WRONG_LANGUAGE
    assert result.detected_language == "de"
    result = analyse(SENTENCES["en"], expected_language="en", language_candidates=["de", "fr"])
    assert result.error == ErrorType.IDENTICAL  # same text as the source, but in the right language
    assert result.detected_language == "en"
    assert analyse(german, expected_language="xx").error is None  # unknown to the identifier: not checked
    assert analyse(german, expected_language=None).error is None


def test_translation_into_expected_language_is_fine():
    result = analyse(SENTENCES["fr"], expected_language="fr", language_candidates=["en", "fr", "de"])
    assert result.error is None
    assert result.detected_language == "fr"


# --------------------------------------------------------------------------------------------------
# summarize_errors
# --------------------------------------------------------------------------------------------------


def test_summarize_errors_counts():
    summary = summarize_errors(
        [None, ErrorType.EMPTY, "empty", "wrong_language", None, "", ErrorType.TRUNCATED, None, None, None]
    )
    assert isinstance(summary, ErrorSummary)
    assert summary.n_items == 10
    assert summary.n_failed == 4
    assert summary.total_rate == pytest.approx(0.4)
    assert summary.rates["empty"] == pytest.approx(0.2)
    assert summary.rates["wrong_language"] == pytest.approx(0.1)
    assert summary.rates["truncated"] == pytest.approx(0.1)
    assert summary.rates["runaway"] == 0.0
    assert set(summary.rates) == {e.value for e in ErrorType}
    assert sum(summary.rates.values()) == pytest.approx(summary.total_rate)


def test_summarize_errors_empty_and_generator():
    summary = summarize_errors(iter([]))
    assert (summary.n_items, summary.n_failed, summary.total_rate) == (0, 0, 0.0)
    assert all(rate == 0.0 for rate in summary.rates.values())
    summary = summarize_errors(analyse(raw).error for raw in ["", GOOD, "..."])
    assert summary.n_items == 3 and summary.n_failed == 2


def test_summarize_errors_rejects_unknown():
    with pytest.raises(ValueError):
        summarize_errors(["not_an_error"])


@settings(max_examples=100, deadline=None)
@given(st.lists(st.one_of(st.none(), st.sampled_from(list(ErrorType)))))
def test_summarize_errors_property(errors):
    summary = summarize_errors(errors)
    assert summary.n_items == len(errors)
    assert summary.n_failed == sum(e is not None for e in errors)
    assert sum(summary.rates.values()) == pytest.approx(summary.total_rate)
    assert 0.0 <= summary.total_rate <= 1.0


@settings(max_examples=150, deadline=None)
@given(
    st.text(max_size=60),
    st.lists(st.one_of(FRAGMENTS, st.text(max_size=10)), max_size=8).map("".join),
    st.sampled_from([None, "en", "de", "zh"]),
    st.booleans(),
)
def test_analyse_output_invariants(source, raw, expected_language, must_shrink):
    result = analyse_output(source, raw, expected_language=expected_language, must_shrink=must_shrink)
    assert result.text == clean_output(raw)
    assert result.error == (result.all_errors[0] if result.all_errors else None)
    assert len(set(result.all_errors)) == len(result.all_errors)
    assert list(result.all_errors) == sorted(result.all_errors, key=ERROR_PRECEDENCE.index)
    assert 0.0 <= result.edit_distance <= 1.0
    assert result.length_ratio >= 0.0
    assert (result.error == ErrorType.EMPTY) == (result.text == "")


# --------------------------------------------------------------------------------------------------
# Sentence type: a meaning-preserving rewrite keeps a statement a statement and a question a question
# --------------------------------------------------------------------------------------------------

Q, S = SentenceType.QUESTION, SentenceType.STATEMENT


@pytest.mark.parametrize(
    ("text", "language", "expected"),
    [
        ("The volcano erupted last night.", "en", S),
        ("Did the volcano explode last night?", "en", Q),
        ("Wow, it erupted!", "en", S),
        ("Where is it? I cannot find it.", "en", S),  # the last sentence decides
        ("¿Dónde está la estación?", "es", Q),
        ("¿Dónde está la estación", "es", Q),  # opened with ¿, never closed
        ("dónde está la estación", "es", Q),
        ("como cada año llegó tarde", "es", S),  # "como" opens statements too
        ("هل ثار البركان الليلة الماضية؟", "ar", Q),
        ("火山は昨夜噴火しましたか。", "ja", Q),  # a question particle before a full stop
        ("火山は昨夜噴火しました。", "ja", S),
        ("火山昨晚喷发了吗？", "zh", Q),
        ("Πού είναι ο σταθμός;", "el", Q),  # the Greek question mark, folded to a semicolon
        ("Πού είναι ο σταθμός\u037e", "el", Q),
        ("He left; she stayed;", "en", None),  # a semicolon outside Greek says nothing
        ("how do i learn python", "en", Q),  # a search query without its mark
        ("a man is playing a guitar", "en", S),
        ("wie lernt man Python", "de", Q),
        ("Pourquoi le ciel est bleu", "fr", Q),
        ("un homme joue de la guitare", "tr", None),  # no opener list for the language: unknown
        ('She asked, "Is it raining?"', "en", None),  # reported speech or a question: unknown
        ('He said, "Go home."', "en", S),
        ("", "en", None),
    ],
)
def test_sentence_type(text, language, expected):
    assert sentence_type(text, language) == expected


@pytest.mark.parametrize(
    ("source", "output"),
    [
        # Issue 20: a paraphrase run turned a statement into a question and marked it ok.
        ("The volcano erupted last night.", "Did the volcano explode last night?"),
        ("How do volcanoes form?", "Volcanoes form when magma rises through the crust."),
        # An answered question: the question is kept and its answer added after it.
        ("Where is the train station?", "Where is the train station? It is next to the market."),
        ("how do i learn python", "Practice every day to learn Python."),
        ("¿Dónde está la estación?", "La estación está junto al mercado."),
        ("Πού είναι ο σταθμός;", "Ο σταθμός είναι δίπλα στην αγορά."),
    ],
)
def test_sentence_type_change_is_an_error(source, output):
    language = "es" if "¿" in source else "el" if "σ" in source else "en"
    result = analyse_output(source, output, expected_language=language, keep_sentence_type=True)
    assert result.error == ErrorType.SENTENCE_TYPE, result.all_errors


@pytest.mark.parametrize(
    ("source", "output", "language"),
    [
        ("The volcano erupted last night.", "Last night the volcano blew up.", "en"),
        ("How do volcanoes form?", "What makes a volcano form?", "en"),
        ("how do i learn python", "What is the best way to learn Python?", "en"),
        ("Where is it? I cannot find it.", "I cannot find it. Where is it?", "en"),
        ('She asked, "Is it raining?"', "She wanted to know whether it was raining.", "en"),
        # A statement that embeds a question may end as one when reordered.
        ('"Why?" was all he said.', 'All he said was "Why?"', "en"),
        ("¿Dónde está la estación?", "¿En qué lugar queda la estación?", "es"),
        ("火山は昨夜噴火しましたか。", "昨夜、火山は噴火しましたか？", "ja"),
        ("Πού είναι ο σταθμός;", "Πού βρίσκεται ο σταθμός;", "el"),
    ],
)
def test_sentence_type_kept_is_ok(source, output, language):
    result = analyse_output(source, output, expected_language=language, keep_sentence_type=True)
    assert ErrorType.SENTENCE_TYPE not in result.all_errors


def test_sentence_type_is_checked_only_when_asked():
    """Off by default, and off for translation: a Japanese question may end in "か。" where the
    English source ends in "?", so the marks of the two languages are not compared."""
    source, output = "The volcano erupted last night.", "Did the volcano explode last night?"
    assert analyse_output(source, output, expected_language="en").error is None
    checked = {name for name, t in TRANSFORMATIONS.items() if t.keeps_sentence_type}
    assert checked == {
        "paraphrase",
        "backtranslation",
        "style_change",
        "expansion",
        "summarization",
        "summarized_expansion",
        "negation",
        "antonym",
        "number_entity_swap",
        "role_swap",
    }
    translated = analyse_output("Where is the station?", "駅はどこですか。", expected_language="ja")
    assert translated.error is None


def test_sentence_type_reads_the_detected_language_without_an_expected_one():
    result = analyse_output(
        "Πού είναι ο σταθμός των τρένων στην πόλη;",
        "Ο σταθμός των τρένων είναι δίπλα στην αγορά της πόλης.",
        expected_language=None,
        keep_sentence_type=True,
    )
    assert result.detected_language == "el"
    assert result.error == ErrorType.SENTENCE_TYPE
