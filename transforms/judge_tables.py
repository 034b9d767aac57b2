"""Tables of a stored judge report, shared by the page, the command and the CSV export so all
three show the same numbers (pure module: takes the report's stored JSON result)."""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass

from core.spreadsheet import spreadsheet_writer


@dataclass(frozen=True)
class Table:
    key: str
    title: str
    note: str  # unit of observation and aggregation
    columns: list[str]
    rows: list[list]


def format_value(value) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.1e}" if 0 < abs(value) < 0.001 else f"{value:.3f}"
    return str(value)


def _interval(cell: dict) -> str:
    counts = f"n={cell['n']}" + (f", {cell['n_unparsed']} unparsed" if cell.get("n_unparsed") else "")
    if cell["mean"] is None:
        return f"– ({counts})"
    return f"{cell['mean']:.2f} [{cell['ci_low']:.2f}, {cell['ci_high']:.2f}] ({counts})"


def judge_models(kind: str, result: dict) -> dict[str, str]:
    """The model each judge alias of a stored report had when it ran."""
    if kind == "evaluation":
        return {result["judge"]: result["model"]}
    if kind == "run":
        return {j["judge"]: j["model"] for j in result["judges"]}
    return dict(result.get("judge_models", {}))


def _stored_degenerate_judges(kind: str, result: dict) -> list[dict]:
    """The degenerate judges a report stored, or for a report stored before they were, those its
    summaries show with zero variance (SD 0, or a zero-width bootstrap interval over 2+ scores)."""
    if "degenerate_judges" in result:
        return result["degenerate_judges"]
    if kind == "run":
        return [
            {"judge": j["judge"], "kind": k, "n": s["n_parsed"], "modal_score": s["mean"], "modal_share": 1.0}
            for j in result["judges"]
            for k, s in j["by_kind"].items()
            if s["n_parsed"] > 1 and s["sd"] == 0
        ]
    if kind == "selection":
        found = []
        for k, comparison in result["kinds"].items():
            for judge, row in comparison["crossover"].items():
                cells = [c for c in row.values() if c["n"]]
                means = {c["mean"] for c in cells}
                n = sum(c["n"] for c in cells)
                if n > 1 and len(means) == 1 and all(c["ci_low"] == c["ci_high"] for c in cells):
                    found.append(
                        {"judge": judge, "kind": k, "n": n, "modal_score": cells[0]["mean"], "modal_share": 1.0}
                    )
        return found
    return []


def report_warnings(kind: str, result: dict) -> list[str]:
    """A warning for every judge that gave one score to (nearly) every text: its numbers in this
    report cannot tell texts, languages or candidates apart."""
    models = judge_models(kind, result)
    unit = "pair" if kind == "evaluation" else "text"
    warnings = []
    for d in _stored_degenerate_judges(kind, result):
        model = models.get(d["judge"], d["judge"])
        judge = d["judge"] if model == d["judge"] else f"{model} ({d['judge']})"
        score, share = f"{d['modal_score']:g}", d["modal_share"]
        if share == 1:
            what = f"gave {d['kind']} {score} to every one of its {d['n']} scored {unit}s (no variance)"
            power = "cannot"
        else:
            what = f"gave {d['kind']} {score} to {round(share * d['n'])} of its {d['n']} scored {unit}s ({share:.0%})"
            power = "can hardly"
        warnings.append(
            f"Degenerate judge: {judge} {what}. Its {d['kind']} scores {power} tell {unit}s apart, so their "
            "means, intervals and rankings say little; try another judge model or check its answers."
        )
    return warnings


def report_tables(kind: str, result: dict) -> list[Table]:
    """The tables of a report of ``kind`` (evaluation, run or selection)."""
    return {"evaluation": _evaluation_tables, "run": _run_tables, "selection": _selection_tables}[kind](result)


