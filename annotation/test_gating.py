"""The acceptance gate."""

from hypothesis import given, settings
from hypothesis import strategies as st

from annotation.gating import gate_decide


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
