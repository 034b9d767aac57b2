"""Error analysis of LLM rewrites (pure module).

Every transformed text goes through :func:`analyse_output`: it cleans the answer
(:func:`~transforms.cleaning.clean_output`), runs the error checks of the product spec in a fixed
precedence order and reports the first that fired as the item's single error.
:func:`summarize_errors` turns the errors of many items into rates.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from transforms.cleaning import clean_output
from transforms.language_id import (
    MIN_WORDS_FOR_LANGUAGE,
    detect_language,
    normalise_language_code,
    same_language,
    supported_languages,
)
from transforms.leak_patterns import (
    INSTRUCTION_ANYWHERE_RES,
    INSTRUCTION_START_RES,
    REASONING_START_RES,
    THINK_TAG_RE,
)
from transforms.text_metrics import normalized_edit_distance, word_count

__all__ = [
    "ERROR_PRECEDENCE",
    "output_errors",
    "RUNAWAY_RATIO",
    "SentenceType",
    "TRUNCATED_RATIO",
    "MEANING_CHANGE_LENGTH_SHARE",
    "MEANING_CHANGE_LENGTH_SLACK",
    "ErrorSummary",
    "ErrorType",
    "OutputAnalysis",
    "analyse_output",
    "sentence_type",
    "summarize_errors",
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
    SENTENCE_TYPE = "sentence_type"
    LENGTH_CHANGED = "length_changed"


#: Order in which errors are reported: the first one that applies is the item's single error.
ERROR_PRECEDENCE: tuple[ErrorType, ...] = tuple(ErrorType)

#: ``runaway`` fires when the output has more than this many times the words of the source.
RUNAWAY_RATIO = 5.0
#: ``truncated`` fires when the output has fewer than this share of the words of the source.
TRUNCATED_RATIO = 0.2
#: ``length_changed`` (meaning-changing rewrites) fires when the output's word count differs from the
#: source's by more than this share of the source's words, or by more than the slack below for short texts.
MEANING_CHANGE_LENGTH_SHARE = 0.5
MEANING_CHANGE_LENGTH_SLACK = 4

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
    if THINK_TAG_RE.search(text) is not None:
        return True
    return _fires(REASONING_START_RES, text, source)


def _is_instruction_leak(text: str, source: str) -> bool:
    return _fires(INSTRUCTION_START_RES, text, source) or _fires(INSTRUCTION_ANYWHERE_RES, text, source, anywhere=True)


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
# Sentence type (statement or question)
# --------------------------------------------------------------------------------------------------


class SentenceType(StrEnum):
    STATEMENT = "statement"
    QUESTION = "question"


# Question marks of the scripts the identifier knows: Latin "?", full-width "？" (Chinese, Japanese),
# Arabic/Persian/Urdu "؟", Ethiopic "፧", Greek U+037E. Two count only in their own language: a
# final ";" in Greek (NFC folds U+037E into it; elsewhere it is a semicolon) and a final "か" in
# Japanese (a question particle written with "。").
_QUESTION_MARKS = frozenset("?？؟፧;\u037e")
_STATEMENT_MARKS = frozenset(".!。！।॥۔…")
_CLOSERS = frozenset("\"'”’»›)]」』")
# Words that open a question in languages whose texts often come without a final question mark
# (search queries, forum titles). Only the first word is looked at, and only when the text has no
# final mark at all.
_QUESTION_OPENERS = {
    "en": frozenset(
        "what why how who whom whose when where which is are was were do does did can could would should "
        "isn't aren't wasn't weren't don't doesn't didn't can't couldn't won't wouldn't shouldn't".split()
    ),
    "de": frozenset(
        "was warum wieso weshalb wie wer wen wem wessen wann wo woher wohin welche welcher welches".split()
    ),
    "fr": frozenset("qu'est-ce pourquoi comment qui quand où quel quelle quels quelles est-ce".split()),
    # Spanish opens a question with "¿" (handled for every language); without it, the accented
    # interrogatives only ("como", "donde" open statements too).
    "es": frozenset("qué cómo quién quiénes cuándo dónde cuál cuáles cuánto cuánta cuántos cuántas".split()),
}


def sentence_type(text: str, language: str | None = None) -> SentenceType | None:
    """Whether *text* ends as a question or a statement; ``None`` when that cannot be told.

    The last sentence decides, by its final mark. A text that ends in a quotation whose last mark
    is a question mark ('She asked, "Is it raining?"') is reported speech as often as a question:
    ``None``. A text without a final mark is a question when its first word opens questions in
    *language* (English, German, French, Spanish), a statement when it does not, and ``None``
    in other languages.
    """
    stripped = text.rstrip()
    quoted = False
    while stripped and stripped[-1] in _CLOSERS:
        stripped, quoted = stripped[:-1].rstrip(), True
    if not stripped:
        return None
    last = stripped[-1]
    if last == ";" and language != "el":
        return None
    if last in _QUESTION_MARKS or (language == "ja" and stripped.endswith(("か。", "か"))):
        return None if quoted else SentenceType.QUESTION
    if last in _STATEMENT_MARKS:
        return SentenceType.STATEMENT
    if quoted:
        return None
    if stripped.startswith("¿"):
        return SentenceType.QUESTION
    openers = _QUESTION_OPENERS.get(language or "")
    if openers is None:
        return None
    words = stripped.split(maxsplit=1)
    first = words[0].casefold().lstrip("¡\"'“‘(") if words else ""
    return SentenceType.QUESTION if first in openers else SentenceType.STATEMENT


def _changes_sentence_type(source: str, text: str, language: str | None) -> bool:
    """A statement that became a question, or a question that became a statement (an answer
    included: a question followed by its answer ends as a statement)."""
    before, after = sentence_type(source, language), sentence_type(text, language)
    if before is None or after is None or before == after:
        return False
    if before is SentenceType.STATEMENT:
        # A statement that quotes or embeds a question may end as a question when rephrased.
        return not any(mark in source for mark in "?？؟")
    return True


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
    keep_sentence_type: bool = False,
    language_candidates: Sequence[str] | None = None,
    keep_length: bool = False,
) -> OutputAnalysis:
    """Clean a model answer and run every error check on it (:func:`output_errors` says which, in
    precedence order).

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
    keep_sentence_type : bool
        The transformation keeps the meaning in the same language (paraphrase, style change,
        length changes, backtranslation): ``sentence_type`` applies.
    language_candidates : sequence of str, optional
        Languages the detection is restricted to (the expected language is always added). Restricting
        to the languages of the benchmark makes detection both more accurate and more often confident.
    keep_length : bool
        The transformation changes the meaning with a small edit (the sensitivity axis):
        ``length_changed`` applies.

    Returns
    -------
    OutputAnalysis
    """
    text = clean_output(raw_output)
    expected = normalise_language_code(expected_language) if expected_language else None
    detected = detect_language(text, candidates=_detection_candidates(language_candidates, expected)) if text else None
    all_errors = output_errors(
        source,
        text,
        expected=expected,
        detected=detected,
        may_grow=may_grow,
        may_shrink=may_shrink,
        must_shrink=must_shrink,
        keep_sentence_type=keep_sentence_type,
        keep_length=keep_length,
    )
    return OutputAnalysis(
        text=text,
        error=all_errors[0] if all_errors else None,
        all_errors=all_errors,
        detected_language=detected,
        edit_distance=normalized_edit_distance(source, text),
        length_ratio=word_count(text) / max(word_count(source), 1),
    )


def _detection_candidates(language_candidates: Sequence[str] | None, expected: str | None) -> list[str] | None:
    """The languages the detection is restricted to: the candidates the identifier knows, and the
    expected language; None (every language) when there are none."""
    if language_candidates is None:
        return None
    known = supported_languages()
    candidates = [code for code in map(normalise_language_code, language_candidates) if code in known]
    if expected in known:
        candidates.append(expected)
    return candidates or None


def output_errors(
    source: str,
    text: str,
    *,
    expected: str | None,
    detected: str | None,
    may_grow: bool = False,
    may_shrink: bool = False,
    must_shrink: bool = False,
    keep_sentence_type: bool = False,
    keep_length: bool = False,
) -> tuple[ErrorType, ...]:
    """The errors of the cleaned output ``text`` of ``source``, in precedence order; ``expected``
    and ``detected`` are normalised language codes (the options: see :func:`analyse_output`).

    Checks, in precedence order (see :class:`ErrorType`):

    ``empty``
        The cleaned output is empty.
    ``ellipsis``
        It has only punctuation ("...", "…", ". . .", "?").
        An ``empty`` or ``ellipsis`` output has no content to check further, so no other check runs.
    ``json_fragment``
        It is, or starts like, a JSON object or array (or a quoted key followed by a colon).
    ``reasoning_leak``
        A think tag is left, or it opens with the model talking about its task
        (:data:`~transforms.leak_patterns.REASONING_START_RES`).
    ``instruction_leak``
        It opens with chat framing or a refusal, or repeats the prompt's instructions anywhere
        (:data:`~transforms.leak_patterns.INSTRUCTION_START_RES`, ``INSTRUCTION_ANYWHERE_RES``).
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
    ``sentence_type``
        *keep_sentence_type* and a statement became a question or a question a statement (an
        answered question, "Where is it? It is here.", ends as a statement): see
        :func:`sentence_type`, read in the expected language (else the detected one). Only for
        rewrites in the source's own language, where the marks of a question stay the same.
    ``length_changed``
        *keep_length* (a meaning-changing edit) and the output's word count differs from the
        source's by more than ``max(MEANING_CHANGE_LENGTH_SLACK, MEANING_CHANGE_LENGTH_SHARE ×
        source words)``: a rewrite that far from the source's length is no longer a small edit.
    """
    if not text:
        return (ErrorType.EMPTY,)
    if _is_only_punctuation(text):
        return (ErrorType.ELLIPSIS,)
    source_words, output_words = word_count(source), word_count(text)
    length_ratio = output_words / max(source_words, 1)
    checks = {
        ErrorType.JSON_FRAGMENT: _is_json_fragment(text),
        ErrorType.REASONING_LEAK: _is_reasoning_leak(text, source),
        ErrorType.INSTRUCTION_LEAK: _is_instruction_leak(text, source),
        ErrorType.IDENTICAL: _comparable(text) == _comparable(source),
        ErrorType.WRONG_LANGUAGE: (
            expected is not None
            and expected in supported_languages()
            and detected is not None
            and output_words >= MIN_WORDS_FOR_LANGUAGE
            and not same_language(detected, expected)
        ),
        ErrorType.RUNAWAY: length_ratio > RUNAWAY_RATIO and not may_grow,
        ErrorType.TRUNCATED: length_ratio < TRUNCATED_RATIO and not may_shrink,
        ErrorType.SUMMARY_LONGER: must_shrink and output_words > source_words,
        ErrorType.SENTENCE_TYPE: keep_sentence_type and _changes_sentence_type(source, text, expected or detected),
        ErrorType.LENGTH_CHANGED: keep_length and _length_changed(source_words, output_words),
    }
    return tuple(error for error in ERROR_PRECEDENCE if checks.get(error))


def _length_changed(source_words: int, output_words: int) -> bool:
    slack = max(MEANING_CHANGE_LENGTH_SLACK, MEANING_CHANGE_LENGTH_SHARE * source_words)
    return abs(output_words - source_words) > slack


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
