"""Variance-adaptive confidence sequences and prediction-powered observations (pure)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from annotation.science.sequential import Settled, settle, settle_questions
from annotation.science.variance_sequences import (
    BoundedObservations,
    _log_capital,
    asymptotic_confidence_sequence,
    asymptotic_first_settlements,
    bounded_confidence_sequence,
    bounded_settle,
    bounded_settle_questions,
    first_settlements,
    human_observations,
    ppi_mean_interval,
    ppi_weight,
    prediction_powered_observations,
)

SCALE = (1.0, 5.0)


def _scale_bounds(n: int) -> tuple[np.ndarray, np.ndarray]:
    return np.full(n, SCALE[0]), np.full(n, SCALE[1])


def _ppi_rows_with_replacement(rng, *, runs: int, steps: int, population: int, bias: float, noise: float):
    """Runs of PPI observations drawn with replacement from one fixed population of human values
    (on 1-5) with a biased, noisy judge; returns (values, lower, upper, true mean)."""
    from annotation.science.variance_sequences import _ppi_rows

    h_pop = np.clip(np.rint(3.2 + rng.normal(0, 0.9, population)), 1, 5)
    g_pop = np.clip(h_pop + bias + rng.normal(0, noise, population), 1, 5)
    picks = rng.integers(0, population, (runs, steps))
    z, lo, hi, _ = _ppi_rows(
        np.broadcast_to(g_pop, (runs, population)),
        g_pop[picks],
        h_pop[picks],
        scale=SCALE,
        sampling="with_replacement",
        weight=None,
    )
    return z, lo, hi, float(h_pop.mean())


# --------------------------------------------------------------------------- parity


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("alpha", [0.1, 0.05])
def test_ppi_mean_interval_equals_ppi_py(seed, alpha):
    ppi_py = pytest.importorskip("ppi_py", reason="ppi-python (requirements-dev.txt) is not installed")
    rng = np.random.default_rng(seed)
    n, big = 40 + 30 * seed, 1379
    truth = rng.normal(3.2, 0.7, n + big)
    judge_all = np.clip(truth + 0.6 + rng.normal(0, 0.4, n + big), 1, 5)  # a biased judge
    human = np.clip(np.rint(truth[:n] + rng.normal(0, 0.5, n)), 1, 5)
    judge, unlabeled = judge_all[:n], judge_all[n:]
    ours = ppi_mean_interval(human, judge, unlabeled, alpha=alpha)
    lower, upper = ppi_py.ppi_mean_ci(human, judge, unlabeled, alpha=alpha)
    assert abs(ours.lower - float(np.squeeze(lower))) < 1e-9
    assert abs(ours.upper - float(np.squeeze(upper))) < 1e-9
    point = ppi_py.ppi_mean_pointestimate(human, judge, unlabeled)
    assert abs(ours.estimate - float(np.squeeze(point))) < 1e-9
    # the tuned weight is ppi_py's lhat: its interval with our weight given is the same interval
    lower_given, upper_given = ppi_py.ppi_mean_ci(human, judge, unlabeled, alpha=alpha, lam=ours.weight)
    assert abs(float(np.squeeze(lower_given)) - float(np.squeeze(lower))) < 1e-12
    assert abs(float(np.squeeze(upper_given)) - float(np.squeeze(upper))) < 1e-12
    # and with a weight fixed by hand (1: plain PPI; 0: the classical interval)
    for lam in (0.0, 0.3, 1.0):
        fixed = ppi_mean_interval(human, judge, unlabeled, alpha=alpha, weight=lam)
        lower, upper = ppi_py.ppi_mean_ci(human, judge, unlabeled, alpha=alpha, lam=lam)
        assert abs(fixed.lower - float(np.squeeze(lower))) < 1e-9
        assert abs(fixed.upper - float(np.squeeze(upper))) < 1e-9


def test_ppi_mean_interval_by_hand():
    human, judge, unlabeled = [3.0, 4.0, 5.0], [3.0, 4.0, 5.0], [3.0, 4.0, 5.0, 4.0]
    r = ppi_mean_interval(human, judge, unlabeled, alpha=0.05, weight=1.0)
    # a perfect judge: the rectifier has no variance, the imputed mean 4 has var 0.5 / 4
    assert r.estimate == pytest.approx(4.0) and r.std_error**2 == pytest.approx(0.125)
    assert r.upper - r.estimate == pytest.approx(1.959963984540054 * np.sqrt(0.125))
    # weight 0 is the classical normal interval on the human ratings alone
    classic = ppi_mean_interval([2.0, 4.0], [1.0, 1.0], [1.0], alpha=0.05, weight=0.0)
    assert classic.estimate == 3.0 and classic.std_error == pytest.approx(1.0 / np.sqrt(2))
    # lhat by hand: cov(h, g) / n over (1 + n/N) var(all judge scores, ddof 1)
    h, g, g_all = np.array([1.0, 2.0, 4.0]), np.array([2.0, 2.5, 5.0]), np.array([1.0, 3.0, 5.0, 2.0])
    cov = np.mean((h - h.mean()) * (g - g.mean()))
    var = np.var(np.concatenate((g, g_all)), ddof=1)
    assert float(ppi_weight(h, g, g_all)) == pytest.approx(min(cov / ((1 + 3 / 4) * var), 1.0))


def test_plugin_bet_on_the_scale_reduces_to_todays_settle():
    """On the plain scale, with today's plug-in bet, the generalised rule is today's rule."""
    rng = np.random.default_rng(3)
    for centre in (2.2, 2.9, 3.0, 3.4, 4.1):
        x = np.clip(np.rint(centre + rng.normal(0, 0.9, 120)), 1, 5)
        lo, hi = _scale_bounds(x.size)
        ours = bounded_settle(
            BoundedObservations(x, lo, hi, SCALE), threshold=3.0, alpha=0.05, strategy="plugin", alpha_pass=0.1
        )
        today = settle(x, threshold=3.0, alpha=0.05, scale=SCALE, alpha_pass=0.1)
        assert (ours.state, ours.n) == (today.state, today.n)
        assert ours.lower == pytest.approx(today.lower, abs=1e-3) and ours.upper == pytest.approx(today.upper, abs=1e-3)
    quality = np.clip(np.rint(3.6 + rng.normal(0, 0.8, 60)), 1, 5)
    fluency = np.clip(np.rint(3.9 + rng.normal(0, 0.8, 60)), 1, 5)
    pairs = (("quality", quality), ("fluency", fluency))
    obs = {q: BoundedObservations(v, *_scale_bounds(60), SCALE) for q, v in pairs}
    ours = bounded_settle_questions(obs, threshold=3.0, alpha=0.05, strategy="plugin")
    today = settle_questions(
        {"quality": quality, "fluency": fluency}, threshold=3.0, alpha=0.05, scales={"quality": SCALE, "fluency": SCALE}
    )
    assert (ours.state, ours.n, ours.alpha_per_question) == (today.state, today.n, today.alpha_per_question)


# --------------------------------------------------------------------------- validity by simulation


@pytest.mark.parametrize("strategy", ["agrapa", "plugin"])
def test_coverage_at_every_time_with_varying_bounds(strategy):
    """2,000 replays of 200 prediction-powered observations (a judge biased by +0.8, bounds that
    change with lam_t): the true mean leaves the sequence, at any time, in at most alpha of them."""
    rng = np.random.default_rng(40)
    alpha, runs = 0.1, 2000
    z, lo, hi, mu = _ppi_rows_with_replacement(rng, runs=runs, steps=200, population=400, bias=0.8, noise=0.5)
    assert not np.allclose(hi - lo, 4.0)  # the bounds do vary
    log_up, log_down = _log_capital(z, lo, hi, np.array([[mu]]), alpha=alpha, strategy=strategy, truncation=0.5)
    missed = ((log_up[..., 0] >= np.log(2 / alpha)) | (log_down[..., 0] >= np.log(2 / alpha))).any(axis=1)
    assert missed.mean() <= alpha + 3 * np.sqrt(alpha * (1 - alpha) / runs)


def test_coverage_without_replacement_of_a_finite_population():
    rng = np.random.default_rng(41)
    alpha, runs, population, steps = 0.1, 2000, 250, 200
    from annotation.science.variance_sequences import _ppi_rows

    h_pop = np.clip(np.rint(2.7 + rng.normal(0, 1.1, population)), 1, 5)
    g_pop = np.clip(h_pop - 1.0 + rng.normal(0, 0.6, population), 1, 5)
    order = np.argsort(rng.random((runs, population)), axis=1)[:, :steps]
    z, lo, hi, _ = _ppi_rows(
        np.broadcast_to(g_pop, (runs, population)),
        g_pop[order],
        h_pop[order],
        scale=SCALE,
        sampling="without_replacement",
        weight=None,
    )
    assert (z >= lo - 1e-9).all() and (z <= hi + 1e-9).all()
    log_up, log_down = _log_capital(
        z, lo, hi, np.array([[h_pop.mean()]]), alpha=alpha, strategy="agrapa", truncation=0.5
    )
    missed = ((log_up[..., 0] >= np.log(2 / alpha)) | (log_down[..., 0] >= np.log(2 / alpha))).any(axis=1)
    assert missed.mean() <= alpha + 3 * np.sqrt(alpha * (1 - alpha) / runs)


@pytest.mark.parametrize("judged", [False, True])
def test_error_at_the_threshold_stays_below_alpha(judged):
    """True mean exactly at the threshold: settling either way is an error, at most alpha/2 a side."""
    rng = np.random.default_rng(42)
    alpha, runs = 0.1, 2000
    values = np.array([1.0, 2.0, 3.0, 4.0, 5.0])  # symmetric around 3: mean exactly 3
    h_pop = np.repeat(values, 80)
    g_pop = np.clip(h_pop + 1.0 + rng.normal(0, 0.7, h_pop.size), 1, 5)
    picks = rng.integers(0, h_pop.size, (runs, 150))
    from annotation.science.variance_sequences import _ppi_rows

    z, lo, hi, _ = _ppi_rows(
        np.broadcast_to(g_pop, (runs, h_pop.size)),
        g_pop[picks],
        h_pop[picks],
        scale=SCALE,
        sampling="with_replacement",
        weight=None if judged else 0.0,
    )
    n, passed = first_settlements(z, lo, hi, threshold=3.0, alpha=alpha, min_items=1)
    bound = alpha / 2 + 3 * np.sqrt(alpha / 2 / runs)
    assert (np.isfinite(n) & passed).mean() <= bound and (np.isfinite(n) & ~passed).mean() <= bound


def test_asymptotic_sequence_error_at_the_threshold_after_ten_items():
    """The asymptotic sequence has no finite-sample guarantee; at 10+ items on ratings like a
    study's, its error at the threshold stays within alpha (measured, within simulation error)."""
    rng = np.random.default_rng(43)
    alpha, runs = 0.1, 2000
    x = 3 + rng.choice([-2.0, -1.0, 0.0, 1.0, 2.0], p=[0.1, 0.2, 0.4, 0.2, 0.1], size=(runs, 100))
    n, passed = asymptotic_first_settlements(x, threshold=3.0, alpha=alpha, min_items=10)
    assert np.isfinite(n).mean() <= alpha + 3 * np.sqrt(alpha * (1 - alpha) / runs)


