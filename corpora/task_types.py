"""The eight task types of SPEC §1 and what each needs from an imported file (pure module)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class TaskType(StrEnum):
    STS = "sts"
    STR = "str"
    SUMMARIZATION = "summarization"
    PAIR_CLASSIFICATION = "pair_classification"
    CLASSIFICATION = "classification"
    CLUSTERING = "clustering"
    RERANKING = "reranking"
    RETRIEVAL = "retrieval"


@dataclass(frozen=True)
class TaskSpec:
    task: TaskType
    label: str
    main_metric: str
    required_fields: tuple[str, ...]
    gold_field: str | None
    transformable_fields: tuple[str, ...]
    """Texts an LLM transformation rewrites (for reranking and retrieval only the query)."""


TASK_SPECS: dict[TaskType, TaskSpec] = {
    TaskType.STS: TaskSpec(
        TaskType.STS,
        "Semantic textual similarity",
        "Spearman (cosine)",
        ("sentence1", "sentence2", "score"),
        "score",
        ("sentence1", "sentence2"),
    ),
    TaskType.STR: TaskSpec(
        TaskType.STR,
        "Semantic textual relatedness",
        "Spearman (cosine)",
        ("sentence1", "sentence2", "score"),
        "score",
        ("sentence1", "sentence2"),
    ),
    TaskType.SUMMARIZATION: TaskSpec(
        TaskType.SUMMARIZATION,
        "Summarization",
        "Spearman (cosine)",
        ("text", "human_summaries", "machine_summaries", "relevance"),
        "relevance",
        ("text",),
    ),
    TaskType.PAIR_CLASSIFICATION: TaskSpec(
        TaskType.PAIR_CLASSIFICATION,
        "Pair classification",
        "Average precision (best of cosine, dot, Euclidean, Manhattan; MTEB max_ap)",
        ("sentence1", "sentence2", "label"),
        "label",
        ("sentence1", "sentence2"),
    ),
    TaskType.CLASSIFICATION: TaskSpec(
        TaskType.CLASSIFICATION,
        "Classification",
        "Accuracy (logistic regression)",
        ("text", "label"),
        "label",
        ("text",),
    ),
    TaskType.CLUSTERING: TaskSpec(
        TaskType.CLUSTERING,
        "Clustering",
        "V-measure",
        ("text", "label"),
        "label",
        ("text",),
    ),
    TaskType.RERANKING: TaskSpec(
        TaskType.RERANKING,
        "Reranking",
        "MAP@1000 (MTEB v2)",
        ("query", "positive", "negative"),
        None,
        ("query",),
    ),
    TaskType.RETRIEVAL: TaskSpec(
        TaskType.RETRIEVAL,
        "Retrieval",
        "nDCG@10",
        ("_id", "text"),
        None,
        ("text",),
    ),
}

PAIR_TASKS = frozenset({TaskType.STS, TaskType.STR, TaskType.PAIR_CLASSIFICATION})


def task_spec(task: str | TaskType) -> TaskSpec:
    try:
        return TASK_SPECS[TaskType(task)]
    except ValueError:
        choices = ", ".join(t.value for t in TaskType)
        raise ValueError(f"unknown task type {task!r}: choose one of {choices}") from None
