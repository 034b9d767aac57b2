"""Post-processing and error analysis of LLM rewrites (pure module).

Every transformed text goes through :func:`clean_output` (remove reasoning blocks, wrapping quotes or
code fences and answer labels) and then :func:`analyse_output`, which runs the error checks of the
product spec in a fixed precedence order and reports the first that fired as the item's single error.

Nothing here touches Django, files of the project or the network. The one exception to "pure" is the
language identifier (py3langid), whose packaged model is read once, lazily, on the first call to
:func:`detect_language` and kept in a module-level cache.

Tokenisation (shared by :func:`word_count` and :func:`normalized_edit_distance`)
    Text is split on whitespace; punctuation stays attached to the word it touches ("sat." and
    "sat" are different tokens) and a chunk without any letter or digit (a lone dash, "...") is no
    word at all. In scripts written without spaces (Chinese, Japanese kana and kanji, Thai, Lao,
    Khmer, Myanmar) every letter is a word of its own, together with its combining marks and any
    punctuation that follows it, so length ratios stay meaningful for those languages.
    Tokens are compared case-sensitively.
"""

from __future__ import annotations

import copy
import json
import re
import threading
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from typing import Any

from rapidfuzz.distance import Levenshtein

__all__ = [
    "ERROR_PRECEDENCE",
    "LANGUAGE_MIN_CONFIDENCE",
    "MAX_LABEL_WORDS",
    "MIN_WORDS_FOR_LANGUAGE",
    "RUNAWAY_RATIO",
    "TRUNCATED_RATIO",
    "ErrorSummary",
    "ErrorType",
    "OutputAnalysis",
    "analyse_output",
    "clean_output",
    "detect_language",
    "normalized_edit_distance",
    "summarize_errors",
    "supported_languages",
    "word_count",
]


class ErrorType(StrEnum):
    """The kinds of failure a transformed text can have; values are stored in the database."""

    EMPTY = "empty"
    ELLIPSIS = "ellipsis"
    JSON_FRAGMENT = "json_fragment"
    REASONING_LEAK = "reasoning_leak"
    INSTRUCTION_LEAK = "instruction_leak"
    IDENTICAL = "identical"
    WRONG_LANGUAGE = "wrong_language"
    RUNAWAY = "runaway"
    TRUNCATED = "truncated"
    SUMMARY_LONGER = "summary_longer"


#: Order in which errors are reported: the first one that applies is the item's single error.
ERROR_PRECEDENCE: tuple[ErrorType, ...] = tuple(ErrorType)

#: ``runaway`` fires when the output has more than this many times the words of the source.
RUNAWAY_RATIO = 5.0
#: ``truncated`` fires when the output has fewer than this share of the words of the source.
TRUNCATED_RATIO = 0.2
#: Texts with fewer words than this are too short for language identification (no ``wrong_language``).
MIN_WORDS_FOR_LANGUAGE = 3
#: Probability the identifier must give its best language before the answer counts as confident.
#: Chosen on STS-B multi-mt (11 languages, ~31,000 sentences): at 0.7 fewer than 0.1 % of sentences
#: get a confident but wrong answer, while about 10 % (all 140+ languages) or 1 % (restricted to the
#: 11) are left undecided.
LANGUAGE_MIN_CONFIDENCE = 0.7
#: A label before the answer ("Here is the paraphrase:") has at most this many words before its colon.
MAX_LABEL_WORDS = 8


# --------------------------------------------------------------------------------------------------
# Tokenisation and distances
# --------------------------------------------------------------------------------------------------

# Scripts written without spaces between words: each letter counts as one word.
_SPACELESS_RANGES = (
    "\u0e00-\u0e7f"  # Thai
    "\u0e80-\u0eff"  # Lao
    "\u1000-\u109f"  # Myanmar
    "\u1780-\u17ff"  # Khmer
    "\u3040-\u309f"  # Hiragana
    "\u30a0-\u30ff"  # Katakana
    "\u31f0-\u31ff"  # Katakana phonetic extensions
    "\u3400-\u4dbf"  # CJK unified ideographs, extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\uff66-\uff9f"  # half-width Katakana
    "\U00020000-\U0003134f"  # CJK unified ideographs, extensions B to G
)
_SPACELESS_RE = re.compile(f"[{_SPACELESS_RANGES}]")


