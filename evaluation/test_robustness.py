"""Robustness report (pure): units of observation, Holm families, Kendall's τ against scipy,
split-half reliability, exports and figures."""

from __future__ import annotations

import csv
import io
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from scipy import stats

from evaluation.aggregation import UnitScore
from evaluation.figures import report_figures
from evaluation.robustness import robustness_analyse
from evaluation.robustness_options import ReportOptionError, ReportOptions
from evaluation.robustness_results import ALL_MODELS, POOLED, RUN_AGGREGATED, DriftItem
from evaluation.robustness_tables import robustness_csv, robustness_latex
from evaluation.stats import paired_shifts

MODELS = ("alpha", "beta")
DATASETS = ("sts-a", "sts-b", "cls-c")
SEEDS = (1, 2)
TRANSFORMATIONS = {"paraphrase": "lexical", "summary": "length"}
TASK_TYPES = {"sts-a": "sts", "sts-b": "sts", "cls-c": "classification"}


def units(models=MODELS) -> list[UnitScore]:
    rng = np.random.default_rng(7)
    rows = []
    for m, model in enumerate(models):
        for d, dataset in enumerate(DATASETS):
            original = 0.5 + 0.1 * d + 0.05 * m
            rows.append(UnitScore(model, dataset, "original", "", 0, original))
            for t, (name, axis) in enumerate(TRANSFORMATIONS.items()):
                for seed in SEEDS:
                    same_items = original + float(rng.normal(0, 0.01))
                    score = same_items - 0.05 * (t + 1) + float(rng.normal(0, 0.01))
                    rows.append(UnitScore(model, dataset, name, axis, seed, score, same_items))
    return rows


@pytest.fixture(scope="module")
def report():
    return robustness_analyse(units(), models=MODELS, task_types=TASK_TYPES, seed=3, n_resamples=200)


def test_pooled_and_run_aggregated_units_differ_in_n(report):
    n = {(t.scope, t.unit, t.level): [r.n for r in t.rows] for t in report.shifts}
    assert n[(ALL_MODELS, POOLED, "transformation")] == [6, 6]  # 3 datasets x 2 seeds, models averaged
    assert n[(ALL_MODELS, RUN_AGGREGATED, "transformation")] == [3, 3]  # seeds averaged too
    assert n[("alpha", POOLED, "transformation")] == [6, 6]
    assert n[("alpha", RUN_AGGREGATED, "transformation")] == [3, 3]
    assert n[("beta", RUN_AGGREGATED, "axis")] == [3, 3]
    assert n[("beta", POOLED, "axis")] == [6, 6]


def test_shifts_match_paired_shifts_with_holm_across_transformations(report):
    table = report.shift_table(scope=ALL_MODELS, unit=POOLED, level="transformation")
    rows = [u for u in units() if u.transformation != "original"]
    pairs = {}
    for name in ("paraphrase", "summary"):
        # the default unit: per dataset x seed, the mean over the two models
        cells = [(d, s) for d in sorted(DATASETS) for s in SEEDS]
        of = {(u.model, u.dataset, u.seed): u for u in rows if u.transformation == name}
        pairs[name] = (
            [np.mean([of[(m, d, s)].original_score for m in MODELS]) for d, s in cells],
            [np.mean([of[(m, d, s)].score for m in MODELS]) for d, s in cells],
        )
    assert list(table.rows) == paired_shifts(pairs, seed=3, n_resamples=200)
    p = [r.p_value for r in table.rows]
    assert [r.p_holm for r in table.rows] == pytest.approx(
        list(np.minimum(1, np.maximum.accumulate(np.sort(p) * np.array([2, 1])))[np.argsort(np.argsort(p))])
    )
    summary = table.rows[1]
    assert summary.label == "summary" and summary.hodges_lehmann == pytest.approx(-0.1, abs=0.02)
    assert summary.ci_low <= summary.hodges_lehmann <= summary.ci_high


