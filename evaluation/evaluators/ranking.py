"""Retrieval and reranking: rank documents per query by embedding similarity, score the ranking.

Protocol of MTEB's ``AbsTaskRetrieval`` (which also runs its reranking tasks): documents are
"title text" (or just the text), queries and documents are encoded with their own prompt type,
each query ranks documents by the model's similarity function, and the ranking is scored with
trec_eval's measures as ``pytrec_eval`` computes them, plus MTEB's own MRR. Main scores: nDCG@10
for retrieval, MAP@1000 for reranking (where each query ranks only its own candidates).

The measures are re-implemented here (``query_scores``) rather than taken from pytrec_eval:

- ranking order: score descending, ties broken by document id descending (trec_eval's rule);
- a document is relevant when its qrels grade is >= 1; ``num_rel`` counts relevant documents
  in the qrels, retrieved or not;
- nDCG@k: gain = qrels grade, discount log2(rank + 1), normalised by the ideal DCG of the
  query's qrels grades cut at k (0 when no document is relevant);
- MAP@k (trec_eval ``map_cut``): sum of precision at each relevant rank <= k, over ``num_rel``;
- Recall@k over ``num_rel``, P@k over k, HitRate@k (trec_eval ``success``), MRR@k = 1 / rank of the
  first relevant document within k.

Every measure is averaged over the queries that have qrels. MTEB additionally rounds averages to
five decimals; these are kept unrounded.

Reranking scores candidate lists (``reranking_result``): each query's candidates carry a score
(a model's similarity, or a human's relevance judgement) and a gold grade. Candidates are numbered
most relevant first, so trec_eval's tie rule (descending id) puts the less relevant candidate
first among equal scores: a tie never earns credit. For a model's real-valued similarities ties
are rare; for binary human judgements this makes the score the worst case over the orders of
tied candidates (a lower bound).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from evaluation.evaluators.base import Encode, as_matrix, split_rows
from evaluation.evaluators.similarity import SIMILARITY_FUNCTIONS, similarity_matrix
from evaluation.item_scores import ItemScores

K_VALUES = (1, 3, 5, 10, 20, 100, 1000)
MEASURES = ("ndcg", "map", "recall", "precision", "mrr", "hit_rate")
# Similarity rows are computed for this many (query x document) cells at a time.
_BLOCK_CELLS = 1 << 24


@dataclass(frozen=True)
class RankingResult:
    """Mean of each measure at each cutoff, e.g. ``at["ndcg"][10]``."""

    at: dict[str, dict[int, float]]
    n_queries: int
    main_measure: str = "ndcg"
    main_k: int = 10
    items: ItemScores | None = field(default=None, compare=False, repr=False)
    """Each query's main measure, ids the query ids (the main score is their mean)."""

    @property
    def main_metric(self) -> str:
        return f"{self.main_measure}_at_{self.main_k}"

    @property
    def main_score(self) -> float:
        return self.at[self.main_measure][self.main_k]

    def metrics(self) -> dict[str, float | None]:
        flat: dict[str, float | None] = {
            f"{measure}_at_{k}": value for measure, by_k in self.at.items() for k, value in by_k.items()
        }
        flat["n_queries"] = self.n_queries
        return flat


def query_scores(
    ranking: Sequence[str], grades: Mapping[str, float], *, k_values: Sequence[int] = K_VALUES
) -> dict[str, dict[int, float]]:
    """Every measure at every cutoff for one query's ranked document ids and its qrels grades."""
    gains = np.array([max(float(grades.get(doc, 0.0)), 0.0) for doc in ranking])
    relevant = np.array([grades.get(doc, 0.0) >= 1 for doc in ranking], dtype=bool)
    num_rel = sum(1 for grade in grades.values() if grade >= 1)
    ideal = np.sort(np.array([max(float(g), 0.0) for g in grades.values()]))[::-1]
    discounts = 1.0 / np.log2(np.arange(2, max(len(ranking), len(ideal), 1) + 2))
    hits = np.cumsum(relevant)
    first_hit = int(np.argmax(relevant)) + 1 if relevant.any() else None
    scores: dict[str, dict[int, float]] = {measure: {} for measure in MEASURES}
    for k in k_values:
        top = min(k, len(ranking))
        found = int(hits[top - 1]) if top else 0
        ideal_dcg = float(np.sum(ideal[:k] * discounts[: min(k, len(ideal))]))
        dcg = float(np.sum(gains[:top] * discounts[:top]))
        precision_at_hits = hits[:top][relevant[:top]] / (np.flatnonzero(relevant[:top]) + 1)
        scores["ndcg"][k] = dcg / ideal_dcg if ideal_dcg > 0 else 0.0
        scores["map"][k] = float(precision_at_hits.sum()) / num_rel if num_rel else 0.0
        scores["recall"][k] = found / num_rel if num_rel else 0.0
        scores["precision"][k] = found / k
        scores["mrr"][k] = 1.0 / first_hit if first_hit is not None and first_hit <= k else 0.0
        scores["hit_rate"][k] = 1.0 if found else 0.0
    return scores


