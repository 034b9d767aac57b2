"""Human baselines (pure): scores against scipy/sklearn/statsmodels, intervals and agreement
against their reference implementations, and the "same evaluator" property (a rater answering
exactly what a model predicts gets the model's score)."""

from __future__ import annotations

import math
from itertools import combinations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as scipy_stats
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import adjusted_rand_score, v_measure_score
from statsmodels.stats.inter_rater import fleiss_kappa as statsmodels_fleiss_kappa
from statsmodels.stats.proportion import proportion_confint

from annotation.baselines.baseline_tasks import BASELINE_TASKS
from core.stats import fisher_z_interval, wilson_interval
from evaluation.baseline_predictions import MODEL_SCORINGS, model_predictions, score_model_on_instances
from evaluation.evaluators import ClassificationEvaluator, ClusteringEvaluator, RerankingEvaluator, STSEvaluator
from evaluation.evaluators.ranking import reranking_result
from evaluation.human_baseline import (
    BASELINE_SCORINGS,
    POOLED,
    TASK_TYPES,
    Answer,
    Instance,
    interval_position,
    score_answers,
    score_predictions,
)


def test_every_baseline_task_type_has_one_scoring_and_one_model_definition():
    assert set(BASELINE_SCORINGS) == set(MODEL_SCORINGS) == set(BASELINE_TASKS) == set(TASK_TYPES)
    for task_type, scoring in BASELINE_SCORINGS.items():
        assert scoring.task_type is task_type and scoring.metric and scoring.unit and scoring.interval


# --- fixtures: instances, answers and a fake encoder ---------------------------------------------


def sts_instances(gold):
    return [Instance(f"s{k}", "sts", (f"left {k}", f"right {k}"), g) for k, g in enumerate(gold)]


def answers_of(rater, values, prefix="s"):
    return [Answer(rater, f"{prefix}{k}", v) for k, v in enumerate(values) if v is not None]


def fake_encode(dim=6, seed=0):
    """Deterministic pseudo-embeddings per text (the same text always gets the same vector)."""
    cache = {}
    calls = []

    def encode(texts, *, prompt_type=None):
        calls.append((list(texts), prompt_type))
        rows = []
        for text in texts:
            if text not in cache:
                cache[text] = np.random.default_rng([seed, *map(ord, text)]).normal(size=dim)
            rows.append(cache[text])
        return np.array(rows, dtype=np.float32)

    encode.calls = calls
    return encode


# --- STS -------------------------------------------------------------------------------------------

GOLD = [4.8, 0.2, 3.1, 2.5, 1.0, 3.9, 0.6, 2.2, 4.1, 1.7]
ANNA = [5, 0, 3, 3, 1, 4, 1, 2, 4, 2]
BEN = [4, 1, 2, 3, 0, 5, 1, 3, 5, 1]
CARL = [5, 1, 4, 2, 2, 3, 0, 2, 4, None]  # skipped the last pair


def test_sts_rater_and_pooled_scores_equal_scipy_spearman():
    instances = sts_instances(GOLD)
    answers = answers_of("anna", ANNA) + answers_of("ben", BEN) + answers_of("carl", CARL)
    result = score_answers(instances, answers)
    anna, ben, carl = result.raters
    assert anna.score == pytest.approx(scipy_stats.spearmanr(ANNA, GOLD).statistic)
    assert carl.score == pytest.approx(scipy_stats.spearmanr(CARL[:9], GOLD[:9]).statistic) and carl.n_units == 9
    assert anna.metrics["pearson"] == pytest.approx(scipy_stats.pearsonr(ANNA, GOLD).statistic)
    means = [np.mean([v for v in vs if v is not None]) for vs in zip(ANNA, BEN, CARL, strict=True)]
    assert result.pooled.rater == POOLED and result.pooled.n_units == 10
    assert result.pooled.score == pytest.approx(scipy_stats.spearmanr(means, GOLD).statistic)
    low, high = fisher_z_interval(result.pooled.score, 10, method="spearman")
    assert (result.pooled.ci_low, result.pooled.ci_high, result.pooled.ci_method) == (low, high, "fisher_z")
    assert result.n_answers == 29 and result.metric == "spearman"


