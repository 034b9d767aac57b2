"""Pure evaluator tests: hand-computed values, and library references where one exists."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from sklearn.metrics import v_measure_score

from evaluation.evaluators import (
    ClassificationEvaluator,
    ClusteringEvaluator,
    PairClassificationEvaluator,
    RerankingEvaluator,
    RetrievalEvaluator,
    STSEvaluator,
    SummarizationEvaluator,
)
from evaluation.evaluators.options import mteb_protocol_options, protocol_options
from evaluation.evaluators.pair_classification import threshold_scores
from evaluation.evaluators.ranking import query_scores, ranking_result


def test_ranking_measures_on_a_hand_case():
    # Ranked d1 d2 d3 d4; judged d1 (grade 1), d3 (grade 2) and d5 (grade 1, never retrieved).
    scores = query_scores(["d1", "d2", "d3", "d4"], {"d1": 1, "d3": 2, "d5": 1}, k_values=(1, 3, 10))
    ideal_at_3 = 2 + 1 / math.log2(3) + 1 / 2
    assert scores["ndcg"][3] == pytest.approx((1 + 2 / 2) / ideal_at_3)
    assert scores["ndcg"][1] == pytest.approx(1 / 2)
    assert scores["map"][3] == pytest.approx((1 / 1 + 2 / 3) / 3)
    assert scores["recall"][3] == pytest.approx(2 / 3)
    assert scores["precision"][3] == pytest.approx(2 / 3)
    assert scores["precision"][10] == pytest.approx(2 / 10)
    assert scores["mrr"][1] == 1.0 and scores["hit_rate"][1] == 1.0


def test_ranking_measures_when_the_first_hit_is_late_or_missing():
    late = query_scores(["a", "b", "c"], {"c": 1}, k_values=(1, 3))
    assert late["mrr"][1] == 0.0 and late["mrr"][3] == pytest.approx(1 / 3)
    assert late["ndcg"][3] == pytest.approx(1 / 2)  # 1/log2(4) over an ideal of 1
    assert late["map"][3] == pytest.approx(1 / 3)
    none = query_scores(["a"], {"z": 0}, k_values=(1,))
    assert none["ndcg"][1] == none["map"][1] == none["recall"][1] == 0.0


def test_ranking_measures_match_pytrec_eval():
    pytrec_eval = pytest.importorskip("pytrec_eval", reason="pytrec_eval comes with the dev requirements (mteb)")
    rng = random.Random(7)
    run, qrels = {}, {}
    for q in range(40):
        docs = [f"d{i}" for i in range(30)]
        run[f"q{q}"] = {d: round(rng.random(), 2) for d in docs}  # rounding makes ties
        qrels[f"q{q}"] = {d: rng.choice([0, 1, 2]) for d in rng.sample(docs, 8)}
    measures = {"ndcg_cut.1,3,5,10", "map_cut.1,3,5,10", "recall.1,3,5,10", "P.1,3,5,10", "success.1,3,5,10"}
    reference = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
    rankings = {q: sorted(scores, key=lambda d: (scores[d], d), reverse=True) for q, scores in run.items()}
    result = ranking_result(rankings, qrels, k_values=(1, 3, 5, 10))
    names = {"ndcg": "ndcg_cut", "map": "map_cut", "recall": "recall", "precision": "P", "hit_rate": "success"}
    for ours, theirs in names.items():
        for k in (1, 3, 5, 10):
            expected = np.mean([reference[q][f"{theirs}_{k}"] for q in run])
            assert result.at[ours][k] == pytest.approx(expected, abs=1e-12), (ours, k)


def test_retrieval_ranks_documents_by_cosine():
    documents = np.array([[1.0, 0.0], [0.0, 1.0], [0.7, 0.7]])
    queries = np.array([[1.0, 0.1], [0.1, 1.0]])
    qrels = {"q0": {"a": 1}, "q1": {"c": 1}}
    result = RetrievalEvaluator(k_values=(1, 10)).score(queries, ["q0", "q1"], documents, ["a", "b", "c"], qrels)
    assert result.main_metric == "ndcg_at_10"
    assert result.at["ndcg"][1] == pytest.approx(0.5)  # q0 finds a first, q1 finds b before c
    assert result.main_score == pytest.approx((1 + 1 / math.log2(3)) / 2)


def test_reranking_map_on_a_hand_case():
    query = np.array([[1.0, 0.0]])
    # positives first: p1 ranks 2nd, p2 ranks 3rd; the negative ranks 1st.
    candidates = [np.array([[0.8, 0.6], [0.6, 0.8], [1.0, 0.0]])]
    result = RerankingEvaluator().score(query, candidates, [2])
    assert result.main_metric == "map_at_1000"
    assert result.main_score == pytest.approx((1 / 2 + 2 / 3) / 2)
    assert result.metrics()["mrr_at_10"] == pytest.approx(1 / 2)


def test_pair_threshold_scores_on_a_hand_case():
    scores = threshold_scores(np.array([0.9, 0.8, 0.7, 0.6]), np.array([1, 0, 1, 0]), higher_is_similar=True)
    assert scores.ap == pytest.approx((1 + 2 / 3) / 2)
    assert scores.accuracy == pytest.approx(0.75) and scores.accuracy_threshold == pytest.approx(0.85)
    assert scores.f1 == pytest.approx(0.8) and scores.f1_threshold == pytest.approx(0.65)
    assert scores.precision == pytest.approx(2 / 3) and scores.recall == 1.0


def test_pair_thresholds_never_split_ties_and_distances_rank_upwards():
    tied = threshold_scores(np.array([0.9, 0.9, 0.1]), np.array([1, 0, 0]), higher_is_similar=True)
    assert tied.accuracy == pytest.approx(2 / 3) and tied.accuracy_threshold == pytest.approx(0.5)
    distances = threshold_scores(np.array([0.1, 0.2, 0.3, 0.4]), np.array([1, 0, 1, 0]), higher_is_similar=False)
    assert distances.ap == pytest.approx((1 + 2 / 3) / 2)


def test_pair_classification_main_score_is_the_best_ap():
    embeddings1 = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 3.0], [0.0, 1.0]])
    embeddings2 = np.array([[1.0, 0.1], [0.0, 1.0], [0.1, 3.0], [1.0, 0.2]])
    result = PairClassificationEvaluator().score(embeddings1, embeddings2, [1, 0, 1, 0])
    assert result.main_metric == "max_ap" and result.main_score == 1.0
    assert result.main_score == max(s.ap for s in result.by_function.values())
    assert result.metrics()["cosine_ap"] == result.by_function["cosine"].ap


def test_sts_correlates_cosine_with_gold():
    angles = np.array([0.1, 0.5, 0.9, 1.3])
    embeddings1 = np.tile([1.0, 0.0], (4, 1))
    embeddings2 = np.stack([np.cos(angles), np.sin(angles)], axis=1)
    result = STSEvaluator().score(embeddings1, embeddings2, [5.0, 3.2, 2.0, 0.4])
    assert result.main_metric == "cosine_spearman" and result.main_score == pytest.approx(1.0)
    assert result.euclidean_spearman == pytest.approx(1.0) and result.n_pairs == 4
    shuffled = STSEvaluator().score(embeddings1, embeddings2, [3.2, 5.0, 0.4, 2.0])
    assert shuffled.cosine_spearman == pytest.approx(0.6)  # 1 - 6 * 4 / (4 * 15)


def test_sts_evaluate_encodes_both_sides_in_one_call():
    calls = []

    def encode(texts, *, prompt_type=None):
        calls.append((list(texts), prompt_type))
        return np.array([[1.0, float(len(t))] for t in texts])

    STSEvaluator().evaluate(["a", "bb", "ccc"], ["a", "b", "c"], [1, 2, 3], encode=encode)
    assert calls == [(["a", "bb", "ccc", "a", "b", "c"], None)]


def _blobs(n_per_label: int, labels: list[str], seed: int = 0) -> tuple[np.ndarray, list[str]]:
    rng = np.random.default_rng(seed)
    centres = np.eye(len(labels)) * 10
    points = np.concatenate([centres[i] + rng.normal(0, 0.1, (n_per_label, len(labels))) for i in range(len(labels))])
    return points, [label for label in labels for _ in range(n_per_label)]


@pytest.mark.parametrize("protocol", ["bootstrap", "single"])
def test_clustering_v_measure_is_one_for_separated_clusters(protocol):
    points, labels = _blobs(30, ["x", "y", "z"])
    evaluator = ClusteringEvaluator(protocol=protocol, max_documents_per_cluster=200, n_bootstrap=3)
    result = evaluator.score(points, labels)
    assert result.main_metric == "v_measure" and result.main_score == pytest.approx(1.0)
    assert len(result.v_measures) == (3 if protocol == "bootstrap" else 1)


def test_clustering_v_measure_is_sklearns_for_the_kmeans_assignment():
    points, labels = _blobs(20, ["a", "b"])
    labels = labels[:15] + ["b"] * 5 + labels[20:]  # five mislabelled points: clusters disagree with gold
    result = ClusteringEvaluator(protocol="single").score(points, labels)
    assignment = (points[:, 1] > 5).astype(int)  # the two blobs k-means must find
    assert result.v_measure == pytest.approx(v_measure_score(labels, assignment))
    assert result.cluster_accuracy == pytest.approx(35 / 40)


def test_clustering_embeds_a_seeded_subset_when_asked():
    points, labels = _blobs(50, ["a", "b"])
    seen = []

    def encode(texts, *, prompt_type=None):
        seen.append(list(texts))
        return points[[int(t) for t in texts]]

    evaluator = ClusteringEvaluator(max_fraction_of_documents_to_embed=0.2, max_documents_per_cluster=64, n_bootstrap=2)
    evaluator.evaluate([str(i) for i in range(100)], labels, encode=encode)
    evaluator.evaluate([str(i) for i in range(100)], labels, encode=encode)
    assert len(seen[0]) == 20 and seen[0] == seen[1]


def test_classification_draws_follow_the_mteb_undersampling():
    labels = ["a"] * 6 + ["b"] * 3 + ["c"]
    evaluator = ClassificationEvaluator(n_experiments=3, samples_per_label=2, seed=42)
    draws = evaluator.training_draws(labels)
    order = list(range(len(labels)))
    for draw in draws:
        np.random.RandomState(42).shuffle(order)  # each experiment reshuffles the previous order
        assert draw == [i for i in order if [labels[j] for j in order[: order.index(i) + 1]].count(labels[i]) <= 2]
        assert sorted(labels[i] for i in draw) == ["a", "a", "b", "b", "c"]
    assert draws[0] != draws[1]


def test_classification_scores_separable_embeddings_perfectly():
    train, train_labels = _blobs(10, ["neg", "pos"], seed=1)
    test, test_labels = _blobs(5, ["neg", "pos"], seed=2)
    result = ClassificationEvaluator(n_experiments=2).score(train, train_labels, test, test_labels)
    assert result.main_metric == "accuracy" and result.main_score == 1.0
    assert result.f1 == 1.0 and result.ap == 1.0 and len(result.experiments) == 2


def test_classification_encodes_only_the_drawn_training_texts():
    train, train_labels = _blobs(40, ["a", "b"], seed=3)
    test, test_labels = _blobs(5, ["a", "b"], seed=4)
    texts = [f"t{i}" for i in range(80)]
    encoded = []

    def encode(batch, *, prompt_type=None):
        encoded.append(list(batch))
        return np.array([train[int(t[1:])] if t.startswith("t") else test[int(t[1:])] for t in batch])

    evaluator = ClassificationEvaluator(n_experiments=2, samples_per_label=4)
    result = evaluator.evaluate(texts, train_labels, [f"e{i}" for i in range(10)], test_labels, encode=encode)
    drawn = set().union(*evaluator.training_draws(train_labels))
    assert encoded[0] == [texts[i] for i in sorted(drawn)] and len(encoded[0]) <= 16
    assert result == evaluator.score(train, train_labels, test, test_labels)


def test_summarization_correlates_best_similarity_to_human_summaries():
    human = [np.array([[1.0, 0.0], [0.0, 1.0]])]
    machine = [np.array([[1.0, 0.05], [0.6, 0.8], [0.9, 0.9], [-1.0, 0.1]])]
    # best cosine to either human summary: ~0.999, 0.8, 0.707, ~0.0995
    result = SummarizationEvaluator().score(human, machine, [[4.0, 3.0, 2.0, 1.0]])
    assert result.main_metric == "cosine_spearman" and result.main_score == pytest.approx(1.0)
    flat = SummarizationEvaluator().score(human * 2, machine * 2, [[4.0, 3.0, 2.0, 1.0], [2.0, 2.0, 2.0, 2.0]])
    assert flat.n_skipped == 1 and flat.n_texts == 1


def test_inputs_are_checked():
    with pytest.raises(ValueError, match="2-D"):
        STSEvaluator().score(np.zeros(3), np.zeros(3), [1, 2, 3])
    with pytest.raises(ValueError, match="labels must be 0"):
        PairClassificationEvaluator().score(np.ones((2, 2)), np.ones((2, 2)), [1, 2])
    with pytest.raises(ValueError, match="similarity_fn_name"):
        RetrievalEvaluator(similarity_fn_name="jaccard")
    with pytest.raises(ValueError, match="n_bootstrap, .* must be positive"):
        ClusteringEvaluator(n_bootstrap=0)  # zero draws would average nothing into NaN


def test_protocol_options_are_validated_per_task_type():
    assert protocol_options("classification", {"samples_per_label": 16}) == {"samples_per_label": 16}
    assert protocol_options("sts", None) == {} and protocol_options("clustering", {}) == {}
    assert protocol_options("clustering", {"max_fraction_of_documents_to_embed": 1}) == {
        "max_fraction_of_documents_to_embed": 1
    }
    with pytest.raises(ValueError, match="retrieval datasets have no protocol options"):
        protocol_options("retrieval", {"k_values": [10]})
    with pytest.raises(ValueError, match="unknown classification protocol option.*use max_iter, n_experiments"):
        protocol_options("classification", {"seed": 1})
    with pytest.raises(ValueError, match="n_experiments must be int, got True"):
        protocol_options("classification", {"n_experiments": True})
    with pytest.raises(ValueError, match="max_documents_to_embed must be int or null"):
        protocol_options("clustering", {"max_documents_to_embed": 2.5})
    with pytest.raises(ValueError, match="not both"):
        protocol_options("clustering", {"max_fraction_of_documents_to_embed": 0.1, "max_documents_to_embed": 10})


def test_protocol_options_read_from_mteb_tasks():
    mteb = pytest.importorskip("mteb", reason="mteb comes with the dev requirements")
    assert mteb_protocol_options(mteb.get_task("Banking77Classification")) == {
        "samples_per_label": 8,
        "n_experiments": 10,
        "max_iter": 100,
    }
    assert mteb_protocol_options(mteb.get_task("TwentyNewsgroupsClustering")) == {"protocol": "single"}
    assert mteb_protocol_options(mteb.get_task("TwentyNewsgroupsClustering.v2")) == {
        "protocol": "bootstrap",
        "n_bootstrap": 10,
        "max_documents_per_cluster": 16_384,
        "kmeans_batch_size": 512,
        "max_fraction_of_documents_to_embed": 0.04,
        "max_documents_to_embed": None,
    }
    assert mteb_protocol_options(mteb.get_task("STSBenchmark")) == {}
    # The defaults of Shiftlab's evaluators are MTEB's: its classification task's settings change nothing.
    assert ClassificationEvaluator(**mteb_protocol_options(mteb.get_task("Banking77Classification"))) == (
        ClassificationEvaluator()
    )