def _has_alnum(token: str) -> bool:
    return any(ch.isalnum() for ch in token)


def _is_spaceless_letter(ch: str) -> bool:
    return _SPACELESS_RE.match(ch) is not None and ch.isalnum()


def _split_chunk(chunk: str) -> list[str]:
    """Split one whitespace-free chunk that contains characters of a spaceless script."""
    parts: list[str] = []
    current = ""
    in_spaceless = False
    for ch in chunk:
        if _is_spaceless_letter(ch):
            if _has_alnum(current):
                parts.append(current)
                current = ch
            else:  # leading punctuation ("「") sticks to the letter that follows it
                current += ch
            in_spaceless = True
        elif in_spaceless and ch.isalnum():
            parts.append(current)
            current = ch
            in_spaceless = False
        else:  # combining marks and punctuation stay with the letter before them
            current += ch
    if current:
        parts.append(current)
    return parts


def _tokens(text: str) -> list[str]:
    """Word tokens of *text*, as described in the module docstring."""
    chunks = text.split()
    if _SPACELESS_RE.search(text) is None:
        return [chunk for chunk in chunks if _has_alnum(chunk)]
    tokens: list[str] = []
    for chunk in chunks:
        if _SPACELESS_RE.search(chunk) is None:
            tokens.append(chunk)
        else:
            tokens.extend(_split_chunk(chunk))
    return [token for token in tokens if _has_alnum(token)]


def word_count(text: str) -> int:
    """Count the words of a text.

    Parameters
    ----------
    text : str
        Any text.

    Returns
    -------
    int
        Number of whitespace-separated chunks that contain a letter or digit; in Chinese, Japanese,
        Thai and other scripts written without spaces every letter counts as one word.
    """
    return len(_tokens(text))


def normalized_edit_distance(a: str, b: str) -> float:
    """Word-level Levenshtein distance divided by the longer text's word count.

    Parameters
    ----------
    a, b : str
        The two texts. They are tokenised like :func:`word_count` (punctuation attached to its word,
        case kept), so the token counts are exactly the word counts.

    Returns
    -------
    float
        Number of word insertions, deletions and substitutions that turn *a* into *b*, divided by
        ``max(word_count(a), word_count(b))``; in ``[0, 1]``, symmetric, and ``0.0`` when both are empty.
    """
    tokens_a, tokens_b = _tokens(a), _tokens(b)
    longest = max(len(tokens_a), len(tokens_b))
    if longest == 0:
        return 0.0
    return Levenshtein.distance(tokens_a, tokens_b) / longest


# --------------------------------------------------------------------------------------------------
# Cleaning
# --------------------------------------------------------------------------------------------------

# Invisible characters that str.strip() leaves alone but that should not count as content.
_EXTRA_STRIP = "\ufeff\u200b\u200c\u200d\u2060"

_THINK_BLOCK_RE = re.compile(r"<(think|thinking)\s*>.*?</\1\s*>", re.IGNORECASE | re.DOTALL)
_THINK_OPEN_RE = re.compile(r"<think(?:ing)?\s*>", re.IGNORECASE)
_THINK_CLOSE_RE = re.compile(r"</think(?:ing)?\s*>", re.IGNORECASE)
_THINK_ANY_RE = re.compile(r"</?think(?:ing)?\s*>", re.IGNORECASE)
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
    if any(pattern.search(lead) for pattern in _INSTRUCTION_ANYWHERE_RES):
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


# --------------------------------------------------------------------------------------------------
# Language identification
# --------------------------------------------------------------------------------------------------

