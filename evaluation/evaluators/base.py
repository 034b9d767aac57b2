"""What every evaluator shares: the ``encode`` callable it receives and the result interface."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import ClassVar, Protocol

import numpy as np


class Encode(Protocol):
    """Texts to a float32 matrix, one row per text. ``prompt_type`` is "query" or "document" for
    the two sides of retrieval and reranking, None elsewhere (as MTEB passes it)."""

    def __call__(self, texts: Sequence[str], /, *, prompt_type: str | None = None) -> np.ndarray: ...


class EvaluationResult(Protocol):
    main_metric: str

    @property
    def main_score(self) -> float: ...

    def metrics(self) -> dict[str, float | None]: ...


class FieldScores:
    """For result dataclasses whose fields are all their metrics, but for an optional ``items``
    field (``evaluation.item_scores.ItemScores``), and whose main score is the field named
    ``main_metric``."""

    main_metric: ClassVar[str]

    @property
    def main_score(self) -> float:
        return getattr(self, self.main_metric)

    def metrics(self) -> dict[str, float | None]:
        flat = asdict(self)
        flat.pop("items", None)
        return flat


def as_matrix(embeddings: np.ndarray, name: str) -> np.ndarray:
    """Validate a 2-D finite embedding matrix (the one shared input check)."""
    matrix = np.asarray(embeddings)
    if matrix.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array (texts x dimensions), got shape {matrix.shape}")
    if not np.isfinite(matrix).all():
        raise ValueError(f"{name} holds NaN or infinite values")
    return matrix


def split_rows(matrix: np.ndarray, sizes: Sequence[int]) -> list[np.ndarray]:
    """Cut a matrix encoded in one call back into consecutive blocks of ``sizes`` rows."""
    return np.split(matrix, np.cumsum(sizes)[:-1]) if len(sizes) else []


def encode_pairs(sentences1: Sequence[str], sentences2: Sequence[str], encode: Encode) -> list[np.ndarray]:
    """Both sides of sentence pairs encoded in one call: the first sentences' rows, then the second's."""
    if len(sentences1) != len(sentences2):
        raise ValueError(f"{len(sentences1)} first sentences but {len(sentences2)} second sentences")
    return split_rows(encode([*sentences1, *sentences2]), [len(sentences1), len(sentences2)])
