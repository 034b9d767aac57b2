"""A benchmark run as a Hugging Face dataset (pure module: rows and the dataset card's text).

The folder holds ``data/results.parquet`` (one row per unit), the robustness report's statistics
and figures under ``report/``, the approval evidence of each transformation in ``approval.json``,
and a ``README.md`` dataset card whose YAML header declares the Parquet file as the only config,
so ``datasets.load_dataset(folder)`` reads exactly the results table.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from evaluation.aggregation import RESULT_SCORE_FIELDS

DATA_FILE = "data/results.parquet"
SPLIT = "results"
COLUMNS = (
    "model",
    "model_id",
    "model_revision",
    "dataset",
    "dataset_content_hash",
    "task_type",
    "mteb_task",
    "split",
    "transformation",
    "axis",
    "seed",
    "side",
    *RESULT_SCORE_FIELDS,
    "metrics_json",
    "config_hash",
    "benchmark_run",
)


def approval_summary(config_document: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """One entry per transformation of a validated config: its approval and gate evidence."""
    summary = []
    for entry in (config_document or {}).get("transformations", []):
        approval, gate, study = entry.get("approval") or {}, entry.get("gate") or {}, entry.get("study") or {}
        summary.append(
            {
                "transformation": entry.get("transformation"),
                "axis": entry.get("axis"),
                "study": f"{study.get('name')} v{study.get('version')}" if study else None,
                "decision": approval.get("decision"),
                "by": approval.get("by"),
                "at": approval.get("at"),
                "comment": approval.get("comment") or "",
                "gate_passed": gate.get("passed"),
                "evidence_hash": gate.get("evidence_hash"),
                "evidence": gate.get("evidence") or {},
                "basis": gate.get("basis") or (gate.get("evidence") or {}).get("gate_basis") or "",
                "runs": [run.get("run_hash") for run in entry.get("runs", [])],
            }
        )
    return summary


def hf_card(
    *,
    run_id: int,
    run_name: str,
    config_hash: str,
    rows: Sequence[Mapping[str, Any]],
    approvals: Sequence[Mapping[str, Any]],
    report_files: Sequence[str],
    license_id: str | None,
    config_label: str = "",
    evidence_override: Mapping[str, Any] | None = None,
) -> str:
    """The dataset card: YAML header (config → Parquet file, tags, licence) and a body saying what
    the table holds, what the config is (validated, or signed with the public development key), the
    approvals behind each transformation, what had changed in their evidence when the run was
    started anyway, and the report's files."""
    header: dict[str, Any] = {
        "configs": [{"config_name": "default", "data_files": [{"split": SPLIT, "path": DATA_FILE}]}],
        "tags": ["shiftlab", "mteb", "robustness", "embeddings"],
        "pretty_name": f"Shiftlab benchmark run {run_id}" + (f" ({run_name})" if run_name else ""),
        "shiftlab": {
            "benchmark_run": run_id,
            "config_hash": config_hash or None,
            "evidence_override": dict(evidence_override) if evidence_override else None,
        },
    }
    if license_id:
        header["license"] = license_id
    models = sorted({row["model"] for row in rows})
    datasets = sorted({row["dataset"] for row in rows})
    lines = [
        "---",
        yaml.safe_dump(header, sort_keys=False, allow_unicode=True).strip(),
        "---",
        "",
        f"# {header['pretty_name']}",
        "",
        "Robustness results of embedding models under LLM transformations of benchmark data, written by "
        "Shiftlab. One row per benchmark unit: a model on a dataset, either on the original data or on one "
        "transformation of it with one seed. `original_main_score` is the original data's score on the same "
        "items (items whose transformation failed are left out of both) and `delta` the difference.",
        "",
        f"- Config hash: `{config_hash or 'none (original data only)'}`"
        + (f" ({config_label})" if config_label else ""),
        f"- Models ({len(models)}): {', '.join(models)}",
        f"- Datasets ({len(datasets)}): {', '.join(datasets)}",
        f"- Units: {len(rows)}",
        "",
        "```python",
        "from datasets import load_dataset",
        f'results = load_dataset("PATH_OR_REPO")["{SPLIT}"]',
        "```",
        "",
        "## Approval evidence",
        "",
    ]
    if approvals:
        lines += [
            "| transformation | axis | study | decision | by | at | gate passed | evidence hash |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for a in approvals:
            evidence_hash = (a.get("evidence_hash") or "")[:12]
            lines.append(
                f"| {a['transformation']} | {a['axis']} | {a['study']} | {a['decision']} | {a['by']} | {a['at']} "
                f"| {a['gate_passed']} | `{evidence_hash}` |"
            )
        based = [a for a in approvals if a.get("basis")]
        if based:
            lines += ["", "What each gate's decision rests on:", ""]
            lines += [f"- {a['transformation']}: {a['basis']}" for a in based]
        lines += ["", "The full evidence of each gate is in `approval.json`."]
    else:
        lines.append("None: this run scored the original data only.")
    if evidence_override:
        lines += ["", "## Run anyway", "", "The evidence behind the config had changed when this run was started:", ""]
        lines += [f"- {reason}" for reason in evidence_override.get("reasons", [])]
    lines += ["", "## Statistics and figures", ""]
    lines += [f"- [`report/{name}`](report/{name})" for name in report_files] or ["None written."]
    lines += ["", "## Columns", "", "`" + "`, `".join(COLUMNS) + "` (`metrics_json`: every metric, as JSON).", ""]
    return "\n".join(lines)


def hf_row(values: Mapping[str, Any]) -> dict[str, Any]:
    """One table row in ``COLUMNS`` order; ``metrics`` becomes ``metrics_json``."""
    row = {name: values.get(name) for name in COLUMNS}
    row["metrics_json"] = json.dumps(values.get("metrics") or {}, sort_keys=True)
    original = values.get("original_main_score")
    row["delta"] = None if original is None else values["main_score"] - original
    return row
