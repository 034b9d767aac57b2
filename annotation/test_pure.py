"""Pure modules of studies: design, sampling, controls, flag/rejection rules, gate, config export,
sync diff."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from annotation.config_export import config_render, config_seal, config_verify
from annotation.controls import (
    ControlRating,
    ControlStatus,
    ItemKind,
    control_check,
    control_pairs,
    expected_value,
    n_controls,
    near_copy,
)
from annotation.design import DesignError, StudyDesign
from annotation.gating import gate_decide
from annotation.sampling import Unit, allocate, stratified_sample
from annotation.sync_diff import SyncCounts, sync_diff
from annotation.validation import FlagRule, RejectionReason, flags_for_rating, llm_estimate, rejection_reason, rescale


def test_design_round_trip_hash_and_errors():
    design = StudyDesign(items_per_transformation=6, seed=3)
    assert StudyDesign.from_dict(design.to_dict()) == design
    assert design.revised(seed=4).content_hash != design.content_hash
    assert [q.name for q in design.questions] == ["quality", "fluency"]
    assert [q.values for q in StudyDesign(kind="similarity").questions] == [(0, 1, 2, 3, 4, 5)]
    with pytest.raises(DesignError, match="raters_per_item"):
        StudyDesign(raters_per_item=0)
    with pytest.raises(DesignError, match="kind must be one of"):
        StudyDesign(kind="stars")
    with pytest.raises(DesignError, match="unknown design field"):
        StudyDesign.from_dict({"raters": 3})


@settings(max_examples=80, deadline=None)
@given(
    st.dictionaries(st.text(min_size=1, max_size=3), st.integers(1, 40), min_size=1, max_size=6), st.integers(0, 200)
)
def test_allocation_is_proportional_and_exact(sizes, n):
    alloc = allocate(sizes, n)
    assert sum(alloc.values()) == min(n, sum(sizes.values()))
    assert all(0 <= alloc[s] <= sizes[s] for s in sizes)
    if n < sum(sizes.values()):
        for s, size in sizes.items():
            assert abs(alloc[s] - n * size / sum(sizes.values())) < 1 + 1e-9


def test_sampling_is_seeded_stratified_and_order_free():
    units = [Unit(i, "a" if i < 30 else "b") for i in range(40)]
    first = stratified_sample(units, 10, rng=np.random.default_rng(7))
    again = stratified_sample(list(reversed(units)), 10, rng=np.random.default_rng(7))
    other = stratified_sample(units, 10, rng=np.random.default_rng(8))
    assert first.keys == again.keys and first.keys != other.keys
    assert first.allocation == {"a": 8, "b": 2} and first.shortfall == 0 and len(set(first.keys)) == 10
    everything = stratified_sample(units, 50, rng=np.random.default_rng(7))
    assert len(everything.keys) == 40 and everything.shortfall == 10


def test_controls_alternate_and_look_like_real_pairs():
    sources = ["The cat sleeps on the sofa.", "Stock markets fell sharply today.", "Rain is expected tomorrow"]
    outputs = ["A cat is sleeping on the couch.", "Markets dropped a lot today.", "Tomorrow it will rain"]
    pairs = control_pairs(sources, outputs, 4, rng=np.random.default_rng(0))
    assert [p.kind for p in pairs] == [ItemKind.EASY_POSITIVE, ItemKind.EASY_NEGATIVE] * 2
    for pair in pairs:
        assert pair.text_a == sources[pair.source_index]
        if pair.kind == ItemKind.EASY_POSITIVE:
            assert pair.text_b == near_copy(pair.text_a) != pair.text_a
        else:
            assert pair.text_b in outputs and pair.text_b != outputs[pair.source_index]
    assert near_copy("Rain is expected tomorrow") == "Rain is expected tomorrow."
    assert (
        n_controls(41, batch_size=20, controls_per_batch=2) == 6
        and n_controls(5, batch_size=20, controls_per_batch=0) == 0
    )


def test_control_expectations_and_check():
    quality, fluency = StudyDesign().questions
    similarity = StudyDesign(kind="similarity").questions[0]
    assert expected_value(ItemKind.EASY_POSITIVE, quality) == 5 and expected_value(ItemKind.EASY_NEGATIVE, quality) == 1
    assert expected_value(ItemKind.EASY_NEGATIVE, fluency) is None  # an unrelated text can be fluent
    assert expected_value(ItemKind.EASY_NEGATIVE, similarity) == 0
    good = [ControlRating(5, 4), ControlRating(1, 2), ControlRating(5, 5)]
    assert control_check(good, margin=1, min_ratings=2).status == ControlStatus.PASSED
    bad = control_check(good + [ControlRating(1, 5)], margin=1, min_ratings=2)
    assert bad.status == ControlStatus.FAILED and bad.misses == (ControlRating(1, 5),) and bad.pass_rate == 0.75
    assert control_check(good[:1], margin=1, min_ratings=2).status == ControlStatus.INSUFFICIENT
    assert control_check([], margin=1, min_ratings=0).status == ControlStatus.PASSED


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


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_config_verification_catches_any_one_byte_edit(fmt):
    document = config_seal({"transformations": [{"name": "paraphrase", "mean": 4.25, "note": "déjà vu"}]})
    text = config_render(document, fmt)
    assert config_verify(text, fmt).ok
    for position in range(0, len(text), max(1, len(text) // 25)):
        for replacement in ("x", " ", "9"):
            if text[position] == replacement:
                continue
            tampered = text[:position] + replacement + text[position + 1 :]
            assert not config_verify(tampered, fmt).ok, (position, replacement)
    assert not config_verify(text + " ", fmt).ok


def test_sync_diff_creates_updates_keeps_and_withdraws():
    stored = {"same": 1, "edited": 2, "gone": 3}
    diff = sync_diff({"new": (5, "t1"), "same": (1, "t2"), "edited": (4, "t3")}, stored, is_current=int.__eq__)
    assert diff.create == (("new", 5, "t1"),) and diff.update == ((2, 4, "t3"),) and diff.unchanged == 1
    assert diff.withdraw == (("gone", 3),)
    assert diff.counts() == {"created": 1, "updated": 1, "withdrawn": 1, "unchanged": 1}
    already_withdrawn = sync_diff({}, stored, is_current=int.__eq__, is_live=lambda row: row != 3)
    assert [key for key, _ in already_withdrawn.withdraw] == ["same", "edited"]


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(st.integers(0, 9), st.integers(0, 3)),
    st.dictionaries(st.integers(0, 9), st.integers(0, 3)),
)
def test_sync_diff_partitions_the_answers_and_rows(submitted, stored):
    diff = sync_diff({k: (v, None) for k, v in submitted.items()}, stored, is_current=int.__eq__)
    assert {key for key, _, _ in diff.create} == submitted.keys() - stored.keys()
    assert {key for key, _ in diff.withdraw} == stored.keys() - submitted.keys()
    both = submitted.keys() & stored.keys()
    assert len(diff.update) == sum(submitted[k] != stored[k] for k in both)
    assert all(row != value for row, value, _ in diff.update)
    assert len(diff.create) + len(diff.update) + diff.unchanged == len(submitted)


def test_sync_counts_audit_only_what_happened():
    counts = SyncCounts(created=2, unchanged=0, withdrawn=1)
    assert counts.changed == 3 and counts.audit_payload() == {"created": 2, "withdrawn": 1}