def test_run_aggregated_averages_seeds_first(report):
    table = report.shift_table(scope="alpha", unit=RUN_AGGREGATED, level="transformation")
    rows = [u for u in units() if u.model == "alpha" and u.transformation == "paraphrase"]
    diffs = sorted(np.mean([u.delta for u in rows if u.dataset == d]) for d in DATASETS)
    assert table.rows[0].median_absolute_difference == pytest.approx(abs(np.median(diffs)))


def test_kendall_tau_per_dataset_and_seed_matches_scipy():
    rows = [
        UnitScore(m, "d", "paraphrase", "lexical", 1, s, o)
        for m, o, s in (("a", 0.1, 0.3), ("b", 0.2, 0.1), ("c", 0.3, 0.2), ("d", 0.4, 0.5))
    ]
    found = robustness_analyse(rows, models=["a", "b", "c", "d"], task_types={"d": "sts"}, n_resamples=50)
    expected = stats.kendalltau([0.1, 0.2, 0.3, 0.4], [0.3, 0.1, 0.2, 0.5]).statistic
    by_label = {t.label: t for t in found.taus}
    assert by_label["paraphrase"].mean == pytest.approx(expected) and by_label["paraphrase"].n == 1
    assert by_label["lexical"].mean == pytest.approx(expected) and by_label["lexical"].sd is None


def test_model_comparison_pairs_deltas_against_the_first_model(report):
    assert report.baseline == "alpha"
    assert [c.label for c in report.comparisons] == ["beta | paraphrase", "beta | summary"]
    assert all(c.n == 6 for c in report.comparisons) and all(c.p_holm is not None for c in report.comparisons)


def test_sections_without_enough_models_say_why():
    single = robustness_analyse(units(("alpha",)), models=["alpha"], task_types=TASK_TYPES, n_resamples=50)
    assert single.comparisons == () and "no model comparison" in single.notes["comparisons"]
    assert single.taus == () and "2 models" in single.notes["taus"]
    assert "3 models" in single.notes["reliability"] and "no drift" in single.notes["drift"]
    assert [t.scope for t in single.shifts] == ["alpha"] * 4


def test_split_half_reliability_with_three_models():
    found = robustness_analyse(
        units(("a", "b", "c")),
        models=["a", "b", "c"],
        task_types=TASK_TYPES,
        n_resamples=50,
        options=ReportOptions(split_half_splits=20),
    )
    assert [r.axis for r in found.reliability] == ["lexical", "length"]
    assert all(r.n_datasets == 3 and r.n_splits == 20 for r in found.reliability)
    assert all(r.median is None or -1 <= r.median <= 1 for r in found.reliability)
    assert "only 3 datasets: each half holds at most 2" in found.notes["reliability"]  # results, with a caution


def test_drift_vs_quality_per_transformation():
    items = [DriftItem("paraphrase", d, q) for d, q in ((0.1, 5), (0.2, 4), (0.3, 4.5), (0.5, 2), (0.6, 1))]
    found = robustness_analyse(units(), models=MODELS, task_types=TASK_TYPES, drift_items=items, n_resamples=100)
    (summary,) = found.drift
    assert summary.correlation.spearman == pytest.approx(
        stats.spearmanr([0.1, 0.2, 0.3, 0.5, 0.6], [5, 4, 4.5, 2, 1]).statistic
    )
    assert "drift" in report_figures(found)


def test_exports(report):
    rows = list(csv.DictReader(io.StringIO(robustness_csv(report))))
    tables = {r["table"] for r in rows}
    assert {
        "scores per axis",
        "shift per transformation",
        "shift per axis",
        "model vs baseline",
        "kendall tau per transformation",
    } <= tables
    assert any(r["statistic"] == "p_holm" and r["label"] == "summary" for r in rows)
    latex = robustness_latex(report)
    assert r"\toprule" in latex and r"\bottomrule" in latex and r"$\pm$" in latex
    assert latex.count(r" \\") == 3  # header + 2 models
    assert report.as_dict()["model_comparisons"]["baseline"] == "alpha"


