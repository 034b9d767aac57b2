"""Cleaning of raw model answers before they are analysed or stored (pure module).

:func:`clean_output` removes what a chat model wraps around its answer: reasoning blocks, quotes or
code fences around the whole answer, and a short label before it ("Paraphrase:").
"""

from __future__ import annotations

import re

from transforms.leak_patterns import INSTRUCTION_ANYWHERE_RES

__all__ = ["MAX_LABEL_WORDS", "clean_output"]

#: A label before the answer ("Here is the paraphrase:") has at most this many words before its colon.
MAX_LABEL_WORDS = 8

# Invisible characters that str.strip() leaves alone but that should not count as content.
_EXTRA_STRIP = "\ufeff\u200b\u200c\u200d\u2060"

_THINK_BLOCK_RE = re.compile(r"<(think|thinking)\s*>.*?</\1\s*>", re.IGNORECASE | re.DOTALL)
_THINK_OPEN_RE = re.compile(r"<think(?:ing)?\s*>", re.IGNORECASE)
_THINK_CLOSE_RE = re.compile(r"</think(?:ing)?\s*>", re.IGNORECASE)
_PARAGRAPH_BREAK_RE = re.compile(r"\n[ \t]*\n")

# (opening, closing) characters that may wrap the whole answer.
_QUOTE_PAIRS = (
    ('"', '"'),
    ("\u201c", "\u201d"),  # “ ”
    ("\u201e", "\u201c"),  # „ “
    ("\u201d", "\u201d"),  # ” ”
    ("\u00ab", "\u00bb"),  # « »
    ("\u00bb", "\u00ab"),  # » «
    ("'", "'"),
    ("\u2018", "\u2019"),  # ‘ ’
    ("\u300c", "\u300d"),  # 「 」
    ("\u300e", "\u300f"),  # 『 』
    ("`", "`"),
)
# Characters that double as apostrophes: inside a wrapped answer they are fine between two letters.
_APOSTROPHES = frozenset("'\u2019")

# A Markdown code fence around the whole answer, with an optional info string ("```json").
_FENCE_RE = re.compile(
    r"^```[ \t]*[\w+.#-]*[ \t]*\n(?P<body>.*?)\n?[ \t]*```$|^```(?P<inline>[^`\n].*?)```$", re.DOTALL
)

# A possible label: a short run of words before a colon at the very start, with optional Markdown
# emphasis or heading marks around it ("**Paraphrase:**", "## Translation:").
_LABEL_RE = re.compile(
    r"^[#>*_ \t]*(?P<lead>[^:\uff1a\n*_#]{1,160}?)[ \t]*"
    r"(?:(?:\*\*|__)[ \t]*[:\uff1a]|[:\uff1a](?:[ \t]*(?:\*\*|__))?)\s*"
)
# Words that name the task or its product; a label must contain one of them.
_TASK_WORD = (
    r"(?:paraphras\w*|rephras\w*|reword\w*|rewrit\w*|back-?translat\w*|translat\w*|summar\w*|expan\w*"
    r"|keywords?|key\s+words|output|answer|response|result|version|rendition|restyl\w*|style)"
)
_TASK_WORD_RE = re.compile(rf"\b{_TASK_WORD}\b", re.IGNORECASE)
# Nouns that, after "Here is", announce the answer ("Here's my attempt:"), besides the task words.
_ANSWER_NOUN_RE = re.compile(
    rf"\b(?:{_TASK_WORD}|text|sentence|passage|attempt|it|options?|alternatives?)\b", re.IGNORECASE
)
_HERE_IS_RE = re.compile(r"\bhere\s*(?:is|are|['\u2019]s)\b", re.IGNORECASE)
_PRESENTATIONAL_RE = re.compile(r"^(?:this|below)\s+(?:is|are)\b|^(?:the\s+)?following\s+(?:is|are)\b", re.IGNORECASE)
# A bare label that is only a generic noun ("Text:", "New sentence:"), as when the prompt's own
# "Text:" framing is echoed back.
_BARE_LABEL_RE = re.compile(
    r"^(?:(?:new|final|revised|modified|rewritten|reworded|edited|resulting|formal|informal|casual)\s+)?"
    r"(?:text|sentence|passage)$",
    re.IGNORECASE,
)
# Words that may stand before the task word of a label ("Final answer:", "German translation:",
# "A more formal version:"); a lead whose task word comes after any other word is content
# ("News Summary: ...", "This doesn't answer your question, but: ...").
_LABEL_MODIFIERS = frozenset(
    """
    the a an my our one final new revised improved corrected alternative possible suggested proposed
    formal informal casual polished plain simple simplified short shorter long longer expanded extended
    condensed rewritten paraphrased translated reworded restyled summarized summarised literal natural
    fluent more less edited modified resulting back
    english german spanish french italian dutch polish portuguese russian chinese japanese turkish
    arabic korean
    """.split()
)
# If a lead contains one of these it reads as a sentence ("The answer is simple:"), not as a label.
_SENTENCE_WORD_RE = re.compile(
    r"\b(?:is|are|was|were|be|been|being|am|has|have|had|do|does|did|will|would|can|could|should|shall|may"
    r"|might|must|says|said|reads|means|i|you|he|she|we|they)\b|n['\u2019]t\b|\bnot\b",
    re.IGNORECASE,
)


