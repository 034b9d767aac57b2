"""Flag and rejection rules of the validation pipeline."""

from annotation.kinds import FlagRule, RejectionReason
from annotation.science.control_check import ControlStatus
from annotation.science.validation import (
    flags_for_rating,
    llm_estimate,
    rejection_reason,
    rescale,
)


def test_flag_rules_rescale_the_judge_and_reject_by_rule():
    assert rescale(2.5, source=(0, 5), target=(1, 5)) == 3.0
    assert llm_estimate([4.0, None, 5.0], judge_scale=(1, 5), question_scale=(1, 5)) == 4.5
    assert llm_estimate([None], judge_scale=(1, 5), question_scale=(1, 5)) is None
    hits = flags_for_rating(1, estimate=4.5, max_deviation=2, low_rating_max=2)
    assert [h.rule for h in hits] == [FlagRule.LLM_DEVIATION, FlagRule.LOW_RATING] and hits[0].deviation == 3.5
    assert flags_for_rating(3, estimate=5.0, max_deviation=2, low_rating_max=2) == []  # exactly 2: not more
    assert flags_for_rating(4, estimate=None, max_deviation=2, low_rating_max=2) == []
    assert (
        rejection_reason(control_status=ControlStatus.FAILED, confirmed_flags=0, max_confirmed_flags=3)
        == RejectionReason.FAILED_CONTROLS
    )
    assert (
        rejection_reason(control_status=ControlStatus.PASSED, confirmed_flags=3, max_confirmed_flags=3)
        == RejectionReason.CONFIRMED_DEVIANT
    )
    assert rejection_reason(control_status=ControlStatus.INSUFFICIENT, confirmed_flags=2, max_confirmed_flags=3) is None
