"""Tests of the cleaning of raw model answers (transforms.cleaning)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transforms.cleaning import clean_output


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


FRAGMENTS = st.sampled_from(
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
@given(st.lists(st.one_of(FRAGMENTS, st.text(max_size=8)), max_size=12).map("".join))
def test_clean_output_is_idempotent(text):
    once = clean_output(text)
    assert clean_output(once) == once
    assert len(once) <= len(text)