# Labels of the identifier that are varieties of a language with a two-letter code: their
# probabilities are added to that language's (e.g. Wu Chinese to Chinese, Egyptian Arabic to Arabic).
_LABEL_TO_CODE = {
    "wuu": "zh",
    "yue": "zh",
    "ary": "ar",
    "arz": "ar",
    "uzs": "uz",
    "gug": "gn",
    "sdh": "ku",
}
# The identifier's label for "no linguistic content".
_NO_LANGUAGE = "zxx"
# Codes the caller may use for a language the identifier knows under another code.
_CODE_ALIASES = {"nb": "no", "iw": "he", "in": "id", "ji": "yi", "zh-hans": "zh", "zh-hant": "zh"}
# Languages so close in writing that a confident mismatch between them is not reported as an error.
_COMPATIBLE = ({"no", "nn"}, {"hr", "sr", "bs"})

_MODEL_LOCK = threading.Lock()
_BASE_IDENTIFIER: Any = None


def _base_identifier() -> Any:
    """The full py3langid model, loaded on first use and then kept."""
    global _BASE_IDENTIFIER
    if _BASE_IDENTIFIER is None:
        with _MODEL_LOCK:
            if _BASE_IDENTIFIER is None:
                from py3langid.langid import MODEL_FILE, LanguageIdentifier

                _BASE_IDENTIFIER = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    return _BASE_IDENTIFIER


@lru_cache(maxsize=1)
def _labels_by_code() -> dict[str, frozenset[str]]:
    by_code: dict[str, set[str]] = {}
    for label in _base_identifier().labels:
        if label == _NO_LANGUAGE:
            continue
        by_code.setdefault(_LABEL_TO_CODE.get(label, label), set()).add(label)
    return {code: frozenset(labels) for code, labels in by_code.items()}


def _normalise_code(code: str) -> str:
    code = code.strip().lower().replace("_", "-")
    if code in _CODE_ALIASES:
        return _CODE_ALIASES[code]
    primary = code.split("-", 1)[0]
    return _CODE_ALIASES.get(primary, primary)


def supported_languages() -> frozenset[str]:
    """Language codes :func:`detect_language` can return (loads the model on first call).

    Returns
    -------
    frozenset of str
        ISO 639-1 codes, plus ISO 639-3 codes for the few languages without a two-letter code.
    """
    return frozenset(_labels_by_code())


@lru_cache(maxsize=32)
def _identifier(codes: frozenset[str] | None) -> Any:
    base = _base_identifier()
    if codes is None:
        return base
    restricted = copy.copy(base)  # shares the model arrays; set_languages only rebinds attributes
    labels = _labels_by_code()
    restricted.set_languages(sorted(label for code in codes for label in labels[code]))
    return restricted


def _language_scores(text: str, codes: frozenset[str] | None) -> dict[str, float]:
    scores: dict[str, float] = {}
    for label, probability in _identifier(codes).rank(text):
        code = None if label == _NO_LANGUAGE else _LABEL_TO_CODE.get(label, label)
        if code is not None:
            scores[code] = scores.get(code, 0.0) + probability
    return scores


def _candidate_codes(candidates: Sequence[str] | None) -> frozenset[str] | None:
    if candidates is None:
        return None
    known = _labels_by_code()
    codes = frozenset(code for code in map(_normalise_code, candidates) if code in known)
    if not codes:
        raise ValueError(f"none of the candidate languages {list(candidates)!r} is supported by the identifier")
    return codes


def detect_language(text: str, *, candidates: Sequence[str] | None = None) -> str | None:
    """Identify the language of a text.

    Uses py3langid (Naive Bayes over byte n-grams, 140+ languages), loaded lazily once.

    Parameters
    ----------
    text : str
        The text to identify.
    candidates : sequence of str, optional
        Restrict the answer to these language codes (ISO 639-1; region subtags such as "pt-BR" are
        ignored). Codes the identifier does not know are skipped; ``ValueError`` if none is known.

    Returns
    -------
    str or None
        The ISO 639-1 code (ISO 639-3 for the few languages without one), or ``None`` when the text
        has fewer than :data:`MIN_WORDS_FOR_LANGUAGE` words or the best language's probability is
        below :data:`LANGUAGE_MIN_CONFIDENCE`.
    """
    codes = _candidate_codes(candidates)
    if word_count(text) < MIN_WORDS_FOR_LANGUAGE:
        return None
    scores = _language_scores(text, codes)
    if not scores:
        return None
    best = max(scores, key=scores.__getitem__)
    return best if scores[best] >= LANGUAGE_MIN_CONFIDENCE else None


