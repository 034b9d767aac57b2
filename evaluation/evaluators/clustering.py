"""Clustering: agreement of mini-batch k-means clusters with gold labels (V-measure).

Two MTEB protocols:

- ``"bootstrap"`` (default; MTEB's ``AbsTaskClustering``, the "v2"/fast clustering tasks): optionally
  embed a random subset of the documents, then ``n_bootstrap`` times draw
  ``max_documents_per_cluster`` documents *with replacement*, cluster them with
  ``MiniBatchKMeans(k-means++, n_init=1, batch_size=512)`` into as many clusters as gold labels,
  and average V-measure (and adjusted mutual information) over the draws. The subset and the
  draws come from one ``random.Random(seed)`` stream, the k-means from ``random_state=seed``.
  MTEB's base class embeds only 4% of a task's documents (``max_fraction_of_documents_to_embed =
  0.04``), a speed-up for its large hub sets that individual tasks override; Shiftlab's default
  embeds every document (set the fraction to 0.04 to mimic a task that keeps MTEB's default).
- ``"single"`` (MTEB's ``AbsTaskClusteringLegacy`` / ``ClusteringEvaluator``, one cluster set):
  one ``MiniBatchKMeans(batch_size=500, n_init="auto")`` over all documents; V-measure, NMI, ARI
  and cluster accuracy (best one-to-one matching of clusters to labels).

Hierarchical (multi-level) labels are not supported: every document has one label.

``clustering_v_measure`` scores one assignment against gold labels and ``single_assignment`` is the
single protocol's k-means on its own, so a human's cluster ids and a model's k-means clusters are
scored by the same function.
"""

from __future__ import annotations

import random
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np
from scipy.optimize import linear_sum_assignment
from sklearn.cluster import MiniBatchKMeans
from sklearn.metrics import (
    adjusted_mutual_info_score,
    adjusted_rand_score,
    confusion_matrix,
    normalized_mutual_info_score,
    v_measure_score,
)

from evaluation.evaluators.base import Encode, FieldScores, as_matrix


@dataclass(frozen=True)
class ClusteringResult(FieldScores):
    v_measure: float
    v_measure_std: float
    v_measures: tuple[float, ...]
    """One value per bootstrap draw (one value for the single protocol)."""
    ami: float | None = None
    ami_std: float | None = None
    nmi: float | None = None
    ari: float | None = None
    cluster_accuracy: float | None = None
    n_documents: int = 0

    main_metric: ClassVar[str] = "v_measure"

    def metrics(self) -> dict[str, float | None]:
        flat = super().metrics()
        flat.pop("v_measures")
        return flat


