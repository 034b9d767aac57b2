"""The acceptance gate."""

from hypothesis import given, settings
from hypothesis import strategies as st

from annotation.science.gating import GateState, RatingCoverage, gate_decide, gate_state_of, rating_coverage


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(st.sampled_from(["quality", "fluency"]), st.floats(1, 5), min_size=1),
    st.floats(1, 5),
    st.floats(0, 1),
)
def test_gate_is_monotone_in_scores(means, threshold, bump):
    before = gate_decide(means, threshold=threshold)
    after = gate_decide({q: m + bump for q, m in means.items()}, threshold=threshold)
    assert before.passed == all(m >= threshold for m in means.values())
    assert after.passed or not before.passed


def test_gate_fails_without_ratings():
    decision = gate_decide({"quality": 4.0, "fluency": None}, threshold=3)
    assert not decision.passed and decision.reasons == ("fluency: no ratings",)


def test_gate_has_three_states():
    means = {"quality": 4.0, "fluency": 3.5}
    full = RatingCoverage(items=4, raters_per_item=3, counted=12)
    assert gate_decide(means, threshold=3, coverage=full).state is GateState.PASSED
    failed = gate_decide({"quality": 4.0, "fluency": 2.5}, threshold=3, coverage=full)
    assert failed.state is GateState.FAILED and not failed.passed
    assert failed.reasons == ("fluency: mean 2.500 < 3",)
    short = gate_decide(means, threshold=3, coverage=RatingCoverage(items=4, raters_per_item=3, counted=7))
    assert short.state is GateState.NOT_ENOUGH_RATINGS and not short.passed
    assert short.reasons == ("not enough ratings: 5 more needed per question (4 items × 3 raters = 12, 7 count)",)
    none = gate_decide({"quality": None}, threshold=3, coverage=RatingCoverage(items=4, raters_per_item=3, counted=0))
    assert none.state is GateState.NOT_ENOUGH_RATINGS
    assert none.reasons[0].startswith("not enough ratings: 12 more needed") and none.reasons[1] == "quality: no ratings"


def test_coverage_counts_each_item_up_to_the_declared_raters():
    # Five raters on one item do not make up for an item nobody rated; the thinnest question counts.
    coverage = rating_coverage({"quality": [5, 2, 1], "fluency": [2, 2]}, items=4, raters_per_item=2)
    assert (coverage.required, coverage.counted, coverage.missing) == (8, 4, 4)
    assert rating_coverage({"quality": []}, items=3, raters_per_item=2).missing == 6


def test_state_of_evidence_stored_before_states_existed():
    assert gate_state_of({"passed": True, "reasons": []}) is GateState.PASSED
    assert gate_state_of({"passed": False, "reasons": ["quality: no ratings", "fluency: no ratings"]}) is (
        GateState.NOT_ENOUGH_RATINGS
    )
    assert gate_state_of({"passed": False, "reasons": ["fluency: mean 2.000 < 3"]}) is GateState.FAILED
    assert gate_state_of({"passed": False, "state": "not_enough_ratings"}) is GateState.NOT_ENOUGH_RATINGS


# --- Gates say what they rest on (issue 29) -------------------------------------------------

MEANS = {"quality": 4.0, "fluency": 4.0}


def test_one_rater_per_item_cannot_pass_unless_the_design_is_a_declared_pilot():
    single = rating_coverage({"quality": [1, 1, 1, 1], "fluency": [1, 1, 1, 1]}, items=4, raters_per_item=1)
    assert single.missing == 0 and single.thin_items == 4
    decision = gate_decide(MEANS, threshold=3, coverage=single)
    assert decision.state is GateState.FAILED and not decision.passed
    assert decision.reasons == (
        "fewer than 2 counted raters on 4 of 4 items: one person's ratings decide and agreement cannot be "
        "measured; declare raters_per_item of at least 2 in a new study version, or declare the design a "
        "single-rater pilot (single_rater_pilot)",
    )
    assert not decision.single_rater_pilot
    pilot = gate_decide(MEANS, threshold=3, coverage=single, single_rater_pilot=True)
    assert pilot.passed and pilot.state is GateState.PASSED and pilot.single_rater_pilot and not pilot.reasons
    # An adaptive rule that settled above the threshold on single ratings does not pass either.
    settled = gate_decide(MEANS, threshold=3, coverage=single, settled=True)
    assert not settled.passed and settled.reasons[0].startswith("fewer than 2 counted raters on 4 of 4 items")
    # A low mean still fails, and the reasons say both.
    low = gate_decide({"quality": 2.0, "fluency": 4.0}, threshold=3, coverage=single)
    assert low.reasons[0] == "quality: mean 2.000 < 3" and low.reasons[1].startswith("fewer than 2 counted")


def test_extra_raters_count_towards_two_per_item_and_a_pilot_with_two_is_no_pilot_pass():
    # One item of two has a second rater: the other still rests on one person.
    assert rating_coverage({"quality": [2, 1]}, items=2, raters_per_item=1).thin_items == 1
    two = rating_coverage({"quality": [2, 2], "fluency": [3, 2]}, items=2, raters_per_item=2)
    assert two.thin_items == 0
    both = gate_decide(MEANS, threshold=3, coverage=two, single_rater_pilot=True)
    assert both.passed and not both.single_rater_pilot
    # Adaptive designs decide on completed items only: a withdrawn item's lone rating is not thin.
    assert rating_coverage({"quality": [2, 1, 2]}, items=3, raters_per_item=2, completed_only=True).thin_items == 0


def test_an_optional_minimum_agreement_is_checked_on_ac2_s_lower_bound():
    full = RatingCoverage(items=40, raters_per_item=3, counted=120)
    lows = {"quality": 0.55, "fluency": 0.31}
    assert gate_decide(MEANS, threshold=3, coverage=full, ac2_lower=lows).passed  # off by default
    short = gate_decide(MEANS, threshold=3, coverage=full, min_ac2_lower=0.4, ac2_lower=lows)
    assert short.state is GateState.FAILED
    assert short.reasons == ("fluency: AC2 lower confidence bound 0.310 < 0.4 (the design's minimum agreement)",)
    undefined = gate_decide(MEANS, threshold=3, coverage=full, min_ac2_lower=0.4, ac2_lower={"quality": None})
    assert undefined.reasons == (
        "quality: AC2 undefined (fewer than 2 items with 2 or more raters), but the design asks for a lower "
        "confidence bound of at least 0.4",
    )
    assert gate_decide(MEANS, threshold=3, coverage=full, min_ac2_lower=0.3, ac2_lower=lows).passed