def _same_language(a: str, b: str) -> bool:
    return a == b or any(a in group and b in group for group in _COMPATIBLE)


# --------------------------------------------------------------------------------------------------
# Leak patterns
# --------------------------------------------------------------------------------------------------

_APOS = "['\u2019]"
# Optional Markdown or quote marks before the first word.
_LEAD = r"^[\s*#>_\"\u201c\u2018-]*"
# Nouns that stand for the text the model works on.
_TEXT_NOUN = (
    r"(?:sentence|text|input|original|passage|phrase|statement|paragraph|request|instruction|prompt|query|task"
    r"|meaning|wording|translation|paraphrase|summary|keywords?)s?"
)
_OBJECT = (
    rf"(?:(?:the|this|that|its|each|every|given|user{_APOS}s)\s+(?:[\w-]+\s+){{0,2}}?{_TEXT_NOUN}\b"
    r"|(?:it|this|that)\b(?=\s*(?:[.,:;!?]|$)|\s+(?:into|to|in|for|as|while|without|and|more|carefully|again)\b))"
)
# Verbs that only a model talking about its task uses on a text-like object.
_STUDY_VERB = (
    r"(?:understand|analy[sz]e|consider|examine|read|re-?read|look\s+at|review|check|identify|parse"
    r"|break\s+down|figure\s+out|think\s+about|focus\s+on|go\s+through|make\s+sure|start\s+with|begin\s+with)"
)
# Nouns that only name the product of a transformation (narrower than _TASK_WORD).
_PRODUCT_NOUN = (
    r"(?:paraphras\w*|rephras\w*|reword\w*|rewrit\w*|translat\w*|summar\w*|keywords?|expanded|version|rendition)"
)
# Verbs naming the transformations; the first group is used for nothing but that.
_TASK_VERB_BARE = r"(?:paraphras|rephras|reword|back-?translat)\w*"
_TASK_VERB_OBJ = r"(?:rewrite|translate|summari[sz]e|expand(?:\s+on)?|condense|shorten|restyle)"
_META_ACTION = rf"(?:{_TASK_VERB_BARE}|{_TASK_VERB_OBJ}\s+{_OBJECT}|{_STUDY_VERB}\s+{_OBJECT}|come\s+up\s+with\s+an?\b)"
_FIRST_PERSON_PLAN = (
    rf"i(?:\s+need\s+to|\s+have\s+to|\s+should|\s+must|{_APOS}ll(?:\s+need\s+to)?|\s+will(?:\s+need\s+to)?"
    rf"|{_APOS}m\s+going\s+to|\s+am\s+going\s+to|\s+want\s+to|{_APOS}d\s+like\s+to|\s+would\s+like\s+to)"
)

