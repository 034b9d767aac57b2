"""Augmented encoding: pool a text's embedding with the embeddings of its generated variants
(pure module: numpy only, no Django, no I/O).

A text is represented by its original embedding ``o`` and the embeddings ``v_1..v_m`` of m
variants (paraphrases, summaries, keyword lists). Three poolings:

- ``mean``: ``(o + v_1 + ... + v_m) / (1 + m)``, every text counts equally;
- ``weighted``: ``w * o + (1 - w) * mean(v_1..v_m)``, with ``w`` in [0, 1]; ``w = 1`` is the
  plain encoder, ``w = 1 / (1 + m)`` the mean pooling and ``w = 0`` the variants only;
- ``max``: the element-wise maximum of ``o, v_1, ..., v_m`` (max pooling over the set).

A text with no variant keeps its original embedding under every pooling (also with ``w = 0``:
there is nothing else to represent it). The pooled rows are
scaled back to unit length only when every input row already had unit length (the base model
normalises its outputs, as all-MiniLM-L6-v2 does): such a model's users may score with the dot
product, and the mean of unit vectors is shorter than one. Unnormalised models keep the plain
average, whose length is part of what they output.

The encoder that reads the variants and calls the base model lives in
``evaluation/augmented_encoder.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

POOLINGS = ("mean", "weighted", "max")
UNIT_NORM_TOLERANCE = 1e-3


@dataclass(frozen=True)
class VariantCoverage:
    """How many variants a set of texts had, against the ``k`` per transformation asked for."""

    texts: int
    """Distinct texts."""
    incomplete: int
    """Texts that lack at least one requested variant (the ``missing`` option decides)."""
    without_variants: int
    """Texts with no variant at all (their pooled embedding is the original one)."""
    variants: int
    """Variants found, over all texts."""


def is_unit_norm(vectors: np.ndarray, *, tolerance: float = UNIT_NORM_TOLERANCE) -> bool:
    """Whether every row has length 1 (within ``tolerance``); True for no rows."""
    norms = np.linalg.norm(np.asarray(vectors, dtype=np.float64), axis=1)
    return bool(np.all(np.abs(norms - 1.0) <= tolerance))


def pool_embeddings(
    originals: np.ndarray,
    variants: np.ndarray,
    owners: Sequence[int] | np.ndarray,
    *,
    pooling: str = "mean",
    weight: float | None = None,
    normalise: bool = False,
) -> np.ndarray:
    """Pooled embedding of each original row with the variant rows it owns.

    Parameters
    ----------
    originals : (n, d) array
        One row per text.
    variants : (m, d) array
        One row per variant, in any order.
    owners : (m,) ints
        ``owners[j]`` is the row of ``originals`` whose text variant ``j`` was generated from.
    pooling : "mean", "weighted" or "max"
    weight : float in [0, 1], only for ``weighted``
        The original's share; the variants share ``1 - weight`` equally (0: variants only).
    normalise : bool
        Scale every pooled row to unit length.

    Returns
    -------
    (n, d) float32 array
    """
    originals = np.asarray(originals, dtype=np.float64)
    variants = np.asarray(variants, dtype=np.float64)
    owners = np.asarray(owners, dtype=np.int64)
    _validate(originals, variants, owners, pooling=pooling, weight=weight)
    n, d = originals.shape
    sums = np.zeros((n, d), dtype=np.float64)
    np.add.at(sums, owners, variants)
    counts = np.bincount(owners, minlength=n).astype(np.float64)[:, None]
    if pooling == "mean":
        pooled = (originals + sums) / (1.0 + counts)
    elif pooling == "max":
        pooled = originals.copy()
        np.maximum.at(pooled, owners, variants)
    else:
        has_variants = counts > 0
        variant_mean = np.divide(sums, counts, out=np.zeros_like(sums), where=has_variants)
        pooled = np.where(has_variants, weight * originals + (1.0 - weight) * variant_mean, originals)
    if normalise:
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        pooled = pooled / np.maximum(norms, np.finfo(np.float64).tiny)
    return pooled.astype(np.float32)


def _validate(originals: np.ndarray, variants: np.ndarray, owners: np.ndarray, *, pooling: str, weight) -> None:
    if originals.ndim != 2:
        raise ValueError(f"originals must be a 2-D array, got shape {originals.shape}")
    if variants.ndim != 2 or (variants.shape[0] and variants.shape[1] != originals.shape[1]):
        raise ValueError(f"variants must be a 2-D array with {originals.shape[1]} columns, got shape {variants.shape}")
    if owners.shape != (variants.shape[0],):
        raise ValueError(f"owners needs one entry per variant ({variants.shape[0]}), got shape {owners.shape}")
    if owners.size and (owners.min() < 0 or owners.max() >= originals.shape[0]):
        raise ValueError(f"owners must index the {originals.shape[0]} originals")
    if pooling not in POOLINGS:
        raise ValueError(f"pooling must be one of {', '.join(POOLINGS)}, got {pooling!r}")
    if pooling == "weighted" and (weight is None or not 0.0 <= weight <= 1.0):
        raise ValueError(f"weighted pooling needs a weight in [0, 1], got {weight!r}")
    if pooling != "weighted" and weight is not None:
        raise ValueError(f"{pooling} pooling takes no weight: use pooling='weighted' to weight the original")
