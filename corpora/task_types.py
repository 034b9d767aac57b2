"""The eight task types of SPEC §1: everything the rest of the code asks about one (pure module).

One :class:`TaskSpec` per task type, as mteb's abstract tasks: the fields its files hold and how
their rows parse, its gold, what an LLM transformation rewrites, the MTEB task type it comes
from, the evaluator that scores it and that evaluator's main metric. Other modules look a task
type up here instead of branching on it; each keeps only its own presentation.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

from core.errors import ShiftlabError


class TaskType(StrEnum):
    STS = "sts"
    STR = "str"
    SUMMARIZATION = "summarization"
    PAIR_CLASSIFICATION = "pair_classification"
    CLASSIFICATION = "classification"
    CLUSTERING = "clustering"
    RERANKING = "reranking"
    RETRIEVAL = "retrieval"


class UnknownTaskTypeError(ShiftlabError, ValueError):
    """A task type name that is none of :class:`TaskType`."""


@dataclass(frozen=True, kw_only=True)
class TaskSpec:
    task: TaskType
    label: str
    main_metric: str
    required_fields: tuple[str, ...]
    gold_field: str | None
    transformable_fields: tuple[str, ...]
    """Texts an LLM transformation rewrites (for reranking and retrieval only the query)."""
    layout: str
    """How the rows of its files parse (``corpora.parsing`` has one reader per layout): "pair"
    (two sentences and a gold), "text" (a text and its label), "reranking", "summarization", or
    "beir" (a corpus, queries and qrels)."""
    gold_kind: str | None
    """What its gold is: "number", "binary" (0/1), "text" (a label), "numbers" (one per
    candidate), or None (no gold column: judged candidates or qrels)."""
    gold_aliases: tuple[str, ...] = ()
    """Other columns that may hold the gold (pair datasets carry "score" or "label")."""
    summary: str | None = None
    """What the import records about its items beside their number: "gold_range", "labels",
    "documents" or "candidates"."""
    trains_on_train_split: bool = False
    """Its evaluator is fit on a "train" split and scored on another one."""
    mteb_type: str | None = None
    """MTEB's task type (``TaskMetadata.type``) that imports as this one."""
    evaluator: str
    """The evaluator that scores it: a name ``evaluation`` resolves (task types sharing an
    evaluator are scored alike, so an MTEB task may be imported as either)."""


_STS = TaskSpec(
    task=TaskType.STS,
    label="Semantic textual similarity",
    main_metric="Spearman (cosine)",
    required_fields=("sentence1", "sentence2", "score"),
    gold_field="score",
    transformable_fields=("sentence1", "sentence2"),
    layout="pair",
    gold_kind="number",
    gold_aliases=("label",),
    summary="gold_range",
    mteb_type="STS",
    evaluator="sts",
)

TASK_SPECS: dict[TaskType, TaskSpec] = {
    TaskType.STS: _STS,
    # Relatedness is read and scored as similarity is; MTEB has no task type of its own for it.
    TaskType.STR: replace(_STS, task=TaskType.STR, label="Semantic textual relatedness", mteb_type=None),
    TaskType.SUMMARIZATION: TaskSpec(
        task=TaskType.SUMMARIZATION,
        label="Summarization",
        main_metric="Spearman (cosine)",
        required_fields=("text", "human_summaries", "machine_summaries", "relevance"),
        gold_field="relevance",
        transformable_fields=("text",),
        layout="summarization",
        gold_kind="numbers",
        mteb_type="Summarization",
        evaluator="summarization",
    ),
    TaskType.PAIR_CLASSIFICATION: TaskSpec(
        task=TaskType.PAIR_CLASSIFICATION,
        label="Pair classification",
        main_metric="Average precision (best of cosine, dot, Euclidean, Manhattan; MTEB max_ap)",
        required_fields=("sentence1", "sentence2", "label"),
        gold_field="label",
        transformable_fields=("sentence1", "sentence2"),
        layout="pair",
        gold_kind="binary",
        gold_aliases=("score",),
        summary="labels",
        mteb_type="PairClassification",
        evaluator="pair_classification",
    ),
    TaskType.CLASSIFICATION: TaskSpec(
        task=TaskType.CLASSIFICATION,
        label="Classification",
        main_metric="Accuracy (logistic regression)",
        required_fields=("text", "label"),
        gold_field="label",
        transformable_fields=("text",),
        layout="text",
        gold_kind="text",
        summary="labels",
        trains_on_train_split=True,
        mteb_type="Classification",
        evaluator="classification",
    ),
    TaskType.CLUSTERING: TaskSpec(
        task=TaskType.CLUSTERING,
        label="Clustering",
        main_metric="V-measure",
        required_fields=("text", "label"),
        gold_field="label",
        transformable_fields=("text",),
        layout="text",
        gold_kind="text",
        summary="labels",
        mteb_type="Clustering",
        evaluator="clustering",
    ),
    TaskType.RERANKING: TaskSpec(
        task=TaskType.RERANKING,
        label="Reranking",
        main_metric="MAP@1000 (MTEB v2)",
        required_fields=("query", "positive", "negative"),
        gold_field=None,
        transformable_fields=("query",),
        layout="reranking",
        gold_kind=None,
        summary="candidates",
        mteb_type="Reranking",
        evaluator="reranking",
    ),
    TaskType.RETRIEVAL: TaskSpec(
        task=TaskType.RETRIEVAL,
        label="Retrieval",
        main_metric="nDCG@10",
        required_fields=("_id", "text"),
        gold_field=None,
        transformable_fields=("text",),
        layout="beir",
        gold_kind=None,
        summary="documents",
        mteb_type="Retrieval",
        evaluator="retrieval",
    ),
}

PAIR_TASKS = frozenset(t for t, spec in TASK_SPECS.items() if spec.layout == "pair")

MTEB_TASK_TYPES: dict[str, TaskType] = {spec.mteb_type: t for t, spec in TASK_SPECS.items() if spec.mteb_type}
"""MTEB task type -> Shiftlab task type (STS tasks import as "sts"; ask for "str" to override)."""


def task_spec(task: str | TaskType) -> TaskSpec:
    try:
        return TASK_SPECS[TaskType(task)]
    except ValueError:
        choices = ", ".join(t.value for t in TaskType)
        raise UnknownTaskTypeError(f"unknown task type {task!r}: choose one of {choices}") from None