_REASONING_START = [
    # "Let me think", "Let me see,", "Let me paraphrase", "Let me analyse the sentence" (not "Let me know").
    rf"let\s+me\s+(?:first\s+|now\s+|just\s+)?(?:think\b|see(?:\s*[,.\u2026]|\s+(?:if|whether|how)\b)|{_META_ACTION})",
    # "Let's break this down", "Let's analyse the text" (not "Let's go to the beach").
    rf"let{_APOS}s\s+(?:first\s+|now\s+)?(?:think\b|break\s+(?:it|this|that)\s+down|see\s+(?:if|whether|how)\b"
    rf"|{_META_ACTION})",
    # "Okay, so", "Alright, let me", "Okay, the user wants", "Hmm, ..."
    rf"(?:okay|ok|alright|all\s+right)[,.!]?\s+(?:so\b|let\s+me\b|let{_APOS}s\b|i\s+need\b|i{_APOS}ll\b|i\s+will\b"
    r"|i\s+should\b|i\s+have\s+to\b|the\s+user\b|first\b)",
    r"hmm+\b",
    # "First, I need to understand the sentence", "First, let me", "First I'll paraphrase".
    rf"first(?:ly)?,?\s+(?:let\s+me|let{_APOS}s|{_FIRST_PERSON_PLAN}|i)\s+(?:first\s+)?(?:think\b|{_META_ACTION})",
    # "Step 1: identify the main clause" (not "Step 1: preheat the oven").
    r"step\s*(?:1|one)\s*[:.)\u2013-]\s*(?:\w+\s+){0,2}?(?:identify|understand|analy[sz]e|read|break|determine|parse"
    r"|look|consider|examine|translat|paraphras|rephras|rewrit|summari[sz]|expand|extract|figure)",
    # "I need to paraphrase", "I'll translate the sentence", "I'm going to rewrite it".
    rf"{_FIRST_PERSON_PLAN}\s+(?:now\s+|first\s+)?{_META_ACTION}",
    # "To paraphrase this sentence", "To translate the given text" (not "To summarize, ...").
    rf"to\s+(?:{_TASK_VERB_BARE}|{_TASK_VERB_OBJ})\s+(?:this|the\s+(?:given|following|original|provided|above)|"
    rf"the\s+{_TEXT_NOUN}\b)",
    # "The user wants me to", "The user is asking for a paraphrase", "The user's request".
    rf"the\s+user(?:\s+(?:wants|asked|asks|is\s+asking|has\s+asked|would\s+like|needs|requests|has\s+requested)\s+"
    rf"(?:me\b|(?:for\s+)?(?:a|an|the)\s+(?:\w+\s+)?{_PRODUCT_NOUN}|to\s+(?:have|get)\b|(?:me\s+)?to\s+"
    rf"(?:{_TASK_VERB_BARE}|{_TASK_VERB_OBJ}))|\s+(?:has\s+)?provided\b|{_APOS}s\s+(?:request|instruction|query"
    rf"|input|sentence|text|message)\b)",
    # A reasoning section title.
    r"(?:thinking|reasoning|thought\s+process|chain\s+of\s+thought)\s*:",
]
_REASONING_RES = [re.compile(_LEAD + pattern, re.IGNORECASE) for pattern in _REASONING_START]