def test_ppi_observations_are_unbiased_with_a_biased_judge():
    """Whatever the judge's bias or quality the observations' mean is the population's mean; a
    good judge lowers their variance, a useless one costs little."""
    rng = np.random.default_rng(44)
    population, runs, steps = 600, 3000, 60
    truth = 3.1 + rng.normal(0, 0.7, population)
    h_pop = np.clip(np.rint(truth), 1, 5)
    mu = h_pop.mean()
    spreads = {}
    for name, g_pop in {
        "good, biased +1.5": np.clip(truth + 1.5 + rng.normal(0, 0.2, population), 1, 5),
        "useless, biased -1": np.clip(2.0 + rng.normal(0, 0.7, population), 1, 5),
    }.items():
        picks = rng.integers(0, population, (runs, steps))
        for sampling in ("with_replacement", "without_replacement"):
            if sampling == "without_replacement":
                picks = np.argsort(rng.random((runs, population)), axis=1)[:, :steps]
            from annotation.science.variance_sequences import _ppi_rows

            z, _, _, lam = _ppi_rows(
                np.broadcast_to(g_pop, (runs, population)),
                g_pop[picks],
                h_pop[picks],
                scale=SCALE,
                sampling=sampling,
                weight=None,
            )
            se = z.mean(axis=1).std() / np.sqrt(runs)
            assert abs(z.mean() - mu) < 4 * se + 1e-12, (name, sampling)
            assert (lam >= 0).all() and (lam <= 1).all()
            spreads[(name, sampling)] = z[:, 10:].std()
    plain = h_pop.std()
    assert spreads[("good, biased +1.5", "with_replacement")] < 0.75 * plain
    assert spreads[("useless, biased -1", "with_replacement")] < 1.1 * plain


