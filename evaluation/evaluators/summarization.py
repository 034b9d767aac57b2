"""Summarization: does embedding similarity to human summaries rank machine summaries like humans?

Protocol of MTEB's ``AbsTaskSummarization`` / ``SummarizationEvaluator`` (the corrected evaluator
of SummEval v2): each machine summary is scored by its highest cosine (and dot) similarity to the
human reference summaries of the same text; per text, Spearman and Pearson correlations of those
scores with the human ratings are computed, and averaged over texts. Texts whose ratings, cosine
scores or dot scores are all equal are skipped (a correlation is undefined there). The main score
is the mean cosine Spearman. The source text itself is not encoded.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
from scipy.stats import pearsonr, spearmanr

from evaluation.evaluators.base import Encode, FieldScores, as_matrix, split_rows
from evaluation.evaluators.similarity import similarity_matrix
from evaluation.item_scores import ItemScores


@dataclass(frozen=True)
class SummarizationResult(FieldScores):
    cosine_spearman: float
    cosine_pearson: float
    dot_spearman: float
    dot_pearson: float
    n_texts: int
    n_skipped: int
    items: ItemScores | None = field(default=None, compare=False, repr=False)
    """Each scored text's cosine Spearman, ids its positions (skipped texts have none)."""

    main_metric: ClassVar[str] = "cosine_spearman"


@dataclass(frozen=True)
class SummarizationEvaluator:
    def evaluate(
        self,
        human_summaries: Sequence[Sequence[str]],
        machine_summaries: Sequence[Sequence[str]],
        ratings: Sequence[Sequence[float]],
        *,
        encode: Encode,
    ) -> SummarizationResult:
        human = split_rows(encode([s for group in human_summaries for s in group]), [len(g) for g in human_summaries])
        machine = split_rows(
            encode([s for group in machine_summaries for s in group]), [len(g) for g in machine_summaries]
        )
        return self.score(human, machine, ratings)

    def score(
        self,
        human_embeddings: Sequence[np.ndarray],
        machine_embeddings: Sequence[np.ndarray],
        ratings: Sequence[Sequence[float]],
    ) -> SummarizationResult:
        if not len(human_embeddings) == len(machine_embeddings) == len(ratings):
            raise ValueError("each text needs human summaries, machine summaries and ratings")
        correlations: dict[str, list[float]] = {
            "cosine_spearman": [],
            "cosine_pearson": [],
            "dot_spearman": [],
            "dot_pearson": [],
        }
        skipped, scored = 0, []
        for i, (human, machine, rated) in enumerate(zip(human_embeddings, machine_embeddings, ratings, strict=True)):
            human, machine = as_matrix(human, f"human_embeddings[{i}]"), as_matrix(machine, f"machine_embeddings[{i}]")
            if len(rated) != len(machine):
                raise ValueError(f"text {i}: {len(rated)} ratings for {len(machine)} machine summaries")
            cosine = similarity_matrix(machine, human, function="cosine").max(axis=1)
            dot = similarity_matrix(machine, human, function="dot").max(axis=1)
            if len(set(rated)) == 1 or len(np.unique(cosine)) == 1 or len(np.unique(dot)) == 1:
                skipped += 1
                continue
            scored.append(str(i))
            correlations["cosine_spearman"].append(float(spearmanr(rated, cosine).statistic))
            correlations["cosine_pearson"].append(float(pearsonr(rated, cosine).statistic))
            correlations["dot_spearman"].append(float(spearmanr(rated, dot).statistic))
            correlations["dot_pearson"].append(float(pearsonr(rated, dot).statistic))
        if not correlations["cosine_spearman"]:
            raise ValueError("every text was skipped: no text has varying ratings and similarities")
        return SummarizationResult(
            **{name: float(np.mean(values)) for name, values in correlations.items()},
            n_texts=len(ratings) - skipped,
            n_skipped=skipped,
            items=ItemScores("mean", tuple(scored), tuple(correlations["cosine_spearman"])),
        )
