"""Model rankings with their uncertainty (pure module: numpy and scipy, no Django, no I/O).

A bare leaderboard order hides that neighbours are often not separable. For one ranking (the
original data, or one axis) this module gives each model:

- its **rank** on the mean score over datasets (1 = best; tied means share the better rank);
- a **bootstrap rank interval**: the models are re-ranked on every resample and the interval holds
  the central 95% of a model's ranks (the ranks of all models come from the same resamples);
- **significance letters**: every pair of models is compared with a two-sided Wilcoxon
  signed-rank test over the datasets (a dataset's scores averaged over seeds first), Holm's
  correction runs over all pairs of the ranking, and a compact letter display summarises them:
  models sharing a letter are not significantly different.

What a bootstrap resample draws depends on what the run stored:

- **items within each dataset** (``item_bootstrap_ranks``), when every unit of the ranking has
  per-item scores (``evaluation.item_scores``): the items of each dataset are drawn with
  replacement and every unit's main score is recomputed on the drawn items, while the datasets
  and seeds stay fixed. The interval then reflects the sampling of items, the uncertainty a
  leaderboard's reader usually has in mind;
- **datasets** (``bootstrap_ranks``) otherwise (clustering and pair classification scores do not
  decompose over items, and runs stored before per-item scores have none): the datasets are
  resampled and, inside each drawn dataset, its seeds. The interval reflects which datasets were
  benchmarked, not the sampling of items; with few datasets it is coarse.

The Wilcoxon test over datasets follows Demšar (2006); with fewer than six datasets its exact
p-value cannot fall below 0.05, so every model shares a letter (the report says so rather than
inventing separations).

References
----------
Demšar, J. (2006). Statistical comparisons of classifiers over multiple data sets. Journal of
Machine Learning Research 7, 1–30.
Holm, S. (1979). A simple sequentially rejective multiple test procedure. Scandinavian Journal
of Statistics 6(2), 65–70.
Piepho, H.-P. (2004). An algorithm for a letter-based representation of all-pairwise comparisons.
Journal of Computational and Graphical Statistics 13(2), 456–466.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from itertools import combinations

import numpy as np
from scipy import stats

from core.stats import compact_letters, holm, wilcoxon_p_value
from evaluation.item_scores import ItemScores

ALPHA = 0.05
MIN_DATASETS_FOR_SEPARATION = 6  # exact two-sided Wilcoxon: the smallest p with 5 datasets is 0.0625
ITEM = "item (within each dataset)"  # what a bootstrap resample draws (``Ranking.resampled``)
DATASET = "dataset"

# items[model][dataset][seed]: the item scores of that cell's units (one per transformation)
CellItems = Sequence[Sequence[Sequence[Sequence[ItemScores]]]]


@dataclass(frozen=True)
class ModelRank:
    model: str
    score: float  # mean over datasets of the seed-averaged score
    rank: int  # 1 = best
    rank_low: int  # central bootstrap interval of the rank
    rank_high: int
    letters: str  # models sharing a letter are not significantly different


@dataclass(frozen=True)
class PairTest:
    first: str  # the better-ranked model
    second: str
    n: int  # datasets
    mean_difference: float  # first − second, mean over datasets
    wilcoxon_statistic: float | None
    p_value: float | None  # None when every difference is zero
    p_holm: float | None
    significant: bool


@dataclass(frozen=True)
class Ranking:
    scope: str  # "original" or an axis
    datasets: tuple[str, ...]
    n_seeds: int
    rows: tuple[ModelRank, ...]  # best first
    pairs: tuple[PairTest, ...]
    n_resamples: int
    confidence: float
    alpha: float
    resampled: str = DATASET  # ITEM or DATASET: what a bootstrap resample draws
    n_items: tuple[int, ...] = ()  # ITEM: the items of each dataset

    @property
    def unit(self) -> str:
        if self.resampled == ITEM:
            drawn = (
                f"unit resampled: item (within each dataset; {sum(self.n_items)} items in {len(self.datasets)} "
                f"datasets, datasets and {self.n_seeds} seed(s) fixed)"
            )
        else:
            seeds = f", its {self.n_seeds} seeds resampled within each drawn dataset" if self.n_seeds > 1 else ""
            drawn = f"unit resampled: dataset ({len(self.datasets)}){seeds}"
        return (
            f"{drawn}; {self.n_resamples} bootstrap resamples, central {self.confidence:.0%} rank interval; "
            f"Wilcoxon signed-rank over {len(self.datasets)} datasets (scores averaged over seeds), "
            f"Holm over all {len(self.pairs)} pairs, α = {self.alpha}"
        )

    @property
    def can_separate(self) -> bool:
        return len(self.datasets) >= MIN_DATASETS_FOR_SEPARATION

    def as_dict(self) -> dict:
        return {
            "scope": self.scope,
            "unit": self.unit,
            "resampled": self.resampled,
            "n_items": list(self.n_items),
            "datasets": list(self.datasets),
            "n_seeds": self.n_seeds,
            "n_resamples": self.n_resamples,
            "confidence": self.confidence,
            "alpha": self.alpha,
            "rows": [asdict(r) for r in self.rows],
            "pairs": [asdict(p) for p in self.pairs],
        }


def competition_ranks(scores: np.ndarray) -> np.ndarray:
    """Ranks of the last axis' scores, 1 for the highest; tied scores share the better rank."""
    return stats.rankdata(-np.asarray(scores, dtype=float), method="min", axis=-1).astype(int)