def _evaluation_tables(r: dict) -> list[Table]:
    return [
        Table(
            "overview",
            "Judge vs gold similarity",
            "One row per judge; unit: sentence pair. Parse failures are left out of Spearman and MAE.",
            ["judge", "model", "dataset", "pairs", "parsed", "parse failure rate", "Spearman", "MAE"],
            [
                [
                    r["judge"],
                    r["model"],
                    r["dataset"],
                    r["n"],
                    r["n_parsed"],
                    r["parse_failure_rate"],
                    r["spearman"],
                    r["mae"],
                ]
            ],
        ),
        Table(
            "spearman_by_length",
            "Spearman by length",
            "Pairs binned by the word count of their longer sentence.",
            ["words", "n", "Spearman"],
            [[k, b["n"], b["value"]] for k, b in r["by_length"].items()],
        ),
        Table(
            "mae_by_gold",
            "Mean absolute error by gold score",
            "Pairs binned by their gold score (0–5).",
            ["gold score", "n", "MAE"],
            [[k, b["n"], b["value"]] for k, b in r["mae_by_gold"].items()],
        ),
    ]


_SCORE_COLUMNS = ["n", "parsed", "parse failure rate", "mean", "SD", "HL", "HL 95% CI low", "HL 95% CI high"]


def _score_row(s: dict) -> list:
    return [
        s["n"],
        s["n_parsed"],
        s["parse_failure_rate"],
        s["mean"],
        s["sd"],
        s["hodges_lehmann"],
        s["ci_low"],
        s["ci_high"],
    ]


def _run_tables(r: dict) -> list[Table]:
    overall = [[j["judge"], j["model"], kind] + _score_row(s) for j in r["judges"] for kind, s in j["by_kind"].items()]
    by_language = [
        [j["judge"], language, kind] + _score_row(s)
        for j in r["judges"]
        for language, kinds in j["by_language"].items()
        for kind, s in kinds.items()
    ]
    return [
        Table(
            "run_scores",
            f"Run {r['run']}: {r['transformation']} of {r['dataset']}",
            f"Unit: transformed text ({r['n_ok']} successful of {r['n_texts']}); HL = Hodges–Lehmann estimate "
            "with a 95% percentile-bootstrap interval.",
            ["judge", "model", "question"] + _SCORE_COLUMNS,
            overall,
        ),
        Table(
            "run_by_language",
            "By language of the transformed text",
            "Unit: transformed text, grouped by its target language.",
            ["judge", "language", "question"] + _SCORE_COLUMNS,
            by_language,
        ),
    ]


def _selection_tables(r: dict) -> list[Table]:
    candidates = r["candidates"]
    error_types = sorted({e for c in candidates for e in c["error_rates"]})
    pooled = r.get("pooled") or {}
    by_transformation = r.get("by_transformation") or {r["transformation"]: r["kinds"]}
    # Over several transformations each candidate has one run per transformation.
    lead = ["transformation"] if pooled else []
    of = ", ".join(by_transformation) if pooled else r["transformation"]
    tables = [
        Table(
            "candidates",
            f"Candidates: {of} of {r['dataset']}",
            "Unit: text to transform. Error rates count each text once (its final error); seconds per text are "
            "the LLM latency of the kept attempt.",
            lead
            + ["candidate", "model", "run", "texts", "error rate"]
            + [f"error: {e}" for e in error_types]
            + ["mean edit distance", "seconds per text"],
            [
                ([c.get("transformation", "")] if pooled else [])
                + [c["name"], c["model"], c["run_id"], c["n_texts"], c["error_rate"]]
                + [c["error_rates"].get(e, 0.0) for e in error_types]
                + [c["mean_edit_distance"], c["seconds_per_text"]]
                for c in candidates
            ],
        ),
    ]
    for transformation, kinds in by_transformation.items():
        names = [c["name"] for c in candidates if not pooled or c.get("transformation") == transformation]
        for kind, k in kinds.items():
            tables += _kind_tables(r, kind, k, names, transformation if pooled else "")
    for kind, p in pooled.items():
        tables += _pooled_tables(kind, p)
    return tables


