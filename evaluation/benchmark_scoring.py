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
from corpora.task_types import TaskType
from evaluation.benchmark_plan import QUERY, Unit, transform_run_key
from evaluation.benchmark_sides import Corpus, Perturbation, has_candidate_lists, unit_perturbation
from evaluation.embedding_cache import cached_missing
from evaluation.encoders import Encoder, get_encoder, prompt_name_for, slug
from evaluation.evaluators.base import EvaluationResult
from evaluation.item_scores import ItemScores
from evaluation.models import BenchmarkRun
from evaluation.services import DEFAULT_SEED, EVALUATORS, dataset_protocol_options, examples_evaluate
from transforms.chunk_services import transform_run_execute_inline
from transforms.models import TransformRun
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
    transform_run, original, left_out, documents = None, None, 0, None
    item_scores = original_item_scores = None
    if unit.is_original:
        result = _evaluate(dataset, run.split, examples, encoder)
        item_scores = _item_scores(dataset, result, examples)
    else:
        runs = _unit_transform_runs(run, unit)
        transform_run = runs[0] or runs[1]
        perturbation = unit_perturbation(dataset, examples, query_run=runs[0], document_run=runs[1])
        left_out = len(examples) - len(perturbation.original)
        if not perturbation.original:
            raise ShiftlabError(_nothing_left(unit, dataset, runs))
        original = _evaluate(dataset, run.split, perturbation.original, encoder, perturbation.original_corpus)
        if runs[1] is not None:
            documents = _document_figures(perturbation, runs[1], encoder, dataset.task_type)
        result = _evaluate(dataset, run.split, perturbation.transformed, encoder, perturbation.transformed_corpus)
        item_scores = _item_scores(dataset, result, perturbation.transformed)
        original_item_scores = _item_scores(dataset, original, perturbation.original)
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
        "side": unit.side,
        "axis": "" if unit.is_original else TRANSFORMATIONS[unit.transformation].axis.value,
        "transform_run": transform_run,
        "documents": documents,
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


def _evaluate(
    dataset: Dataset, split: str, examples: list[Example], encoder: Encoder, corpus: Corpus | None = None
) -> EvaluationResult:
    # Seeded protocols (classification, clustering) use MTEB's seed: the unit's seed is the
    # transformation's, so original and transformed scores differ only by the texts.
    return examples_evaluate(
        dataset=dataset,
        split=split,
        examples=[e[:3] for e in examples],
        encoder=encoder,
        seed=DEFAULT_SEED,
        corpus=corpus,
    )


def _nothing_left(unit: Unit, dataset: Dataset, runs: tuple[TransformRun | None, TransformRun | None]) -> str:
    """Why a transformed unit has no example left to score."""
    query_run, document_run = runs
    if document_run is None:
        return f"every {unit.transformation} output of transformation run {query_run.pk} failed"
    lost = "has only positive candidates" if has_candidate_lists(dataset.task_type) else "judges relevant a document"
    return (
        f"every query of the evaluated range {lost} whose {unit.transformation} rewrite failed, or its own rewrite "
        f"failed (transformation runs {', '.join(str(r.pk) for r in runs if r is not None)})"
    )


def _unit_transform_runs(run: BenchmarkRun, unit: Unit) -> tuple[TransformRun | None, TransformRun | None]:
    """The unit's run of examples (query side) and of documents (document side), each executed
    in this task as far as it still lacks outputs; None for a side the unit leaves as it is."""
    found = []
    for wanted, documents in ((unit.perturbs_queries, False), (unit.perturbs_documents, True)):
        key = transform_run_key(unit.dataset, unit.transformation, unit.seed, documents=documents)
        found.append(transform_run_execute_inline(run_id=run.plan["transform_runs"][key]) if wanted else None)
    return found[0], found[1]


def _document_figures(
    perturbation: Perturbation, document_run: TransformRun, encoder: Encoder, task_type: str
) -> dict[str, int]:
    """What the document side cost: documents (reranking: distinct candidates) rewritten and left
    out, and of the transformed side's distinct document texts (its corpus, or its lists'
    candidates) those the embedding cache lacked (encoded now) and those it served. Counted just
    before the transformed side is encoded (after the original one was)."""
    texts = perturbation.document_texts()
    prompt = prompt_name_for(encoder.prompts, task_type=task_type, prompt_type="document")
    encoded = cached_missing(encoder, list(texts), prompt_name=prompt)
    return {
        "transform_run": document_run.pk,
        "transformed": perturbation.documents_transformed,
        "left_out": perturbation.documents_left_out,
        "corpus": len(perturbation.transformed_corpus) if perturbation.transformed_corpus is not None else len(texts),
        "encoded": encoded,
        "reused": len(texts) - encoded,
    }


def _item_scores(dataset: Dataset, result: EvaluationResult, examples: list[Example]) -> dict | None:
    """The result's per-item scores keyed by item id, as stored (None where the main score does
    not decompose over items). Retrieval keys queries by item id already; the other evaluators
    number their inputs, which are ``examples`` in order."""
    items: ItemScores | None = getattr(result, "items", None)
    if items is None:
        return None
    if not EVALUATORS[TaskType(dataset.task_type)].items_by_id:
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


def _write_result_file(row: dict[str, Any], *, dataset: Dataset, split: str) -> Path:
    """The unit's MTEB-style result file (task name, revision, scores per split), with Shiftlab's
    unit description alongside. Written atomically; a redelivered unit rewrites the same path."""
    run: BenchmarkRun = row["run"]
    name = row["transformation"] if row["axis"] == "" else f"{row['transformation']}-seed{row['seed']}"
    name = name if row["side"] == QUERY else f"{name}-{row['side']}"
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
            "side": row["side"],
            "documents": row["documents"],
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
