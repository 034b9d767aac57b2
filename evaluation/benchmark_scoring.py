"""Scoring one unit of a benchmark run: the items it covers, its original and transformed examples
(a failed transformation leaves an item out of both), the result row and its MTEB-style JSON file
under ``DATA_DIR/results/<run>/``. ``evaluation.benchmark_services`` stores the row."""

from __future__ import annotations

import json
import math
import os
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
from django.conf import settings

from core.errors import ShiftlabError
from corpora.models import Dataset, DatasetItem
from corpora.task_types import TaskType, task_spec
from evaluation.benchmark_plan import Unit, transform_run_key
from evaluation.encoders import Encoder, get_encoder, slug
from evaluation.evaluators.base import EvaluationResult
from evaluation.item_scores import ItemScores
from evaluation.models import BenchmarkRun
from evaluation.services import DEFAULT_SEED, dataset_protocol_options, examples_evaluate
from transforms.chunk_services import transform_run_execute_inline
from transforms.models import TransformedItem, TransformRun
from transforms.registry import TRANSFORMATIONS

Example = tuple[str, dict, object, int]  # (item_id, payload, gold, DatasetItem pk)


def benchmark_unit_score(*, run: BenchmarkRun, unit: Unit) -> dict[str, Any]:
    """The ``BenchmarkResult`` fields of one unit, its result file written. A transformed unit
    first generates the outputs its transformation run still lacks (in this task), then scores
    the transformed texts and, on the same items, the original ones."""
    ids = run.plan.get("dataset_ids")  # runs planned before names were unique per project have none
    dataset = Dataset.objects.get(pk=ids[unit.dataset]) if ids else Dataset.objects.get(name=unit.dataset)
    encoder = get_encoder(unit.model, run.plan.get("encoder_dtype"))  # a preset's dtype, if any
    started = time.perf_counter()
    examples = _scoped_examples(dataset, run.split, run.item_limit)
    transform_run, original, left_out = None, None, 0
    item_scores = original_item_scores = None
    if unit.is_original:
        result = _evaluate(dataset, run.split, examples, encoder)
        item_scores = _item_scores(dataset, result, examples)
    else:
        transform_run_id = run.plan["transform_runs"][transform_run_key(unit.dataset, unit.transformation, unit.seed)]
        transform_run = transform_run_execute_inline(run_id=transform_run_id)
        kept_original, kept_transformed = _paired_examples(dataset, transform_run, examples)
        left_out = len(examples) - len(kept_original)
        if not kept_original:
            raise ShiftlabError(f"every {unit.transformation} output of transformation run {transform_run.pk} failed")
        result = _evaluate(dataset, run.split, kept_transformed, encoder)
        original = _evaluate(dataset, run.split, kept_original, encoder)
        item_scores = _item_scores(dataset, result, kept_transformed)
        original_item_scores = _item_scores(dataset, original, kept_original)
    for scored in (result, original):
        if scored is not None and not math.isfinite(scored.main_score):
            raise ShiftlabError(
                f"{result.main_metric} is undefined on the {len(examples) - left_out} items left "
                f"({left_out} left out because their transformation failed): use more items"
            )
    row = {
        "run": run,
        "model": unit.model,
        "model_id": encoder.model_id,
        "model_revision": encoder.revision,
        "dataset": dataset,
        "transformation": unit.transformation,
        "seed": unit.seed,
        "axis": "" if unit.is_original else TRANSFORMATIONS[unit.transformation].axis.value,
        "transform_run": transform_run,
        "main_metric": result.main_metric,
        "main_score": float(result.main_score),
        "metrics": json_safe(result.metrics()),
        "n_items": len(examples) - left_out,
        "n_left_out": left_out,
        "original_main_score": None if original is None else float(original.main_score),
        "original_metrics": None if original is None else json_safe(original.metrics()),
        "item_scores": item_scores,
        "original_item_scores": original_item_scores,
        "evaluation_time_s": time.perf_counter() - started,
    }
    row["result_path"] = str(_write_result_file(row, dataset=dataset, split=run.split))
    return row


def json_safe(data: Any) -> Any:
    """``data`` as JSON gives it back, with every non-finite number (NaN, ±infinity) as null.

    The structure is walked, so only numbers are replaced and strings are never touched; numpy
    scalars become Python numbers (``float`` of them), tuples become lists.
    """
    return json.loads(json.dumps(_finite(data), default=float, allow_nan=False))


