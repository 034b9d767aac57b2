"""The sensitivity section of a robustness report (issue 30): for each model of a benchmark run and
each meaning-changing transformation run among its results on a pair task (STS, relatedness, pair
classification), how far the model moves the changed pairs apart, beside the model's invariance to
the meaning-preserving transformations of the same run (``evaluation.meaning_change``)."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from corpora.task_types import TASK_SPECS
from evaluation.benchmark_plan import BENCHMARK_AXES
from evaluation.embedding_cache import encode_cached
from evaluation.encoders import get_encoder
from evaluation.meaning_change import ModelSensitivity, model_sensitivity, retention, similarity_drop
from evaluation.models import BenchmarkRun
from evaluation.robustness_results import RobustnessReport
from evaluation.selectors import benchmark_result_list
from transforms.models import TransformedItem
from transforms.registry import Axis

PAIR_SIDES = ("sentence1", "sentence2")


def _changed_pairs(transform_run_ids: list[int]) -> list[tuple[str, str, str]]:
    """(kept text, original partner, changed partner) for every changed side of every pair:
    a pair whose two sides both changed gives two observations, each against the other's original."""
    outputs = TransformedItem.objects.filter(run__in=transform_run_ids, ok=True, side__in=PAIR_SIDES).select_related(
        "item"
    )
    pairs = []
    for out in outputs.order_by("run", "item__position", "side"):
        other = PAIR_SIDES[1 - PAIR_SIDES.index(out.side)]
        pairs.append((out.item.payload[other], out.source_text, out.output_text))
    return pairs


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    return np.einsum("ij,ij->i", a, b) / np.where(norms == 0, 1.0, norms)


def robustness_sensitivity(*, run: BenchmarkRun, report: RobustnessReport, seed: int = 0) -> list[ModelSensitivity]:
    """One ``ModelSensitivity`` per model of ``run`` that has results of the sensitivity axis on a
    pair task: the similarity drops (each model encodes the texts; the shared embedding cache keeps
    each text encoded once per model) and the invariance from ``report``'s aggregates (retention of
    the main score over the lexical, length and language transformations)."""
    units: dict[tuple[str, str, str], list[int]] = defaultdict(list)
    results = benchmark_result_list(run=run).filter(axis=Axis.SENSITIVITY.value).exclude(transform_run=None)
    for result in results:
        if TASK_SPECS[result.dataset.task_type].layout == "pair":
            units[(result.model, result.dataset.name, result.transformation)].append(result.transform_run_id)
    out = []
    for model in run.model_names:
        keys = sorted(k for k in units if k[0] == model)
        if not keys:
            continue
        encoder = get_encoder(model)
        drops = []
        for _, dataset, transformation in keys:
            pairs = _changed_pairs(sorted(set(units[(model, dataset, transformation)])))
            if not pairs:
                continue
            kept, original, changed = (encode_cached(encoder, list(texts)) for texts in zip(*pairs, strict=True))
            drop = similarity_drop(_cosines(kept, original), _cosines(kept, changed), seed=seed)
            drops.append((dataset, transformation, drop))
        aggregate = report.aggregates.get(model)
        retentions = [
            retention(s.mean, s.mean - s.delta)
            for name, s in (aggregate.transformations.items() if aggregate else ())
            if report.axis_of.get(name) in BENCHMARK_AXES and s.mean is not None and s.delta is not None
        ]
        out.append(model_sensitivity(model, drops=drops, retentions=retentions))
    return out
