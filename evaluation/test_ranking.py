"""Model rankings: bootstrap rank intervals checked against a bootstrap written here with plain
loops, letter groups on worked examples with exact Wilcoxon p-values, and the report's rankings."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from evaluation.aggregation import UnitScore
from evaluation.ranking import competition_ranks, rank_models
from evaluation.robustness import robustness_analyse


def independent_rank_intervals(scores, *, seed: int, n_resamples: int, confidence: float = 0.95):
    """The documented scheme, written without numpy fancy indexing: per resample, draw the datasets,
    then the seeds of each drawn dataset; a model's score is the mean over the drawn cells; its rank
    is 1 + the number of models scoring strictly higher. The interval is the inverted-CDF quantile
    pair of each model's ranks."""
    rng = np.random.default_rng(seed)
    n_models, n_datasets, n_seeds = scores.shape
    ranks = [[] for _ in range(n_models)]
    for _ in range(n_resamples):
        drawn = rng.integers(0, n_datasets, n_datasets)
        drawn_seeds = rng.integers(0, n_seeds, (n_datasets, n_seeds))
        means = []
        for m in range(n_models):
            cells = [scores[m][drawn[i]][drawn_seeds[i][j]] for i in range(n_datasets) for j in range(n_seeds)]
            means.append(sum(cells) / len(cells))
        for m in range(n_models):
            ranks[m].append(1 + sum(other > means[m] for other in means))
    tail = (1 - confidence) / 2
    out = []
    for values in ranks:
        ordered = sorted(values)
        out.append((ordered[math.ceil(tail * n_resamples) - 1], ordered[math.ceil((1 - tail) * n_resamples) - 1]))
    return out


def test_rank_intervals_match_an_independent_bootstrap():
    rng = np.random.default_rng(5)
    # four models, 7 datasets, 3 seeds: two close leaders, a middle model, a clear last
    centres = np.array([0.80, 0.79, 0.75, 0.60])
    scores = centres[:, None, None] + rng.normal(0, 0.03, (4, 7, 3))
    models = ["lead", "close", "middle", "last"]
    found = rank_models(
        scores, models, scope="original", datasets=[f"d{i}" for i in range(7)], rng=np.random.default_rng(42)
    )
    expected = independent_rank_intervals(scores, seed=42, n_resamples=1000)
    by_model = {row.model: row for row in found.rows}
    for model, (low, high) in zip(models, expected, strict=True):
        assert (by_model[model].rank_low, by_model[model].rank_high) == (low, high)
    assert by_model["last"].rank_low == by_model["last"].rank_high == 4
    assert [row.model for row in found.rows] == sorted(models, key=lambda m: -scores[models.index(m)].mean())
    assert all(row.rank_low <= row.rank <= row.rank_high for row in found.rows)


def test_letter_groups_three_models_two_separable():
    # eight datasets, one seed; "low" is below both others on every dataset; "first" and "second"
    # alternate. Exact two-sided Wilcoxon with all 8 differences of one sign: p = 2 / 2**8.
    first = np.array([0.70, 0.62, 0.81, 0.66, 0.74, 0.59, 0.77, 0.68])
    second = first - np.array([-0.01, 0.02, -0.03, 0.04, -0.05, 0.06, -0.07, 0.08]) / 10  # mean 0.0005 lower
    low = first - 0.1 - np.arange(8) / 100
    scores = np.stack([second, low, first])[:, :, None]
    found = rank_models(
        scores, ["second", "low", "first"], scope="original", datasets=list("abcdefgh"), rng=np.random.default_rng(0)
    )
    letters = {row.model: row.letters for row in found.rows}
    assert letters == {"first": "a", "second": "a", "low": "b"}
    pairs = {(p.first, p.second): p for p in found.pairs}
    assert set(pairs) == {("first", "second"), ("first", "low"), ("second", "low")}  # best first
    assert pairs[("first", "low")].p_value == pytest.approx(2 / 2**8)
    assert pairs[("first", "low")].p_holm == pytest.approx(3 * 2 / 2**8)  # Holm: the smallest p times 3
    expected = stats.wilcoxon(first - second).pvalue
    assert pairs[("first", "second")].p_value == pytest.approx(expected) and not pairs[("first", "second")].significant
    assert found.can_separate


