"""The grid replays the design form shows before any rating of an adaptive study (pure data): what
adaptive stopping saved, by how far the true mean lies from the acceptance threshold, for each kind
of adaptive study (every rater observed; the gate on each item's first 2 raters; the gate on each
item's first rater, with today's, the variance-adaptive or the asymptotic sequence, on the human
ratings alone or prediction-powered with the LLM judge on every output)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from annotation.science.design import StudyDesign

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


# The one-rater designs (``adaptive_gate_raters`` = 1, issue 40): the gate observes each item's
# first rater only, a share of the items drawn before any rating is rated by all raters (for
# agreement and the rater model), at least 3 distinct raters stand behind a decision. Regenerated
# by ``benchmarks/gate_savings.py --tables`` (seed 0, 4000 simulated studies per row; its own
# simulator, not benchmarks/adaptive_gate.py's: items observed in order, no ratings in flight, so
# these and the two tables above are not replays of one model). Per kind: ``adaptive_sequence``.
# The decisions differing from the complete study are mostly the end-of-study ones near the
# threshold (at most 1.6% of the replays at |distance| >= 0.25 for every kind).
ONE_RATER_PLUGIN_SAVING_BY_DISTANCE = (
    (0.0, 0.535, 0.535),
    (0.1, 0.543, 0.534),
    (0.25, 0.607, 0.552),
    (0.5, 0.807, 0.731),
    (0.75, 0.880, 0.855),
)
ONE_RATER_PLUGIN_SAVING_CONDITIONS = (
    "4000 simulated studies per mean, quality and fluency both at the mean shown, threshold 3 on 1–5, α "
    "0.05, at least 10 items and 3 distinct raters, against 100 items × 3 raters; the gate on each item's "
    "first rater with today's betting sequence (plug-in bet); 20% of the items, drawn before any rating, "
    "rated by all 3 (counted); 8 annotators at random paces, rater noise sd 0.9, item spread sd 0.7, no "
    "rater bias; items observed one after the other: ratings in flight when it settles are not counted "
    "(with 8 annotators at most 7 more); decisions differing from the complete study's: 5.4% over the "
    "grid, 20.3% at a mean exactly at the threshold"
)
ONE_RATER_AGRAPA_SAVING_BY_DISTANCE = (
    (0.0, 0.535, 0.535),
    (0.1, 0.541, 0.534),
    (0.25, 0.600, 0.547),
    (0.5, 0.793, 0.713),
    (0.75, 0.869, 0.841),
)
ONE_RATER_AGRAPA_SAVING_CONDITIONS = (
    "4000 simulated studies per mean, quality and fluency both at the mean shown, threshold 3 on 1–5, α "
    "0.05, at least 10 items and 3 distinct raters, against 100 items × 3 raters; the gate on each item's "
    "first rater with the variance-adaptive betting sequence (aGRAPA bet); 20% of the items, drawn before "
    "any rating, rated by all 3 (counted); 8 annotators at random paces, rater noise sd 0.9, item spread "
    "sd 0.7, no rater bias; items observed one after the other: ratings in flight when it settles are not "
    "counted (with 8 annotators at most 7 more); decisions differing from the complete study's: 5.4% over "
    "the grid, 20.3% at a mean exactly at the threshold"
)
ONE_RATER_ASYMPTOTIC_SAVING_BY_DISTANCE = (
    (0.0, 0.542, 0.542),
    (0.1, 0.562, 0.537),
    (0.25, 0.651, 0.558),
    (0.5, 0.859, 0.748),
    (0.75, 0.926, 0.879),
)
ONE_RATER_ASYMPTOTIC_SAVING_CONDITIONS = (
    "4000 simulated studies per mean, quality and fluency both at the mean shown, threshold 3 on 1–5, α "
    "0.05, at least 10 items and 3 distinct raters, against 100 items × 3 raters; the gate on each item's "
    "first rater with the asymptotic confidence sequence (valid as items grow, no finite-sample "
    "guarantee); 20% of the items, drawn before any rating, rated by all 3 (counted); 8 annotators at "
    "random paces, rater noise sd 0.9, item spread sd 0.7, no rater bias; items observed one after the "
    "other: ratings in flight when it settles are not counted (with 8 annotators at most 7 more); "
    "decisions differing from the complete study's: 5.4% over the grid, 20.4% at a mean exactly at the "
    "threshold"
)
# ``gate_estimator`` = "prediction_powered" (PPI++ on the judge's score of every output, the
# asymptotic sequence), shown for a judge correlated 0.9 with the true item means; the 0.5 judge's
# replay is kept to say in the conditions how much less a weaker judge saves.
PREDICTION_POWERED_SAVING_BY_DISTANCE = (
    (0.0, 0.542, 0.542),
    (0.1, 0.563, 0.538),
    (0.25, 0.683, 0.572),
    (0.5, 0.881, 0.794),
    (0.75, 0.933, 0.897),
)
PREDICTION_POWERED_SAVING_CONDITIONS = (
    "4000 simulated studies per mean, quality and fluency both at the mean shown, threshold 3 on 1–5, α "
    "0.05, at least 10 items and 3 distinct raters, against 100 items × 3 raters; the gate on each item's "
    "first rater with the asymptotic confidence sequence (valid as items grow, no finite-sample "
    "guarantee), prediction-powered (PPI++) with an LLM judge on all 1,000 outputs of the run whose "
    "correlation with the true item means is 0.9 (no judge bias); a weaker judge saves less: at distance "
    "0.5, 80.7% with correlation 0.5 against 83.8% (mean of below and above); 20% of the items, drawn "
    "before any rating, rated by all 3 (counted); 8 annotators at random paces, rater noise sd 0.9, item "
    "spread sd 0.7, no rater bias; items observed one after the other: ratings in flight when it settles "
    "are not counted (with 8 annotators at most 7 more); decisions differing from the complete study's: "
    "6.6% over the grid, 27.3% at a mean exactly at the threshold"
)
PREDICTION_POWERED_WEAK_SAVING_BY_DISTANCE = (
    (0.0, 0.542, 0.542),
    (0.1, 0.561, 0.537),
    (0.25, 0.654, 0.558),
    (0.5, 0.860, 0.754),
    (0.75, 0.925, 0.879),
)
PREDICTION_POWERED_WEAK_SAVING_CONDITIONS = (
    "4000 simulated studies per mean, quality and fluency both at the mean shown, threshold 3 on 1–5, α "
    "0.05, at least 10 items and 3 distinct raters, against 100 items × 3 raters; the gate on each item's "
    "first rater with the asymptotic confidence sequence (valid as items grow, no finite-sample "
    "guarantee), prediction-powered (PPI++) with an LLM judge on all 1,000 outputs of the run whose "
    "correlation with the true item means is 0.5 (no judge bias); 20% of the items, drawn before any "
    "rating, rated by all 3 (counted); 8 annotators at random paces, rater noise sd 0.9, item spread sd "
    "0.7, no rater bias; items observed one after the other: ratings in flight when it settles are not "
    "counted (with 8 annotators at most 7 more); decisions differing from the complete study's: 5.8% over "
    "the grid, 22.5% at a mean exactly at the threshold"
)
ONE_RATER_TABLES = {
    "plugin": (ONE_RATER_PLUGIN_SAVING_BY_DISTANCE, ONE_RATER_PLUGIN_SAVING_CONDITIONS),
    "agrapa": (ONE_RATER_AGRAPA_SAVING_BY_DISTANCE, ONE_RATER_AGRAPA_SAVING_CONDITIONS),
    "asymptotic": (ONE_RATER_ASYMPTOTIC_SAVING_BY_DISTANCE, ONE_RATER_ASYMPTOTIC_SAVING_CONDITIONS),
}


def adaptive_saving_table(design: StudyDesign | None) -> tuple[tuple[tuple[float, float, float], ...], str]:
    """The replay table (distance, saved below, saved above) and its conditions that the design form
    shows before any rating: the one of the design's kind of adaptive study.

    The one-rater kinds are read with ``getattr`` and the design's defaults (``adaptive_sequence``
    "plugin", ``gate_estimator`` "human"), so a design from before those fields picks as it did."""
    gate_raters = getattr(design, "adaptive_gate_raters", 0) if design is not None else 0
    if gate_raters == 1:
        if getattr(design, "gate_estimator", "human") == "prediction_powered":
            return PREDICTION_POWERED_SAVING_BY_DISTANCE, PREDICTION_POWERED_SAVING_CONDITIONS
        return ONE_RATER_TABLES[getattr(design, "adaptive_sequence", "plugin")]
    if gate_raters:
        return ADAPTIVE_GATE_SAVING_BY_DISTANCE, ADAPTIVE_GATE_SAVING_CONDITIONS
    return ADAPTIVE_SAVING_BY_DISTANCE, ADAPTIVE_SAVING_CONDITIONS
