"""The gate as the design declares it (``gate_sequence.gate_outcome``): who may decide, which
sequence, the prediction-powered estimate and what the evidence says it rests on. The statistics
underneath have their own tests (``test_sequential``, ``test_variance_sequences``); here the
observations are rebuilt by hand and the error rates re-measured by simulation."""

import numpy as np
import pytest

from annotation.science.gate_sequence import JudgeScores, decisions_allowed_from, gate_outcome
from annotation.science.observations import FixedSequence
from annotation.science.sequential import Settled, settle_questions

SCALES = {"fluency": (1.0, 5.0), "quality": (1.0, 5.0)}
ONE_QUESTION = {"quality": (1.0, 5.0)}


def _seen(means: dict[str, list[float]], raters: list[tuple[int, ...]]) -> FixedSequence:
    items = list(range(100, 100 + len(raters)))
    return FixedSequence(list(zip(items, raters, strict=True)), items, means)


def _gate(seen, **kwargs):
    options = dict(questions=SCALES, threshold=3.0, alpha=0.05, min_items=10, min_raters=3) | kwargs
    return gate_outcome(seen, **options)


def test_no_decision_before_enough_distinct_raters_even_on_clear_ratings():
    # 30 items, all 5s, all rated by the same two people: a plugin gate would pass at item 10.
    seen = _seen({"quality": [5.0] * 30, "fluency": [5.0] * 30}, [(1,), (2,)] * 15)
    alone = _gate(seen)
    assert alone.decision.state is Settled.UNDECIDED and alone.raters == 2 and alone.min_items == 31
    # A third person at item 25: the rule may decide from there (a stopping time), and does.
    raters = [(1,), (2,)] * 12 + [(3,)] + [(1,)] * 5
    third = _gate(_seen({"quality": [5.0] * 30, "fluency": [5.0] * 30}, raters))
    assert third.min_items == 25 and third.decision.state is Settled.PASS and third.decision.n == 25
    assert decisions_allowed_from([(1, (4, 5, 6))], min_items=10, min_raters=3) == 10


def test_the_plugin_human_gate_is_todays_rule():
    rng = np.random.default_rng(4)
    means = {q: np.clip(rng.normal(3.4, 0.8, 60).round(), 1, 5).tolist() for q in SCALES}
    seen = _seen(means, [(1, 2, 3)] * 60)
    outcome = _gate(seen)
    assert outcome.decision == settle_questions(means, threshold=3.0, alpha=0.05, scales=SCALES, min_items=10)
    # Settled: it rests on the items up to the one it settled at.
    assert outcome.decision.state is Settled.PASS
    assert outcome.basis() == f"{outcome.decision.n} human-rated items from 3 raters"


def _ppi_by_hand(population, judge, human, lo, hi):
    """PPI++ observations without replacement, written out item by item (not the library's
    vectorised rows): lam_t from the earlier pairs over the judge's variance over all N outputs,
    the judges' mean over the outputs not drawn yet, then the recentring of Waudby-Smith and Ramdas."""
    n_all = len(population)
    var_all = float(np.var(population))
    values = []
    for t in range(len(human)):
        if t >= 2:
            g, h = judge[:t], human[:t]
            cov = sum((a - sum(g) / t) * (b - sum(h) / t) for a, b in zip(g, h, strict=True)) / (t - 1)
            lam = min(max(cov / var_all, 0.0), 1.0)
        else:
            lam = 0.0
        remaining_mean = (sum(population) - sum(judge[:t])) / (n_all - t)
        z = lam * remaining_mean + human[t] - lam * judge[t]
        values.append(((n_all - t) * z + sum(human[:t])) / n_all)
    return values


def test_prediction_powered_observations_follow_the_items_order_and_the_formula():
    rng = np.random.default_rng(7)
    n_all, n = 200, 40
    truth = rng.normal(3.3, 0.7, n_all)
    population = np.clip(truth + rng.normal(0, 0.3, n_all), 1, 5)
    drawn = rng.permutation(n_all)[:n]
    human = np.clip((truth[drawn] + rng.normal(0, 0.5, n)).round(), 1, 5)
    items = list(range(100, 100 + n))
    judge = JudgeScores(
        population={"quality": population},
        items={item: {"quality": float(population[k])} for item, k in zip(items, drawn, strict=True)},
        fingerprint="judge-v1",
        label="judge default",
    )
    seen = FixedSequence([(i, (i % 7,)) for i in items], items, {"quality": human.tolist()})
    outcome = _gate(seen, questions=ONE_QUESTION, sequence="asymptotic", estimator="prediction_powered", judge=judge)
    expected = _ppi_by_hand(population.tolist(), population[drawn].tolist(), human.tolist(), 1, 5)
    np.testing.assert_allclose(outcome.observations["quality"].values, expected, atol=1e-12)
    agreement = outcome.judge["quality"]
    assert agreement.correlation == pytest.approx(np.corrcoef(human, population[drawn])[0, 1])
    assert agreement.bias == pytest.approx(float(np.mean(population[drawn] - human)))
    assert agreement.judge_mean == pytest.approx(population.mean())
    assert outcome.basis() == "judge default on 200 outputs, corrected by 40 human-rated items from 7 raters"
    assert outcome.to_dict()["judge"]["fingerprint"] == "judge-v1"


