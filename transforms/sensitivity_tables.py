"""Tables and figure of a prompt-sensitivity report, shared by the page, the command and the API's
CSV so all show the same numbers (pure: takes the report as a plain dict, ``asdict`` of
:class:`transforms.sensitivity_services.PromptSensitivity`)."""

from __future__ import annotations

from dataclasses import replace

from transforms.judge_tables import Table
from transforms.plots import intervals_by_version

_TESTS = {
    "cochran_q": "Cochran's Q (chi-square, k−1 df)",
    "permutation": "within-block permutation of prompt labels, range of the versions' statistics",
}


def _estimate_cells(e: dict | None) -> list:
    return [None, None, None] if e is None else [e["value"], e["ci_low"], e["ci_high"]]


def _judge_kinds(versions: list[dict]) -> list[str]:
    """Judge kinds with a value for at least one version."""
    return sorted({k for v in versions for k, e in v["judge"].items() if e["value"] is not None})


def sensitivity_tables(r: dict) -> list[Table]:
    rep = r["report"]
    versions = rep["versions"]
    kinds = _judge_kinds(versions)
    has_delta = any(v["benchmark_delta"] for v in versions)
    level = f"{rep['confidence']:.0%}"
    intervals = f"Intervals: {level} percentile bootstrap, {rep['n_resamples']} resamples, seed {rep['seed']}."
    outcome_rows = []
    for v in versions:
        e = v["edit_distance"]
        outcome_rows.append(
            [v["label"], v["run_id"], v["n_texts"], *_estimate_cells(v["error_rate"])]
            + [e["n"], e["median"], e["q1"], e["q3"], e["ci_low"], e["ci_high"]]
        )
    tables = [
        Table(
            "versions",
            f"{r['transformation']} of {r['dataset']} (seed {r['seed']}) under {len(versions)} prompt versions",
            f"Unit: text to transform; edit distances of the successful texts. {intervals}",
            ["prompt version", "run", "texts", "error rate", f"{level} CI low", f"{level} CI high"]
            + ["successful", "edit distance median", "Q1", "Q3", f"median {level} CI low", f"median {level} CI high"],
            outcome_rows,
        )
    ]
    judge_note = r["judge_note"] or "judge scores: per text, the mean over the judges of each run's latest judge report"
    if kinds or has_delta:
        columns, rows = ["prompt version"], [[v["label"]] for v in versions]
        for kind in kinds:
            columns += [f"judge {kind} n", "mean", f"{level} CI low", f"{level} CI high"]
            for row, v in zip(rows, versions, strict=True):
                e = v["judge"].get(kind)
                row += [None] * 4 if e is None else [e["n"], e["value"], e["ci_low"], e["ci_high"]]
        if has_delta:
            columns += ["benchmark units", "Δ mean", f"{level} CI low", f"{level} CI high"]
            for row, v in zip(rows, versions, strict=True):
                d = v["benchmark_delta"]
                row += [None] * 4 if d is None else [d["n"], d["value"], d["ci_low"], d["ci_high"]]
        tables.append(
            Table(
                "version_scores",
                "Judge scores and benchmark Δ per prompt version",
                f"Judge scores: unit successful text; {judge_note}. Benchmark Δ (transformed minus original main "
                f"score on the same items): unit model × dataset × seed. {intervals}",
                columns,
                rows,
            )
        )
    elif r["judge_note"]:
        tables[0] = replace(tables[0], note=f"{tables[0].note} {r['judge_note'][0].upper()}{r['judge_note'][1:]}.")
    tables.append(
        Table(
            "spread",
            "Spread across prompt versions",
            "Spread: largest minus smallest version estimate. The test uses the blocks (texts, or benchmark units) "
            "with a value under every version; p < 0.05 says the prompt wording changes the metric.",
            ["metric", "spread", "blocks", "test", "statistic", "p"],
            [
                [s["metric"], s["spread"], s["n_blocks"], _TESTS[s["test"]], s["statistic"], s["p_value"]]
                for s in rep["spreads"]
            ],
        )
    )
    return tables


def sensitivity_figure(r: dict) -> str:
    """One panel per metric: each prompt version's estimate with its interval."""
    versions = r["report"]["versions"]
    panels = {"error rate": [v["error_rate"] for v in versions]}
    panels["edit distance (median)"] = [
        {
            "value": v["edit_distance"]["median"],
            "ci_low": v["edit_distance"]["ci_low"],
            "ci_high": v["edit_distance"]["ci_high"],
        }
        for v in versions
    ]
    for kind in _judge_kinds(versions):
        panels[f"judge {kind}"] = [v["judge"].get(kind) for v in versions]
    if any(v["benchmark_delta"] for v in versions):
        panels["benchmark Δ"] = [v["benchmark_delta"] for v in versions]
    return intervals_by_version([v["label"] for v in versions], panels)
