"""Expected answers of control items and the per-rater control check (pure module).

Expected answers (:func:`expected_value`): easy positives expect the top of every question, except
fluency for keyword-shaped controls (a keyword list is not prose: honest raters differ on its
fluency) and for noisy ones (typos are not fluent, and how much they cost is a matter of taste).
A noisy easy positive is checked only up to ``NOISE_CHECKED_UP_TO`` percent of noise, where the
text still reads at a glance (one letter in ten); above it, whether the meaning survives is what
the study asks, so such a control is shown, keeping the real items' look, and checks nothing.
Easy negatives expect the bottom of the meaning questions only (inverse questions: the ends swap).

A rater passes when every expected control rating is within ``margin`` of its expected end, and
needs at least ``min_ratings`` such ratings to be checked at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from annotation.kinds import ItemKind
from annotation.science.design import Question

# A noisy easy positive's meaning is checked up to this severity (percent of the units changed).
NOISE_CHECKED_UP_TO = 10


def expected_value(kind: ItemKind, question: Question, *, keywords: bool = False, noise: int = 0) -> int | None:
    """The expected end of the scale for a control, or None when the question is not checked
    (fluency of a keyword list, of a text with ``noise`` percent of noise, or of an unrelated text;
    any question of an easy positive with more noise than ``NOISE_CHECKED_UP_TO``). An inverse
    question ("did the meaning change?", sensitivity studies) expects the other end: the bottom
    ("not changed") for a meaning-preserving easy positive, the top ("changed") for an unrelated
    easy negative."""
    if kind == ItemKind.EASY_POSITIVE:
        if noise > NOISE_CHECKED_UP_TO:
            return None  # whether so much noise keeps the meaning is the study's question
        if question.inverse:
            return question.low
        return question.high if question.meaning or not (keywords or noise) else None
    if kind == ItemKind.EASY_NEGATIVE:
        return question.high if question.inverse else question.low if question.meaning else None
    return None


class ControlStatus(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    INSUFFICIENT = "insufficient"  # too few control ratings to decide yet


@dataclass(frozen=True)
class ControlRating:
    expected: int
    value: int


@dataclass(frozen=True)
class ControlCheck:
    status: ControlStatus
    n_checked: int
    n_within: int
    misses: tuple[ControlRating, ...]

    @property
    def pass_rate(self) -> float | None:
        return self.n_within / self.n_checked if self.n_checked else None


def control_check(ratings: Sequence[ControlRating], *, margin: int, min_ratings: int) -> ControlCheck:
    """A rater's control check: any rating further than ``margin`` from its expected end fails."""
    misses = tuple(r for r in ratings if abs(r.value - r.expected) > margin)
    n = len(ratings)
    if misses:
        status = ControlStatus.FAILED
    elif n < min_ratings:
        status = ControlStatus.INSUFFICIENT
    else:
        status = ControlStatus.PASSED
    return ControlCheck(status=status, n_checked=n, n_within=n - len(misses), misses=misses)
