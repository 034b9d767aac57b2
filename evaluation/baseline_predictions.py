"""A model on a human baseline's instances: what it predicts for each instance and its score, with
the evaluators that score the raters (pure module; see ``evaluation.human_baseline``)."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from core.stats import wilson_interval
from corpora.task_types import TaskType
from evaluation.evaluators.base import Encode, split_rows
from evaluation.evaluators.classification import ClassificationEvaluator
from evaluation.evaluators.clustering import ClusteringEvaluator
from evaluation.evaluators.similarity import SIMILARITY_FUNCTIONS, paired_scores, similarity_matrix
from evaluation.human_baseline import Instance, RaterScore, instance_groups, score_predictions, task_type_of


def model_predictions(
    instances: Sequence[Instance], encode: Encode, *, seed: int = 42, similarity_fn_name: str = "cosine"
) -> dict[str, float | str]:
    """What a model predicts for each instance, for ``score_predictions``: the cosine similarity of
    the pair (sts; the MTEB main score's), the cluster id from the single protocol's k-means over
    each batch with k = the number of gold labels in the batch (clustering; batches with one gold
    label get none), or the similarity of query and candidate (reranking). Classification has no
    per-instance prediction: its protocol averages experiments (``score_model_on_instances``)."""
    task = TaskType(task_type_of(instances))
    return MODEL_SCORINGS[task].predict(instances, encode, seed=seed, similarity_fn_name=similarity_fn_name)


def score_model_on_instances(
    instances: Sequence[Instance],
    encode: Encode,
    *,
    rater: str = "model",
    train_texts: Sequence[str] | None = None,
    train_labels: Sequence[Hashable] | None = None,
    seed: int = 42,
    similarity_fn_name: str = "cosine",
    confidence: float = 0.95,
) -> RaterScore:
    """Score a model on exactly these instances with the evaluators that score raters.

    Classification follows ClassificationEvaluator's protocol: logistic regression fitted on
    ``train_texts``/``train_labels`` (the dataset's train split) in each of its seeded experiments,
    predicting the instances' texts; the score is the mean accuracy over experiments, with a
    Wilson interval on that mean. Other tasks score ``model_predictions`` with
    ``score_predictions``, exactly as a rater's answers are scored.
    """
    task = TaskType(task_type_of(instances))
    return MODEL_SCORINGS[task].score(
        instances,
        encode,
        rater=rater,
        train=(train_texts, train_labels),
        seed=seed,
        similarity_fn_name=similarity_fn_name,
        confidence=confidence,
    )


class ModelScoring:
    """How a model answers the instances of one baseline task type (one subclass per type, as
    ``evaluation.human_baseline.BASELINE_SCORINGS``): its per-instance predictions, scored as a
    rater's answers are, unless its protocol scores the instances as a whole."""

    def predict(
        self, instances: Sequence[Instance], encode: Encode, *, seed: int, similarity_fn_name: str
    ) -> dict[str, float | str]:
        raise NotImplementedError

    def score(
        self,
        instances: Sequence[Instance],
        encode: Encode,
        *,
        rater: str,
        train: tuple[Sequence[str] | None, Sequence[Hashable] | None],
        seed: int,
        similarity_fn_name: str,
        confidence: float,
    ) -> RaterScore:
        predictions = self.predict(instances, encode, seed=seed, similarity_fn_name=similarity_fn_name)
        return score_predictions(instances, predictions, rater=rater, confidence=confidence)


class STSModel(ModelScoring):
    def predict(self, instances, encode, *, seed, similarity_fn_name):
        _check_texts(instances, 2)
        left, right = split_rows(
            encode([*(i.texts[0] for i in instances), *(i.texts[1] for i in instances)]),
            [len(instances), len(instances)],
        )
        cosine = paired_scores(left, right)["cosine"]
        return {i.key: float(c) for i, c in zip(instances, cosine, strict=True)}


class ClusteringModel(ModelScoring):
    def predict(self, instances, encode, *, seed, similarity_fn_name):
        _check_texts(instances, 1)
        groups = [g for g in instance_groups(instances).values() if len({str(i.gold) for i in g}) >= 2]
        embeddings = split_rows(encode([i.texts[0] for g in groups for i in g]), [len(g) for g in groups])
        evaluator = ClusteringEvaluator(protocol="single", seed=seed)
        predictions: dict[str, float | str] = {}
        for group, matrix in zip(groups, embeddings, strict=True):
            assigned = evaluator.single_assignment(matrix, len({str(i.gold) for i in group}))
            predictions.update({i.key: str(a) for i, a in zip(group, assigned, strict=True)})
        return predictions


class RerankingModel(ModelScoring):
    def predict(self, instances, encode, *, seed, similarity_fn_name):
        if similarity_fn_name not in SIMILARITY_FUNCTIONS:
            raise ValueError(f"similarity_fn_name must be one of {SIMILARITY_FUNCTIONS}, got {similarity_fn_name!r}")
        _check_texts(instances, 2)
        groups = list(instance_groups(instances).values())
        for group in groups:
            if len({i.texts[0] for i in group}) != 1:
                raise ValueError(f"reranking group {group[0].group!r} holds more than one query text")
        queries = encode([g[0].texts[0] for g in groups], prompt_type="query")
        candidates = split_rows(
            encode([i.texts[1] for g in groups for i in g], prompt_type="document"), [len(g) for g in groups]
        )
        predictions = {}
        for group, query, matrix in zip(groups, queries, candidates, strict=True):
            row = similarity_matrix(query[None, :], matrix, function=similarity_fn_name)[0]
            predictions.update({i.key: float(s) for i, s in zip(group, row, strict=True)})
        return predictions


class ClassificationModel(ModelScoring):
    def predict(self, instances, encode, *, seed, similarity_fn_name):
        raise ValueError("classification predictions come from the few-shot protocol: use score_model_on_instances")

    def score(self, instances, encode, *, rater, train, seed, similarity_fn_name, confidence):
        train_texts, train_labels = train
        if train_texts is None or train_labels is None or not len(train_texts):
            raise ValueError("classification needs the training texts and labels the classifier is fitted on")
        _check_texts(instances, 1)
        result = ClassificationEvaluator(seed=seed).evaluate(
            list(train_texts),
            [str(label) for label in train_labels],
            [i.texts[0] for i in instances],
            [str(i.gold) for i in instances],
            encode=encode,
        )
        n = len(instances)
        ci = wilson_interval(result.accuracy * n, n, confidence=confidence)
        return RaterScore(rater, "accuracy", result.accuracy, n, n, *ci, "wilson", metrics=result.metrics())


MODEL_SCORINGS: dict[TaskType, ModelScoring] = {
    TaskType.STS: STSModel(),
    TaskType.CLASSIFICATION: ClassificationModel(),
    TaskType.CLUSTERING: ClusteringModel(),
    TaskType.RERANKING: RerankingModel(),
}
"""One definition per baseline task type (``evaluation/test_human_baseline.py`` checks)."""


def _check_texts(instances: Sequence[Instance], n: int) -> None:
    for instance in instances:
        if len(instance.texts) < n:
            raise ValueError(f"instance {instance.key} needs {n} text(s), has {len(instance.texts)}")
