"""Word-level measures of texts that control items are matched and checked by (pure module): the
content words a keyword list must keep, keyword lists themselves, punctuation edits and word
overlap."""

from __future__ import annotations

import re

from transforms.text_metrics import word_count

_WORD = re.compile(r"\w+", re.UNICODE)

# Frequent English words of four or more letters that carry no content (the rest of a text's words of
# four or more letters count as its content words; shorter words never do).
_FUNCTION_WORDS = frozenset(
    "about also been being could does each from have into just more most much only over same some such than that "
    "their them then there these they this those very were what when where which while will with would your".split()
)


def _is_content(word: str) -> bool:
    return len(word) >= 4 and word.lower() not in _FUNCTION_WORDS


def keyword_list(text: str, n: int, *, prefer: str = "") -> str:
    """``text`` as a comma-separated list of ``n`` of its distinct words (at least one, or all it
    has), in their order in the text: the shape of the keyword transformations' outputs. Content
    words (:func:`content_words`) come first, then the others; within each, words that also occur
    in ``prefer`` first (a keyword list is made of its source's words)."""
    words = list(dict.fromkeys(_WORD.findall(text)))
    n = min(len(words), max(1, n))
    known = {w.lower() for w in _WORD.findall(prefer)}
    rank = sorted(range(len(words)), key=lambda k: (not _is_content(words[k]), words[k].lower() not in known, k))
    keep = sorted(rank[:n])
    return ", ".join(words[k] for k in keep)


def looks_like_keywords(text: str) -> bool:
    """Whether a text is a comma-separated list of words rather than prose: no sentence-final
    punctuation and a comma between (about) every two words."""
    stripped = text.strip()
    n = word_count(stripped)
    return n > 0 and not stripped.endswith((".", "!", "?", "。")) and stripped.count(",") >= max(1, (n - 1) // 2)


def content_words(text: str) -> int:
    """Distinct content words (four or more letters, not a frequent function word): what a keyword
    list that keeps the text's meaning must hold."""
    return len({w.lower() for w in _WORD.findall(text) if _is_content(w)})


def dropped_content_words(text: str, list_length: int) -> int:
    """Content words of ``text`` that a keyword list of ``list_length`` words cannot hold."""
    return max(0, content_words(text) - list_length)


def _word_list(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def is_punctuation_edit(a: str, b: str) -> bool:
    """Whether two texts have the same words (ignoring case and punctuation): not a rewrite."""
    return _word_list(a) == _word_list(b)


def word_overlap(a: str, b: str) -> float:
    """Jaccard overlap of the texts' lower-cased words (1 when both have none), as the
    detectability check measures it."""
    wa, wb = set(_word_list(a)), set(_word_list(b))
    union = wa | wb
    return len(wa & wb) / len(union) if union else 1.0


def content_overlap(a: str, b: str) -> float:
    """Jaccard overlap of the texts' lower-cased words of four or more letters (0 when both have none)."""
    wa = {w for w in _word_list(a) if len(w) >= 4}
    wb = {w for w in _word_list(b) if len(w) >= 4}
    union = wa | wb
    return len(wa & wb) / len(union) if union else 0.0
