"""The grid replays the design form shows before any rating of an adaptive study (pure data): what
adaptive stopping saved, by how far the true mean lies from the acceptance threshold, for the two
kinds of adaptive study (every rater observed, or the gate on each item's first raters)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from annotation.studies.design import StudyDesign

# What adaptive stopping saved, by how far the true mean lies from the acceptance threshold: the
# grid replay of benchmarks/adaptive_gate.py (seed 0, 200 simulated studies per row, two questions
# both at that mean, threshold 3.0 on 1-5, alpha 0.05, at least 10 items, 100 items x 3 raters,
# five annotators at random paces with pull assignment and batches of 10; ratings in flight when it
# settles count as spent). (distance, saved when the mean is below, saved when above.) Shown before
# any rating; once a transformation has ratings, its own prediction replaces it
# (saving_forecast.forecast_saving). No single figure holds for every study.
ADAPTIVE_SAVING_BY_DISTANCE = (
    (0.0, 0.0, 0.0),
    (0.1, 0.012, 0.003),
    (0.25, 0.188, 0.054),
    (0.5, 0.538, 0.486),
    (0.75, 0.674, 0.650),
)
ADAPTIVE_SAVING_CONDITIONS = (
    "simulated studies, quality and fluency both at the mean shown, threshold 3 on 1–5, α 0.05, "
    "at least 10 items, 100 items × 3 raters, 5 annotators at random paces, pull assignment, batches of 10; "
    "ratings in flight when it settles count as spent"
)
# The same replay with ``adaptive_gate_raters`` = 2: the gate observes each item's first 2 raters,
# a third rates only where they disagree by more than 1 point (issue 29). Near the threshold the
# saving is the third raters not asked; the complete study's decision differed in 1.7% of the
# replays over the grid (7.5% at a mean exactly at the threshold, where it is a coin flip).
ADAPTIVE_GATE_SAVING_BY_DISTANCE = (
    (0.0, 0.316, 0.316),
    (0.1, 0.322, 0.317),
    (0.25, 0.445, 0.350),
    (0.5, 0.701, 0.644),
    (0.75, 0.783, 0.769),
)
ADAPTIVE_GATE_SAVING_CONDITIONS = (
    "simulated studies, quality and fluency both at the mean shown, threshold 3 on 1–5, α 0.05, "
    "at least 10 items, 100 items × 3 raters, the gate on each item's first 2 (a third rater only where they "
    "disagree by more than 1 point), 5 annotators at random paces, pull assignment, batches of 10; ratings in "
    "flight when it settles count as spent; noisier raters are contested more often and save less"
)


def adaptive_saving_table(design: StudyDesign | None) -> tuple[tuple[tuple[float, float, float], ...], str]:
    """The replay table (distance, saved below, saved above) and its conditions that the design form
    shows before any rating: the one of the design's kind of adaptive study."""
    if design is not None and design.adaptive_gate_raters:
        return ADAPTIVE_GATE_SAVING_BY_DISTANCE, ADAPTIVE_GATE_SAVING_CONDITIONS
    return ADAPTIVE_SAVING_BY_DISTANCE, ADAPTIVE_SAVING_CONDITIONS
