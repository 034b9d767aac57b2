"""Language identification of transformed texts (pure module).

Uses py3langid (Naive Bayes over byte n-grams, 140+ languages). Its packaged model is read once,
lazily, on the first call that needs it and kept in a module-level cache: the one exception to
"no I/O" here.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from py3langid.langid import MODEL_FILE, LanguageIdentifier

from transforms.text_metrics import word_count

__all__ = [
    "LANGUAGE_MIN_CONFIDENCE",
    "MIN_WORDS_FOR_LANGUAGE",
    "detect_language",
    "normalise_language_code",
    "same_language",
    "supported_languages",
]

#: Texts with fewer words than this are too short for language identification (no ``wrong_language``).
MIN_WORDS_FOR_LANGUAGE = 3
#: Probability the identifier must give its best language before the answer counts as confident.
#: Chosen on STS-B multi-mt (11 languages, ~31,000 sentences): at 0.7 fewer than 0.1 % of sentences
#: get a confident but wrong answer, while about 10 % (all 140+ languages) or 1 % (restricted to the
#: 11) are left undecided.
LANGUAGE_MIN_CONFIDENCE = 0.7

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


def normalise_language_code(code: str) -> str:
    """The identifier's code for a caller's code: lower case, region subtag dropped, aliases resolved
    ("pt-BR" -> "pt", "nb" -> "no")."""
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
    codes = frozenset(code for code in map(normalise_language_code, candidates) if code in known)
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


def same_language(a: str, b: str) -> bool:
    """Whether two codes name one language, counting close written variants as the same
    (Norwegian Bokmål/Nynorsk, Croatian/Serbian/Bosnian)."""
    return a == b or any(a in group and b in group for group in _COMPATIBLE)