# Words after "Sure!"/"Certainly," that show the reply is addressed to the requester.
_ASSISTANT_REPLY = (
    rf"(?:here\b|i{_APOS}d\s+be\s+(?:happy|glad)|i\s+would\s+be\s+(?:happy|glad)|happy\s+to\b|glad\s+to\b"
    rf"|i\s+can\s+(?:help|do\s+that)|i{_APOS}ll\s+(?:help|do\s+that|{_TASK_VERB_BARE}|{_TASK_VERB_OBJ})|below\b"
    rf"|let\s+me\b|no\s+problem\b|(?:this\s+is\s+)?(?:the|an?|my)\s+(?:[\w-]+\s+){{0,2}}?{_PRODUCT_NOUN}\b)"
)
_REFUSAL_OBJECT = (
    rf"(?:assist|comply|fulfil+|help\s+(?:you\s+)?with\s+(?:this|that|the|your)|{_TASK_VERB_BARE}"
    rf"|{_TASK_VERB_OBJ}\s+{_OBJECT}"
    rf"|(?:provide|generate|write|create)\s+(?:a|an|the|that|this)\s+(?:\w+\s+)?{_PRODUCT_NOUN}"
    rf"|process\s+(?:this|that|the|your)\s+request|complete\s+(?:this|that|the|your)\s+(?:task|request))"
)
_INSTRUCTION_START = [
    # "Sure! Here's...", "Certainly, I'd be happy to", "Of course. The paraphrase is" (not "Sure enough").
    rf"(?:sure(?:\s+thing)?|certainly|of\s+course|absolutely|no\s+problem|great)\s*[!,.:]\s*(?:{_ASSISTANT_REPLY}|$)",
    r"(?:sure(?:\s+thing)?|certainly|of\s+course|absolutely)\s*[!.]?\s*(?:\n|$)",
    # "Here is the paraphrase.", "Here's a more formal version" (not "Here is where we met.").
    rf"here\s*(?:is|are|{_APOS}s)\b[^.!?\n:]{{0,60}}?\b(?:{_PRODUCT_NOUN}|sentence|text|passage|attempt)\b",
    r"here\s+(?:you\s+go|it\s+is)\b",
    # Self-reference of an assistant.
    r"as\s+an?\s+(?:ai|language\s+model|large\s+language\s+model|assistant)\b",
    # Refusals: "I'm sorry, but I can't", "I cannot paraphrase this" (not "I'm sorry for your loss").
    rf"(?:i{_APOS}m|i\s+am)\s+(?:very\s+|so\s+)?sorry\b[^.!?\n]{{0,40}}?\b(?:can{_APOS}t|cannot|can\s+not|unable"
    r"|not\s+able|won['\u2019]t|as\s+an?\s+ai|language\s+model)",
    rf"(?:i|i{_APOS}m|i\s+am)\s+(?:cannot|can{_APOS}t|can\s+not|unable\s+to|not\s+able\s+to|won{_APOS}t)\s+"
    rf"{_REFUSAL_OBJECT}",
    # The prompt's input framing echoed back: "Original: ...", "Input text: ...".
    r"(?:original|source|input)(?:\s+(?:text|sentence|passage))?\s*:",
]
_INSTRUCTION_START_RES = [re.compile(_LEAD + pattern, re.IGNORECASE) for pattern in _INSTRUCTION_START]
# Instruction wording repeated anywhere in the answer.
_INSTRUCTION_ANYWHERE = [
    # An imperative at the start of a sentence: "Translate the following", "Rewrite the text in ...".
    rf"(?:^|[.!?:\n]\s*)(?:please\s+)?(?:{_TASK_VERB_BARE}|{_TASK_VERB_OBJ})\s+(?:the|this)\s+"
    r"(?:following|given|above|text|sentence|passage|input|paragraph)\b",
    # The same wording anywhere when it points at the prompt: "translate the following", "the text below".
    rf"\b(?:{_TASK_VERB_BARE}|{_TASK_VERB_OBJ})\s+the\s+following\b",
    r"\bthe\s+(?:text|sentence|passage)\s+below\b",
    r"\b(?:reply|respond|answer)\s+with\s+(?:[\w-]+\s+){0,3}?only\b",
    r"\b(?:output|return|write)\s+only\s+the\b",
    r"\bdo\s+not\s+(?:add|include)\s+(?:any\s+)?(?:explanations?|comments?|notes?|labels?)\b",
    r"\b(?:extract|list)\s+(?:the\s+)?(?:\d+\s+|most\s+important\s+)?keywords\b",
]
_INSTRUCTION_ANYWHERE_RES = [re.compile(pattern, re.IGNORECASE) for pattern in _INSTRUCTION_ANYWHERE]

_JSON_START_RE = re.compile(
    r"""^(?:\{\s*(?:["'}\[]|[A-Za-z_]\w*\s*:|$)|\[\s*(?:["'{\[\]]|$)|["'][\w\-]{1,40}["']\s*:)"""
)


def _fires(patterns: Sequence[re.Pattern[str]], text: str, source: str, *, anywhere: bool = False) -> bool:
    """Whether a pattern matches *text* but not *source*: wording the source has is content."""
    for pattern in patterns:
        find = pattern.search if anywhere else pattern.match
        if find(text) is not None and find(source) is None:
            return True
    return False


def _is_json_fragment(text: str) -> bool:
    if _JSON_START_RE.match(text):
        return True
    if text[0] not in "[{":
        return False
    try:
        value = json.loads(text)
    except ValueError:
        return False
    return isinstance(value, (dict, list))


def _is_reasoning_leak(text: str, source: str) -> bool:
    if _THINK_ANY_RE.search(text) is not None:
        return True
    return _fires(_REASONING_RES, text, source)


def _is_instruction_leak(text: str, source: str) -> bool:
    return _fires(_INSTRUCTION_START_RES, text, source) or _fires(
        _INSTRUCTION_ANYWHERE_RES, text, source, anywhere=True
    )


def _comparable(text: str) -> str:
    """Case-folded text with whitespace collapsed and surrounding punctuation removed."""
    collapsed = " ".join(text.casefold().split())
    start, end = 0, len(collapsed)
    while start < end and _is_punctuation_or_space(collapsed[start]):
        start += 1
    while end > start and _is_punctuation_or_space(collapsed[end - 1]):
        end -= 1
    return collapsed[start:end]