def test_variance_adaptive_bet_settles_sooner_on_a_quiet_sequence():
    """Half the spread, same mean: fewer observations to settle. (On a 1-5 scale with the threshold
    at 3 the truncation c / (3 - 1) caps both bets for such sequences, so aGRAPA and today's
    plug-in bet settle alike there: the range, not the bet, holds the betting sequence back.)"""
    rng = np.random.default_rng(45)
    runs, steps = 400, 300
    noisy = np.clip(3.4 + rng.choice([-1.6, 1.6], size=(runs, steps)), 1, 5)
    quiet = np.clip(3.4 + rng.choice([-0.8, 0.8], size=(runs, steps)), 1, 5)
    lo, hi = _scale_bounds(steps)
    needed = {}
    for name, x in (("noisy", noisy), ("quiet", quiet)):
        n, _ = first_settlements(x, lo, hi, threshold=3.0, alpha=0.05)
        needed[name] = float(np.median(np.where(np.isfinite(n), n, steps)))
        n, _ = asymptotic_first_settlements(x, threshold=3.0, alpha=0.05)
        needed["asymptotic " + name] = float(np.median(np.where(np.isfinite(n), n, steps)))
    assert needed["quiet"] < 0.5 * needed["noisy"]
    assert needed["asymptotic quiet"] < 0.5 * needed["asymptotic noisy"]
    assert needed["asymptotic quiet"] < needed["quiet"]


