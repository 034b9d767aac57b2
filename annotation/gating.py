"""The acceptance gate of a transformation (pure module).

A gate has one of three states. It lacks ratings while fewer ratings count than the design
declares (items drawn × raters per item, for every question); otherwise it passes when every
question's mean rating (after rejections) is at least the declared threshold, and fails when one
is not. Only a passed gate may be approved; a gate without enough ratings cannot be decided on.
Agreement is evidence shown beside the decision, not part of it: the design declares only the
mean threshold (SPEC §4).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum


class GateState(StrEnum):
    NOT_ENOUGH_RATINGS = "not_enough_ratings"
    PASSED = "passed"
    FAILED = "failed"

    @property
    def label(self) -> str:
        return {"not_enough_ratings": "not enough ratings"}.get(self.value, self.value)


@dataclass(frozen=True)
class RatingCoverage:
    """How many ratings per question the design asks for and how many of them count."""

    items: int  # items drawn for the transformation
    raters_per_item: int
    counted: int  # of the question with the fewest, each item counting up to raters per item

    @property
    def required(self) -> int:
        return self.items * self.raters_per_item

    @property
    def missing(self) -> int:
        return max(self.required - self.counted, 0)


@dataclass(frozen=True)
class GateDecision:
    passed: bool
    reasons: tuple[str, ...]  # why it did not pass; empty when it passed
    state: GateState


def rating_coverage(
    raters_per_question: Mapping[str, Iterable[int]], *, items: int, raters_per_item: int
) -> RatingCoverage:
    """``raters_per_question`` maps every question to the number of counted raters of each rated
    item; raters beyond ``raters_per_item`` on one item do not make up for another item."""
    counted = min((sum(min(n, raters_per_item) for n in counts) for counts in raters_per_question.values()), default=0)
    return RatingCoverage(items=items, raters_per_item=raters_per_item, counted=counted)


def gate_decide(
    means: Mapping[str, float | None],
    *,
    threshold: float,
    coverage: RatingCoverage | None = None,
    settled: bool | None = None,
) -> GateDecision:
    """``means`` maps every question of the study to its mean rating (None: no ratings);
    ``coverage`` (None: no declared requirement) says whether enough ratings count; ``settled``
    (adaptive designs: True/False once the sequential rule settled the transformation above/below
    the threshold, ``annotation.sequential``) decides instead of the means, without waiting for
    the ratings its withdrawn items would have had."""
    if not means:
        raise ValueError("the gate needs at least one question")
    if settled is not None:
        reasons = () if settled else ("settled below the threshold by the sequential rule (adaptive stopping)",)
        return GateDecision(passed=settled, reasons=reasons, state=GateState.PASSED if settled else GateState.FAILED)
    unrated = [f"{question}: no ratings" for question, mean in sorted(means.items()) if mean is None]
    if coverage is not None and coverage.missing:
        reasons = [
            f"not enough ratings: {coverage.missing} more needed per question ({coverage.items} items × "
            f"{coverage.raters_per_item} raters = {coverage.required}, {coverage.counted} count)",
            *unrated,
        ]
        return GateDecision(passed=False, reasons=tuple(reasons), state=GateState.NOT_ENOUGH_RATINGS)
    if unrated:
        return GateDecision(passed=False, reasons=tuple(unrated), state=GateState.NOT_ENOUGH_RATINGS)
    reasons = [
        f"{question}: mean {mean:.3f} < {threshold:g}" for question, mean in sorted(means.items()) if mean < threshold
    ]
    return GateDecision(
        passed=not reasons, reasons=tuple(reasons), state=GateState.FAILED if reasons else GateState.PASSED
    )


def gate_state_of(evidence: Mapping) -> GateState:
    """The state of a stored gate result; evidence stored before states existed has none, and
    there a gate that failed only for lack of ratings had no ratings at all."""
    if "state" in evidence:
        return GateState(evidence["state"])
    if evidence.get("passed"):
        return GateState.PASSED
    reasons = evidence.get("reasons", [])
    if reasons and all(reason.endswith(": no ratings") for reason in reasons):
        return GateState.NOT_ENOUGH_RATINGS
    return GateState.FAILED
