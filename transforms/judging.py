"""The LLM judge's prompts, score parsing and evaluation against gold ratings (pure module).

Three judgements (SPEC §3): semantic similarity of a sentence pair on 0–5 with one decimal, and
the quality (1–5) and fluency (1–5) of a transformed text next to its original.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from core.stats import bootstrap_ci, hodges_lehmann, spearman_rho
from corpora.task_types import TASK_SPECS, TaskType

# The datasets a judge is evaluated on: text pairs whose gold is a similarity score (STS, STR).
GOLD_SIMILARITY_TASKS: frozenset[TaskType] = frozenset(
    t for t, spec in TASK_SPECS.items() if spec.gold_field == "score"
)


class JudgeKind(StrEnum):
    SIMILARITY = "similarity"
    QUALITY = "quality"
    FLUENCY = "fluency"


SCALES: dict[JudgeKind, tuple[float, float]] = {
    JudgeKind.SIMILARITY: (0.0, 5.0),
    JudgeKind.QUALITY: (1.0, 5.0),
    JudgeKind.FLUENCY: (1.0, 5.0),
}

_JUDGE_SYSTEM = (
    "You are a meticulous annotator for a language research study. Answer with a single number and nothing else."
)

JUDGE_PROMPTS: dict[JudgeKind, tuple[str, str]] = {
    JudgeKind.SIMILARITY: (
        _JUDGE_SYSTEM,
        "How close in meaning are the two sentences below? Use this scale: 0 = unrelated topics; "
        "1 = different meaning, same topic; 2 = different meaning but some details shared; "
        "3 = roughly the same meaning with important details differing or missing; "
        "4 = mostly the same meaning, minor details differ; 5 = exactly the same meaning. "
        "Reply with one number between 0 and 5 with one decimal, e.g. 3.4.\n\n"
        "Sentence A: {text_a}\nSentence B: {text_b}",
    ),
    JudgeKind.QUALITY: (
        _JUDGE_SYSTEM,
        "An original text was rewritten by a system. Rate how well the rewrite keeps the meaning of "
        "the original (ignoring differences of language, length or style that the rewrite was asked "
        "to make): 1 = meaning lost or contradicted; 2 = mostly lost; 3 = partly kept; 4 = mostly "
        "kept; 5 = fully kept. Reply with one whole number from 1 to 5.\n\n"
        "Original: {text_a}\nRewrite: {text_b}",
    ),
    JudgeKind.FLUENCY: (
        _JUDGE_SYSTEM,
        "Rate how fluent and natural the rewritten text reads in its own language, regardless of "
        "the original: 1 = incomprehensible; 2 = many errors; 3 = understandable but awkward; "
        "4 = good with small slips; 5 = flawless and natural. Reply with one whole number from 1 to 5."
        "\n\nOriginal: {text_a}\nRewrite: {text_b}",
    ),
}

# Mentions of the scale itself ("0-5", "0 to 5", "out of 5", "/5") are not the answer.
_SCALE_MENTIONS = re.compile(
    r"(?:scale\s+(?:of|from)\s+)?\b\d+(?:\.\d+)?\s*(?:-|–|to)\s*\d+(?:\.\d+)?\b(?!\s*\.\d)"
    r"|(?:out\s+of|/)\s*\d+(?:\.\d+)?",
    re.IGNORECASE,
)
_NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(?:[.,]\d+)?")

WORD_BINS: tuple[tuple[str, int, float], ...] = (
    ("[0,5)", 0, 5),
    ("[5,10)", 5, 10),
    ("[10,15)", 10, 15),
    ("[15,20)", 15, 20),
    ("20+", 20, math.inf),
)
GOLD_BUCKETS: tuple[tuple[str, float, float], ...] = (
    ("[0,1)", 0.0, 1.0),
    ("[1,2)", 1.0, 2.0),
    ("[2,3)", 2.0, 3.0),
    ("[3,4)", 3.0, 4.0),
    ("[4,5]", 4.0, math.inf),
)


def parse_score(text: str, *, low: float, high: float) -> float | None:
    """The first number in ``text`` within [low, high], ignoring mentions of the scale; None when
    there is none (a parse failure, never a silent default)."""
    cleaned = _SCALE_MENTIONS.sub(" ", text or "")
    for match in _NUMBER.finditer(cleaned):
        value = float(match.group().replace(",", "."))
        if low <= value <= high:
            return value
    return None


def word_bin(n_words: int) -> str:
    """The word-count bin of a pair, by the word count of its longer sentence."""
    for label, start, stop in WORD_BINS:
        if start <= n_words < stop:
            return label
    raise ValueError(f"negative word count {n_words}")


def gold_bucket(score: float) -> str:
    for label, start, stop in GOLD_BUCKETS:
        if start <= score < stop:
            return label
    raise ValueError(f"gold score {score} is below 0")


@dataclass(frozen=True)
class BinResult:
    """A statistic over one bin: Spearman's rho for length bins, the MAE for gold buckets."""

    n: int
    value: float | None


