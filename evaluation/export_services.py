"""Exports of a benchmark run for the tools embedding researchers already use: an mteb results
folder (``benchmark_export_mteb``) and a Hugging Face dataset folder (``benchmark_export_hf``,
optionally pushed to the hub). The shapes are built by the pure modules ``evaluation.mteb_results``
and ``evaluation.hf_export``; this module reads the run and writes files."""

from __future__ import annotations

import json
import os
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

from core.errors import ShiftlabError
from evaluation.models import BenchmarkResult, BenchmarkRun
from evaluation.mteb_results import (
    MtebUnit,
    mteb_model_meta,
    mteb_model_meta_document,
    mteb_result_path,
    mteb_task_result,
)
from evaluation.selectors import benchmark_result_list


class ExportError(ShiftlabError):
    """A run cannot be exported as asked (nothing to export, clashing units, no network...)."""


def benchmark_export_mteb(*, run: BenchmarkRun, out: Path) -> list[Path]:
    """Write every unit of ``run`` under ``out`` as mteb's result cache lays results out; read it
    back with ``mteb.ResultCache(out).load_results()``. Returns the files written."""
    results = list(benchmark_result_list(run=run))
    if not results:
        raise ExportError(f"Benchmark run {run.pk} has no results yet: nothing to export.")
    groups: dict[Path, list[MtebUnit]] = defaultdict(list)
    metas = {}
    for result in results:
        unit = mteb_unit(result, run=run)
        meta = mteb_model_meta(unit)
        path = Path(out) / mteb_result_path(meta, unit.task_name)
        groups[path].append(unit)
        metas[path.parent] = meta
    try:
        task_results = {path: mteb_task_result(units) for path, units in groups.items()}
    except ValueError as exc:
        raise ExportError(f"Benchmark run {run.pk} cannot be written as mteb results: {exc}.") from None
    written = []
    for folder, meta in metas.items():
        folder.mkdir(parents=True, exist_ok=True)
        _write_text(folder / "model_meta.json", json.dumps(mteb_model_meta_document(meta), indent=2, default=str))
        written.append(folder / "model_meta.json")
    for path, task_result in task_results.items():
        task_result.to_disk(path)
        written.append(path)
    return written


def mteb_unit(result: BenchmarkResult, *, run: BenchmarkRun) -> MtebUnit:
    """A stored result as mteb sees it: under the MTEB task's name, revision and subset when its
    dataset was imported from MTEB (``corpora import --mteb``), else under the dataset's own."""
    dataset = result.dataset
    task = (dataset.metadata or {}).get("mteb") or {}
    return MtebUnit(
        model_id=result.model_id,
        model_revision=result.model_revision,
        task_name=task.get("task_name") or dataset.name,
        dataset_revision=(task.get("dataset") or {}).get("revision") or dataset.content_hash,
        hf_subset=task.get("hf_subset") or "default",
        languages=list(task.get("eval_langs") or dataset.languages),
        split=run.split,
        main_score=result.main_score,
        metrics=result.metrics,
        evaluation_time_s=result.evaluation_time_s,
        transformation=result.transformation,
        seed=result.seed,
        config_hash=run.config_hash,
        shiftlab=_unit_description(result, run=run),
        side=result.side,
    )


def _unit_description(result: BenchmarkResult, *, run: BenchmarkRun) -> dict[str, Any]:
    return {
        "benchmark_run": run.pk,
        "model": result.model,
        "dataset": result.dataset.name,
        "dataset_content_hash": result.dataset.content_hash,
        "task_type": result.dataset.task_type,
        "main_metric": result.main_metric,
        "axis": result.axis,
        "transform_run": result.transform_run_id,
        "side": result.side,
        "documents": result.documents,
        "n_items": result.n_items,
        "n_left_out": result.n_left_out,
        "item_limit": run.item_limit,
        "original_main_score_same_items": result.original_main_score,
    }