@dataclass(frozen=True)
class ClusteringEvaluator:
    seed: int = 42
    protocol: Literal["bootstrap", "single"] = "bootstrap"
    n_bootstrap: int = 10
    max_documents_per_cluster: int = 16_384
    kmeans_batch_size: int = 512
    max_fraction_of_documents_to_embed: float | None = None
    max_documents_to_embed: int | None = None
    single_batch_size: int = 500

    def __post_init__(self) -> None:
        if self.protocol not in ("bootstrap", "single"):
            raise ValueError(f"protocol must be 'bootstrap' or 'single', got {self.protocol!r}")
        counts = ("n_bootstrap", "max_documents_per_cluster", "kmeans_batch_size", "single_batch_size")
        if any(getattr(self, name) < 1 for name in counts):
            raise ValueError(f"{', '.join(counts)} must be positive")
        if self.max_documents_to_embed is not None and self.max_documents_to_embed < 1:
            raise ValueError("max_documents_to_embed must be positive")
        if self.max_fraction_of_documents_to_embed is not None and self.max_documents_to_embed is not None:
            raise ValueError("set max_fraction_of_documents_to_embed or max_documents_to_embed, not both")
        if self.max_fraction_of_documents_to_embed is not None and not 0 < self.max_fraction_of_documents_to_embed <= 1:
            raise ValueError("max_fraction_of_documents_to_embed must be in (0, 1]")

    def evaluate(self, texts: Sequence[str], labels: Sequence[Hashable], *, encode: Encode) -> ClusteringResult:
        if len(texts) != len(labels):
            raise ValueError(f"{len(texts)} texts but {len(labels)} labels")
        rng = random.Random(self.seed)
        chosen = self._embedding_subset(len(texts), rng)
        embeddings = encode([texts[i] for i in chosen])
        return self._score(embeddings, [labels[i] for i in chosen], rng)

    def score(self, embeddings: np.ndarray, labels: Sequence[Hashable]) -> ClusteringResult:
        """Like ``evaluate`` with every document embedded."""
        if self.max_fraction_of_documents_to_embed is not None or self.max_documents_to_embed is not None:
            raise ValueError("score() takes all documents: use evaluate() to embed a random subset")
        return self._score(embeddings, labels, random.Random(self.seed))

    def _embedding_subset(self, n: int, rng: random.Random) -> list[int]:
        if self.protocol == "single":
            return list(range(n))
        if self.max_fraction_of_documents_to_embed is not None:
            k = int(self.max_fraction_of_documents_to_embed * n)
        elif self.max_documents_to_embed is not None:
            k = self.max_documents_to_embed
        else:
            return list(range(n))
        return rng.sample(range(n), k=min(n, k))

    def _score(self, embeddings: np.ndarray, labels: Sequence[Hashable], rng: random.Random) -> ClusteringResult:
        embeddings = as_matrix(embeddings, "embeddings")
        gold = _label_ids(labels)
        if len(gold) != len(embeddings):
            raise ValueError(f"{len(embeddings)} embeddings but {len(gold)} labels")
        n_clusters = len(np.unique(gold))
        if n_clusters < 2:
            raise ValueError("clustering needs at least two distinct labels")
        if self.protocol == "single":
            return self._single(embeddings, gold, n_clusters)
        kmeans = MiniBatchKMeans(
            n_clusters=n_clusters,
            batch_size=self.kmeans_batch_size,
            init="k-means++",
            n_init=1,
            random_state=self.seed,
        )
        v_measures, amis = [], []
        for _ in range(self.n_bootstrap):
            draw = rng.choices(range(len(gold)), k=self.max_documents_per_cluster)
            assigned = kmeans.fit_predict(embeddings[draw])
            v_measures.append(clustering_v_measure(gold[draw], assigned))
            amis.append(float(adjusted_mutual_info_score(gold[draw], assigned)))
        return ClusteringResult(
            v_measure=float(np.mean(v_measures)),
            v_measure_std=float(np.std(v_measures)),
            v_measures=tuple(v_measures),
            ami=float(np.mean(amis)),
            ami_std=float(np.std(amis)),
            n_documents=len(gold),
        )

    def single_assignment(self, embeddings: np.ndarray, n_clusters: int) -> np.ndarray:
        """Cluster ids of the single protocol's one mini-batch k-means run over ``embeddings``."""
        kmeans = MiniBatchKMeans(
            n_clusters=n_clusters,
            batch_size=self.single_batch_size,
            n_init="auto",
            compute_labels=True,
            random_state=self.seed,
        )
        return kmeans.fit(as_matrix(embeddings, "embeddings")).labels_

    def _single(self, embeddings: np.ndarray, gold: np.ndarray, n_clusters: int) -> ClusteringResult:
        assigned = self.single_assignment(embeddings, n_clusters)
        v_measure = clustering_v_measure(gold, assigned)
        matrix = confusion_matrix(gold, assigned)
        rows, columns = linear_sum_assignment(matrix, maximize=True)
        return ClusteringResult(
            v_measure=v_measure,
            v_measure_std=0.0,
            v_measures=(v_measure,),
            nmi=float(normalized_mutual_info_score(gold, assigned)),
            ari=float(adjusted_rand_score(gold, assigned)),
            cluster_accuracy=float(matrix[rows, columns].sum() / len(gold)),
            n_documents=len(gold),
        )


def clustering_v_measure(gold: Sequence[Hashable], assigned: Sequence[Hashable]) -> float:
    """V-measure (scikit-learn's, beta = 1) of an assignment of cluster ids against gold labels;
    both may be any hashable values, only their equality matters."""
    if len(gold) != len(assigned):
        raise ValueError(f"{len(gold)} gold labels but {len(assigned)} cluster ids")
    return float(v_measure_score(_label_ids(gold), _label_ids(assigned)))


def _label_ids(labels: Sequence[Hashable]) -> np.ndarray:
    # Any hashable labels (names from a file) become integers; clustering metrics only compare them.
    ids: dict[Hashable, int] = {}
    return np.array([ids.setdefault(label, len(ids)) for label in labels], dtype=np.int64)