def rank(scores: np.ndarray, doc_ids: Sequence[str], *, top_k: int) -> list[str]:
    """Document ids by descending score, ties by descending id (trec_eval's order), cut at top_k."""
    order = sorted(range(len(doc_ids)), key=lambda i: (float(scores[i]), doc_ids[i]), reverse=True)
    return [doc_ids[i] for i in order[:top_k]]


def ranking_result(
    rankings: Mapping[str, Sequence[str]],
    qrels: Mapping[str, Mapping[str, float]],
    *,
    k_values: Sequence[int] = K_VALUES,
    main_measure: str = "ndcg",
    main_k: int = 10,
) -> RankingResult:
    """Average ``query_scores`` over the queries that have both a ranking and qrels."""
    queries = [q for q in rankings if q in qrels]
    if not queries:
        raise ValueError("no query has both a ranking and relevance judgements")
    per_query = [query_scores(rankings[q], qrels[q], k_values=k_values) for q in queries]
    at = {m: {k: float(np.mean([s[m][k] for s in per_query])) for k in k_values} for m in MEASURES}
    items = ItemScores("mean", tuple(queries), tuple(s[main_measure][main_k] for s in per_query))
    return RankingResult(at, len(queries), main_measure, main_k, items)


@dataclass(frozen=True)
class _RankingEvaluator:
    """The options of both ranking evaluators; ``main_k`` (the cut-off of their main score) must be
    among ``k_values``."""

    similarity_fn_name: str = "cosine"
    k_values: tuple[int, ...] = field(default=K_VALUES)
    main_k: ClassVar[int]

    def __post_init__(self) -> None:
        _check_options(self.similarity_fn_name, self.k_values, self.main_k)