def test_sts_agreement_is_the_mean_over_rater_pairs():
    instances = sts_instances(GOLD)
    raters = {"anna": ANNA, "ben": BEN, "carl": CARL}
    result = score_answers(instances, [a for name, v in raters.items() for a in answers_of(name, v)])
    agreement = {a.measure: a for a in result.agreement}
    rhos, taus = [], []
    for first, second in combinations(raters.values(), 2):
        kept = [(x, y) for x, y in zip(first, second, strict=True) if x is not None and y is not None]
        rhos.append(scipy_stats.spearmanr(*zip(*kept, strict=True)).statistic)
        taus.append(scipy_stats.kendalltau(*zip(*kept, strict=True)).statistic)
    assert agreement["mean_pairwise_spearman"].value == pytest.approx(np.mean(rhos))
    assert agreement["mean_pairwise_kendall_tau"].value == pytest.approx(np.mean(taus))
    assert agreement["mean_pairwise_spearman"].n_pairs == 3 and agreement["mean_pairwise_spearman"].n_items == 10


def test_sts_constant_ratings_give_no_score_rather_than_nan():
    result = score_answers(sts_instances(GOLD[:4]), answers_of("lazy", [3, 3, 3, 3]))
    assert result.raters[0].score is None and result.raters[0].ci_low is None


def test_sts_a_rater_answering_the_models_cosines_gets_the_models_score():
    instances = sts_instances(GOLD)
    encode = fake_encode()
    cosines = model_predictions(instances, encode)
    left = encode([i.texts[0] for i in instances])
    right = encode([i.texts[1] for i in instances])
    expected = STSEvaluator().score(left, right, GOLD).cosine_spearman
    model = score_model_on_instances(instances, encode, rater="fake")
    rater = score_answers(instances, [Answer("mimic", k, v) for k, v in cosines.items()]).raters[0]
    assert model.score == pytest.approx(expected) and rater.score == pytest.approx(expected)
    assert (model.ci_low, model.ci_high) == (rater.ci_low, rater.ci_high)
    assert len(encode.calls[0][0]) == 20  # both sides in one call, as STSEvaluator.evaluate


# --- classification --------------------------------------------------------------------------------


def classification_instances(gold):
    return [Instance(f"c{k}", "classification", (f"text {k}",), g) for k, g in enumerate(gold)]


LABELS = ["pos", "neg", "pos", "neu", "neg", "pos", "neu", "neg"]


def test_classification_accuracy_majority_and_wilson():
    instances = classification_instances(LABELS)
    anna = ["pos", "neg", "pos", "neu", "neg", "pos", "neu", "neg"]  # all right
    ben = ["pos", "neg", "neg", "neu", "neg", "neu", "pos", "neg"]  # 5/8
    carl = ["neg", "neg", "neu", "neu", "pos", "neu", "neu", "pos"]  # 3/8
    answers = answers_of("anna", anna, "c") + answers_of("ben", ben, "c") + answers_of("carl", carl, "c")
    result = score_answers(instances, answers)
    assert [r.score for r in result.raters] == [1.0, 5 / 8, 3 / 8]
    # Majority per text: text 2 (pos, neg, neu) is a three-way tie, which goes to "neg" (it sorts
    # first); text 5 (pos, neu, neu) goes to "neu". Both are wrong, the other six right.
    majority = ["pos", "neg", "neg", "neu", "neg", "neu", "neu", "neg"]
    correct = sum(m == g for m, g in zip(majority, LABELS, strict=True))
    assert correct == 6
    assert result.pooled.score == pytest.approx(correct / 8)
    low, high = proportion_confint(correct, 8, method="wilson")
    assert result.pooled.ci_low == pytest.approx(low) and result.pooled.ci_high == pytest.approx(high)
    assert result.pooled.ci_method == "wilson" and result.pooled.metrics["f1"] is not None
    table = [
        [[a, b, c].count(label) for label in ("neg", "neu", "pos")] for a, b, c in zip(anna, ben, carl, strict=True)
    ]
    (kappa,) = result.agreement
    assert kappa.measure == "fleiss_kappa"
    assert kappa.value == pytest.approx(statsmodels_fleiss_kappa(np.array(table), method="fleiss"))


def test_classification_majority_tie_does_not_depend_on_rater_order():
    instances = classification_instances(["b"])
    one = score_answers(instances, [Answer("x", "c0", "b"), Answer("y", "c0", "a")])
    other = score_answers(instances, [Answer("y", "c0", "a"), Answer("x", "c0", "b")])
    assert one.pooled.score == other.pooled.score == 0.0  # the tie goes to "a", which sorts first


def _blob_texts(labels, seed):
    rng = np.random.default_rng(seed)
    centres = {label: np.eye(4)[k] * 5 for k, label in enumerate(sorted(set(labels)))}
    return {f"{label}-{seed}-{k}": centres[label] + rng.normal(0, 1.5, 4) for k, label in enumerate(labels)}