def _write_text(path: Path, text: str) -> None:
    # Atomic: a reader never sees half a file, and a rerun replaces the old one.
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        temporary.write_text(text, encoding="utf-8")
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def benchmark_export_hf(*, run: BenchmarkRun, out: Path) -> list[Path]:
    """Write ``run`` under ``out`` as a Hugging Face dataset folder that ``datasets.load_dataset(out)``
    reads: the results table (Parquet), the robustness report's files, the approvals and the card."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from evaluation.hf_export import COLUMNS, DATA_FILE, approval_summary, hf_card, hf_row
    from evaluation.report_robustness import robustness_report_write

    results = list(benchmark_result_list(run=run))
    if not results:
        raise ExportError(f"Benchmark run {run.pk} has no results yet: nothing to export.")
    out = Path(out)
    rows = [hf_row(_hf_values(result, run=run)) for result in results]
    table = pa.Table.from_pylist(rows, schema=_hf_schema(pa, COLUMNS))
    (out / DATA_FILE).parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, out / DATA_FILE)
    written = [out / DATA_FILE]
    written += robustness_report_write(run=run, out=out / "report")
    approvals = approval_summary(run.config_document)
    _write_text(out / "approval.json", json.dumps(approvals, indent=2, ensure_ascii=False))
    written.append(out / "approval.json")
    # A licence in the card only when every dataset came from MTEB with the same declared licence.
    licenses = {((r.dataset.metadata or {}).get("mteb") or {}).get("license") or "" for r in results}
    license_id = next(iter(licenses)) if len(licenses) == 1 and licenses.isdisjoint({"", "not specified"}) else None
    card = hf_card(
        run_id=run.pk,
        run_name=run.name,
        config_hash=run.config_hash,
        rows=rows,
        approvals=approvals,
        report_files=sorted(p.relative_to(out / "report").as_posix() for p in written if p.parent == out / "report"),
        license_id=license_id,
        config_label=run.config_label if run.config_hash else "",
        evidence_override=run.evidence_override,
    )
    _write_text(out / "README.md", card)
    written.append(out / "README.md")
    return written


def benchmark_export_hf_push(*, out: Path, repo: str) -> str:
    """Upload the folder written by ``benchmark_export_hf`` to the hub dataset ``repo`` (created if
    missing, with the token of ``huggingface-cli login`` or HF_TOKEN). Returns the repo id."""
    from huggingface_hub import HfApi, constants

    if constants.HF_HUB_OFFLINE:
        raise ExportError(
            f"Not pushed: the Hugging Face hub is switched off here (HF_HUB_OFFLINE=1). The folder is written at "
            f"{out}; upload it from a machine with network access: huggingface-cli upload {repo} {out} "
            "--repo-type dataset"
        )
    api = HfApi()
    try:
        api.create_repo(repo, repo_type="dataset", exist_ok=True)
        api.upload_folder(folder_path=str(out), repo_id=repo, repo_type="dataset")
    except Exception as exc:  # the hub client raises many unrelated types (network, auth, quota)
        raise ExportError(
            f"Could not push {out} to the hub dataset {repo}: {type(exc).__name__}: {exc}. Check the network and "
            "your token (huggingface-cli login), or upload later with huggingface-cli upload."
        ) from None
    return repo


def _hf_values(result: BenchmarkResult, *, run: BenchmarkRun) -> dict[str, Any]:
    return {
        "model": result.model,
        "model_id": result.model_id,
        "model_revision": result.model_revision,
        "dataset": result.dataset.name,
        "dataset_content_hash": result.dataset.content_hash,
        "task_type": result.dataset.task_type,
        "mteb_task": ((result.dataset.metadata or {}).get("mteb") or {}).get("task_name"),
        "split": run.split,
        "transformation": result.transformation,
        "axis": result.axis,
        "seed": result.seed,
        "side": result.side,
        "main_metric": result.main_metric,
        "main_score": result.main_score,
        "original_main_score": result.original_main_score,
        "n_items": result.n_items,
        "n_left_out": result.n_left_out,
        "metrics": result.metrics,
        "config_hash": run.config_hash or None,
        "benchmark_run": run.pk,
    }


def _hf_schema(pa, columns):
    # Explicit types: a column that is null in every row (no transformation, no config) still loads.
    types = {
        "seed": pa.int64(),
        "n_items": pa.int64(),
        "n_left_out": pa.int64(),
        "benchmark_run": pa.int64(),
        "main_score": pa.float64(),
        "original_main_score": pa.float64(),
        "delta": pa.float64(),
    }
    return pa.schema([(name, types.get(name, pa.string())) for name in columns])
