"""The acceptance gate."""

from hypothesis import given, settings
from hypothesis import strategies as st

from annotation.gating import GateState, RatingCoverage, gate_decide, gate_state_of, rating_coverage


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