def test_figures_are_valid_deterministic_svg(report):
    figures = report_figures(report)
    assert set(figures) == {"dumbbell", "shifts", "heatmap", "ranks"}
    for svg in figures.values():
        ET.fromstring(svg.encode())
        assert "<dc:date>" not in svg
    assert "paraphrase" in figures["shifts"] and "summary" in figures["heatmap"] and "lexical" in figures["dumbbell"]
    assert "alpha" in figures["heatmap"]
    assert report_figures(report) == figures


def test_figures_as_png_and_pdf_are_deterministic(report):
    png, pdf = report_figures(report, fmt="png"), report_figures(report, fmt="pdf")
    assert set(png) == set(pdf) == {"dumbbell", "shifts", "heatmap", "ranks"}
    assert all(data.startswith(b"\x89PNG\r\n\x1a\n") for data in png.values())
    assert all(data.startswith(b"%PDF-") for data in pdf.values())
    assert report_figures(report, fmt="png") == png and report_figures(report, fmt="pdf") == pdf
    with pytest.raises(ValueError, match="svg, png, pdf"):
        report_figures(report, fmt="gif")


# --- the statistics' units as options: worked examples computed here with scipy ---
OPT_MODELS = ("a", "b", "c")
OPT_DATASETS = ("d1", "d2")
OPT_SEEDS = (1, 2)
OPT_TRANSFORMATIONS = ("paraphrase", "synonyms")  # one axis: lexical


@pytest.fixture(scope="module")
def cube():
    """(model, dataset, transformation, seed) -> (original score on the same items, transformed score)."""
    rng = np.random.default_rng(11)
    return {
        (m, d, t, s): (0.6 + 0.05 * i + float(rng.normal(0, 0.03)), 0.5 + float(rng.normal(0, 0.06)))
        for i, m in enumerate(OPT_MODELS)
        for d in OPT_DATASETS
        for t in OPT_TRANSFORMATIONS
        for s in OPT_SEEDS
    }


def cube_units(cube):
    rows = [UnitScore(m, d, "original", "", 0, 0.6) for m in OPT_MODELS for d in OPT_DATASETS]
    rows += [UnitScore(m, d, t, "lexical", s, after, before) for (m, d, t, s), (before, after) in cube.items()]
    return rows


def analyse(cube, **options):
    return robustness_analyse(
        cube_units(cube),
        models=OPT_MODELS,
        task_types={d: "sts" for d in OPT_DATASETS},
        n_resamples=50,
        options=ReportOptions(**options),
    )


# The multi-axis (HTEB) paper's protocol, written out here rather than read from the presets module:
# τ per dataset on seed-averaged scores (an axis: on its transformations' mean), split-half on the
# transformed scores with 1,000 splits, Wilcoxon on the models' mean, the Walsh-average HL interval,
# and the shifts figure on its unit (runs averaged, datasets as observations).
PAPER_PROTOCOL = {
    "tau_unit": "seed_mean",
    "axis_tau": "axis_mean_scores",
    "split_half_on": "scores",
    "split_half_splits": 1000,
    "wilcoxon_unit": "model_mean",
    "baseline_compare": "delta",  # the multi-axis paper compares no model with a baseline
    "shift_interval": "walsh",
    "shift_figure_unit": "run_aggregated",
}


def test_default_options_are_the_papers_and_recorded_in_every_export(cube):
    found = analyse(cube)
    assert found.options == ReportOptions() and found.options.as_dict() == PAPER_PROTOCOL
    rows = list(csv.DictReader(io.StringIO(robustness_csv(found))))
    assert {r["label"]: r["value"] for r in rows if r["table"] == "options"}["split_half_splits"] == "1000"
    assert {r["unit"] for r in rows if r["table"] == "kendall tau per transformation"} == {
        "unit: dataset (scores averaged over seeds first) ranking of the models"
    }
    assert "tau_unit=seed_mean" in robustness_latex(found).splitlines()[0]
    chosen = analyse(cube, tau_unit="per_seed", split_half_splits=100)
    assert chosen.as_dict()["options"]["tau_unit"] == "per_seed"
    assert "tau_unit=per_seed" in robustness_latex(chosen).splitlines()[0]


