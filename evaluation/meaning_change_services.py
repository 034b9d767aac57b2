"""The sensitivity section of a robustness report (issue 30): for each model of a benchmark run and
each meaning-changing transformation run among its results, how far the model moves the changed
texts apart (``evaluation.meaning_change``), beside the model's invariance to the meaning-preserving
transformations of the same run.

- pair tasks (STS, relatedness, pair classification): the similarity drop of each changed side
  against the other side's original;
- retrieval: each changed document against its original, for every query that judges it relevant
  (document side), and each relevant document for the original and the changed query (query side).

Each model encodes through the shared embedding cache with the prompts its evaluator uses."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from corpora.models import Dataset, DatasetItem
from corpora.task_types import TASK_SPECS, TaskType
from evaluation.benchmark_plan import BENCHMARK_AXES
from evaluation.encoders import Encoder, get_encoder
from evaluation.meaning_change import (
    ModelSensitivity,
    RankShift,
    model_sensitivity,
    query_rank_shift,
    rank_loss,
    rank_shift,
    retention,
    similarity_drop,
)
from evaluation.models import BenchmarkRun
from evaluation.robustness_results import RobustnessReport
from evaluation.selectors import benchmark_result_list
from evaluation.services import cached_encode, document_text
from transforms.models import TransformedItem
from transforms.registry import Axis

PAIR_SIDES = ("sentence1", "sentence2")


def _changed_pairs(transform_run_ids: list[int]) -> list[tuple[str, str, str]]:
    """(kept text, original partner, changed partner) for every changed side of every pair:
    a pair whose two sides both changed gives two observations, each against the other's original."""
    outputs = TransformedItem.objects.filter(run__in=transform_run_ids, ok=True, side__in=PAIR_SIDES)
    pairs = []
    for out in outputs.select_related("item").order_by("run", "item__position", "side"):
        other = PAIR_SIDES[1 - PAIR_SIDES.index(out.side)]
        pairs.append((out.item.payload[other], out.source_text, out.output_text))
    return pairs


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    return np.einsum("ij,ij->i", a, b) / np.where(norms == 0, 1.0, norms)


def _pair_drop(encoder: Encoder, dataset: Dataset, run_ids: list[int], seed: int):
    pairs = _changed_pairs(run_ids)
    if not pairs:
        return None
    encode = cached_encode(encoder, task=TaskType(dataset.task_type), batch_size=None)
    kept, original, changed = (encode(list(texts)) for texts in zip(*pairs, strict=True))
    return similarity_drop(_cosines(kept, original), _cosines(kept, changed), seed=seed)


def _retrieval_shifts(encoder: Encoder, dataset: Dataset, run_ids: list[int]) -> list[RankShift]:
    """Rank shifts of the changed documents (document side) and changed queries (query side)."""
    documents = list(
        DatasetItem.objects.filter(dataset=dataset, kind="document")
        .order_by("position")
        .values_list("item_id", "payload")
    )
    index = {doc_id: i for i, (doc_id, _) in enumerate(documents)}
    queries = list(DatasetItem.objects.filter(dataset=dataset, kind="example").order_by("position"))
    changed = list(
        TransformedItem.objects.filter(run__in=run_ids, ok=True)
        .select_related("item")
        .order_by("run", "item__position")
    )
    if not changed or not documents:
        return []
    encode = cached_encode(encoder, task=TaskType(dataset.task_type), batch_size=None)
    corpus = encode([document_text(payload) for _, payload in documents], prompt_type="document")
    query_vectors = encode([q.payload["text"] for q in queries], prompt_type="query")
    shifts = []
    changed_docs = [t for t in changed if t.item.kind == "document" and t.item.item_id in index]
    if changed_docs:
        # The changed document is its original with the rewritten field replaced (a title stays).
        texts = [document_text({**t.item.payload, t.side: t.output_text}) for t in changed_docs]
        changed_vectors = encode(texts, prompt_type="document")
        for t, vector in zip(changed_docs, changed_vectors, strict=True):
            for q, q_vector in zip(queries, query_vectors, strict=True):
                if (q.gold or {}).get(t.item.item_id, 0) > 0:
                    shifts.append(rank_shift(q_vector, corpus, index[t.item.item_id], vector))
    changed_queries = [t for t in changed if t.item.kind == "example"]
    if changed_queries:
        originals = encode([t.item.payload["text"] for t in changed_queries], prompt_type="query")
        rewritten = encode([t.output_text for t in changed_queries], prompt_type="query")
        for t, before, after in zip(changed_queries, originals, rewritten, strict=True):
            for doc_id, grade in sorted((t.item.gold or {}).items()):
                if grade > 0 and doc_id in index:
                    shifts.append(query_rank_shift(before, after, corpus, index[doc_id]))
    return shifts


def robustness_sensitivity(*, run: BenchmarkRun, report: RobustnessReport, seed: int = 0) -> list[ModelSensitivity]:
    """One ``ModelSensitivity`` per model of ``run`` that has results of the sensitivity axis on a
    pair or retrieval task: similarity drops and rank losses, and the invariance from ``report``'s
    aggregates (retention of the main score over the lexical, length and language transformations)."""
    units: dict[tuple[str, str, str], list[int]] = defaultdict(list)
    datasets: dict[str, Dataset] = {}
    results = benchmark_result_list(run=run).filter(axis=Axis.SENSITIVITY.value).exclude(transform_run=None)
    for result in results:
        if TASK_SPECS[result.dataset.task_type].layout in ("pair", "beir"):
            units[(result.model, result.dataset.name, result.transformation)].append(result.transform_run_id)
            datasets[result.dataset.name] = result.dataset
    out = []
    for model in run.model_names:
        keys = sorted(k for k in units if k[0] == model)
        if not keys:
            continue
        encoder = get_encoder(model)
        drops, losses = [], []
        for _, name, transformation in keys:
            dataset, run_ids = datasets[name], sorted(set(units[(model, name, transformation)]))
            if TASK_SPECS[dataset.task_type].layout == "pair":
                if (drop := _pair_drop(encoder, dataset, run_ids, seed)) is not None:
                    drops.append((name, transformation, drop))
            elif shifts := _retrieval_shifts(encoder, dataset, run_ids):
                losses.append((name, transformation, rank_loss(shifts, seed=seed)))
        out.append(model_sensitivity(model, drops=drops, rank_losses=losses, retentions=_retentions(report, model)))
    return out


def _retentions(report: RobustnessReport, model: str) -> list[float | None]:
    aggregate = report.aggregates.get(model)
    return [
        retention(s.mean, s.mean - s.delta)
        for name, s in (aggregate.transformations.items() if aggregate else ())
        if report.axis_of.get(name) in BENCHMARK_AXES and s.mean is not None and s.delta is not None
    ]
