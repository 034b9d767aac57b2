"""Tests of the pure output post-processing and error analysis (transforms.errors)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transforms.errors import (
    ERROR_PRECEDENCE,
    LANGUAGE_MIN_CONFIDENCE,
    MIN_WORDS_FOR_LANGUAGE,
    RUNAWAY_RATIO,
    TRUNCATED_RATIO,
    ErrorSummary,
    ErrorType,
    OutputAnalysis,
    analyse_output,
    clean_output,
    detect_language,
    normalized_edit_distance,
    summarize_errors,
    supported_languages,
    word_count,
)

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
    ]
    assert ERROR_PRECEDENCE == tuple(ErrorType)
    assert ErrorType.EMPTY == "empty"  # StrEnum: compares and stores as its value
    assert RUNAWAY_RATIO == 5.0 and TRUNCATED_RATIO == 0.2
    assert MIN_WORDS_FOR_LANGUAGE == 3 and 0.5 <= LANGUAGE_MIN_CONFIDENCE < 1


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
# clean_output
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "cleaned"),
    [
        ("<think>\nThe user wants a paraphrase.\n</think>\n\nThe cat sat.", "The cat sat."),
        ("<THINK>a</THINK>The cat sat.", "The cat sat."),
        ("<thinking>plan</thinking> The cat sat.", "The cat sat."),
        ("The user wants a paraphrase.\n</think>\n\nThe cat sat.", "The cat sat."),
        ("<think>\nLet me think about it.\n\nThe cat sat.", "The cat sat."),
        ("<think>unfinished reasoning", "<think>unfinished reasoning"),
        ("  The cat sat.  \n", "The cat sat."),
        ("\ufeffThe cat sat.\u200b", "The cat sat."),
        ('"The cat sat."', "The cat sat."),
        ("\u201cThe cat sat.\u201d", "The cat sat."),
        ("\u00ab Le chat dort. \u00bb", "Le chat dort."),
        ("\u300c\u732b\u304c\u5ea7\u3063\u305f\u3002\u300d", "\u732b\u304c\u5ea7\u3063\u305f\u3002"),
        ("'It's fine.'", "It's fine."),
        ("'Hello' and 'bye'", "'Hello' and 'bye'"),
        ('"Hello," she said, "bye."', '"Hello," she said, "bye."'),
        ("`The cat sat.`", "The cat sat."),
        ("```\nThe cat sat.\n```", "The cat sat."),
        ("```text\nThe cat sat.\n```", "The cat sat."),
        ("Paraphrase: The cat sat.", "The cat sat."),
        ("paraphrased sentence: The cat sat.", "The cat sat."),
        ("**Paraphrased sentence:** The cat sat.", "The cat sat."),
        ("Rewritten text: The cat sat.", "The cat sat."),
        ("Translation: Die Katze sa\u00df.", "Die Katze sa\u00df."),
        ("Translated text:\nDie Katze sa\u00df.", "Die Katze sa\u00df."),
        ("German translation (formal): Die Katze sa\u00df.", "Die Katze sa\u00df."),
        ("Summary: Cat sat.", "Cat sat."),
        ("Expanded text: The old cat sat.", "The old cat sat."),
        ("Keywords: cat, mat", "cat, mat"),
        ("Output: The cat sat.", "The cat sat."),
        ("Answer: The cat sat.", "The cat sat."),
        ("Final answer: The cat sat.", "The cat sat."),
        ("Text: The cat sat.", "The cat sat."),
        ("Here is the paraphrase: The cat sat.", "The cat sat."),
        ("Here's the translation:\nDie Katze sa\u00df.", "Die Katze sa\u00df."),
        ("Sure! Here is a more formal version: The cat sat.", "The cat sat."),
        ('Paraphrase: "The cat sat."', "The cat sat."),
        ('<think>x</think>\n```\nParaphrase: "The cat sat."\n```', "The cat sat."),
        # Content that must stay.
        ("Note: the meeting moved.", "Note: the meeting moved."),
        ("The answer is simple: no.", "The answer is simple: no."),
        ("The text message said: see you soon.", "The text message said: see you soon."),
        ("This doesn't answer your question, but: it helps.", "This doesn't answer your question, but: it helps."),
        ("News Summary: Apple buys a chip maker.", "News Summary: Apple buys a chip maker."),
        ("Here's the thing: we are late.", "Here's the thing: we are late."),
        ("He said: translation is hard.", "He said: translation is hard."),
        ("The cat sat. Paraphrase: the feline sat.", "The cat sat. Paraphrase: the feline sat."),
        (
            "One two three four five six seven eight nine translation: x",
            "One two three four five six seven eight nine translation: x",
        ),
    ],
)
def test_clean_output(raw, cleaned):
    assert clean_output(raw) == cleaned
    assert clean_output(cleaned) == cleaned


_FRAGMENTS = st.sampled_from(
    [
        "<think>",
        "</think>",
        "<thinking>",
        "\n\n",
        '"',
        "'",
        "\u201c",
        "\u201d",
        "`",
        "```",
        "```json\n",
        "Paraphrase:",
        "Here is the translation:",
        "**Summary:**",
        "Text:",
        " ",
        "The cat sat.",
        "Let me think.",
        "{",
        "}",
        "\u2026",
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_FRAGMENTS, st.text(max_size=8)), max_size=12).map("".join))
def test_clean_output_is_idempotent(text):
    once = clean_output(text)
    assert clean_output(once) == once
    assert len(once) <= len(text)


# --------------------------------------------------------------------------------------------------
# word_count and normalized_edit_distance
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "count"),
    [
        ("", 0),
        ("   ", 0),
        ("The cat sat.", 3),
        ("The cat sat .", 3),  # a lone punctuation mark is no word
        ("state-of-the-art don't 3.5", 3),
        ("... \u2014 !!", 0),
        ("\u00c7ocuklar parkta oynuyordu.", 3),
        ("\u732b\u304c\u5ea7\u3063\u305f\u3002", 5),  # Japanese: one word per letter, the full stop is none
        ("\u6211\u7231\u4f60", 3),
        ("iPhone\u3092\u8cb7\u3063\u305f", 5),  # a Latin run, then 4 Japanese letters
        ("\u0e41\u0e21\u0e27\u0e19\u0e31\u0e48\u0e07", 5),  # Thai: 5 base letters, 2 marks attach to them
    ],
)
def test_word_count(text, count):
    assert word_count(text) == count


@pytest.mark.parametrize(
    ("a", "b", "distance"),
    [
        ("the cat sat", "the dog sat", 1 / 3),
        ("the cat sat", "the cat sat", 0.0),
        ("", "", 0.0),
        ("", "the cat", 1.0),
        ("the cat sat", "the black cat sat", 1 / 4),  # one insertion
        ("the cat sat", "the cat sat down here", 2 / 5),  # two insertions
        ("the cat sat", "cat sat", 1 / 3),  # one deletion
        ("the cat sat", "The cat sat", 1 / 3),  # case-sensitive
        ("the cat sat", "the cat sat.", 1 / 3),  # punctuation belongs to its word
        ("a b c d", "d c b a", 1.0),
        ("\u732b\u304c\u5ea7\u3063\u305f", "\u72ac\u304c\u5ea7\u3063\u305f", 1 / 5),
    ],
)
def test_normalized_edit_distance(a, b, distance):
    assert normalized_edit_distance(a, b) == pytest.approx(distance)


_WORDS = st.lists(st.sampled_from(["the", "cat", "sat", "on", "mat", "The", "mat.", "\u732b", "..."]), max_size=10)


@settings(max_examples=200, deadline=None)
@given(_WORDS.map(" ".join), _WORDS.map(" ".join))
def test_edit_distance_bounded_and_symmetric(a, b):
    d = normalized_edit_distance(a, b)
    assert 0.0 <= d <= 1.0
    assert d == normalized_edit_distance(b, a)
    assert normalized_edit_distance(a, a) == 0.0


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40), st.text(max_size=40))
def test_edit_distance_properties_on_any_text(a, b):
    d = normalized_edit_distance(a, b)
    assert 0.0 <= d <= 1.0
    assert d == normalized_edit_distance(b, a)
    assert word_count(a) >= 0


# --------------------------------------------------------------------------------------------------
# Language identification
# --------------------------------------------------------------------------------------------------

SENTENCES = {
    "en": "The children were playing football in the park until it started to rain.",
    "de": "Die Kinder spielten im Park Fu\u00dfball, bis es anfing zu regnen.",
    "es": "Los ni\u00f1os jugaban al f\u00fatbol en el parque hasta que empez\u00f3 a llover.",
    "fr": "Les enfants jouaient au football dans le parc jusqu'\u00e0 ce qu'il commence \u00e0 pleuvoir.",
    "tr": "\u00c7ocuklar ya\u011fmur ya\u011fmaya ba\u015flayana kadar parkta futbol oynuyordu.",
    "ar": "\u0643\u0627\u0646 \u0627\u0644\u0623\u0637\u0641\u0627\u0644 \u064a\u0644\u0639\u0628\u0648\u0646 "
    "\u0643\u0631\u0629 \u0627\u0644\u0642\u062f\u0645 \u0641\u064a \u0627\u0644\u062d\u062f\u064a\u0642\u0629 "
    "\u062d\u062a\u0649 \u0628\u062f\u0623 \u0627\u0644\u0645\u0637\u0631 \u064a\u0647\u0637\u0644.",
}


@pytest.mark.parametrize(("language", "sentence"), sorted(SENTENCES.items()))
def test_detect_language(language, sentence):
    assert detect_language(sentence) == language
    assert detect_language(sentence, candidates=sorted(SENTENCES)) == language


def test_detect_language_more_sentences():
    assert detect_language("Mein Bruder wohnt seit drei Jahren in einer kleinen Wohnung in Berlin.") == "de"
    assert detect_language("\u00bfD\u00f3nde est\u00e1 la estaci\u00f3n de tren m\u00e1s cercana?") == "es"
    assert detect_language("Nous avons mang\u00e9 une tarte aux pommes apr\u00e8s le d\u00eener.") == "fr"
    assert detect_language("Yar\u0131n sabah erkenden \u0130stanbul'a gidece\u011fiz.") == "tr"
    assert (
        detect_language(
            "\u0623\u062d\u0628 \u0642\u0631\u0627\u0621\u0629 \u0627\u0644\u0643\u062a\u0628 "
            "\u0641\u064a \u0627\u0644\u0645\u0633\u0627\u0621."
        )
        == "ar"
    )
    assert detect_language("\u5b69\u5b50\u4eec\u5728\u516c\u56ed\u91cc\u8e22\u8db3\u7403\u3002") == "zh"


def test_detect_language_too_short_or_empty():
    assert detect_language("Hello world") is None  # fewer than MIN_WORDS_FOR_LANGUAGE words
    assert detect_language("") is None
    assert detect_language("... !!") is None


def test_detect_language_candidates():
    # Restricting forces the answer into the candidates; region subtags and unknown codes are tolerated.
    assert detect_language(SENTENCES["en"], candidates=["en-GB", "xx"]) == "en"
    assert detect_language(SENTENCES["de"], candidates=["DE", "en"]) == "de"
    with pytest.raises(ValueError):
        detect_language(SENTENCES["en"], candidates=["xx", "yy"])
    assert {"en", "de", "zh", "ja", "tr", "ar"} <= supported_languages()
    assert "wuu" not in supported_languages()  # folded into zh


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
    st.lists(st.one_of(_FRAGMENTS, st.text(max_size=10)), max_size=8).map("".join),
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