def bootstrap_ranks(scores: np.ndarray, *, rng: np.random.Generator, n_resamples: int = 1000) -> np.ndarray:
    """Ranks of the models on ``n_resamples`` resamples (resamples × models).

    ``scores`` is models × datasets × seeds. Each resample draws ``datasets`` indices with
    ``rng.integers(0, n_datasets, n_datasets)``, then the seeds of each drawn dataset with
    ``rng.integers(0, n_seeds, (n_datasets, n_seeds))``; a model's resampled score is its mean over
    the drawn (dataset, seed) cells. Every model is scored on the same resample, so the ranks are
    joint (``core.stats.bootstrap_ci`` bootstraps one scalar statistic, not a joint ranking).
    """
    values = _as_cube(scores)
    _, n_datasets, n_seeds = values.shape
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be positive, got {n_resamples}")
    ranks = np.empty((n_resamples, values.shape[0]), dtype=int)
    for b in range(n_resamples):
        drawn = rng.integers(0, n_datasets, n_datasets)
        drawn_seeds = rng.integers(0, n_seeds, (n_datasets, n_seeds))
        ranks[b] = competition_ranks(values[:, drawn[:, None], drawn_seeds].mean(axis=(1, 2)))
    return ranks


def item_bootstrap_ranks(items: CellItems, *, rng: np.random.Generator, n_resamples: int = 1000) -> np.ndarray:
    """Ranks of the models on ``n_resamples`` resamples of the items within each dataset
    (resamples × models).

    ``items[m][d][s]`` holds the item scores of model m's units at dataset d and seed s (one per
    transformation of the ranked axis; one for the original data). The draws, in this order:
    for each dataset d (in ``items[0]`` order), its universe is the sorted union of the item ids
    of all its units (every model, seed and transformation), of size n_d, and
    ``rng.integers(0, n_d, (n_resamples, n_d))`` draws row b's items (positions in the universe);
    an item's count in row b is how often it was drawn. On resample b, each unit's main score is
    ``ItemScores.scores`` on the counts of the ids it has (a unit lacking some ids uses those it
    has; where its drawn items give no score, none drawn or a constant Spearman side, it keeps its
    score on all its items); a cell's score is the mean over its units, and a model's the mean
    over datasets and seeds, as the point estimate. All models are ranked on the same draws.
    """
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be positive, got {n_resamples}")
    n_models, n_datasets = len(items), len(items[0])
    totals = np.zeros((n_resamples, n_models))
    for d in range(n_datasets):
        cells = [items[m][d] for m in range(n_models)]
        universe = sorted({i for per_seed in cells for units in per_seed for unit in units for i in unit.ids})
        where = {item: k for k, item in enumerate(universe)}
        drawn = rng.integers(0, len(universe), (n_resamples, len(universe)))
        offsets = np.arange(n_resamples)[:, None] * len(universe)
        counts = np.bincount((drawn + offsets).ravel(), minlength=n_resamples * len(universe))
        counts = counts.reshape(n_resamples, len(universe))
        for m, per_seed in enumerate(cells):
            for units in per_seed:
                cell = np.zeros(n_resamples)
                for unit in units:
                    scores = unit.scores(counts[:, [where[i] for i in unit.ids]])
                    cell += np.where(np.isfinite(scores), scores, unit.score())
                totals[:, m] += cell / len(units) / (len(per_seed) * n_datasets)
    return competition_ranks(totals)


