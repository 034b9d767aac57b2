"""The eight task types of SPEC §1: everything the rest of the code asks about one (pure module).

One :class:`TaskSpec` per task type, as mteb's abstract tasks: the fields its files hold and how
their rows parse, its gold, what an LLM transformation rewrites, the MTEB task type it comes
from, the task type whose protocol scores it and that protocol's main metric. Other modules look
a task type up here, or in their own app's definitions keyed by :class:`TaskType`
(``evaluation.services.EVALUATORS``, ``evaluation.human_baseline.BASELINE_SCORINGS``,
``annotation.baselines.baseline_tasks.BASELINE_TASKS``), instead of branching on it
(``tests/test_task_type_branches.py`` checks).
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
    scored_as: TaskType
    """The task type whose protocol scores it (itself, or STS for relatedness): task types scored
    alike may import the same MTEB task, and share MTEB's task type in model prompts."""
    documents: str | None = None
    """What a transformation may rewrite beside its examples: "corpus" (retrieval's documents),
    "candidates" (reranking's candidate lists) or None."""
    controls_from_gold: bool = False
    """Its gold marks paraphrase pairs (a high similarity score, a positive label), so its pairs can
    supply a study's positive control items (relatedness is not paraphrase)."""

    @property
    def sentence_pairs(self) -> bool:
        """Its items are two sentences (sentence1, sentence2), in files that may be spreadsheets."""
        return self.layout == "pair"


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
    scored_as=TaskType.STS,
    controls_from_gold=True,
)

TASK_SPECS: dict[TaskType, TaskSpec] = {
    TaskType.STS: _STS,
    # Relatedness is read and scored as similarity is; MTEB has no task type of its own for it.
    TaskType.STR: replace(
        _STS, task=TaskType.STR, label="Semantic textual relatedness", mteb_type=None, controls_from_gold=False
    ),
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
        scored_as=TaskType.SUMMARIZATION,
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
        scored_as=TaskType.PAIR_CLASSIFICATION,
        controls_from_gold=True,
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
        scored_as=TaskType.CLASSIFICATION,
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
        scored_as=TaskType.CLUSTERING,
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
        scored_as=TaskType.RERANKING,
        documents="candidates",
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
        scored_as=TaskType.RETRIEVAL,
        documents="corpus",
    ),
}

MTEB_TASK_TYPES: dict[str, TaskType] = {spec.mteb_type: t for t, spec in TASK_SPECS.items() if spec.mteb_type}
"""MTEB task type -> Shiftlab task type (STS tasks import as "sts"; ask for "str" to override)."""


def task_spec(task: str | TaskType) -> TaskSpec:
    try:
        return TASK_SPECS[TaskType(task)]
    except ValueError:
        choices = ", ".join(t.value for t in TaskType)
        raise UnknownTaskTypeError(f"unknown task type {task!r}: choose one of {choices}") from None
