"""Word tokens and distances between texts (pure module).

Tokenisation (shared by :func:`word_count` and :func:`normalized_edit_distance`)
    Text is split on whitespace; punctuation stays attached to the word it touches ("sat." and
    "sat" are different tokens) and a chunk without any letter or digit (a lone dash, "...") is no
    word at all. In scripts written without spaces (Chinese, Japanese kana and kanji, Thai, Lao,
    Khmer, Myanmar) every letter is a word of its own, together with its combining marks and any
    punctuation that follows it, so length ratios stay meaningful for those languages.
    Tokens are compared case-sensitively.
"""

from __future__ import annotations

import re

from rapidfuzz.distance import Levenshtein

__all__ = ["normalized_edit_distance", "word_count"]

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
