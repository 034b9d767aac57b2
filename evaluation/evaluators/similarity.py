"""Similarity of paired and of all-against-all embeddings, computed the way MTEB computes them
(scikit-learn's paired distances), so that ties and rounding match its scores."""

from __future__ import annotations

import numpy as np
from sklearn.metrics.pairwise import (
    euclidean_distances,
    manhattan_distances,
    paired_cosine_distances,
    paired_euclidean_distances,
    paired_manhattan_distances,
)

SIMILARITY_FUNCTIONS = ("cosine", "dot", "euclidean", "manhattan")


def paired_scores(embeddings1: np.ndarray, embeddings2: np.ndarray) -> dict[str, np.ndarray]:
    """Per-pair cosine and dot similarity, Euclidean and Manhattan distance."""
    return {
        "cosine": 1 - paired_cosine_distances(embeddings1, embeddings2),
        "dot": np.einsum("ij,ij->i", embeddings1, embeddings2),
        "euclidean": paired_euclidean_distances(embeddings1, embeddings2),
        "manhattan": paired_manhattan_distances(embeddings1, embeddings2),
    }


def similarity_matrix(queries: np.ndarray, documents: np.ndarray, *, function: str) -> np.ndarray:
    """Higher-is-more-similar scores of every query against every document. Distances are
    negated, as sentence-transformers' ``similarity`` does."""
    if function == "cosine":
        return _unit_rows(queries) @ _unit_rows(documents).T
    if function == "dot":
        return queries @ documents.T
    if function == "euclidean":
        return -euclidean_distances(queries, documents)
    if function == "manhattan":
        return -manhattan_distances(queries, documents)
    raise ValueError(f"unknown similarity function {function!r}: use cosine, dot, euclidean or manhattan")


def _unit_rows(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.maximum(norms, np.finfo(matrix.dtype).tiny)