def rank_models(
    scores: np.ndarray,
    models: Sequence[str],
    *,
    scope: str,
    datasets: Sequence[str],
    rng: np.random.Generator,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    alpha: float = ALPHA,
    items: CellItems | None = None,
) -> Ranking:
    """Rank, bootstrap rank interval and significance letters of each model (module docstring).

    ``scores`` is models × datasets × seeds (every cell present; higher is better). With
    ``items`` (``item_bootstrap_ranks``; the cell scores are then the means of their units' main
    scores), the rank intervals resample items within each dataset; without, datasets."""
    values = _as_cube(scores)
    if values.shape[:2] != (len(models), len(datasets)):
        raise ValueError(f"scores has shape {values.shape}, expected {len(models)} models × {len(datasets)} datasets")
    if len(set(models)) != len(models):
        raise ValueError("model names must be unique")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    per_dataset = values.mean(axis=2)  # models × datasets, seeds averaged
    means = per_dataset.mean(axis=1)
    ranks = competition_ranks(means)
    if items is None:
        resampled = bootstrap_ranks(values, rng=rng, n_resamples=n_resamples)
    else:
        if len(items) != len(models) or any(len(per_model) != len(datasets) for per_model in items):
            raise ValueError(f"items must be given per model and dataset, {len(models)} × {len(datasets)}")
        resampled = item_bootstrap_ranks(items, rng=rng, n_resamples=n_resamples)
    tail = (1 - confidence) / 2
    low, high = np.quantile(resampled, [tail, 1 - tail], axis=0, method="inverted_cdf").astype(int)
    order = sorted(range(len(models)), key=lambda i: (ranks[i], i))
    pairs = pairwise_tests(per_dataset[order], [models[i] for i in order], alpha=alpha)
    letters = compact_letters(
        [models[i] for i in order], {frozenset((p.first, p.second)) for p in pairs if p.significant}
    )
    rows = tuple(
        ModelRank(models[i], float(means[i]), int(ranks[i]), int(low[i]), int(high[i]), letters[models[i]])
        for i in order
    )
    n_items = () if items is None else tuple(_universe_size(per_dataset) for per_dataset in zip(*items, strict=True))
    return Ranking(
        scope,
        tuple(datasets),
        values.shape[2],
        rows,
        tuple(pairs),
        n_resamples,
        confidence,
        alpha,
        DATASET if items is None else ITEM,
        n_items,
    )


def pairwise_tests(per_dataset: np.ndarray, models: Sequence[str], *, alpha: float = ALPHA) -> list[PairTest]:
    """Two-sided Wilcoxon signed-rank test of every pair of models over the datasets (rows of
    ``per_dataset`` in ``models`` order, best first), Holm-adjusted over the pairs tested."""
    values = np.asarray(per_dataset, dtype=float)
    raw = []
    for i, j in combinations(range(len(models)), 2):
        difference = values[i] - values[j]
        statistic, p = wilcoxon_p_value(difference)
        raw.append((i, j, float(difference.mean()), statistic, p))
    tested = [p for *_, p in raw if p is not None]
    adjusted = iter(holm(tested)) if tested else iter(())
    out = []
    for i, j, mean_difference, statistic, p in raw:
        p_holm = float(next(adjusted)) if p is not None else None
        significant = p_holm is not None and p_holm < alpha
        out.append(PairTest(models[i], models[j], values.shape[1], mean_difference, statistic, p, p_holm, significant))
    return out


def _as_cube(scores: np.ndarray) -> np.ndarray:
    values = np.asarray(scores, dtype=float)
    if values.ndim != 3 or 0 in values.shape:
        raise ValueError(f"scores must be models × datasets × seeds with every axis non-empty, got {values.shape}")
    if not np.all(np.isfinite(values)):
        raise ValueError("scores hold NaN or infinite values: rank only complete datasets")
    return values


def _universe_size(cells: Sequence[Sequence[Sequence[ItemScores]]]) -> int:
    return len({i for per_seed in cells for units in per_seed for unit in units for i in unit.ids})