@dataclass(frozen=True)
class JudgeEvaluation:
    """Agreement of judge scores with gold scores. Parse failures are left out of the
    correlations and the errors, and counted in ``parse_failure_rate``."""

    n: int
    n_parsed: int
    parse_failure_rate: float
    spearman: float | None
    by_length: dict[str, BinResult]
    mae_by_gold: dict[str, BinResult]
    mae: float | None


def evaluate_judge(
    gold: Sequence[float], predicted: Sequence[float | None], longer_word_counts: Sequence[int]
) -> JudgeEvaluation:
    """Spearman overall and per word-count bin (longer sentence), MAE per gold bucket."""
    if not len(gold) == len(predicted) == len(longer_word_counts):
        raise ValueError("gold, predicted and word counts must have the same length")
    rows = [(g, p, w) for g, p, w in zip(gold, predicted, longer_word_counts, strict=True) if p is not None]
    n = len(gold)
    by_length = {}
    for label, _, _ in WORD_BINS:
        subset = [(g, p) for g, p, w in rows if word_bin(w) == label]
        by_length[label] = BinResult(len(subset), spearman_rho([g for g, _ in subset], [p for _, p in subset]))
    mae_by_gold = {}
    for label, _, _ in GOLD_BUCKETS:
        errors = [abs(g - p) for g, p, _ in rows if gold_bucket(g) == label]
        mae_by_gold[label] = BinResult(len(errors), float(np.mean(errors)) if errors else None)
    return JudgeEvaluation(
        n=n,
        n_parsed=len(rows),
        parse_failure_rate=(n - len(rows)) / n if n else 0.0,
        spearman=spearman_rho([g for g, _, _ in rows], [p for _, p, _ in rows]),
        by_length=by_length,
        mae_by_gold=mae_by_gold,
        mae=float(np.mean([abs(g - p) for g, p, _ in rows])) if rows else None,
    )


# --- judged transformation runs ---------------------------------------------------------------


@dataclass(frozen=True)
class ScoreSummary:
    """Judge scores of one group of texts: mean ± SD and the Hodges–Lehmann estimate with its
    percentile-bootstrap interval. Parse failures are counted, never scored."""

    n: int
    n_parsed: int
    parse_failure_rate: float
    mean: float | None
    sd: float | None
    hodges_lehmann: float | None
    ci_low: float | None
    ci_high: float | None


def summarize_scores(
    scores: Sequence[float | None], *, seed: int, n_resamples: int = 1000, confidence: float = 0.95
) -> ScoreSummary:
    """Summarise judge scores; the bootstrap uses a generator seeded with ``seed`` alone, so the
    interval of a group does not depend on which other groups were summarised before it."""
    parsed = np.array([s for s in scores if s is not None], dtype=float)
    n = len(scores)
    if parsed.size == 0:
        return ScoreSummary(n, 0, 1.0 if n else 0.0, None, None, None, None, None)
    ci = bootstrap_ci(
        parsed, hodges_lehmann, rng=np.random.default_rng(seed), n_resamples=n_resamples, confidence=confidence
    )
    return ScoreSummary(
        n=n,
        n_parsed=int(parsed.size),
        parse_failure_rate=(n - parsed.size) / n,
        mean=float(parsed.mean()),
        sd=float(parsed.std(ddof=1)) if parsed.size > 1 else None,
        hodges_lehmann=ci.estimate,
        ci_low=ci.low,
        ci_high=ci.high,
    )