def test_defaults_compute_the_papers_tau_and_split_half(cube):
    def mean_over(m, d, transformations, which):
        return np.mean([cube[(m, d, t, s)][which] for t in transformations for s in OPT_SEEDS])

    found = {t.label: t for t in analyse(cube).taus}
    for label, members in (("paraphrase", ["paraphrase"]), ("lexical", OPT_TRANSFORMATIONS)):
        per_dataset = [
            stats.kendalltau(
                [mean_over(m, d, members, 0) for m in OPT_MODELS], [mean_over(m, d, members, 1) for m in OPT_MODELS]
            ).statistic
            for d in OPT_DATASETS
        ]
        assert found[label].n == 2 and found[label].mean == pytest.approx(np.mean(per_dataset))
    # two datasets of one task type: every split is one dataset per half, so the median is the
    # Spearman between the two datasets' mean transformed scores
    expected = stats.spearmanr(
        [mean_over(m, "d1", OPT_TRANSFORMATIONS, 1) for m in OPT_MODELS],
        [mean_over(m, "d2", OPT_TRANSFORMATIONS, 1) for m in OPT_MODELS],
    ).statistic
    (reliability,) = analyse(cube).reliability
    assert reliability.n_splits == 1000 and reliability.median == pytest.approx(expected)


@pytest.fixture(scope="module")
def five_datasets():
    """3 models, 5 datasets, 3 seeds, one transformation that lowers every score by about 0.05."""
    rng = np.random.default_rng(5)
    rows, cells = [], {}
    for i, m in enumerate(OPT_MODELS):
        for d in range(5):
            rows.append(UnitScore(m, f"d{d}", "original", "", 0, 0.6))
            for s in (1, 2, 3):
                before = 0.6 + 0.02 * i + 0.03 * d + float(rng.normal(0, 0.01))
                after = before - 0.05 + float(rng.normal(0, 0.01))
                cells[(m, d, s)] = (before, after)
                rows.append(UnitScore(m, f"d{d}", "paraphrase", "lexical", s, after, before))
    return rows, cells


def test_defaults_test_shifts_on_the_papers_unit_with_the_walsh_interval(five_datasets):
    rows, cells = five_datasets
    found = robustness_analyse(rows, models=OPT_MODELS, task_types={f"d{d}": "sts" for d in range(5)})
    # the paper's unit: one value per dataset, the models' and seeds' mean of transformed − original
    d = [np.mean([cells[(m, k, s)][1] - cells[(m, k, s)][0] for m in OPT_MODELS for s in (1, 2, 3)]) for k in range(5)]
    (row,) = found.shift_table(scope=ALL_MODELS, unit=RUN_AGGREGATED, level="transformation").rows
    assert row.n == 5 and row.p_value == pytest.approx(stats.wilcoxon(d).pvalue) == pytest.approx(0.0625)
    # 5 values cannot reach 95%: the Walsh interval is their range, with coverage 1 − 2/2**5
    assert (row.ci_low, row.ci_high, row.ci_confidence) == (pytest.approx(min(d)), pytest.approx(max(d)), 0.9375)
    # the shifts figure uses that unit: no star (p = 0.0625); the dataset × seed unit (n = 15) stars it
    assert "★" not in report_figures(found)["shifts"]
    pooled = robustness_analyse(
        rows,
        models=OPT_MODELS,
        task_types={f"d{d}": "sts" for d in range(5)},
        options=ReportOptions(shift_figure_unit="pooled"),
    )
    assert "★" in report_figures(pooled)["shifts"]


def test_tau_on_seed_averaged_scores(cube):
    expected = [
        stats.kendalltau(
            [np.mean([cube[(m, d, "paraphrase", s)][0] for s in OPT_SEEDS]) for m in OPT_MODELS],
            [np.mean([cube[(m, d, "paraphrase", s)][1] for s in OPT_SEEDS]) for m in OPT_MODELS],
        ).statistic
        for d in OPT_DATASETS
    ]
    tau = {t.label: t for t in analyse(cube, tau_unit="seed_mean").taus}["paraphrase"]
    assert (
        tau.n == 2
        and tau.mean == pytest.approx(np.mean(expected))
        and tau.sd == pytest.approx(np.std(expected, ddof=1))
    )
    per_seed = {t.label: t for t in analyse(cube, tau_unit="per_seed").taus}["paraphrase"]
    assert per_seed.n == 4  # the option per_seed: dataset x seed


