"""The flag and rejection rules of the validation pipeline, as declared in a study design (pure).

- **LLM deviation**: the judge estimate (mean of the design's judges that answered), mapped
  linearly from the judge's scale onto the question's scale, differs from the rating by more
  than ``llm_flag_deviation`` points. No estimate, no flag.
- **Low rating**: the rating is at most ``low_rating_max``.
- **Rejection**: a rater is rejected when their control check failed, or when at least
  ``max_confirmed_flags`` of their flags were confirmed by a researcher ("repeatedly deviant").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from annotation.kinds import FlagRule, RejectionReason
from annotation.science.control_check import ControlStatus

ANNOTATOR_RULES = frozenset(
    {FlagRule.TOO_FAST, FlagRule.STRAIGHT_LINING, FlagRule.LOW_COMPETENCE, FlagRule.LOW_CAREFULNESS}
)


def rescale(value: float, *, source: tuple[float, float], target: tuple[float, float]) -> float:
    """Map ``value`` linearly from the ``source`` scale onto the ``target`` scale."""
    (s_low, s_high), (t_low, t_high) = source, target
    if s_high <= s_low:
        raise ValueError(f"empty source scale {source}")
    return t_low + (value - s_low) * (t_high - t_low) / (s_high - s_low)


@dataclass(frozen=True)
class FlagHit:
    rule: FlagRule
    estimate: float | None  # judge estimate on the question's scale (LLM rule only)
    deviation: float | None


def llm_estimate(
    scores: Sequence[float | None], *, judge_scale: tuple[float, float], question_scale: tuple[float, float]
) -> float | None:
    """Mean of the judges' parsed scores on the question's scale; None when no judge answered."""
    parsed = [s for s in scores if s is not None]
    if not parsed:
        return None
    mean = sum(parsed) / len(parsed)
    return rescale(mean, source=judge_scale, target=question_scale)


def flags_for_rating(value: int, *, estimate: float | None, max_deviation: float, low_rating_max: int) -> list[FlagHit]:
    """The rules a single rating of a real item breaks."""
    hits = []
    if estimate is not None and abs(value - estimate) > max_deviation:
        hits.append(FlagHit(FlagRule.LLM_DEVIATION, estimate=estimate, deviation=abs(value - estimate)))
    if value <= low_rating_max:
        hits.append(FlagHit(FlagRule.LOW_RATING, estimate=estimate, deviation=None))
    return hits


def rejection_reason(
    *, control_status: ControlStatus, confirmed_flags: int, max_confirmed_flags: int
) -> RejectionReason | None:
    """Why a rater must be rejected under the declared rules, or None."""
    if control_status == ControlStatus.FAILED:
        return RejectionReason.FAILED_CONTROLS
    if confirmed_flags >= max_confirmed_flags:
        return RejectionReason.CONFIRMED_DEVIANT
    return None