@dataclass(frozen=True)
class RunJudgeSummary:
    """Quality and fluency of a transformation run's successful texts, overall and per language of
    the transformed text (the run's target language, or the source language when it is kept)."""

    judge: str
    by_kind: dict[str, ScoreSummary]
    by_language: dict[str, dict[str, ScoreSummary]]


def summarize_run(
    *,
    judge: str,
    scores: dict[str, Sequence[float | None]],
    languages: Sequence[str],
    seed: int,
    n_resamples: int = 1000,
) -> RunJudgeSummary:
    """``scores`` maps each judge kind to one score (or None) per text, aligned with ``languages``."""
    for kind, values in scores.items():
        if len(values) != len(languages):
            raise ValueError(f"{kind}: {len(values)} scores for {len(languages)} texts")
    by_kind = {kind: summarize_scores(values, seed=seed, n_resamples=n_resamples) for kind, values in scores.items()}
    by_language = {}
    for language in sorted(set(languages)):
        rows = [i for i, code in enumerate(languages) if code == language]
        by_language[language] = {
            kind: summarize_scores([values[i] for i in rows], seed=seed, n_resamples=n_resamples)
            for kind, values in scores.items()
        }
    return RunJudgeSummary(judge=judge, by_kind=by_kind, by_language=by_language)


# --- degenerate judges ------------------------------------------------------------------------

DEGENERATE_MODAL_SHARE = 0.9


@dataclass(frozen=True)
class JudgeSpread:
    """How much a judge's scores vary over one group of texts. ``degenerate`` when one score is
    given to at least ``DEGENERATE_MODAL_SHARE`` of the scored texts (zero variance included): such
    a judge cannot tell texts apart, and its means, intervals and rankings say nothing."""

    n: int  # texts with a score (parse failures are not counted)
    modal_score: float | None
    modal_share: float | None
    zero_variance: bool
    degenerate: bool


def judge_spread(scores: Sequence[float | None], *, max_modal_share: float = DEGENERATE_MODAL_SHARE) -> JudgeSpread:
    """The modal score, its share and whether the scores are degenerate (see :class:`JudgeSpread`).
    Fewer than two scores are never called degenerate: one answer has no spread to judge."""
    if not 0 < max_modal_share <= 1:
        raise ValueError(f"max_modal_share must lie in (0, 1], got {max_modal_share}")
    parsed = [float(s) for s in scores if s is not None]
    if not parsed:
        return JudgeSpread(0, None, None, False, False)
    values, counts = np.unique(parsed, return_counts=True)
    top = int(np.argmax(counts))  # ties: the lowest score, as np.unique sorts
    share = float(counts[top] / len(parsed))
    zero_variance = len(parsed) > 1 and len(values) == 1
    degenerate = len(parsed) > 1 and share >= max_modal_share
    return JudgeSpread(len(parsed), float(values[top]), share, zero_variance, degenerate)


def degenerate_judges(scores: Mapping[tuple[str, str], Sequence[float | None]]) -> list[dict]:
    """The (judge, kind) groups of ``scores`` whose scores are degenerate, as rows a stored report
    keeps: judge, kind, n, modal score, modal share and whether the variance is zero."""
    rows = []
    for (judge, kind), values in scores.items():
        spread = judge_spread(values)
        if spread.degenerate:
            rows.append(
                {
                    "judge": judge,
                    "kind": kind,
                    "n": spread.n,
                    "modal_score": spread.modal_score,
                    "modal_share": spread.modal_share,
                    "zero_variance": spread.zero_variance,
                }
            )
    return rows


def score_counts(scores: Mapping[tuple[str, str], Sequence[float | None]]) -> list[dict]:
    """How often each (judge, kind) group of ``scores`` gave each score, as rows a stored report
    keeps for its distribution plots: judge, kind, counts (score as text -> number of texts, JSON
    keys being text) and the number of unparsed answers."""
    rows = []
    for (judge, kind), values in scores.items():
        parsed = [float(v) for v in values if v is not None]
        counts = Counter(parsed)
        rows.append(
            {
                "judge": judge,
                "kind": kind,
                "counts": {f"{score:g}": counts[score] for score in sorted(counts)},
                "n_unparsed": len(values) - len(parsed),
            }
        )
    return rows