def test_axis_tau_on_axis_averaged_scores(cube):
    def axis_tau(cells):
        return stats.kendalltau(
            [np.mean([cube[(m, d, t, s)][0] for t in OPT_TRANSFORMATIONS for d, s in cells]) for m in OPT_MODELS],
            [np.mean([cube[(m, d, t, s)][1] for t in OPT_TRANSFORMATIONS for d, s in cells]) for m in OPT_MODELS],
        ).statistic

    seed_means = [axis_tau([(d, s) for s in OPT_SEEDS]) for d in OPT_DATASETS]
    found = {t.label: t for t in analyse(cube, tau_unit="seed_mean", axis_tau="axis_mean_scores").taus}["lexical"]
    assert found.n == 2 and found.mean == pytest.approx(np.mean(seed_means))
    per_seed = [axis_tau([(d, s)]) for d in OPT_DATASETS for s in OPT_SEEDS]
    found = {t.label: t for t in analyse(cube, tau_unit="per_seed").taus}["lexical"]
    assert found.n == 4 and found.mean == pytest.approx(np.mean(per_seed))
    pooled = {t.label: t for t in analyse(cube, tau_unit="per_seed", axis_tau="pooled").taus}["lexical"]
    assert pooled.n == 8  # 2 transformations x 2 datasets x 2 seeds, each with its own τ


def test_split_half_on_scores_or_deltas(cube):
    # two datasets of one task type: every split puts one dataset in each half, so the median is
    # Spearman's rho between the two datasets' model profiles
    def profile(d, value):
        return [
            np.mean([value(*cube[(m, d, t, s)]) for t in OPT_TRANSFORMATIONS for s in OPT_SEEDS]) for m in OPT_MODELS
        ]

    for option, value in (("scores", lambda before, after: after), ("deltas", lambda before, after: after - before)):
        expected = stats.spearmanr(profile("d1", value), profile("d2", value)).statistic
        (found,) = analyse(cube, split_half_on=option, split_half_splits=7).reliability
        assert found.median == pytest.approx(expected) and found.n_splits == 7


def test_wilcoxon_unit_model_mean_or_per_model(cube):
    def diffs(cells):
        return [
            np.mean([cube[(m, d, "paraphrase", s)][1] - cube[(m, d, "paraphrase", s)][0] for m in ms])
            for d, s, ms in cells
        ]

    cells = [(d, s) for d in OPT_DATASETS for s in OPT_SEEDS]
    averaged = analyse(cube).shift_table(scope=ALL_MODELS, unit=POOLED, level="transformation").rows[0]
    expected = stats.wilcoxon(diffs([(d, s, OPT_MODELS) for d, s in cells]))
    assert averaged.n == 4 and averaged.p_value == pytest.approx(expected.pvalue)
    table = analyse(cube, wilcoxon_unit="per_model").shift_table(scope=ALL_MODELS, unit=POOLED, level="transformation")
    expected = stats.wilcoxon(diffs([(d, s, (m,)) for m in OPT_MODELS for d, s in cells]))
    assert table.rows[0].n == 12 and table.rows[0].p_value == pytest.approx(expected.pvalue)
    assert "a model × dataset is one unit" in table.description


