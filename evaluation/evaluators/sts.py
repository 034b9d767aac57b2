"""Semantic textual similarity (and relatedness): correlation of embedding similarity with gold.

Protocol of MTEB's ``AbsTaskSTS`` / ``AnySTSEvaluator``: encode both sides, score each pair with
cosine similarity and negative Manhattan/Euclidean distance, and report Pearson and Spearman
correlations with the gold scores; the main score is the cosine Spearman correlation. MTEB first
rescales gold scores to [0, 1] with the task's min/max score: an increasing affine map, which
leaves both correlations unchanged, so gold scores are used as they are.

``correlation_scores`` is the scoring step on its own (predicted similarities against gold), so
that anything predicting a similarity per pair, a model or a human rater, is scored by one code path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
from scipy.stats import pearsonr, spearmanr

from evaluation.evaluators.base import Encode, FieldScores, as_matrix, encode_pairs
from evaluation.evaluators.similarity import SIMILARITY_FUNCTIONS, paired_scores
from evaluation.item_scores import ItemScores, positional


@dataclass(frozen=True)
class STSResult(FieldScores):
    cosine_spearman: float
    cosine_pearson: float
    manhattan_spearman: float
    manhattan_pearson: float
    euclidean_spearman: float
    euclidean_pearson: float
    spearman: float
    """With the model's own similarity function (MTEB's ``spearman``; cosine for most models)."""
    pearson: float
    n_pairs: int
    items: ItemScores | None = field(default=None, compare=False, repr=False)
    """Each pair's cosine similarity and gold score, ids its positions (the main score's items)."""

    main_metric: ClassVar[str] = "cosine_spearman"


@dataclass(frozen=True)
class STSEvaluator:
    similarity_fn_name: str = "cosine"
    """The model's own similarity function, for ``spearman``/``pearson``."""

    def __post_init__(self) -> None:
        if self.similarity_fn_name not in SIMILARITY_FUNCTIONS:
            raise ValueError(
                f"similarity_fn_name must be one of {SIMILARITY_FUNCTIONS}, got {self.similarity_fn_name!r}"
            )

    def evaluate(
        self, sentences1: Sequence[str], sentences2: Sequence[str], gold: Sequence[float], *, encode: Encode
    ) -> STSResult:
        embeddings1, embeddings2 = encode_pairs(sentences1, sentences2, encode)
        return self.score(embeddings1, embeddings2, gold)

    def score(self, embeddings1: np.ndarray, embeddings2: np.ndarray, gold: Sequence[float]) -> STSResult:
        embeddings1, embeddings2 = as_matrix(embeddings1, "embeddings1"), as_matrix(embeddings2, "embeddings2")
        gold = np.asarray(gold, dtype=np.float64)
        if not embeddings1.shape == embeddings2.shape or len(gold) != len(embeddings1):
            raise ValueError(
                f"shapes differ: embeddings1 {embeddings1.shape}, embeddings2 {embeddings2.shape}, gold {gold.shape}"
            )
        if len(gold) < 2:
            raise ValueError("need at least two pairs to correlate")
        scores = paired_scores(embeddings1, embeddings2)
        # Distances fall as similarity rises: negate them, as MTEB does, so correlations are positive.
        similarity = {
            "cosine": scores["cosine"],
            "dot": scores["dot"],
            "manhattan": -scores["manhattan"],
            "euclidean": -scores["euclidean"],
        }
        needed = {"cosine", "manhattan", "euclidean", self.similarity_fn_name}
        correlations = {name: correlation_scores(similarity[name], gold) for name in needed}
        own = correlations[self.similarity_fn_name]
        return STSResult(
            cosine_spearman=correlations["cosine"].spearman,
            cosine_pearson=correlations["cosine"].pearson,
            manhattan_spearman=correlations["manhattan"].spearman,
            manhattan_pearson=correlations["manhattan"].pearson,
            euclidean_spearman=correlations["euclidean"].spearman,
            euclidean_pearson=correlations["euclidean"].pearson,
            spearman=own.spearman,
            pearson=own.pearson,
            n_pairs=len(gold),
            items=positional("spearman", similarity["cosine"], gold),
        )


@dataclass(frozen=True)
class Correlations:
    spearman: float
    pearson: float
    n_pairs: int


def correlation_scores(predicted: Sequence[float] | np.ndarray, gold: Sequence[float] | np.ndarray) -> Correlations:
    """Spearman and Pearson correlation of predicted similarities with gold scores (NaN where a
    side is constant, as scipy returns it)."""
    predicted, gold = np.asarray(predicted, dtype=np.float64), np.asarray(gold, dtype=np.float64)
    if predicted.shape != gold.shape or predicted.ndim != 1:
        raise ValueError(f"predicted {predicted.shape} and gold {gold.shape} must be paired 1-D arrays")
    if len(gold) < 2:
        raise ValueError("need at least two pairs to correlate")
    return Correlations(
        spearman=float(spearmanr(gold, predicted).statistic),
        pearson=float(pearsonr(gold, predicted).statistic),
        n_pairs=len(gold),
    )