def _kind_tables(r: dict, kind: str, k: dict, names: list[str], transformation: str) -> list[Table]:
    """Crossover, ranking and pairwise tests of one judged dimension (on one transformation of a
    pooled selection: its name goes into the keys and titles)."""
    key = f"{transformation}_{kind}" if transformation else kind
    title = f"{transformation}, {kind}" if transformation else kind.capitalize()
    return [
        Table(
            f"crossover_{key}",
            f"{title}: crossover matrix (rows judge, columns candidate)",
            "Cell: mean judge score of the candidate's successful texts [95% percentile-bootstrap CI] (n scored; "
            "answers without a score on the scale are counted as unparsed).",
            ["judge"] + names,
            [[judge] + [_interval(k["crossover"][judge][c]) for c in names] for judge in r["judges"]],
        ),
        Table(
            f"overall_{key}",
            f"{title}: candidates ranked",
            "Unit: text; its score is the mean over the judges that scored it. Candidates sharing a letter "
            f"are not significantly different (Holm-corrected paired bootstrap, alpha {r['alpha']}).",
            ["rank", "candidate", "group", "n", "mean", "95% CI low", "95% CI high"],
            [
                [
                    i + 1,
                    c,
                    k["letters"][c],
                    k["overall"][c]["n"],
                    k["overall"][c]["mean"],
                    k["overall"][c]["ci_low"],
                    k["overall"][c]["ci_high"],
                ]
                for i, c in enumerate(k["ranking"])
            ],
        ),
        Table(
            f"pairwise_{key}",
            f"{title}: pairwise paired bootstrap tests",
            f"Unit: text both candidates transformed successfully; {r['n_resamples']} resamples, seed "
            f"{r['seed']}; p-values Holm-corrected over all pairs.",
            ["first", "second", "n", "mean difference", "95% CI low", "95% CI high", "p", "p (Holm)", "significant"],
            [
                [
                    p["first"],
                    p["second"],
                    p["n"],
                    p["mean_difference"],
                    p["ci_low"],
                    p["ci_high"],
                    p["p_value"],
                    p["p_holm"],
                    p["significant"],
                ]
                for p in k["pairwise"]
            ],
        ),
    ]


def _pooled_tables(kind: str, p: dict) -> list[Table]:
    """A selection pooled over transformations: the pooled ranking, the top-k crossover and the
    pairs of candidates whose order differs between transformations."""
    transformations, top_k = p["transformations"], p["top_k"]
    return [
        Table(
            f"pooled_{kind}",
            f"{kind.capitalize()}: pooled over {len(transformations)} transformations",
            "Pooled score: the mean over transformations of the candidate's mean per-text score on each (every "
            "transformation weighs the same); 95% percentile-bootstrap CI resampling texts within each "
            "transformation.",
            ["rank", "candidate", "pooled mean", "95% CI low", "95% CI high"]
            + [f"mean: {t}" for t in transformations]
            + ["in top k everywhere"],
            [
                [i + 1, c, p["overall"][c]["mean"], p["overall"][c]["ci_low"], p["overall"][c]["ci_high"]]
                + [p["by_transformation"][t][c] for t in transformations]
                + [c in p["top_k_everywhere"]]
                for i, c in enumerate(p["ranking"])
            ],
        ),
        Table(
            f"top_k_{kind}",
            f"{kind.capitalize()}: top-{p['k']} crossover",
            "The best candidates by mean score on each transformation and pooled, best first.",
            ["ranking"] + [f"#{i + 1}" for i in range(p["k"])],
            [[name] + members + [None] * (p["k"] - len(members)) for name, members in top_k.items()],
        ),
        Table(
            f"crossings_{kind}",
            f"{kind.capitalize()}: where rankings cross",
            "Pairs of candidates whose order (by mean score) differs between transformations.",
            ["first", "second", "first ahead on", "second ahead on"],
            [
                [c["first"], c["second"], ", ".join(c["first_ahead_on"]), ", ".join(c["second_ahead_on"])]
                for c in p["crossings"]
            ],
        ),
    ]


def tables_csv(tables: Sequence[Table]) -> str:
    """All tables in long form (table, row, column, value): one file, easy to pivot."""
    out = io.StringIO()
    writer = spreadsheet_writer(out, lineterminator="\n")
    writer.writerow(["table", "row", "column", "value"])
    for table in tables:
        for index, row in enumerate(table.rows):
            for column, value in zip(table.columns, row, strict=True):
                writer.writerow([table.key, index, column, "" if value is None else value])
    return out.getvalue()


def tables_text(tables: Sequence[Table]) -> str:
    """Fixed-width text for the terminal."""
    blocks = []
    for table in tables:
        cells = [table.columns] + [[format_value(v) for v in row] for row in table.rows]
        widths = [max(len(row[i]) for row in cells) for i in range(len(table.columns))]
        lines = [table.title, f"  ({table.note})"]
        lines += ["  " + "  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in cells]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"