def _is_punctuation_or_space(ch: str) -> bool:
    return ch.isspace() or unicodedata.category(ch).startswith("P")


def _is_only_punctuation(text: str) -> bool:
    return all(_is_punctuation_or_space(ch) for ch in text)


# --------------------------------------------------------------------------------------------------
# Analysis
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OutputAnalysis:
    """Result of analysing one model answer.

    Attributes
    ----------
    text : str
        The cleaned output (:func:`clean_output`).
    error : ErrorType or None
        The item's single error: the first of ``all_errors`` in :data:`ERROR_PRECEDENCE`, or ``None``.
    all_errors : tuple of ErrorType
        Every check that fired, in precedence order.
    detected_language : str or None
        :func:`detect_language` of the cleaned output (restricted to the candidates, if any).
    edit_distance : float
        ``normalized_edit_distance(source, text)``.
    length_ratio : float
        ``word_count(text) / max(word_count(source), 1)``.
    """

    text: str
    error: ErrorType | None
    all_errors: tuple[ErrorType, ...]
    detected_language: str | None
    edit_distance: float
    length_ratio: float


def analyse_output(
    source: str,
    raw_output: str,
    *,
    expected_language: str | None,
    may_grow: bool = False,
    may_shrink: bool = False,
    must_shrink: bool = False,
    language_candidates: Sequence[str] | None = None,
) -> OutputAnalysis:
    """Clean a model answer and run every error check on it.

    Checks, in precedence order (see :class:`ErrorType`):

    ``empty``
        The cleaned output is empty.
    ``ellipsis``
        It has only punctuation ("...", "…", ". . .", "?").
        An ``empty`` or ``ellipsis`` output has no content to check further, so no other check runs.
    ``json_fragment``
        It is, or starts like, JSON: ``{"``, ``{}``, ``[{``, ``["``, ``{key:``, a quoted key followed by a
        colon (``"text": ...``), or any text that parses as a JSON object or array.
    ``reasoning_leak``
        A think tag is left, or it opens with first-person talk about the task ("Let me think",
        "Let's break this down", "Okay, so", "First, I need to understand the sentence", "Step 1:
        identify ...", "I need to paraphrase", "To paraphrase this sentence", "The user wants me to",
        "Hmm", "Reasoning:"). Ordinary sentences such as "Let the dough rest." or "Let's go home." do
        not match.
    ``instruction_leak``
        It opens with chat framing ("Sure! Here is ...", "Certainly, I'd be happy to", "Here's a more
        formal version", "Here you go", "As an AI", "I'm sorry, but I can't", "I cannot translate
        this", "Original: ...") or repeats instruction wording anywhere ("Paraphrase the following",
        "Translate the text below into", "the text below", "reply with ... only", "Do not add
        explanations", "List the keywords"). "Here is/Here's" counts only when the same sentence
        names the answer (a task word, "sentence", "text"...): "Here is where we met." is content.
        For both leak checks, wording that the source itself has at the same place is content, not
        a leak (a source starting "Let me know" may be paraphrased as "Let me know").
    ``identical``
        The output equals the source once case, whitespace and surrounding punctuation are
        normalised (for every transformation, translation included).
    ``wrong_language``
        *expected_language* is given and known to the identifier, the output has at least
        :data:`MIN_WORDS_FOR_LANGUAGE` words, detection is confident, and the detected language is
        another one (Norwegian Bokmål/Nynorsk and Croatian/Serbian/Bosnian count as the same).
    ``runaway``
        ``length_ratio > RUNAWAY_RATIO``, unless *may_grow*.
    ``truncated``
        ``length_ratio < TRUNCATED_RATIO``, unless *may_shrink*.
    ``summary_longer``
        *must_shrink* and the output has more words than the source.

    Parameters
    ----------
    source : str
        The text that was transformed.
    raw_output : str
        The model's raw answer.
    expected_language : str or None
        ISO 639-1 code the answer must be written in; ``None`` skips the language check.
    may_grow : bool
        The transformation may lengthen the text a lot (expansion): no ``runaway``.
    may_shrink : bool
        The transformation may shorten the text a lot (summarization, keywords): no ``truncated``.
        It is independent of *must_shrink*; a summarization usually sets both.
    must_shrink : bool
        The output must be shorter than the source (summarization): ``summary_longer`` applies.
    language_candidates : sequence of str, optional
        Languages the detection is restricted to (the expected language is always added). Restricting
        to the languages of the benchmark makes detection both more accurate and more often confident.

    Returns
    -------
    OutputAnalysis
    """
    text = clean_output(raw_output)
    source_words = word_count(source)
    output_words = word_count(text)
    length_ratio = output_words / max(source_words, 1)
    edit_distance = normalized_edit_distance(source, text)

    expected = _normalise_code(expected_language) if expected_language else None
    known = _labels_by_code()
    candidates: list[str] | None = None
    if language_candidates is not None:
        candidates = [code for code in map(_normalise_code, language_candidates) if code in known]
        if expected in known:
            candidates.append(expected)
        if not candidates:
            candidates = None
    detected = detect_language(text, candidates=candidates) if text else None

    fired: set[ErrorType] = set()
    if not text:
        fired.add(ErrorType.EMPTY)
    elif _is_only_punctuation(text):
        fired.add(ErrorType.ELLIPSIS)
    else:
        if _is_json_fragment(text):
            fired.add(ErrorType.JSON_FRAGMENT)
        if _is_reasoning_leak(text, source):
            fired.add(ErrorType.REASONING_LEAK)
        if _is_instruction_leak(text, source):
            fired.add(ErrorType.INSTRUCTION_LEAK)
        if _comparable(text) == _comparable(source):
            fired.add(ErrorType.IDENTICAL)
        if (
            expected is not None
            and expected in known
            and detected is not None
            and output_words >= MIN_WORDS_FOR_LANGUAGE
            and not _same_language(detected, expected)
        ):
            fired.add(ErrorType.WRONG_LANGUAGE)
        if length_ratio > RUNAWAY_RATIO and not may_grow:
            fired.add(ErrorType.RUNAWAY)
        if length_ratio < TRUNCATED_RATIO and not may_shrink:
            fired.add(ErrorType.TRUNCATED)
        if must_shrink and output_words > source_words:
            fired.add(ErrorType.SUMMARY_LONGER)

    all_errors = tuple(error for error in ERROR_PRECEDENCE if error in fired)
    return OutputAnalysis(
        text=text,
        error=all_errors[0] if all_errors else None,
        all_errors=all_errors,
        detected_language=detected,
        edit_distance=edit_distance,
        length_ratio=length_ratio,
    )