def _finite(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    if isinstance(value, float | np.floating) and not math.isfinite(value):
        return None
    return value


def _evaluate(dataset: Dataset, split: str, examples: list[Example], encoder: Encoder) -> EvaluationResult:
    # Seeded protocols (classification, clustering) use MTEB's seed: the unit's seed is the
    # transformation's, so original and transformed scores differ only by the texts.
    return examples_evaluate(
        dataset=dataset, split=split, examples=[e[:3] for e in examples], encoder=encoder, seed=DEFAULT_SEED
    )


def _item_scores(dataset: Dataset, result: EvaluationResult, examples: list[Example]) -> dict | None:
    """The result's per-item scores keyed by item id, as stored (None where the main score does
    not decompose over items). Retrieval keys queries by item id already; the other evaluators
    number their inputs, which are ``examples`` in order."""
    items: ItemScores | None = getattr(result, "items", None)
    if items is None:
        return None
    if dataset.task_type != TaskType.RETRIEVAL:
        items = items.relabelled([item_id for item_id, *_ in examples])
    return items.as_json()


def _scoped_examples(dataset: Dataset, split: str, limit: int | None) -> list[Example]:
    """(item_id, payload, gold, pk) of the evaluated split; with a limit, of the first ``limit``
    examples of the dataset (the items a transformation run with the same limit covers)."""
    items = DatasetItem.objects.filter(dataset=dataset, kind="example").order_by("position")
    if limit:
        items = items.filter(pk__in=list(items.values_list("pk", flat=True)[:limit]))
    rows = items.filter(split=split).values_list("item_id", "payload", "gold", "pk")
    examples = [(item_id, payload, gold, pk) for item_id, payload, gold, pk in rows]
    if not examples:
        raise ShiftlabError(f"dataset {dataset.name} has no {split!r} examples in the evaluated range")
    return examples


def _paired_examples(
    dataset: Dataset, transform_run: TransformRun, examples: list[Example]
) -> tuple[list[Example], list[Example]]:
    """The examples whose every transformed field succeeded, as original and as transformed.
    A failed transformation leaves the item out of both, never replaced by its original text."""
    fields = task_spec(dataset.task_type).transformable_fields
    outputs = {
        (item_pk, side): (ok, text)
        for item_pk, side, ok, text in TransformedItem.objects.filter(run=transform_run).values_list(
            "item_id", "side", "ok", "output_text"
        )
    }
    kept_original, kept_transformed = [], []
    for item_id, payload, gold, pk in examples:
        outs = [outputs.get((pk, side)) for side in fields]
        if any(out is None or not out[0] for out in outs):
            continue
        kept_original.append((item_id, payload, gold, pk))
        transformed = {**payload, **{side: out[1] for side, out in zip(fields, outs, strict=True)}}
        kept_transformed.append((item_id, transformed, gold, pk))
    return kept_original, kept_transformed


def _write_result_file(row: dict[str, Any], *, dataset: Dataset, split: str) -> Path:
    """The unit's MTEB-style result file (task name, revision, scores per split), with Shiftlab's
    unit description alongside. Written atomically; a redelivered unit rewrites the same path."""
    run: BenchmarkRun = row["run"]
    name = row["transformation"] if row["axis"] == "" else f"{row['transformation']}-seed{row['seed']}"
    path = Path(settings.DATA_DIR) / "results" / str(run.pk) / slug(row["model"]) / slug(dataset.name) / f"{name}.json"
    document = {
        "dataset_revision": dataset.content_hash,
        "task_name": dataset.name,
        "mteb_version": None,
        "evaluation_time": row["evaluation_time_s"],
        "kg_co2_emissions": None,
        "scores": {
            split: [
                {
                    **row["metrics"],
                    "main_score": row["main_score"],
                    "hf_subset": "default",
                    "languages": list(dataset.languages),
                }
            ]
        },
        "shiftlab": {
            "benchmark_run": run.pk,
            "config_hash": run.config_hash,
            "config_development_key": run.config_development_key,
            "evidence_override": run.evidence_override,
            "model": row["model"],
            "model_id": row["model_id"],
            "model_revision": row["model_revision"],
            "task_type": dataset.task_type,
            "protocol_options": dataset_protocol_options(dataset),  # the evaluator's settings ({}: defaults)
            "encoder_dtype": run.plan.get("encoder_dtype"),  # a preset's dtype (None: the model's own)
            "main_metric": row["main_metric"],
            "transformation": row["transformation"],
            "axis": row["axis"],
            "seed": row["seed"],
            "transform_run": row["transform_run"].pk if row["transform_run"] else None,
            "n_items": row["n_items"],
            "n_left_out": row["n_left_out"],
            "original_same_items": None
            if row["original_main_score"] is None
            else {"main_score": row["original_main_score"], "metrics": row["original_metrics"]},
        },
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        temporary.write_text(json.dumps(document, indent=2, sort_keys=True), encoding="utf-8")
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
    return path