# --------------------------------------------------------------------------- properties and rules


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.floats(1, 5, allow_nan=False), min_size=5, max_size=40),
    st.integers(0, 10_000),
    st.sampled_from(["with_replacement", "without_replacement"]),
)
def test_ppi_observations_lie_within_their_bounds(judge_all, seed, sampling):
    rng = np.random.default_rng(seed)
    judge_all = np.array(judge_all)
    steps = int(rng.integers(1, judge_all.size + 1))
    picks = (
        rng.permutation(judge_all.size)[:steps]
        if sampling == "without_replacement"
        else rng.integers(0, judge_all.size, steps)
    )
    human = rng.integers(1, 6, steps).astype(float)
    obs = prediction_powered_observations(judge_all, judge_all[picks], human, scale=SCALE, sampling=sampling)
    assert (obs.values >= obs.lower - 1e-9).all() and (obs.values <= obs.upper + 1e-9).all()
    assert (obs.weights >= 0).all() and (obs.weights <= 1).all() and obs.weights[0] == 0
    # the bounds do not use the drawn item's judge score: changing it leaves them as they are
    changed = judge_all[picks].copy()
    changed[-1] = judge_all.min() if changed[-1] != judge_all.min() else judge_all.max()
    if sampling == "with_replacement":
        other = prediction_powered_observations(judge_all, changed, human, scale=SCALE, sampling=sampling)
        assert np.allclose(other.lower, obs.lower) and np.allclose(other.upper, obs.upper)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(1, 5), min_size=1, max_size=50), st.floats(-3, 3), st.sampled_from(["agrapa", "plugin"]))
def test_capital_moves_with_the_data_and_the_candidate(values, shift, strategy):
    """Shifting the data, its bounds and the candidate mean together leaves the capital as it is."""
    x = np.array(values, dtype=float)[None]
    lo, hi = np.ones_like(x), np.full_like(x, 5.0)
    m = np.array([[2.0, 3.0, 4.5]])
    a = _log_capital(x, lo, hi, m, alpha=0.05, strategy=strategy, truncation=0.5)
    b = _log_capital(x + shift, lo + shift, hi + shift, m + shift, alpha=0.05, strategy=strategy, truncation=0.5)
    assert np.allclose(a[0], b[0], atol=1e-9) and np.allclose(a[1], b[1], atol=1e-9)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(1, 5), min_size=1, max_size=50), st.sampled_from([0.01, 0.05, 0.2]))
