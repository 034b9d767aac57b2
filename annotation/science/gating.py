"""The acceptance gate of a transformation (pure module).

A gate has one of three states. It lacks ratings while fewer ratings count than the design
declares (items drawn × raters per item, for every question); otherwise it passes when every
question's mean rating (after rejections) is at least the declared threshold, every item rests on
at least two counted raters (unless the design declares a single-rater pilot, which the passed
gate then carries) and, where the design declares a minimum agreement, every question's AC2 lower
confidence bound reaches it; it fails when one of these does not hold. Only a passed gate may be
approved; a gate without enough ratings cannot be decided on (SPEC §4).
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
    thin_items: int = 0  # rated items with fewer than MIN_RATERS counted raters (question with the most)

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
    single_rater_pilot: bool = False  # passed on items with fewer than MIN_RATERS raters, as declared


# Counted raters an item needs for the gate to rest on more than one person's judgement.
MIN_RATERS = 2


def rating_coverage(
    raters_per_question: Mapping[str, Iterable[int]],
    *,
    items: int,
    raters_per_item: int,
    completed_only: bool = False,
) -> RatingCoverage:
    """``raters_per_question`` maps every question to the number of counted raters of each rated
    item; raters beyond ``raters_per_item`` on one item do not make up for another item. Items with
    fewer than ``MIN_RATERS`` counted raters are thin; with ``completed_only`` (adaptive designs,
    which decide on completed items only) only items with ``raters_per_item`` raters can be."""
    per_question = {question: list(counts) for question, counts in raters_per_question.items()}
    counted = min((sum(min(n, raters_per_item) for n in counts) for counts in per_question.values()), default=0)
    floor = raters_per_item if completed_only else 1
    thin = max(
        (sum(1 for n in counts if floor <= n < MIN_RATERS) for counts in per_question.values()),
        default=0,
    )
    return RatingCoverage(items=items, raters_per_item=raters_per_item, counted=counted, thin_items=thin)


def gate_decide(
    means: Mapping[str, float | None],
    *,
    threshold: float,
    coverage: RatingCoverage | None = None,
    settled: bool | None = None,
    single_rater_pilot: bool = False,
    min_ac2_lower: float | None = None,
    ac2_lower: Mapping[str, float | None] | None = None,
    too_few_raters: str = "",
) -> GateDecision:
    """``means`` maps every question of the study to its mean rating (None: no ratings);
    ``coverage`` (None: no declared requirement) says whether enough ratings count; ``settled``
    (adaptive designs: True/False once the sequential rule settled the transformation above/below
    the threshold, ``annotation.science.sequential``) decides instead of the means, without waiting for
    the ratings its withdrawn items would have had. Thin items (``coverage.thin_items``) keep the
    gate from passing unless ``single_rater_pilot``; ``min_ac2_lower`` (None: off) is checked on
    ``ac2_lower``, each question's AC2 lower confidence bound (None: undefined)."""
    if not means:
        raise ValueError("the gate needs at least one question")
    if settled is not None:
        reasons = [] if settled else ["settled below the threshold by the sequential rule (adaptive stopping)"]
        short = [too_few_raters] if too_few_raters else []
        return _decided(reasons + short, coverage, single_rater_pilot, _agreement_short(min_ac2_lower, ac2_lower))
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
    reasons += [too_few_raters] if too_few_raters else []
    return _decided(reasons, coverage, single_rater_pilot, _agreement_short(min_ac2_lower, ac2_lower))


def _agreement_short(minimum: float | None, lows: Mapping[str, float | None] | None) -> list[str]:
    if minimum is None:
        return []
    reasons = []
    for question, low in sorted((lows or {}).items()):
        if low is None:
            reasons.append(
                f"{question}: AC2 undefined (fewer than 2 items with 2 or more raters), but the design asks for a "
                f"lower confidence bound of at least {minimum:g}"
            )
        elif low < minimum:
            reasons.append(
                f"{question}: AC2 lower confidence bound {low:.3f} < {minimum:g} (the design's minimum agreement)"
            )
    return reasons


def _decided(
    reasons: list[str], coverage: RatingCoverage | None, pilot: bool, agreement_short: list[str]
) -> GateDecision:
    """The decision once enough ratings count: ``reasons`` so far, then thin items and agreement."""
    thin = coverage.thin_items if coverage is not None else 0
    if thin and not pilot:
        items = max(coverage.items, thin)
        reasons.append(
            f"fewer than {MIN_RATERS} counted raters on {thin} of {items} item{'s' if items != 1 else ''}: one "
            f"person's ratings decide and agreement cannot be measured; declare raters_per_item of at least "
            f"{MIN_RATERS} in a new study version, or declare the design a single-rater pilot (single_rater_pilot)"
        )
    reasons.extend(agreement_short)
    passed = not reasons
    return GateDecision(
        passed=passed,
        reasons=tuple(reasons),
        state=GateState.PASSED if passed else GateState.FAILED,
        single_rater_pilot=passed and bool(thin) and pilot,
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
