"""Control items and the per-rater control check."""

import numpy as np

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
from annotation.design import StudyDesign


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
