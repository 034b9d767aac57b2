"""The pure helpers of ``benchmarks/judge_replay.py`` (issue 40, point 5): its vectorised replay of
the gate against the library's public decision, its simulated rater against a hand computation."""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import norm

from annotation.science.sequential import Settled
from annotation.science.variance_sequences import (
    bounded_settle,
    human_observations,
    prediction_powered_observations,
)

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "judge_replay.py"


@pytest.fixture(scope="module")
def replay():
    spec = importlib.util.spec_from_file_location("judge_replay", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["judge_replay"] = module  # dataclasses look their module up while the file runs
    spec.loader.exec_module(module)
    return module


def _expected_single_rating(centre: float, sd: float) -> float:
    """E[clip(round(centre + N(0, sd)), 1, 5)] summed over the five categories' probabilities."""
    edges = np.array([-np.inf, 1.5, 2.5, 3.5, 4.5, np.inf])
    probs = np.diff(norm.cdf((edges - centre) / sd))
    return float((np.arange(1, 6) * probs).sum())


@pytest.mark.parametrize("sd", [0.44, 0.9])
def test_simulated_rater_has_the_published_mean(replay, sd):
    means = np.array([1.3, 2.0, 3.5, 4.1, 4.9])
    centres = replay.latent_centres(means, sd)
    got = [_expected_single_rating(c, sd) for c in centres]
    assert got == pytest.approx(means, abs=1e-9)


def test_first_allowed_waits_for_items_and_raters(replay):
    raters = np.array(
        [
            [0, 0, 1, 1, 2] + [0] * 15,  # the third rater at the 5th item: the 10-item minimum binds
            [0] * 12 + [1, 2] + [0] * 6,  # the third rater at the 14th item
            [0, 1] * 10,  # never three raters
        ]
    )
    assert replay.first_allowed(raters).tolist() == [10, 14, 21]
    assert replay.first_allowed(raters, min_items=3).tolist() == [5, 14, 21]


def test_judge_scale_mapping_and_agreement(replay):
    assert replay.to_scale(np.array([0.0, 2.5, 5.0]), (1.0, 5.0)).tolist() == [1.0, 3.0, 5.0]
    assert replay.to_scale(np.array([0.0, 5.0]), (0.0, 4.0)).tolist() == [0.0, 4.0]
    judge = np.array([2.0, np.nan, 4.0, 3.0])
    assert replay.with_stand_in(judge, (1.0, 5.0)).tolist() == [2.0, 3.0, 4.0, 3.0]
    assert replay.with_stand_in(judge, (0.0, 4.0)).tolist() == [2.0, 2.0, 4.0, 3.0]
    agreement = replay.judge_agreement(judge, np.array([1.0, 5.0, 4.0, 4.0]))
    # pairs (2,1), (4,4), (3,4): bias (1 + 0 - 1) / 3, absolute errors (1 + 0 + 1) / 3
    assert (agreement.n, agreement.failures) == (4, 1)
    assert agreement.bias == pytest.approx(0.0)
    assert agreement.mae == pytest.approx(2 / 3)
    assert agreement.pearson == pytest.approx(np.corrcoef([2, 4, 3], [1, 4, 4])[0, 1])
    one_answer = replay.judge_agreement(np.array([3.4, 3.4, np.nan]), np.array([1.0, 5.0, 4.0]))
    assert np.isnan(one_answer.pearson)  # one answer: no correlation, not an error
    assert one_answer.bias == pytest.approx(0.4)  # (3.4 - 1 + 3.4 - 5) / 2


def test_pooled_within_sd_by_hand(replay):
    ratings = np.array([[1.0, 2.0, 3.0], [2.0, 2.0, 2.0]])  # variances 1 and 0
    assert replay.pooled_within_sd(ratings) == pytest.approx(np.sqrt(0.5))


@pytest.mark.parametrize("method", ["asymptotic", "betting"])
@pytest.mark.parametrize("judge", [False, True])
def test_vectorised_replay_matches_bounded_settle(replay, method, judge):
    """Each replayed row decides as ``bounded_settle`` does on the public observations of that row,
    with its raters and the 3-rater minimum."""
    rng = np.random.default_rng(7)
    n, rows, scale = 60, 25, (1.0, 5.0)
    item_means = np.clip(rng.normal(3.3, 0.8, n), 1, 5)
    judge_all = np.round(np.clip(item_means + rng.normal(0, 0.4, n), 1, 5), 1)
    order = np.argsort(rng.random((rows, n)), axis=1)
    human = np.clip(np.rint(item_means[order] + rng.normal(0, 0.6, (rows, n))), 1, 5)
    raters = rng.integers(0, 4, (rows, n))
    rep = replay.Replays(human, judge_all[order], raters, judge_all, float(item_means.mean()), scale)
    threshold = 3.0
    outcome = replay.replay_design(rep, threshold=threshold, judge=judge, method=method)
    for r in range(rows):
        if judge:
            obs = prediction_powered_observations(
                judge_all, judge_all[order[r]], human[r], scale=scale, sampling="without_replacement"
            )
        else:
            obs = human_observations(human[r], scale=scale, population=n)
        decision = bounded_settle(
            obs,
            threshold=threshold,
            alpha=replay.ALPHA,
            min_items=replay.MIN_ITEMS,
            raters=[str(x) for x in raters[r]],
            method=method,
        )
        settled = decision.state is not Settled.UNDECIDED
        assert bool(outcome.early[r]) == settled
        assert outcome.ratings[r] == decision.n
        if settled:
            assert bool(outcome.passed[r]) == (decision.state is Settled.PASS)
        else:
            assert bool(outcome.passed[r]) == (human[r].mean() >= threshold)
    assert outcome.early.any()
