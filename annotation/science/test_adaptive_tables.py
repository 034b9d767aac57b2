"""The replay tables of the design form: their shape, their sanity, which design kind picks which,
and one row recomputed by a small simulation of its own (it shares no code with
benchmarks/gate_savings.py nor with annotation.science.variance_sequences)."""

from types import SimpleNamespace

import numpy as np
import pytest
from scipy.stats import norm

from annotation.science import adaptive_tables as tables
from annotation.science.adaptive_tables import adaptive_saving_table
from annotation.science.design import StudyDesign

DISTANCES = (0.0, 0.1, 0.25, 0.5, 0.75)
ALL_TABLES = {
    "ADAPTIVE": tables.ADAPTIVE_SAVING_BY_DISTANCE,
    "ADAPTIVE_GATE": tables.ADAPTIVE_GATE_SAVING_BY_DISTANCE,
    "ONE_RATER_PLUGIN": tables.ONE_RATER_PLUGIN_SAVING_BY_DISTANCE,
    "ONE_RATER_AGRAPA": tables.ONE_RATER_AGRAPA_SAVING_BY_DISTANCE,
    "ONE_RATER_ASYMPTOTIC": tables.ONE_RATER_ASYMPTOTIC_SAVING_BY_DISTANCE,
    "PREDICTION_POWERED": tables.PREDICTION_POWERED_SAVING_BY_DISTANCE,
    "PREDICTION_POWERED_WEAK": tables.PREDICTION_POWERED_WEAK_SAVING_BY_DISTANCE,
}


@pytest.mark.parametrize("name", sorted(ALL_TABLES))
def test_each_table_is_the_grid_with_savings_that_grow_with_the_distance(name):
    table = ALL_TABLES[name]
    assert tuple(row[0] for row in table) == DISTANCES
    assert all(len(row) == 3 and 0.0 <= row[1] <= 1.0 and 0.0 <= row[2] <= 1.0 for row in table)
    # at the threshold, below and above are the same replays
    assert table[0][1] == table[0][2]
    for column in (1, 2):
        saved = [row[column] for row in table]
        assert all(later >= earlier - 0.03 for earlier, later in zip(saved, saved[1:], strict=False)), (name, saved)
        assert saved[-1] > saved[0]


def test_one_rating_per_item_saves_more_than_two_and_a_good_judge_more_than_a_weak_one():
    def far(table):
        return table[-1][1] + table[-1][2]

    for name in ("ONE_RATER_PLUGIN", "ONE_RATER_AGRAPA", "ONE_RATER_ASYMPTOTIC", "PREDICTION_POWERED"):
        assert far(ALL_TABLES[name]) > far(tables.ADAPTIVE_GATE_SAVING_BY_DISTANCE)
    half = DISTANCES.index(0.5)
    strong, weak = tables.PREDICTION_POWERED_SAVING_BY_DISTANCE, tables.PREDICTION_POWERED_WEAK_SAVING_BY_DISTANCE
    assert strong[half][1] + strong[half][2] > weak[half][1] + weak[half][2]
    # the conditions of the shown (0.9) table quote the weaker judge's figure at distance 0.5
    weak_at_half = (weak[half][1] + weak[half][2]) / 2
    assert f"{weak_at_half:.1%} with correlation 0.5" in tables.PREDICTION_POWERED_SAVING_CONDITIONS


def _design(**fields):
    return SimpleNamespace(**fields)


def test_each_design_kind_picks_its_table():
    assert adaptive_saving_table(None) == (tables.ADAPTIVE_SAVING_BY_DISTANCE, tables.ADAPTIVE_SAVING_CONDITIONS)
    # a design of today's fields (before the one-rater fields exist): unchanged selection
    assert adaptive_saving_table(StudyDesign())[0] is tables.ADAPTIVE_SAVING_BY_DISTANCE
    assert adaptive_saving_table(_design(adaptive_gate_raters=0))[0] is tables.ADAPTIVE_SAVING_BY_DISTANCE
    gate2 = adaptive_saving_table(_design(adaptive_gate_raters=2))
    assert gate2 == (tables.ADAPTIVE_GATE_SAVING_BY_DISTANCE, tables.ADAPTIVE_GATE_SAVING_CONDITIONS)
    picks = {
        ("plugin", "human"): tables.ONE_RATER_PLUGIN_SAVING_BY_DISTANCE,
        ("agrapa", "human"): tables.ONE_RATER_AGRAPA_SAVING_BY_DISTANCE,
        ("asymptotic", "human"): tables.ONE_RATER_ASYMPTOTIC_SAVING_BY_DISTANCE,
        ("asymptotic", "prediction_powered"): tables.PREDICTION_POWERED_SAVING_BY_DISTANCE,
    }
    for (sequence, estimator), expected in picks.items():
        design = _design(adaptive_gate_raters=1, adaptive_sequence=sequence, gate_estimator=estimator)
        table, conditions = adaptive_saving_table(design)
        assert table is expected, (sequence, estimator)
        assert "first rater" in conditions
    # the fields' defaults where a design lacks them: today's sequence, human ratings only
    assert adaptive_saving_table(_design(adaptive_gate_raters=1))[0] is tables.ONE_RATER_PLUGIN_SAVING_BY_DISTANCE
    _, conditions = adaptive_saving_table(_design(adaptive_gate_raters=1, gate_estimator="prediction_powered"))
    assert "correlation with the true item means is 0.9" in conditions and "weaker judge saves less" in conditions