def _is_label(lead: str) -> bool:
    lead = lead.strip()
    words = lead.split()
    if not words or len(words) > MAX_LABEL_WORDS:
        return False
    if _BARE_LABEL_RE.match(lead):
        return True
    if _HERE_IS_RE.search(lead):
        return _ANSWER_NOUN_RE.search(lead) is not None
    if _TASK_WORD_RE.search(lead) is None:
        return False
    if any(pattern.search(lead) for pattern in INSTRUCTION_ANYWHERE_RES):
        return False  # the instruction itself ("Rewrite the text in a casual style:") is reported, not removed
    if _PRESENTATIONAL_RE.match(lead):
        return True
    if _SENTENCE_WORD_RE.search(lead) is not None:
        return False
    for word in words:
        if _TASK_WORD_RE.match(word):
            return True
        if word.casefold().strip("()[],.-") not in _LABEL_MODIFIERS:
            return False
    return False


def _strip_reasoning(text: str) -> str:
    text = _THINK_BLOCK_RE.sub("", text)
    closes = list(_THINK_CLOSE_RE.finditer(text))
    close = closes[-1] if closes else None
    if close is not None and _THINK_OPEN_RE.search(text, 0, close.start()) is None:
        # A dangling closing tag: everything before it was reasoning, the answer follows it.
        return text[close.end() :]
    opening = _THINK_OPEN_RE.match(text.lstrip())
    if opening is not None and _THINK_CLOSE_RE.search(text) is None:
        # Unclosed leading block: reasoning runs up to the last paragraph break; what follows is the
        # answer. Without a paragraph break there is no answer to recover and the tag is left in place.
        breaks = list(_PARAGRAPH_BREAK_RE.finditer(text))
        if breaks:
            return text[breaks[-1].end() :]
    return text


def _strip_wrapping(text: str) -> str:
    fence = _FENCE_RE.match(text)
    if fence is not None:
        return fence.group("body") if fence.group("body") is not None else fence.group("inline")
    if text.startswith("```"):
        return text
    for opening, closing in _QUOTE_PAIRS:
        if len(text) >= 2 and text.startswith(opening) and text.endswith(closing):
            inner = text[len(opening) : len(text) - len(closing)]
            if _quote_free(inner, {opening, closing}):
                return inner
    return text


def _quote_free(inner: str, quotes: set[str]) -> bool:
    """Whether *inner* has none of *quotes*, apart from apostrophes between two letters."""
    for i, ch in enumerate(inner):
        if ch not in quotes:
            continue
        if ch in _APOSTROPHES and 0 < i < len(inner) - 1 and inner[i - 1].isalpha() and inner[i + 1].isalpha():
            continue
        return False
    return True


def _strip_label(text: str) -> str:
    match = _LABEL_RE.match(text)
    if match is None or not _is_label(match.group("lead")):
        return text
    return text[match.end() :]


def _clean_step(text: str) -> str:
    text = _strip_reasoning(text)
    text = text.strip().strip(_EXTRA_STRIP).strip()
    text = _strip_wrapping(text)
    text = text.strip().strip(_EXTRA_STRIP).strip()
    return _strip_label(text)


def clean_output(text: str) -> str:
    """Post-process a raw model answer before it is analysed or stored.

    Removes, repeatedly until nothing changes:

    - ``<think>...</think>`` (or ``<thinking>``) blocks anywhere; an unclosed leading ``<think>`` up to
      the last paragraph break (left in place, to be reported, when there is none); everything up to
      a dangling ``</think>`` that has no opening tag;
    - surrounding whitespace (including zero-width characters);
    - a pair of quotes (straight, curly, guillemets, Japanese corner brackets) or backticks that
      wraps the whole answer, as long as the same quote does not also occur inside it (an
      apostrophe between two letters is fine); a Markdown code fence around the whole answer;
    - a short label before the answer, at the very start and ending in a colon, of at most
      :data:`MAX_LABEL_WORDS` words: one headed by a task word ("Paraphrase:", "Rewritten text:",
      "Translated text:", "Summary:", "Keywords:", "Output:", "Answer:", "German translation:"), a
      "Here is/Here's ..." lead-in that names the answer ("Here is the paraphrase:", "Sure! Here's
      my attempt:"), or a bare "Text:"/"Sentence:". Leads that read as a sentence ("The answer is
      simple:", "Here's the thing:") and labels without a task word ("Note:") are content and stay.

    Parameters
    ----------
    text : str
        The raw answer of the model.

    Returns
    -------
    str
        The cleaned answer. The function is idempotent: ``clean_output(clean_output(x)) == clean_output(x)``
        (every step only removes characters, and it runs until no step changes the text).
    """
    current = text
    while True:
        cleaned = _clean_step(current)
        if cleaned == current:
            return cleaned
        current = cleaned