def test_intervals_are_nested_on_the_scale_and_hold_the_data_mean_early(values, alpha):
    x = np.array(values, dtype=float)
    cs = bounded_confidence_sequence(BoundedObservations(x, *_scale_bounds(x.size), SCALE), alpha=alpha)
    assert np.all(cs.lower <= cs.upper + 1e-12) and np.all(cs.lower >= 1) and np.all(cs.upper <= 5)
    assert np.all(np.diff(cs.lower) >= -1e-12) and np.all(np.diff(cs.upper) <= 1e-12)
    asym = asymptotic_confidence_sequence(x, alpha=alpha)
    assert np.all(np.diff(asym.lower) >= -1e-12) and np.all(np.diff(asym.upper) <= 1e-12)


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.integers(1, 5), min_size=2, max_size=30),
    st.integers(0, 29),
    st.floats(0, 1),
    st.sampled_from(["with_replacement", "without_replacement"]),
)
def test_monotone_in_the_human_ratings(values, where, weight, sampling):
    """With a fixed judge weight, a higher human rating never lowers an observation, nor the
    fixed-n estimate."""
    human = np.array(values, dtype=float)
    judge_all = np.linspace(1, 5, 40)
    judge = judge_all[: human.size]
    raised = human.copy()
    raised[where % human.size] = 5.0
    a = prediction_powered_observations(judge_all, judge, human, scale=SCALE, sampling=sampling, weight=weight)
    b = prediction_powered_observations(judge_all, judge, raised, scale=SCALE, sampling=sampling, weight=weight)
    assert (b.values >= a.values - 1e-12).all()
    assert (
        ppi_mean_interval(raised, judge, judge_all, weight=weight).estimate
        >= ppi_mean_interval(human, judge, judge_all, weight=weight).estimate - 1e-12
    )


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(1, 5), min_size=1, max_size=50))
def test_a_smaller_alpha_gives_a_wider_sequence(values):
    """The aGRAPA bets do not depend on alpha: the sequence at a smaller alpha contains the other."""
    x = np.array(values, dtype=float)
    obs = BoundedObservations(x, *_scale_bounds(x.size), SCALE)
    wide, narrow = bounded_confidence_sequence(obs, alpha=0.01), bounded_confidence_sequence(obs, alpha=0.1)
    assert np.all(wide.lower <= narrow.lower + 1e-12) and np.all(wide.upper >= narrow.upper - 1e-12)


def test_a_decision_needs_three_distinct_raters():
    x = np.full(30, 5.0)
    obs = BoundedObservations(x, *_scale_bounds(30), SCALE)
    alone = bounded_settle(obs, threshold=3.0, alpha=0.05, raters=["ann"] * 30)
    assert alone.state is Settled.UNDECIDED
    two = bounded_settle(obs, threshold=3.0, alpha=0.05, raters=["ann"] * 20 + ["bob"] * 10)
    assert two.state is Settled.UNDECIDED
    rotated = bounded_settle(obs, threshold=3.0, alpha=0.05, raters=["ann", "bob", "cy"] * 10)
    late = bounded_settle(obs, threshold=3.0, alpha=0.05, raters=["ann"] * 24 + ["bob", "cy"] * 3)
    assert rotated.state is Settled.PASS and late.state is Settled.PASS and late.n >= 26 > rotated.n
    with pytest.raises(ValueError, match="rater behind each observation"):
        bounded_settle(obs, threshold=3.0, alpha=0.05, raters=["ann"])


def test_settles_far_from_the_threshold_and_reports_the_interval():
    rng = np.random.default_rng(46)
    high = np.clip(np.rint(4.3 + rng.normal(0, 0.6, 80)), 1, 5)
    for method in ("betting", "asymptotic"):
        d = bounded_settle(human_observations(high, scale=SCALE), threshold=3.0, alpha=0.05, method=method)
        assert d.state is Settled.PASS and d.n <= 30 and d.lower >= 3.0 - 1e-9
    low = bounded_settle(human_observations(6 - high, scale=SCALE, population=500), threshold=3.0, alpha=0.05)
    assert low.state is Settled.FAIL and low.upper <= 3.0 + 1e-9


def test_observations_validate_their_input():
    with pytest.raises(ValueError, match="within its bounds"):
        BoundedObservations(np.array([6.0]), np.array([1.0]), np.array([5.0]), SCALE)
    with pytest.raises(ValueError, match="distinct output"):
        prediction_powered_observations([3.0, 4.0], [3.0, 3.0], [2.0, 2.0], scale=SCALE, sampling="without_replacement")
    with pytest.raises(ValueError, match="come from judge_all"):
        prediction_powered_observations([3.0, 4.0], [5.0], [2.0], scale=SCALE)
    with pytest.raises(ValueError, match="weight must lie"):
        prediction_powered_observations([3.0, 4.0], [3.0], [2.0], scale=SCALE, weight=1.5)
    with pytest.raises(ValueError, match="method"):
        bounded_settle(human_observations([3.0] * 12, scale=SCALE), threshold=3.0, alpha=0.05, method="guess")