def test_classification_model_follows_the_evaluators_protocol():
    train = _blob_texts(["a", "b", "c"] * 12, seed=1)
    test = _blob_texts(["a", "b", "c", "a", "b", "c", "a", "b"], seed=2)
    vectors = {**train, **test}

    def encode(texts, *, prompt_type=None):
        return np.array([vectors[t] for t in texts])

    train_texts, train_labels = list(train), [t.split("-")[0] for t in train]
    instances = [Instance(f"c{k}", "classification", (t,), t.split("-")[0]) for k, t in enumerate(test)]
    model = score_model_on_instances(instances, encode, train_texts=train_texts, train_labels=train_labels)
    expected = ClassificationEvaluator().score(
        encode(train_texts), train_labels, encode(list(test)), [i.gold for i in instances]
    )
    assert model.score == pytest.approx(expected.accuracy) and model.metrics["n_experiments"] == 10
    low, high = wilson_interval(expected.accuracy * 8, 8)
    assert (model.ci_low, model.ci_high) == pytest.approx((low, high))
    # One experiment's predictions, answered by a rater, score that experiment's accuracy.
    single = ClassificationEvaluator(n_experiments=1)
    (draw,) = single.training_draws(train_labels)
    classifier = LogisticRegression(max_iter=100, random_state=42).fit(
        encode([train_texts[i] for i in draw]), [train_labels[i] for i in draw]
    )
    predicted = classifier.predict(encode(list(test)))
    rater = score_answers(instances, [Answer("mimic", i.key, p) for i, p in zip(instances, predicted, strict=True)])
    one_experiment = single.score(encode(train_texts), train_labels, encode(list(test)), [i.gold for i in instances])
    assert rater.raters[0].score == pytest.approx(one_experiment.accuracy)
    with pytest.raises(ValueError, match="training texts"):
        score_model_on_instances(instances, encode)


# --- clustering ------------------------------------------------------------------------------------


def clustering_instances(batches):
    instances, k = [], 0
    for batch, gold in batches.items():
        for label in gold:
            instances.append(Instance(f"k{k}", "clustering", (f"text {k}",), label, group=batch))
            k += 1
    return instances


BATCHES = {"b1": ["x", "x", "y", "y", "z", "z"], "b2": ["u", "u", "u", "v", "v", "w"]}


def test_clustering_v_measure_per_batch_averaged_and_annotator_range():
    instances = clustering_instances(BATCHES)
    anna = ["1", "1", "2", "2", "3", "3", "a", "a", "b", "b", "b", "c"]
    ben = ["1", "2", "2", "2", "3", "3", "a", "a", "a", "b", "b", "b"]
    carl = ["1", "1", "1", "2", "2", "2", "a", "a", "a", "b", "b", None]  # left b2 incomplete
    answers = [
        Answer(name, f"k{k}", v)
        for name, values in (("anna", anna), ("ben", ben), ("carl", carl))
        for k, v in enumerate(values)
        if v is not None
    ]
    result = score_answers(instances, answers)
    scores = {r.rater: r for r in result.raters}

    def v(gold, labels):
        return v_measure_score(gold, labels)

    assert scores["anna"].score == pytest.approx((v(BATCHES["b1"], anna[:6]) + v(BATCHES["b2"], anna[6:])) / 2)
    assert scores["ben"].score == pytest.approx((v(BATCHES["b1"], ben[:6]) + v(BATCHES["b2"], ben[6:])) / 2)
    assert scores["carl"].score == pytest.approx(v(BATCHES["b1"], carl[:6])) and scores["carl"].n_units == 1
    values = [r.score for r in result.raters]
    assert result.pooled.score == pytest.approx(np.mean(values))
    assert (result.pooled.ci_low, result.pooled.ci_high) == (min(values), max(values))
    assert result.pooled.ci_method == "annotator_range" and result.pooled.n_units == 2
    aris = [
        adjusted_rand_score(anna[:6], ben[:6]),
        adjusted_rand_score(anna[:6], carl[:6]),
        adjusted_rand_score(ben[:6], carl[:6]),
        adjusted_rand_score(anna[6:], ben[6:]),
        adjusted_rand_score(anna[6:11], carl[6:11]),
        adjusted_rand_score(ben[6:11], carl[6:11]),
    ]
    (ari,) = result.agreement
    assert ari.measure == "mean_pairwise_ari" and ari.value == pytest.approx(np.mean(aris)) and ari.n_pairs == 6


