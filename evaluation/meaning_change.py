"""How far a model moves meaning-changed texts away from their originals, and one summary of
invariance and sensitivity per model (pure module: numpy only; issue 30).

Meaning-changing rewrites (the sensitivity axis: negation, antonym, swapped numbers or entities,
swapped roles) are validated by humans as *changed*. A good embedding model should then move the
pair apart:

- **pair tasks** (STS, relatedness, pair classification): for a pair (a, b) and b' the changed b
  (or a' the changed a), the model's similarity must drop: ``drop = cos(a, b) − cos(a, b')``.
  :func:`similarity_drop` reports the mean drop and the share of pairs whose similarity dropped,
  each with a percentile-bootstrap interval over pairs;
- **retrieval**: the changed version of a relevant document must lose rank against its original
  for the query. :func:`rank_shift` ranks both among the corpus (cosine scores); on the query side
  (the query changed), :func:`query_rank_shift` ranks the relevant document for the original and
  the changed query. :func:`rank_loss` reports the share that lost rank and the mean rank change.

**Invariance–sensitivity summary** (:func:`invariance_sensitivity`): a model robust to paraphrase
but blind to meaning changes maps "open" and "closed" to one point; a model that moves every text
far keeps no meaning either. With

- invariance ``I``: the mean retention ``min(transformed / original, 1)`` (floored at 0) of the
  model's main score over the meaning-preserving transformations (lexical, length, language axes);
- sensitivity ``S``: the share of meaning-changed items the model moved apart (pairs whose
  similarity dropped and documents that lost rank, pooled);

the summary is their harmonic mean ``2·I·S / (I + S)`` (0 when either is 0): both lie in [0, 1],
and the harmonic mean is high only when both are, so neither can make up for the other (an
arithmetic mean would give a blind but perfectly invariant model 0.5). Conditions: ``S`` counts any
drop, however small, so a model whose similarities jitter at random sits near 0.5, and ``I`` is
relative to the original score of the same items.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from core.stats import ConfidenceInterval, bootstrap_ci

N_RESAMPLES = 1000


@dataclass(frozen=True)
class SimilarityDrop:
    """Pair tasks: ``mean_drop`` of cos(a, b) − cos(a, b'), and ``share_dropped`` of the pairs
    whose similarity dropped, each with its 95% percentile-bootstrap interval over pairs."""

    n: int
    mean_drop: ConfidenceInterval
    share_dropped: ConfidenceInterval


def similarity_drop(
    before: Sequence[float], after: Sequence[float], *, seed: int = 0, n_resamples: int = N_RESAMPLES
) -> SimilarityDrop:
    """``before[i]`` the similarity of pair i, ``after[i]`` with one side meaning-changed. Both
    intervals resample the same pairs (one generator state per statistic, same seed)."""
    b, a = np.asarray(before, dtype=float), np.asarray(after, dtype=float)
    if b.shape != a.shape or b.ndim != 1 or not b.size:
        raise ValueError(f"need as many similarities after as before (at least one), got {b.shape} and {a.shape}")
    drops = b - a
    dropped = (drops > 0).astype(float)
    return SimilarityDrop(
        n=int(drops.size),
        mean_drop=bootstrap_ci(drops, rng=np.random.default_rng(seed), n_resamples=n_resamples),
        share_dropped=bootstrap_ci(dropped, rng=np.random.default_rng(seed), n_resamples=n_resamples),
    )


@dataclass(frozen=True)
class RankShift:
    """Ranks (1 = first) of a relevant document and of its meaning-changed version for one query,
    among the corpus with the changed version added; a document's rank is one more than the
    number of other documents scoring strictly higher (ties do not push it down)."""

    original_rank: int
    changed_rank: int

    @property
    def shift(self) -> int:
        """Places the changed version lies below the original (negative: above)."""
        return self.changed_rank - self.original_rank

    @property
    def lost(self) -> bool:
        return self.changed_rank > self.original_rank


def _unit(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return vectors / np.where(norms == 0, 1.0, norms)


def rank_shift(query: np.ndarray, corpus: np.ndarray, relevant: int, changed: np.ndarray) -> RankShift:
    """The ranks for ``query`` (d) of ``corpus[relevant]`` (the corpus is n × d) and of ``changed``
    (d), its meaning-changed version, scored by cosine against the corpus plus ``changed``."""
    corpus = np.asarray(corpus, dtype=float)
    if not 0 <= relevant < len(corpus):
        raise ValueError(f"relevant must index the corpus of {len(corpus)} documents, got {relevant}")
    documents = _unit(np.vstack([corpus, np.asarray(changed, dtype=float)[None, :]]))
    scores = documents @ _unit(np.asarray(query, dtype=float))
    return RankShift(original_rank=_rank_in(scores, relevant), changed_rank=_rank_in(scores, len(corpus)))


def _rank_in(scores: np.ndarray, index: int) -> int:
    return 1 + int(np.sum(np.delete(scores, index) > scores[index]))


def query_rank_shift(query: np.ndarray, changed_query: np.ndarray, corpus: np.ndarray, relevant: int) -> RankShift:
    """The query side: the rank of ``corpus[relevant]`` for ``query`` and for ``changed_query``
    (its meaning-changed version), each scored by cosine against the corpus alone. A model
    sensitive to the change ranks the document lower for the changed query."""
    corpus = _unit(np.asarray(corpus, dtype=float))
    if not 0 <= relevant < len(corpus):
        raise ValueError(f"relevant must index the corpus of {len(corpus)} documents, got {relevant}")
    before = corpus @ _unit(np.asarray(query, dtype=float))
    after = corpus @ _unit(np.asarray(changed_query, dtype=float))
    return RankShift(original_rank=_rank_in(before, relevant), changed_rank=_rank_in(after, relevant))


@dataclass(frozen=True)
class RankLoss:
    """Retrieval and reranking: ``share_lost`` of the changed documents ranked below their
    original, and ``mean_shift`` of changed rank − original rank, with 95% bootstrap intervals."""

    n: int
    share_lost: ConfidenceInterval
    mean_shift: ConfidenceInterval


def rank_loss(shifts: Sequence[RankShift], *, seed: int = 0, n_resamples: int = N_RESAMPLES) -> RankLoss:
    if not shifts:
        raise ValueError("need at least one rank shift")
    lost = np.array([float(s.lost) for s in shifts])
    moved = np.array([float(s.shift) for s in shifts])
    return RankLoss(
        n=len(shifts),
        share_lost=bootstrap_ci(lost, rng=np.random.default_rng(seed), n_resamples=n_resamples),
        mean_shift=bootstrap_ci(moved, rng=np.random.default_rng(seed), n_resamples=n_resamples),
    )


def retention(transformed: float, original: float) -> float | None:
    """The share of its original score a model keeps under a meaning-preserving rewrite, in
    [0, 1] (gains count as 1); None when the original score is not positive."""
    if not original > 0:
        return None
    return float(min(max(transformed / original, 0.0), 1.0))


def invariance(retentions: Iterable[float | None]) -> float | None:
    """The mean retention over the model's meaning-preserving transformations (None: none)."""
    values = [r for r in retentions if r is not None]
    return float(np.mean(values)) if values else None


def sensitivity(moved_apart: int, n: int) -> float | None:
    """The share of meaning-changed items (pairs, documents) the model moved apart."""
    return moved_apart / n if n else None


def invariance_sensitivity(invariance_value: float | None, sensitivity_value: float | None) -> float | None:
    """The harmonic mean of invariance and sensitivity (both in [0, 1]); None when one is unknown."""
    if invariance_value is None or sensitivity_value is None:
        return None
    for name, value in (("invariance", invariance_value), ("sensitivity", sensitivity_value)):
        if not 0 <= value <= 1:
            raise ValueError(f"{name} must lie in [0, 1], got {value}")
    total = invariance_value + sensitivity_value
    return 0.0 if total == 0 else 2 * invariance_value * sensitivity_value / total


@dataclass(frozen=True)
class ModelSensitivity:
    """One model's sensitivity figures beside its invariance, and their summary."""

    model: str
    drops: tuple[tuple[str, str, SimilarityDrop], ...]  # (dataset, transformation, drop) of pair tasks
    rank_losses: tuple[tuple[str, str, RankLoss], ...]  # (dataset, transformation, loss) of ranking tasks
    invariance: float | None
    sensitivity: float | None

    @property
    def summary(self) -> float | None:
        return invariance_sensitivity(self.invariance, self.sensitivity)


def model_sensitivity(
    model: str,
    *,
    drops: Sequence[tuple[str, str, SimilarityDrop]] = (),
    rank_losses: Sequence[tuple[str, str, RankLoss]] = (),
    retentions: Iterable[float | None] = (),
) -> ModelSensitivity:
    """Pools the items behind ``drops`` and ``rank_losses`` into one sensitivity (the share moved
    apart) and ``retentions`` into one invariance."""
    n = sum(d.n for _, _, d in drops) + sum(r.n for _, _, r in rank_losses)
    moved = sum(round(d.share_dropped.estimate * d.n) for _, _, d in drops)
    moved += sum(round(r.share_lost.estimate * r.n) for _, _, r in rank_losses)
    return ModelSensitivity(
        model=model,
        drops=tuple(drops),
        rank_losses=tuple(rank_losses),
        invariance=invariance(retentions),
        sensitivity=sensitivity(moved, n),
    )