def test_the_prediction_powered_gate_waits_for_the_judge_and_a_changed_judge_voids_it():
    seen = _seen({"quality": [5.0] * 20, "fluency": [5.0] * 20}, [(k % 5,) for k in range(20)])
    waiting = _gate(seen, estimator="prediction_powered", judge=None, judge_waiting="waiting: 10 of 50 outputs scored")
    assert waiting.decision.state is Settled.UNDECIDED and "10 of 50" in waiting.summary()
    population = {q: np.full(50, 4.0) for q in SCALES}
    items = {i: {q: 4.0 for q in SCALES} for i in seen.items}
    judge = JudgeScores(population, items, fingerprint="new", label="judge default")
    changed = _gate(seen, estimator="prediction_powered", judge=judge, judge_started_with="old")
    assert changed.decision.state is Settled.UNDECIDED and "voids" in changed.waiting_for_judge
    same = _gate(seen, estimator="prediction_powered", judge=judge, judge_started_with="new", sequence="agrapa")
    assert same.decision.state is Settled.PASS


def _simulate(estimator: str, sequence: str, *, mean: float, studies: int, rng, judge_sd: float = 0.3, bias=0.0):
    """Wrong decisions and items used over simulated one-rating-per-item studies of 100 items drawn
    from 400 outputs whose true item means have the given mean (sd 0.6), raters' noise sd 0.9
    (ratings rounded to 1-5: their mean differs a little from ``mean``, measured on the population)."""
    wrong, used = 0, []
    for _ in range(studies):
        truth = np.clip(rng.normal(mean, 0.6, 400), 1, 5)
        ratings = np.clip((truth[:, None] + rng.normal(0, 0.9, (400, 1))).round(), 1, 5)[:, 0]
        target = float(ratings.mean())  # the gate's estimand: the population's human mean
        drawn = rng.permutation(400)[:100]
        judge_all = np.clip(truth + bias + rng.normal(0, judge_sd, 400), 1, 5)
        items = list(range(100))
        seen = FixedSequence([(i, (i % 8,)) for i in items], items, {"quality": ratings[drawn].tolist()})
        judge = JudgeScores(
            {"quality": judge_all}, {i: {"quality": judge_all[k]} for i, k in zip(items, drawn, strict=True)}, "j"
        )
        outcome = _gate(seen, questions=ONE_QUESTION, sequence=sequence, estimator=estimator, judge=judge)
        state = outcome.decision.state
        if state is not Settled.UNDECIDED:
            used.append(outcome.decision.n)
            wrong += (state is Settled.PASS) != (target >= 3.0)
        else:
            used.append(100)
    return wrong / studies, float(np.mean(used))


@pytest.mark.parametrize("sequence", ["agrapa", "asymptotic"])
def test_at_the_threshold_wrong_decisions_stay_within_alpha(sequence):
    rng = np.random.default_rng(11)
    for estimator in ("human", "prediction_powered"):
        error, _ = _simulate(estimator, sequence, mean=3.0, studies=150, rng=rng, bias=0.8)
        # alpha 0.05; with 150 studies a true 5% shows above 10% with probability < 1%
        assert error <= 0.10, (estimator, sequence, error)


def test_a_good_judge_settles_sooner_than_the_ratings_alone_and_a_useless_one_costs_little():
    rng = np.random.default_rng(12)
    _, human = _simulate("human", "asymptotic", mean=3.5, studies=80, rng=rng)
    _, judged = _simulate("prediction_powered", "asymptotic", mean=3.5, studies=80, rng=rng, judge_sd=0.2)
    _, useless = _simulate("prediction_powered", "asymptotic", mean=3.5, studies=80, rng=rng, judge_sd=5.0)
    assert judged < human and useless <= human * 1.15, (human, judged, useless)
