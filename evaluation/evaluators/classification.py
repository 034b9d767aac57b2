"""Classification: logistic regression on embeddings, few-shot, averaged over experiments.

Protocol of MTEB's ``AbsTaskClassification`` (``SklearnEvaluator`` with its default
``LogisticRegression(max_iter=100)`` seeded with the task seed): for each of ``n_experiments``
experiments, draw at most ``samples_per_label`` training examples per label, fit, predict the
evaluation split, and average accuracy, F1, precision and recall (macro and weighted; average
precision of the predicted labels for binary tasks) over experiments. The main score is accuracy.

The draw reproduces MTEB's exactly: each experiment shuffles the *previous* experiment's index
order again with a fresh ``numpy.random.RandomState(seed)`` and keeps the first
``samples_per_label`` indices of each label in that order. Only the union of drawn training
texts is encoded, as MTEB does. ``classification_scores`` scores one set of predictions.
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score, average_precision_score, f1_score, precision_score, recall_score

from evaluation.evaluators.base import Encode, FieldScores, as_matrix
from evaluation.item_scores import ItemScores, positional


@dataclass(frozen=True)
class ClassificationScores:
    accuracy: float
    f1: float
    f1_weighted: float
    precision: float
    precision_weighted: float
    recall: float
    recall_weighted: float
    ap: float | None
    ap_weighted: float | None


@dataclass(frozen=True)
class ClassificationResult(FieldScores, ClassificationScores):
    experiments: tuple[ClassificationScores, ...]
    items: ItemScores | None = field(default=None, compare=False, repr=False)
    """Each test item's correctness rate over the experiments, ids its positions."""

    main_metric: ClassVar[str] = "accuracy"

    def metrics(self) -> dict[str, float | None]:
        flat = super().metrics()
        flat.pop("experiments")
        flat["n_experiments"] = len(self.experiments)
        return flat


@dataclass(frozen=True)
class ClassificationEvaluator:
    seed: int = 42
    n_experiments: int = 10
    samples_per_label: int = 8
    max_iter: int = 100

    def __post_init__(self) -> None:
        if self.n_experiments < 1 or self.samples_per_label < 1 or self.max_iter < 1:
            raise ValueError("n_experiments, samples_per_label and max_iter must be positive")

    def training_draws(self, train_labels: Sequence[Hashable]) -> list[list[int]]:
        """Indices of the training examples each experiment fits on."""
        order = list(range(len(train_labels)))
        draws = []
        for _ in range(self.n_experiments):
            np.random.RandomState(self.seed).shuffle(order)
            taken: Counter[Hashable] = Counter()
            draw = []
            for index in order:
                if taken[train_labels[index]] < self.samples_per_label:
                    draw.append(index)
                    taken[train_labels[index]] += 1
            draws.append(draw)
        return draws

    def evaluate(
        self,
        train_texts: Sequence[str],
        train_labels: Sequence[Hashable],
        test_texts: Sequence[str],
        test_labels: Sequence[Hashable],
        *,
        encode: Encode,
    ) -> ClassificationResult:
        if len(train_texts) != len(train_labels) or len(test_texts) != len(test_labels):
            raise ValueError("each text needs exactly one label")
        draws = self.training_draws(train_labels)
        needed = sorted(set().union(*draws))
        row_of = {index: row for row, index in enumerate(needed)}
        train_embeddings = as_matrix(encode([train_texts[i] for i in needed]), "train embeddings")
        test_embeddings = as_matrix(encode(list(test_texts)), "test embeddings")
        experiments = [
            self._experiment(
                train_embeddings[[row_of[i] for i in draw]],
                [train_labels[i] for i in draw],
                test_embeddings,
                test_labels,
            )
            for draw in draws
        ]
        return _average(experiments, test_labels)

    def score(
        self,
        train_embeddings: np.ndarray,
        train_labels: Sequence[Hashable],
        test_embeddings: np.ndarray,
        test_labels: Sequence[Hashable],
    ) -> ClassificationResult:
        """Like ``evaluate``, from embeddings of the whole training and evaluation splits."""
        train_embeddings = as_matrix(train_embeddings, "train_embeddings")
        test_embeddings = as_matrix(test_embeddings, "test_embeddings")
        if len(train_embeddings) != len(train_labels) or len(test_embeddings) != len(test_labels):
            raise ValueError("each embedding needs exactly one label")
        experiments = [
            self._experiment(train_embeddings[draw], [train_labels[i] for i in draw], test_embeddings, test_labels)
            for draw in self.training_draws(train_labels)
        ]
        return _average(experiments, test_labels)

    def _experiment(
        self,
        train_embeddings: np.ndarray,
        train_labels: Sequence[Hashable],
        test_embeddings: np.ndarray,
        test_labels: Sequence[Hashable],
    ) -> tuple[ClassificationScores, list[Hashable]]:
        """One experiment's scores and its predicted labels."""
        classifier = LogisticRegression(max_iter=self.max_iter, random_state=self.seed)
        with warnings.catch_warnings():
            # The iteration cap is part of the protocol: not converging is expected, not a fault.
            warnings.simplefilter("ignore", ConvergenceWarning)
            classifier.fit(train_embeddings, list(train_labels))
        predicted = classifier.predict(test_embeddings).tolist()
        return classification_scores(list(test_labels), predicted), predicted


def classification_scores(truth: Sequence[Hashable], predicted: Sequence[Hashable]) -> ClassificationScores:
    """Accuracy, F1, precision and recall (macro and weighted) of predicted against true labels,
    plus MTEB's average precision of hard predictions for binary tasks (the label sorting second
    is the positive class). One experiment's scores; anything predicting labels (a classifier, a
    human rater) is scored by this function."""
    truth, predicted = list(truth), list(predicted)
    if len(truth) != len(predicted) or not truth:
        raise ValueError(f"need one prediction per true label, got {len(predicted)} for {len(truth)}")

    def averaged(metric, average: str) -> float:
        return float(metric(truth, predicted, average=average, zero_division=0))

    ap = ap_weighted = None
    classes = sorted(set(truth), key=str)
    if len(classes) == 2:
        # MTEB scores the hard predictions of a binary task with AP, the second class positive.
        positive = classes[1]
        y_true = [label == positive for label in truth]
        y_score = [label == positive for label in predicted]
        ap = float(average_precision_score(y_true, y_score, average="macro"))
        ap_weighted = float(average_precision_score(y_true, y_score, average="weighted"))
    return ClassificationScores(
        accuracy=float(accuracy_score(truth, predicted)),
        f1=averaged(f1_score, "macro"),
        f1_weighted=averaged(f1_score, "weighted"),
        precision=averaged(precision_score, "macro"),
        precision_weighted=averaged(precision_score, "weighted"),
        recall=averaged(recall_score, "macro"),
        recall_weighted=averaged(recall_score, "weighted"),
        ap=ap,
        ap_weighted=ap_weighted,
    )


def _average(
    experiments: list[tuple[ClassificationScores, list[Hashable]]], test_labels: Sequence[Hashable]
) -> ClassificationResult:
    scores = [found for found, _ in experiments]

    def mean(name: str) -> float | None:
        values = [getattr(e, name) for e in scores if getattr(e, name) is not None]
        return float(np.mean(values)) if values else None

    fields = {name: mean(name) for name in ClassificationScores.__dataclass_fields__}
    # accuracy averaged over experiments = the mean over test items of their correctness rate
    correct = np.mean(
        [[p == t for p, t in zip(predicted, test_labels, strict=True)] for _, predicted in experiments], 0
    )
    return ClassificationResult(**fields, experiments=tuple(scores), items=positional("mean", correct))
