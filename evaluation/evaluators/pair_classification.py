"""Pair classification: how well one similarity threshold separates positive from negative pairs.

Protocol of MTEB's ``AbsTaskPairClassification``: for cosine and dot similarity and for Euclidean
and Manhattan distance, the best accuracy and F1 over all thresholds (a threshold never splits
tied scores) and the average precision of the scores; ``max_*`` is the best over the four
functions, and the main score is ``max_ap``. (MTEB also scores the model's own similarity function,
which is always one of these four, so it cannot change any maximum.)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from sklearn.metrics import average_precision_score

from evaluation.evaluators.base import Encode, as_matrix, encode_pairs
from evaluation.evaluators.similarity import SIMILARITY_FUNCTIONS, paired_scores

HIGHER_IS_SIMILAR = {"cosine": True, "dot": True, "euclidean": False, "manhattan": False}


@dataclass(frozen=True)
class ThresholdScores:
    accuracy: float
    accuracy_threshold: float
    f1: float
    f1_threshold: float
    precision: float
    recall: float
    ap: float


@dataclass(frozen=True)
class PairClassificationResult:
    by_function: dict[str, ThresholdScores]
    n_pairs: int

    main_metric: ClassVar[str] = "max_ap"

    @property
    def main_score(self) -> float:
        return self.best("ap")

    def best(self, metric: str) -> float:
        return max(getattr(scores, metric) for scores in self.by_function.values())

    def metrics(self) -> dict[str, float | None]:
        flat: dict[str, float | None] = {
            f"{function}_{name}": value
            for function, scores in self.by_function.items()
            for name, value in vars(scores).items()
        }
        flat.update({f"max_{metric}": self.best(metric) for metric in ("accuracy", "f1", "precision", "recall", "ap")})
        flat["n_pairs"] = self.n_pairs
        return flat


@dataclass(frozen=True)
class PairClassificationEvaluator:
    def evaluate(
        self, sentences1: Sequence[str], sentences2: Sequence[str], labels: Sequence[int], *, encode: Encode
    ) -> PairClassificationResult:
        embeddings1, embeddings2 = encode_pairs(sentences1, sentences2, encode)
        return self.score(embeddings1, embeddings2, labels)

    def score(
        self, embeddings1: np.ndarray, embeddings2: np.ndarray, labels: Sequence[int]
    ) -> PairClassificationResult:
        embeddings1, embeddings2 = as_matrix(embeddings1, "embeddings1"), as_matrix(embeddings2, "embeddings2")
        labels = np.asarray(labels)
        if embeddings1.shape != embeddings2.shape or len(labels) != len(embeddings1):
            raise ValueError(
                f"shapes differ: embeddings1 {embeddings1.shape}, embeddings2 {embeddings2.shape}, "
                f"labels {labels.shape}"
            )
        if not np.isin(labels, (0, 1)).all() or len(np.unique(labels)) != 2:
            raise ValueError("labels must be 0 (different) and 1 (same), with both present")
        scores = paired_scores(embeddings1, embeddings2)
        return PairClassificationResult(
            {
                function: threshold_scores(scores[function], labels, higher_is_similar=HIGHER_IS_SIMILAR[function])
                for function in SIMILARITY_FUNCTIONS
            },
            len(labels),
        )


def threshold_scores(scores: np.ndarray, labels: np.ndarray, *, higher_is_similar: bool) -> ThresholdScores:
    """Best accuracy and F1 over thresholds, and average precision, for one scoring function.

    Pairs are ranked from most to least similar; a threshold sits between two neighbours with
    different scores and calls everything above it positive. As in MTEB, the cut below the last
    pair (everything positive) is not considered.
    """
    scores = np.asarray(scores, dtype=np.float64)
    order = np.argsort(-scores if higher_is_similar else scores, kind="stable")
    ranked, ranked_labels = scores[order], labels[order]
    n, n_positive = len(labels), int(labels.sum())
    true_positives = np.cumsum(ranked_labels)[:-1]
    predicted_positive = np.arange(1, n)
    cut = ranked[:-1] != ranked[1:]
    thresholds = (ranked[:-1] + ranked[1:]) / 2

    accuracy = (true_positives + (n - n_positive) - (predicted_positive - true_positives)) / n
    accuracy = np.where(cut, accuracy, -np.inf)
    best_accuracy = int(np.argmax(accuracy)) if n > 1 else 0
    has_accuracy = n > 1 and np.isfinite(accuracy[best_accuracy])

    precision = true_positives / predicted_positive
    recall = true_positives / n_positive
    with np.errstate(invalid="ignore", divide="ignore"):
        f1 = np.where(cut & (true_positives > 0), 2 * precision * recall / (precision + recall), -np.inf)
    best_f1 = int(np.argmax(f1)) if n > 1 else 0
    has_f1 = n > 1 and np.isfinite(f1[best_f1])

    ap = average_precision_score(labels, scores if higher_is_similar else -scores)
    return ThresholdScores(
        accuracy=float(accuracy[best_accuracy]) if has_accuracy else 0.0,
        accuracy_threshold=float(thresholds[best_accuracy]) if has_accuracy else -1.0,
        f1=float(f1[best_f1]) if has_f1 else 0.0,
        f1_threshold=float(thresholds[best_f1]) if has_f1 else 0.0,
        precision=float(precision[best_f1]) if has_f1 else 0.0,
        recall=float(recall[best_f1]) if has_f1 else 0.0,
        ap=float(ap),
    )