@dataclass(frozen=True)
class RetrievalEvaluator(_RankingEvaluator):
    main_k: ClassVar[int] = 10

    def evaluate(
        self,
        corpus: Mapping[str, str],
        queries: Mapping[str, str],
        qrels: Mapping[str, Mapping[str, float]],
        *,
        encode: Encode,
    ) -> RankingResult:
        """``corpus`` maps document ids to document texts (title and text already joined)."""
        doc_ids, query_ids = list(corpus), [q for q in queries if q in qrels]
        documents = encode([corpus[d] for d in doc_ids], prompt_type="document")
        query_embeddings = encode([queries[q] for q in query_ids], prompt_type="query")
        return self.score(query_embeddings, query_ids, documents, doc_ids, qrels)

    def score(
        self,
        query_embeddings: np.ndarray,
        query_ids: Sequence[str],
        document_embeddings: np.ndarray,
        doc_ids: Sequence[str],
        qrels: Mapping[str, Mapping[str, float]],
    ) -> RankingResult:
        queries = as_matrix(query_embeddings, "query_embeddings")
        documents = as_matrix(document_embeddings, "document_embeddings")
        top_k = max(self.k_values)
        block = max(1, _BLOCK_CELLS // max(1, len(documents)))
        rankings: dict[str, list[str]] = {}
        for start in range(0, len(queries), block):
            similarities = similarity_matrix(
                queries[start : start + block], documents, function=self.similarity_fn_name
            )
            for offset, row in enumerate(similarities):
                # Only the best top_k (plus ties at the boundary) need the exact ordering.
                keep = _top_candidates(row, top_k)
                rankings[query_ids[start + offset]] = rank(row[keep], [doc_ids[i] for i in keep], top_k=top_k)
        return ranking_result(rankings, qrels, k_values=self.k_values, main_measure="ndcg", main_k=self.main_k)


@dataclass(frozen=True)
class RerankingEvaluator(_RankingEvaluator):
    main_k: ClassVar[int] = 1000

    def evaluate(
        self,
        queries: Sequence[str],
        positives: Sequence[Sequence[str]],
        negatives: Sequence[Sequence[str]],
        *,
        encode: Encode,
    ) -> RankingResult:
        """Each query ranks its own candidates: its positives (relevant) and negatives."""
        if not len(queries) == len(positives) == len(negatives):
            raise ValueError("each query needs one list of positives and one of negatives")
        candidates = [[*p, *n] for p, n in zip(positives, negatives, strict=True)]
        query_embeddings = encode(list(queries), prompt_type="query")
        flat = encode([text for texts in candidates for text in texts], prompt_type="document")
        candidate_embeddings = split_rows(flat, [len(texts) for texts in candidates])
        return self.score(query_embeddings, candidate_embeddings, [len(p) for p in positives])

    def score(
        self, query_embeddings: np.ndarray, candidate_embeddings: Sequence[np.ndarray], n_positives: Sequence[int]
    ) -> RankingResult:
        """``candidate_embeddings[i]`` holds query i's positives first, then its negatives."""
        queries = as_matrix(query_embeddings, "query_embeddings")
        if len(queries) != len(candidate_embeddings) or len(queries) != len(n_positives):
            raise ValueError("each query needs one candidate matrix and one count of positives")
        rows, grades = [], []
        for i, (query, candidates) in enumerate(zip(queries, candidate_embeddings, strict=True)):
            candidates = as_matrix(candidates, f"candidate_embeddings[{i}]")
            rows.append(similarity_matrix(query[None, :], candidates, function=self.similarity_fn_name)[0])
            grades.append([1.0 if j < n_positives[i] else 0.0 for j in range(len(candidates))])
        return reranking_result(rows, grades, k_values=self.k_values)


def reranking_result(
    scores: Sequence[Sequence[float]],
    grades: Sequence[Sequence[float]],
    *,
    k_values: Sequence[int] = K_VALUES,
) -> RankingResult:
    """Rank each query's candidates by score and average the measures over queries (main score
    MAP@1000, as MTEB's reranking tasks). ``scores[i][j]`` is candidate j's score for query i and
    ``grades[i][j]`` its gold grade (>= 1 relevant). Ties in score are broken against the more
    relevant candidate (see the module docstring)."""
    if len(scores) != len(grades):
        raise ValueError(f"{len(scores)} score lists but {len(grades)} grade lists")
    if 1000 not in k_values or any(k < 1 for k in k_values):
        raise ValueError(f"k_values must be positive and include 1000 (MAP@1000 is the main score), got {k_values}")
    rankings, qrels = {}, {}
    for i, (row, row_grades) in enumerate(zip(scores, grades, strict=True)):
        if len(row) != len(row_grades):
            raise ValueError(f"query {i}: {len(row)} scores but {len(row_grades)} grades")
        # Zero-padded ids, most relevant first, make trec_eval's descending-id tie-break rank the
        # less relevant candidate first; among equal grades the order cannot change any measure.
        by_relevance = sorted(range(len(row)), key=lambda j: -float(row_grades[j]))
        ids = [""] * len(row)
        for number, j in enumerate(by_relevance):
            ids[j] = f"{number:06d}"
        rankings[str(i)] = rank(np.asarray(row, dtype=np.float64), ids, top_k=max(k_values))
        qrels[str(i)] = {ids[j]: float(row_grades[j]) for j in range(len(row))}
    return ranking_result(rankings, qrels, k_values=k_values, main_measure="map", main_k=1000)


def _top_candidates(row: np.ndarray, top_k: int) -> np.ndarray:
    if len(row) <= top_k:
        return np.arange(len(row))
    threshold = np.partition(row, len(row) - top_k)[len(row) - top_k]
    return np.flatnonzero(row >= threshold)


def _check_options(similarity_fn_name: str, k_values: Sequence[int], main_k: int) -> None:
    if similarity_fn_name not in SIMILARITY_FUNCTIONS:
        raise ValueError(f"similarity_fn_name must be one of {SIMILARITY_FUNCTIONS}, got {similarity_fn_name!r}")
    if main_k not in k_values or any(k < 1 for k in k_values):
        raise ValueError(f"k_values must be positive and include {main_k}, got {k_values}")
