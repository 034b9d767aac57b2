"""Seeded draws: target languages, sampling seeds and random keywords (pure module).

Every draw is a function of the run seed and the text's hash only, so the same run seed always
gives the same languages and LLM sampling seeds, independently of chunking, ordering or retries.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from core.hashing import sha256_json

MIN_RANDOM_KEYWORDS = 3
RANDOM_KEYWORD_SHARE = 0.3
_WORD = re.compile(r"\w+(?:[-']\w+)*", re.UNICODE)


def _rng(*parts: object) -> np.random.Generator:
    digest = sha256_json([str(p) for p in parts])
    return np.random.default_rng(int(digest[:16], 16))


def candidate_languages(languages: Sequence[str], source_language: str) -> list[str]:
    """The configured target languages minus the source language (a translation must change it)."""
    candidates = [code for code in dict.fromkeys(languages) if code != source_language.split("-")[0]]
    if not candidates:
        raise ValueError(
            f"no target language left: the set {list(languages)} holds only the source language "
            f"{source_language!r}; add at least one other language"
        )
    return candidates


def draw_run_language(*, seed: int, languages: Sequence[str], source_language: str) -> str:
    """One target language for a whole run (translation)."""
    candidates = candidate_languages(languages, source_language)
    return candidates[int(_rng("run-language", seed).integers(len(candidates)))]


def draw_text_language(*, seed: int, text_hash: str, languages: Sequence[str], source_language: str) -> str:
    """A target or pivot language for one text (cross-translation, backtranslation)."""
    candidates = candidate_languages(languages, source_language)
    return candidates[int(_rng("text-language", seed, text_hash).integers(len(candidates)))]


def sampling_seed(*, seed: int, text_hash: str, step: int, attempt: int) -> int:
    """The seed sent to the LLM for one call; a retry (attempt > 0) gets a new one."""
    return int(_rng("sampling", seed, text_hash, step, attempt).integers(0, 2**31 - 1))


@dataclass(frozen=True)
class KeywordSampling:
    """How the random-keyword baseline draws words: ``share`` of the text's words (at least
    ``minimum``, or all it has), from its distinct words or from every word token, joined by
    ``separator``. Words never carry punctuation; the separator decides whether the output does."""

    share: float
    minimum: int
    separator: str
    distinct: bool


#: Shiftlab's baseline: about 30% of the distinct words, at least three, as a comma-separated list.
DEFAULT_KEYWORD_SAMPLING = KeywordSampling(RANDOM_KEYWORD_SHARE, MIN_RANDOM_KEYWORDS, ", ", distinct=True)
#: The augmentation paper's baseline: its random keywords kept 16.1 of 58.2 words on average
#: (about 27.7%), with punctuation removed: word tokens joined by spaces.
PAPER_KEYWORD_SAMPLING = KeywordSampling(16.1 / 58.2, MIN_RANDOM_KEYWORDS, " ", distinct=False)
KEYWORD_SAMPLINGS = {"default": DEFAULT_KEYWORD_SAMPLING, "augmentation-paper": PAPER_KEYWORD_SAMPLING}


def random_keywords(
    text: str, *, seed: int, text_hash: str, sampling: KeywordSampling = DEFAULT_KEYWORD_SAMPLING
) -> str:
    """The non-LLM baseline: words of the text drawn at random (see :class:`KeywordSampling`),
    kept in their original order."""
    words = _WORD.findall(text)
    if sampling.distinct:
        words = list(dict.fromkeys(words))
    if not words:
        return ""
    k = min(len(words), max(sampling.minimum, round(sampling.share * len(words))))
    chosen = sorted(_rng("random-keywords", seed, text_hash).choice(len(words), size=k, replace=False))
    return sampling.separator.join(words[i] for i in chosen)