def test_fewer_than_six_datasets_cannot_separate_any_pair():
    scores = np.stack([np.full(5, 0.9), np.full(5, 0.8) - np.arange(5) / 100, np.full(5, 0.1)])[:, :, None]
    found = rank_models(scores, ["a", "b", "c"], scope="x", datasets=list("vwxyz"), rng=np.random.default_rng(0))
    assert {row.letters for row in found.rows} == {"a"}  # exact p >= 0.0625 with 5 datasets
    assert not found.can_separate and [row.rank for row in found.rows] == [1, 2, 3]


def test_competition_ranks_share_the_better_rank_on_ties():
    assert competition_ranks(np.array([0.5, 0.9, 0.5, 0.1])).tolist() == [2, 1, 2, 4]


def test_bad_input_says_what_is_wrong():
    with pytest.raises(ValueError, match="models × datasets × seeds"):
        rank_models(np.zeros((2, 3)), ["a", "b"], scope="x", datasets=["d", "e", "f"], rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="expected 2 models × 3 datasets"):
        rank_models(np.zeros((2, 2, 1)), ["a", "b"], scope="x", datasets=["d", "e", "f"], rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="NaN"):
        rank_models(
            np.array([[[np.nan], [1.0]], [[0.0], [1.0]]]),
            ["a", "b"],
            scope="x",
            datasets="de",
            rng=np.random.default_rng(0),
        )


def test_report_ranks_original_data_and_each_axis():
    rng = np.random.default_rng(9)
    models, datasets, seeds = ("a", "b", "c"), ("d1", "d2", "d3"), (1, 2)
    rows, axis_cells = [], {}
    for i, m in enumerate(models):
        for d in datasets:
            rows.append(UnitScore(m, d, "original", "", 0, 0.7 - 0.1 * i + float(rng.normal(0, 0.01))))
            for s in seeds:
                values = [0.5 - 0.05 * i + float(rng.normal(0, 0.02)) for _ in range(2)]
                rows += [
                    UnitScore(m, d, t, "lexical", s, v, 0.7)
                    for t, v in zip(("paraphrase", "synonyms"), values, strict=True)
                ]
                axis_cells[(m, d, s)] = np.mean(values)
    report = robustness_analyse(rows, models=models, task_types={d: "sts" for d in datasets}, seed=4, n_resamples=300)
    original, lexical = report.rankings
    assert (original.scope, original.n_seeds, lexical.scope, lexical.n_seeds) == ("original", 1, "lexical", 2)
    cube = np.array([[[axis_cells[(m, d, s)] for s in seeds] for d in datasets] for m in models])
    expected = independent_rank_intervals(cube, seed=4, n_resamples=300)
    assert [(r.rank_low, r.rank_high) for r in sorted(lexical.rows, key=lambda r: models.index(r.model))] == expected
    assert [r.score for r in lexical.rows] == pytest.approx(sorted(cube.mean(axis=(1, 2)), reverse=True))
    assert "rankings" in report.as_dict() and report.as_dict()["rankings"][1]["rows"][0]["letters"] == "a"


def test_one_dataset_gives_no_ranking_and_says_why():
    rows = [UnitScore(m, "only", "original", "", 0, v) for m, v in (("a", 0.5), ("b", 0.6))]
    report = robustness_analyse(rows, models=["a", "b"], task_types={"only": "sts"}, n_resamples=20)
    assert report.rankings == () and "at least 2 datasets" in report.notes["rankings"]
    assert "original (1 complete dataset(s))" in report.notes["rankings"]