def test_clustering_cluster_ids_only_mean_something_within_a_batch():
    instances = clustering_instances(BATCHES)
    same_ids = ["1", "1", "2", "2", "3", "3", "1", "1", "1", "2", "2", "3"]
    renamed = ["p", "p", "q", "q", "r", "r", "1", "1", "1", "2", "2", "3"]
    first = score_answers(instances, answers_of("a", same_ids, "k")).raters[0]
    second = score_answers(instances, answers_of("a", renamed, "k")).raters[0]
    assert first.score == second.score == 1.0


def test_clustering_a_rater_answering_the_kmeans_ids_gets_the_models_score():
    vectors = {
        **_blob_texts(["x", "x", "x", "y", "y", "y", "z", "z"], seed=3),
        **_blob_texts(["u", "u", "u", "v", "v", "v"], seed=4),
    }
    instances = [
        Instance(f"k{n}", "clustering", (t,), t.split("-")[0], group=t.split("-")[1]) for n, t in enumerate(vectors)
    ]

    def encode(texts, *, prompt_type=None):
        return np.array([vectors[t] for t in texts])

    model = score_model_on_instances(instances, encode)
    ids = model_predictions(instances, encode)
    rater = score_answers(instances, [Answer("mimic", k, v) for k, v in ids.items()]).raters[0]
    per_batch = []
    for batch in ("3", "4"):
        members = [i for i in instances if i.group == batch]
        embeddings = encode([i.texts[0] for i in members])
        per_batch.append(ClusteringEvaluator(protocol="single").score(embeddings, [i.gold for i in members]).v_measure)
    assert model.score == pytest.approx(np.mean(per_batch)) and rater.score == pytest.approx(model.score)


# --- reranking -------------------------------------------------------------------------------------


def reranking_instances(queries):
    instances, k = [], 0
    for query, gold in queries.items():
        for relevant in gold:
            instances.append(Instance(f"r{k}", "reranking", (f"query {query}", f"doc {k}"), relevant, group=query))
            k += 1
    return instances


def test_reranking_ties_never_earn_credit():
    instances = reranking_instances({"q": [0, 1, 0, 0]})
    # Two candidates judged relevant, one of them truly: the false one ranks first among the tie.
    result = score_answers(instances, answers_of("anna", [1, 1, 0, 0], "r"))
    assert result.raters[0].score == pytest.approx(1 / 2)
    assert result.raters[0].metrics["mrr_at_10"] == pytest.approx(1 / 2)
    perfect = score_answers(instances, answers_of("anna", [0, 1, 0, 0], "r"))
    assert perfect.raters[0].score == 1.0
    # The rule does not depend on where the positive stands in the list.
    moved = score_answers(reranking_instances({"q": [1, 0, 0, 0]}), answers_of("anna", [1, 1, 0, 0], "r"))
    assert moved.raters[0].score == pytest.approx(1 / 2)


def test_reranking_pooled_uses_the_mean_relevance_and_agreement():
    instances = reranking_instances({"q1": [1, 0, 0, 1], "q2": [0, 1, 0, 0]})
    anna = [1, 0, 1, 1, 0, 1, 0, 0]
    ben = [1, 1, 0, 0, 0, 1, 0, 1]
    carl = [1, 0, 0, 1, 1, 1, 0, 0]
    answers = answers_of("anna", anna, "r") + answers_of("ben", ben, "r") + answers_of("carl", carl, "r")
    result = score_answers(instances, answers)
    means = np.mean([anna, ben, carl], axis=0)
    expected = reranking_result([means[:4], means[4:]], [[1, 0, 0, 1], [0, 1, 0, 0]])
    assert result.pooled.score == pytest.approx(expected.main_score)
    values = [r.score for r in result.raters]
    assert (result.pooled.ci_low, result.pooled.ci_high) == (min(values), max(values))
    kappa, tau = result.agreement
    table = np.array([[sum(r[k] == c for r in (anna, ben, carl)) for c in (0, 1)] for k in range(8)])
    assert kappa.value == pytest.approx(statsmodels_fleiss_kappa(table, method="fleiss"))
    taus = [scipy_stats.kendalltau(a, b).statistic for a, b in combinations([anna, ben, carl], 2)]
    assert tau.measure == "mean_pairwise_kendall_tau" and tau.value == pytest.approx(np.mean(taus))