# --- one row recomputed ---------------------------------------------------------------------------
# The table's model, written out again from its conditions: a run of 1,000 outputs with latent item
# means c + u (u ~ N(0, 0.7)), a rating clip(round(latent + N(0, 0.9)), 1, 5), c set so that the
# outputs' expected ratings average 3 + d exactly; 100 outputs drawn without replacement; the gate
# reads one rating per item, as Waudby-Smith and Ramdas' draws without replacement recentred, with
# the asymptotic confidence sequence (Robbins' normal mixture with the empirical variance, tightest
# at 100 items); two questions, fail side at alpha/2 each, pass side at alpha; 20 of the 100 items,
# drawn before any rating, rated by all 3 raters. With 8 annotators 3 distinct raters are behind
# the first 10 items in all but a negligible share of studies, so the 10-item minimum is the one
# that binds and the simulation leaves raters out.

N, ITEMS, THRESHOLD, ALPHA, RATER_SD, ITEM_SD = 1000, 100, 3.0, 0.05, 0.9, 0.7


def _mean_rating(latent):
    # E[clip(round(latent + e), 1, 5)] = 1 + sum over the cuts k + 1/2 (k = 1..4) of P(latent + e > cut)
    return 1 + sum(norm.sf((k + 0.5 - latent) / RATER_SD) for k in range(1, 5))


def _centred_population(rng, target):
    u = rng.normal(0, ITEM_SD, N)
    low, high = -10.0, 10.0
    for _ in range(50):
        mid = (low + high) / 2
        low, high = (mid, high) if _mean_rating(mid + u).mean() < target else (low, mid)
    return (low + high) / 2 + u


def _robbins_radius(t, variance, alpha):
    rho2 = (-2 * np.log(alpha) + np.log(-2 * np.log(alpha) + 1)) / ITEMS
    return np.sqrt(variance) * np.sqrt(2 * (t * rho2 + 1) / (t**2 * rho2) * np.log(np.sqrt(t * rho2 + 1) / alpha))


def _first_events(y):
    """(first pass, first fail) item of one question's single ratings, np.inf where none."""
    t = np.arange(1, ITEMS + 1)
    before = np.concatenate(([0.0], np.cumsum(y)[:-1]))
    x = ((N - t + 1) * y + before) / N
    mean = np.cumsum(x) / t
    variance = np.maximum(np.cumsum(x**2) / t - mean**2, 0)
    passes = (mean - _robbins_radius(t, variance, ALPHA) > THRESHOLD) & (t >= 10)
    fails = (mean + _robbins_radius(t, variance, ALPHA / 2) < THRESHOLD) & (t >= 10)
    return (t[passes][0] if passes.any() else np.inf), (t[fails][0] if fails.any() else np.inf)


def _saved(rng, d, replays):
    saved = []
    for _ in range(replays):
        order = rng.permutation(N)[:ITEMS]
        events = []
        for _question in range(2):
            latent = _centred_population(rng, THRESHOLD + d)[order]
            y = np.clip(np.rint(latent + rng.normal(0, RATER_SD, ITEMS)), 1, 5)
            events.append(_first_events(y))
        first = [(min(p, f), p < f) for p, f in events]
        fail_at = min((n for n, passed in first if np.isfinite(n) and not passed), default=np.inf)
        pass_at = max(n for n, _ in first) if all(passed for _, passed in first) else np.inf
        n = int(min(fail_at, pass_at, ITEMS))
        overlap = np.zeros(ITEMS, dtype=bool)
        overlap[rng.permutation(ITEMS)[:20]] = True
        saved.append(1 - (n + 2 * overlap[:n].sum()) / (ITEMS * 3))
    return float(np.mean(saved))


def test_a_row_of_the_asymptotic_table_is_recomputed_by_an_independent_simulation():
    rng = np.random.default_rng(20261207)
    d, below, above = tables.ONE_RATER_ASYMPTOTIC_SAVING_BY_DISTANCE[-1]
    assert abs(_saved(rng, -d, 40) - below) <= 0.08
    assert abs(_saved(rng, d, 40) - above) <= 0.08
