"""The declared design of a study: round trip, hash, errors."""

import pytest

from annotation.science.design import DesignContext, DesignError, StudyDesign, design_implications, design_problems
from annotation.science.sequential import settle


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


# --- What a design can do with what is there (issue 20) --------------------------------------


def _fields(design, context):
    return [p.field for p in design_problems(design, context)]


def test_a_control_check_that_can_never_pass_is_refused():
    # The demo: 5 items, 1 control per batch of 5, a check that needs 2 control answers.
    # Even with only 3 annotators (each rating every item), an annotator meets 1 control.
    design = StudyDesign(items_per_transformation=5, batch_size=5, controls_per_batch=1, min_control_ratings=2)
    (problem,) = design_problems(design, DesignContext({"paraphrase": 5}))
    assert problem.field == "controls_per_batch"
    assert "meets 1 control" in problem.message and "needs 2" in problem.message
    # Two batches (6 items) give 2 controls: the check can pass.
    assert _fields(design.revised(items_per_transformation=6), DesignContext({"paraphrase": 6})) == []
    # 2 controls per batch suffice however many annotators there are: who is published comes
    # later, so more annotators (fewer items each) are a warning of the implications, not a refusal.
    wide = design.revised(controls_per_batch=2, min_control_ratings=3, items_per_transformation=10)
    assert _fields(wide, DesignContext({"paraphrase": 10}, annotators=6)) == []
    # 10 items x 3 raters over 6 annotators: 5 items each, 1 batch, 2 controls < 3.
    assert design_implications(wide, DesignContext({"paraphrase": 10}, annotators=6)).control_check_short
    assert not design_implications(wide, DesignContext({"paraphrase": 10}, annotators=3)).control_check_short
    # No check declared: nothing to refuse.
    assert _fields(design.revised(min_control_ratings=0), DesignContext({"paraphrase": 5})) == []


def test_raters_beyond_the_annotators_and_items_beyond_the_texts_are_refused():
    design = StudyDesign(items_per_transformation=20, raters_per_item=3)
    problems = design_problems(design, DesignContext({"paraphrase": 30, "summarization": 12}, annotators=2))
    assert [p.field for p in problems] == ["items_per_transformation", "raters_per_item"]
    assert "summarization has 12" in problems[0].message and "at most 12" in problems[0].message
    assert "only 2 annotator accounts" in problems[1].message
    # The annotator count is checked only when known (the API chooses annotators at publish).
    assert _fields(design.revised(items_per_transformation=12), DesignContext({"paraphrase": 30, "x": 12})) == []


def test_implications_count_items_loads_controls_and_ratings():
    # Worked by hand: 2 transformations x 10 items = 20 real items, 3 raters, 2 questions
    # (rewrite): 20 * 3 * 2 = 120 ratings. 60 item ratings over 4 annotators: 15 each; batches of
    # 6 give 3 batches, 2 controls each = 6 controls per annotator, 24 controls x 2 questions = 48.
    design = StudyDesign(items_per_transformation=10, raters_per_item=3, batch_size=6, controls_per_batch=2)
    implied = design_implications(design, DesignContext({"paraphrase": 40, "summarization": 10}, annotators=4))
    assert implied.drawn == {"paraphrase": 10, "summarization": 10}
    assert (implied.real_items, implied.ratings) == (20, 120)
    assert implied.items_per_annotator == (15, 15) and implied.controls_per_annotator == (6, 6)
    assert implied.control_ratings == 48
    assert implied.adaptive_best_items is None and implied.adaptive_floor_ratings == 0
    # 7 annotators: 60 // 7 = 8 and 9 items; 2 batches each, so 4 controls each; 28 x 2 = 56.
    uneven = design_implications(design, DesignContext({"paraphrase": 10, "summarization": 10}, annotators=7))
    assert uneven.items_per_annotator == (8, 9) and uneven.control_ratings == 56


def test_adaptive_implications_use_the_sequential_gate():
    design = StudyDesign(items_per_transformation=100, adaptive=True, kind="similarity")
    implied = design_implications(design, DesignContext({"paraphrase": 100}))
    # One question, every rating 5 on 0-5: the gate's own first settling point.
    best = next(n for n in range(1, 101) if settle([5.0] * n, threshold=3.0, alpha=0.05, scale=(0, 5)).state == "pass")
    assert implied.adaptive_best_items == best and 10 <= best < 100
    assert implied.adaptive_best_saving == 1 - best / 100
    assert implied.adaptive_floor_ratings == 10 * 3 * 1
    # Too few items to stop before the last: no saving promised.
    small = design_implications(design.revised(items_per_transformation=10), DesignContext({"paraphrase": 10}))
    assert small.adaptive_best_items is None and small.adaptive_best_saving is None


def test_later_gate_fields_keep_old_hashes_and_are_checked():
    design = StudyDesign(items_per_transformation=6, seed=3)
    assert "single_rater_pilot" not in design.to_dict() and "min_ac2_lower" not in design.to_dict()
    pilot = design.revised(single_rater_pilot=True, raters_per_item=1, min_ac2_lower=0.2)
    assert pilot.to_dict()["single_rater_pilot"] is True and pilot.to_dict()["min_ac2_lower"] == 0.2
    assert StudyDesign.from_dict(pilot.to_dict()) == pilot and pilot.content_hash != design.content_hash
    with pytest.raises(DesignError, match="single_rater_pilot must be true or false"):
        StudyDesign(single_rater_pilot="yes")
    with pytest.raises(DesignError, match="min_ac2_lower must be empty .off. or a number between -1 and 1"):
        StudyDesign(min_ac2_lower=1.5)