def test_reranking_a_rater_answering_the_models_similarities_gets_the_models_score():
    instances = reranking_instances({"q1": [0, 1, 0, 1, 0], "q2": [1, 0, 0]})
    encode = fake_encode(seed=5)
    model = score_model_on_instances(instances, encode)
    similarities = model_predictions(instances, encode)
    no_answers = score_answers(instances, [])
    assert no_answers.raters == () and no_answers.pooled is None
    mimic = score_predictions(instances, similarities, rater="mimic")
    # The evaluator's own path: positives first, then negatives, per query.
    queries, candidates, n_positives = [], [], []
    for query in ("q1", "q2"):
        members = [i for i in instances if i.group == query]
        ordered = [i for i in members if i.gold == 1] + [i for i in members if i.gold == 0]
        queries.append(encode([members[0].texts[0]], prompt_type="query")[0])
        candidates.append(encode([i.texts[1] for i in ordered], prompt_type="document"))
        n_positives.append(sum(i.gold for i in members))
    expected = RerankingEvaluator().score(np.array(queries), candidates, n_positives).main_score
    assert model.score == pytest.approx(expected) and mimic.score == pytest.approx(expected)
    assert {p for _, p in encode.calls} == {"query", "document"}


def test_reranking_incomplete_queries_are_left_out():
    instances = reranking_instances({"q1": [1, 0], "q2": [0, 1]})
    result = score_answers(instances, [Answer("a", "r0", 1), Answer("a", "r1", 0), Answer("a", "r2", 1)])
    assert result.raters[0].n_units == 1 and result.raters[0].score == 1.0


# --- validation and properties ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "instances, answers, message",
    [
        (sts_instances([1, 2]), [Answer("a", "nope", 1)], "not an instance"),
        (sts_instances([1, 2]), [Answer("a", "s0", 1), Answer("a", "s0", 2)], "twice"),
        (sts_instances([1, 2]), [Answer("a", "s0", "high")], "must be a number"),
        (reranking_instances({"q": [1, 0]}), [Answer("a", "r0", 2)], "1 \\(relevant\\) or 0"),
        (classification_instances(["x"]), [Answer("a", "c0", "")], "empty"),
        ([], [], "no instances"),
        (sts_instances([1]) + classification_instances(["x"]), [], "one task type"),
        (sts_instances([1]) * 2, [], "unique"),
    ],
)
def test_bad_input_is_named(instances, answers, message):
    with pytest.raises(ValueError, match=message):
        score_answers(instances, answers)


def test_interval_position():
    assert interval_position(0.9, 0.5, 0.8) == "above" and interval_position(0.4, 0.5, 0.8) == "below"
    assert interval_position(0.5, 0.5, 0.8) == "inside" and interval_position(0.5, None, 0.8) is None


ratings_strategy = st.lists(st.integers(0, 5), min_size=6, max_size=6)


@settings(max_examples=60, deadline=None)
@given(st.lists(ratings_strategy, min_size=2, max_size=4), st.randoms(use_true_random=False))
def test_sts_scores_do_not_depend_on_rater_names_or_answer_order(raters, random):
    instances = sts_instances(GOLD[:6])
    answers = [a for n, values in enumerate(raters) for a in answers_of(f"r{n}", values)]
    shuffled = answers[:]
    random.shuffle(shuffled)
    renamed = [Answer(f"z{a.annotator}", a.key, a.value) for a in shuffled]
    first, second = score_answers(instances, answers), score_answers(instances, renamed)
    assert first.pooled == second.pooled and first.agreement == second.agreement
    assert [r.score for r in first.raters] == [r.score for r in second.raters]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "c"]), min_size=4, max_size=8), st.integers(2, 4))
def test_identical_raters_agree_perfectly_and_pool_to_their_own_score(labels, n_raters):
    instances = classification_instances(["a", "b", "c", "a", "b", "c", "a", "b"][: len(labels)])
    answers = [a for n in range(n_raters) for a in answers_of(f"r{n}", labels, "c")]
    result = score_answers(instances, answers)
    assert result.pooled.score == result.raters[0].score
    (kappa,) = result.agreement
    assert kappa.value is None if len(set(labels)) == 1 else kappa.value == pytest.approx(1.0)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0, 5, allow_nan=False), min_size=5, max_size=5, unique=True))
def test_identical_sts_raters_have_rank_agreement_one(values):
    instances = sts_instances(GOLD[:5])
    result = score_answers(instances, answers_of("a", values) + answers_of("b", values))
    assert all(math.isclose(a.value, 1.0) for a in result.agreement)
    assert -1.0 <= result.pooled.ci_low <= result.pooled.score <= result.pooled.ci_high <= 1.0