# --------------------------------------------------------------------------------------------------
# Summaries
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ErrorSummary:
    """Error rates over a set of items.

    Attributes
    ----------
    n_items : int
        Number of items.
    n_failed : int
        Items with an error (each counted once).
    total_rate : float
        ``n_failed / n_items`` (``0.0`` for no items).
    rates : dict of str to float
        For every :class:`ErrorType` value, the share of items whose single error it is; the rates
        add up to ``total_rate``.
    """

    n_items: int
    n_failed: int
    total_rate: float
    rates: dict[str, float]


def summarize_errors(errors: Iterable[ErrorType | str | None]) -> ErrorSummary:
    """Summarise the single errors of a set of items.

    Parameters
    ----------
    errors : iterable of ErrorType, str or None
        One entry per item: its error (an :class:`ErrorType` or its value), or ``None`` (or ``""``)
        for an item without error. An unknown string raises ``ValueError``.

    Returns
    -------
    ErrorSummary
    """
    counts = dict.fromkeys(ErrorType, 0)
    n_items = 0
    for error in errors:
        n_items += 1
        if error is None or error == "":
            continue
        counts[ErrorType(error)] += 1
    n_failed = sum(counts.values())
    rates = {error.value: (count / n_items if n_items else 0.0) for error, count in counts.items()}
    return ErrorSummary(
        n_items=n_items,
        n_failed=n_failed,
        total_rate=n_failed / n_items if n_items else 0.0,
        rates=rates,
    )