def test_baseline_compare_transformed_or_delta(cube):
    cells = [(d, s) for d in OPT_DATASETS for s in OPT_SEEDS]
    transformed = {c.label: c for c in analyse(cube, baseline_compare="transformed").comparisons}["b | paraphrase"]
    expected = stats.wilcoxon(
        [cube[("b", d, "paraphrase", s)][1] - cube[("a", d, "paraphrase", s)][1] for d, s in cells]
    )
    assert transformed.n == 4 and transformed.p_value == pytest.approx(expected.pvalue)

    def delta(m, d, s):
        before, after = cube[(m, d, "paraphrase", s)]
        return after - before

    default = {c.label: c for c in analyse(cube).comparisons}["b | paraphrase"]
    expected = stats.wilcoxon([delta("b", d, s) - delta("a", d, s) for d, s in cells])
    assert default.p_value == pytest.approx(expected.pvalue)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"tau_unit": "per_dataset"}, "tau_unit='per_dataset' is unknown: use one of seed_mean, per_seed"),
        ({"kendall": "x"}, "unknown report option(s) kendall"),
        ({"split_half_splits": "many"}, "split_half_splits must be an integer"),
        ({"split_half_splits": 0}, "from 1 to 100000"),
    ],
)
def test_bad_options_are_refused_with_the_accepted_values(values, message):
    with pytest.raises(ReportOptionError) as caught:
        ReportOptions.from_mapping(values)
    assert message in str(caught.value)


def test_options_from_plain_data_keep_defaults_for_unset_values():
    preset = {
        "tau_unit": "seed_mean",
        "axis_tau": "axis_mean_scores",
        "split_half_on": "scores",
        "split_half_splits": 1000,
    }
    assert ReportOptions.from_mapping(preset) == ReportOptions(**preset)
    assert ReportOptions.from_mapping({"split_half_splits": "250", "tau_unit": None}).split_half_splits == 250


def test_the_papers_preset_is_the_one_source_of_the_defaults():
    from transforms.presets import PRESETS

    paper = dict(PRESETS["multi-axis-paper"].report_options)
    assert {name: ReportOptions().as_dict()[name] for name in paper} == paper
    assert ReportOptions.for_preset("multi-axis-paper") == ReportOptions() == ReportOptions.for_preset(None)
    paraphrasing = ReportOptions.for_preset("paraphrasing-paper", {"split_half_splits": "40"})
    assert (paraphrasing.baseline_compare, paraphrasing.split_half_splits) == ("transformed", 40)
    with pytest.raises(ReportOptionError, match="tau_unit='per_seed' conflicts with preset 'multi-axis-paper'"):
        ReportOptions.for_preset("multi-axis-paper", {"tau_unit": "per_seed"})
    with pytest.raises(ReportOptionError, match="unknown preset 'mteb'"):
        ReportOptions.for_preset("mteb")


def test_csv_cells_never_open_as_spreadsheet_formulas():
    hostile = ('=HYPERLINK("http://127.0.0.1:9/?"&A1,"details")', "@SUM(1+1)*cmd|' /C calc'!A0")
    chosen = robustness_analyse(units(hostile), models=hostile, task_types=TASK_TYPES, n_resamples=50)
    cells = [cell for row in csv.reader(io.StringIO(robustness_csv(chosen))) for cell in row]
    assert not [c for c in cells if c[:1] in ("=", "+", "@", "\t", "\r")]
    assert f"'{hostile[0]}" in cells and f"'{hostile[1]}" in cells  # shown as written, as text
    assert any(c.startswith("-0.") for c in cells)  # numbers stay numbers


def test_figures_show_hostile_model_names_as_text():
    """The pages inline these SVGs (``|safe``): a model name is text in them, never markup."""
    hostile = ("<img src=x onerror=alert(1)>", 'beta"><script>alert(2)</script>')
    chosen = robustness_analyse(units(hostile), models=hostile, task_types=TASK_TYPES, n_resamples=50)
    for name, svg in report_figures(chosen).items():
        root = ET.fromstring(svg)
        tags = {element.tag.rsplit("}", 1)[-1] for element in root.iter()}
        assert not tags & {"img", "script", "foreignObject", "iframe"}, name


def test_figures_draw_a_model_name_with_dollar_signs_as_written():
    # A model may be a local folder of any name; matplotlib would read "$...$" as mathematics and
    # fail on a formula it cannot parse, taking every figure of the report with it.
    name = "/models/m$\\frac{$x"
    report = robustness_analyse(
        units((name, "beta")), models=(name, "beta"), task_types=TASK_TYPES, seed=3, n_resamples=50
    )
    figures = report_figures(report)
    assert set(figures) == {"dumbbell", "shifts", "heatmap", "ranks"}
    assert "m$\\frac{$x" in figures["heatmap"]
