"""Per-item scores: each evaluator's main score recomputed from them, their weighted Spearman
against scipy on repeated arrays, and item-level rank intervals checked against a bootstrap
written here with plain loops."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from evaluation.aggregation import UnitScore
from evaluation.evaluators import (
    ClassificationEvaluator,
    RerankingEvaluator,
    RetrievalEvaluator,
    STSEvaluator,
    SummarizationEvaluator,
)
from evaluation.item_scores import ItemScores, weighted_spearman
from evaluation.ranking import DATASET, ITEM, rank_models
from evaluation.robustness import robustness_analyse


def reproduces(result) -> None:
    assert result.items is not None and "items" not in result.metrics()
    assert result.items.score() == pytest.approx(result.main_score, abs=1e-9)
    stored = ItemScores.from_json(result.items.as_json())  # 9 significant digits
    assert stored.ids == result.items.ids and stored.score() == pytest.approx(result.main_score, abs=1e-6)


def test_sts_pairs_reproduce_cosine_spearman():
    rng = np.random.default_rng(0)
    e1 = rng.normal(size=(40, 8))
    e2 = e1 + rng.normal(0, 1, (40, 8))
    gold = np.round(rng.uniform(0, 5, 40), 0)  # ties in gold, as in STS
    result = STSEvaluator().score(e1, e2, gold)
    reproduces(result)
    assert result.items.kind == "spearman" and result.items.ids[:2] == ("0", "1")


def test_retrieval_and_reranking_queries_reproduce_the_main_measure():
    rng = np.random.default_rng(1)
    docs = rng.normal(size=(30, 6))
    query_ids = [f"q{i}" for i in range(12)]
    qrels = {q: {f"d{(3 * i + j) % 30}": float(1 + j % 2) for j in range(3)} for i, q in enumerate(query_ids)}
    retrieval = RetrievalEvaluator().score(
        rng.normal(size=(12, 6)), query_ids, docs, [f"d{i}" for i in range(30)], qrels
    )
    reproduces(retrieval)
    assert retrieval.items.ids == tuple(query_ids) and retrieval.main_metric == "ndcg_at_10"
    reranking = RerankingEvaluator().score(
        rng.normal(size=(10, 6)), [rng.normal(size=(5, 6)) for _ in range(10)], [1, 2] * 5
    )
    reproduces(reranking)
    assert reranking.main_metric == "map_at_1000" and len(reranking.items.ids) == 10


def test_summarization_texts_reproduce_the_mean_spearman_and_skip_like_it():
    rng = np.random.default_rng(2)
    human = [rng.normal(size=(2, 5)) for _ in range(8)]
    machine = [rng.normal(size=(4, 5)) for _ in range(8)]
    ratings = [list(rng.uniform(1, 5, 4)) for _ in range(8)]
    ratings[3] = [2.0] * 4  # constant ratings: skipped, and without an item score
    result = SummarizationEvaluator().score(human, machine, ratings)
    reproduces(result)
    assert result.n_skipped == 1 and "3" not in result.items.ids and len(result.items.ids) == 7


def test_classification_correctness_rates_reproduce_mean_accuracy():
    rng = np.random.default_rng(3)
    labels = [i % 3 for i in range(60)]
    train = rng.normal(size=(60, 4)) + np.array(labels)[:, None]
    test_labels = [i % 3 for i in range(25)]
    test = rng.normal(size=(25, 4)) + np.array(test_labels)[:, None]
    result = ClassificationEvaluator(n_experiments=4, samples_per_label=4).score(train, labels, test, test_labels)
    reproduces(result)
    assert len(result.items.ids) == 25 and 0 < result.main_score < 1


def test_weighted_spearman_equals_scipy_on_repeated_items():
    rng = np.random.default_rng(4)
    x, y = rng.normal(size=30), np.round(rng.normal(size=30), 1)
    x[5] = x[6]  # a tie on each side
    weights = rng.integers(0, 4, (25, 30))
    expected = [stats.spearmanr(np.repeat(x, w), np.repeat(y, w)).statistic for w in weights]
    assert weighted_spearman(x, y, weights) == pytest.approx(expected, abs=1e-12)
    assert np.isnan(weighted_spearman(x, np.ones(30), weights[:1]))[0]  # constant side: undefined


def test_a_multiset_counts_repeated_items_and_ignores_unknown_ids():
    items = ItemScores("mean", ("a", "b", "c"), (1.0, 0.0, 0.5))
    assert items.score({"a": 2, "b": 1, "zz": 5}) == pytest.approx(2 / 3)
    assert math.isnan(items.score({"zz": 1}))
    numbered = ItemScores("mean", ("1", "0"), (1.0, 0.0))
    assert numbered.relabelled(["first", "second"]).ids == ("second", "first")
    with pytest.raises(ValueError, match="one value per distinct item id"):
        ItemScores("mean", ("a", "a"), (1.0, 2.0))


# -- item-level rank intervals ------------------------------------------------------------------


def independent_item_intervals(units, models, datasets, seeds, *, seed, n_resamples, confidence=0.95):
    """The documented draws, written with plain loops: per dataset (in order) one
    ``integers(0, n, (n_resamples, n))`` call over its sorted item universe; per resample a unit's
    score is its mean or its ``scipy.stats.spearmanr`` on the drawn items it has, repeated as drawn;
    cells average their transformations, models their cells; rank = 1 + models strictly higher."""
    rng = np.random.default_rng(seed)
    draws = {}
    for d in datasets:
        universe = sorted({i for (_, dd, _), cell in units.items() if dd == d for unit in cell for i in unit.ids})
        draws[d] = (universe, rng.integers(0, len(universe), (n_resamples, len(universe))))
    ranks = {m: [] for m in models}
    for b in range(n_resamples):
        totals = {}
        for m in models:
            cell_scores = []
            for d in datasets:
                universe, drawn = draws[d]
                picked = [universe[k] for k in drawn[b]]
                for s in seeds:
                    unit_scores = []
                    for unit in units[(m, d, s)]:
                        counts = [picked.count(i) for i in unit.ids]
                        if unit.kind == "mean":
                            unit_scores.append(
                                sum(c * v for c, v in zip(counts, unit.values, strict=True)) / sum(counts)
                            )
                        else:
                            predicted = np.repeat(unit.values, counts)
                            gold = np.repeat(unit.gold, counts)
                            unit_scores.append(stats.spearmanr(predicted, gold).statistic)
                    cell_scores.append(sum(unit_scores) / len(unit_scores))
            totals[m] = sum(cell_scores) / len(cell_scores)
        for m in models:
            ranks[m].append(1 + sum(other > totals[m] for other in totals.values()))
    tail = (1 - confidence) / 2
    out = {}
    for m, values in ranks.items():
        ordered = sorted(values)
        out[m] = (ordered[math.ceil(tail * n_resamples) - 1], ordered[math.ceil((1 - tail) * n_resamples) - 1])
    return out


def synthetic_units(rng):
    """3 models × 2 datasets (STS-like Spearman, retrieval-like mean) × 2 seeds × 2 transformations,
    ~30 items each; one unit lacks three items (left out by a failed transformation)."""
    models, datasets, seeds = ("a", "b", "c"), ("sts", "ret"), (1, 2)
    gold = np.round(rng.uniform(0, 5, 30), 0)
    units = {}
    for k, m in enumerate(models):
        for s in seeds:
            units[(m, "sts", s)] = [
                ItemScores(
                    "spearman",
                    tuple(f"p{i}" for i in range(30)),
                    tuple(gold + rng.normal(0, 1.5 + 0.3 * k, 30)),
                    tuple(gold),
                )
                for _ in range(2)
            ]
            units[(m, "ret", s)] = [
                ItemScores(
                    "mean", tuple(f"q{i}" for i in range(32)), tuple(np.clip(rng.normal(0.6 - 0.03 * k, 0.3, 32), 0, 1))
                )
                for _ in range(2)
            ]
    first = units[("b", "ret", 2)][0]
    units[("b", "ret", 2)][0] = ItemScores("mean", first.ids[3:], first.values[3:])
    return models, datasets, seeds, units


def test_item_rank_intervals_match_an_independent_bootstrap():
    models, datasets, seeds, units = synthetic_units(np.random.default_rng(11))
    scores = np.array(
        [[[np.mean([u.score() for u in units[(m, d, s)]]) for s in seeds] for d in datasets] for m in models]
    )
    items = [[[units[(m, d, s)] for s in seeds] for d in datasets] for m in models]
    found = rank_models(
        scores, models, scope="lexical", datasets=datasets, rng=np.random.default_rng(7), n_resamples=200, items=items
    )
    expected = independent_item_intervals(units, models, datasets, seeds, seed=7, n_resamples=200)
    assert {r.model: (r.rank_low, r.rank_high) for r in found.rows} == expected
    assert len({r.rank_low for r in found.rows} | {r.rank_high for r in found.rows}) > 1  # not all degenerate
    assert found.resampled == ITEM and found.n_items == (30, 32)
    assert found.unit.startswith("unit resampled: item (within each dataset; 62 items in 2 datasets")
    assert found.as_dict()["resampled"] == ITEM


def test_report_falls_back_to_datasets_when_a_unit_has_no_item_scores():
    models, datasets, seeds, units = synthetic_units(np.random.default_rng(12))
    rows = []
    for (m, d, s), cell in units.items():
        for t, items in zip(("paraphrase", "synonyms"), cell, strict=True):
            rows.append(UnitScore(m, d, t, "lexical", s, items.score(), 0.7, item_scores=items))
    for m in models:
        for d in datasets:
            original = units[(m, d, 1)][0]
            rows.append(UnitScore(m, d, "original", "", 0, original.score(), item_scores=original))
    rows[0] = UnitScore(
        *[getattr(rows[0], f) for f in ("model", "dataset", "transformation", "axis", "seed", "score")], 0.7
    )
    report = robustness_analyse(rows, models=models, task_types={"sts": "sts", "ret": "retrieval"}, n_resamples=50)
    original, lexical = report.rankings
    assert original.resampled == ITEM and "unit resampled: item (within each dataset" in original.unit
    assert lexical.resampled == DATASET and lexical.unit.startswith("unit resampled: dataset (2)")
    assert report.as_dict()["rankings"][1]["resampled"] == DATASET
