"""Evaluate an encoder on an imported dataset: read items, encode through the cache, score."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from core.errors import ShiftlabError
from corpora.models import Dataset
from corpora.selectors import dataset_item_list
from corpora.task_types import TaskType, task_spec
from evaluation.augmented import VariantCoverage
from evaluation.augmented_encoder import AugmentedEncoder
from evaluation.embedding_cache import encode_cached
from evaluation.encoders import Encoder, get_encoder, prompt_name_for
from evaluation.evaluators import (
    ClassificationEvaluator,
    ClusteringEvaluator,
    Encode,
    EvaluationResult,
    PairClassificationEvaluator,
    RerankingEvaluator,
    RetrievalEvaluator,
    STSEvaluator,
    SummarizationEvaluator,
)
from evaluation.evaluators.options import METADATA_KEY as PROTOCOL_METADATA_KEY
from evaluation.evaluators.options import protocol_options
from evaluation.evaluators.similarity import paired_scores
from evaluation.stats import CorrelationDifference, spearman_difference_with_ci

DEFAULT_SEED = 42  # MTEB's default task seed
TRAIN_SPLIT = "train"


def dataset_evaluate(
    *,
    dataset: Dataset,
    encoder_alias_or_model: str = "default",
    split: str = "test",
    seed: int = DEFAULT_SEED,
    batch_size: int | None = None,
) -> EvaluationResult:
    """Score one encoder on one split of ``dataset`` with the MTEB protocol of its task type.

    ``seed`` drives the seeded protocols (classification draws, clustering); the others are
    deterministic. Raises ``ShiftlabError`` for a missing split or an unusable model.
    """
    if split not in dataset.splits:
        raise ShiftlabError(
            f"Dataset {dataset.name} has no split {split!r}; its splits are: {', '.join(dataset.splits) or 'none'}."
        )
    encoder = get_encoder(encoder_alias_or_model)
    examples = list(
        dataset_item_list(dataset=dataset, split=split, kind="example").values_list("item_id", "payload", "gold")
    )
    return examples_evaluate(
        dataset=dataset, split=split, examples=examples, encoder=encoder, seed=seed, batch_size=batch_size
    )


def examples_evaluate(
    *,
    dataset: Dataset,
    split: str,
    examples: Sequence[tuple[str, dict, object]],
    encoder: Encoder,
    seed: int = DEFAULT_SEED,
    batch_size: int | None = None,
    corpus: Mapping[str, dict] | None = None,
) -> EvaluationResult:
    """Score ``encoder`` on the given examples of ``dataset`` (``(item_id, payload, gold)``, as
    stored or with transformed texts in their payloads). What a protocol needs besides the
    examples comes from the dataset unchanged: the original ``train`` split for classification,
    the document corpus for retrieval (unless ``corpus``, document id -> payload, replaces it:
    the document side of a benchmark). Protocol options stored on the dataset (classification
    draws, clustering settings: ``evaluation.evaluators.options``) apply to its evaluator."""
    task = TaskType(dataset.task_type)
    scoring = _Scoring(
        dataset=dataset,
        split=split,
        examples=examples,
        rows=[(payload, gold) for _, payload, gold in examples],
        encode=cached_encode(encoder, task=task, batch_size=batch_size),
        similarity=encoder.similarity_fn_name,
        seed=seed,
        protocol=dataset_protocol_options(dataset),
        corpus=corpus,
    )
    return EVALUATORS[task].score(scoring)


@dataclass(frozen=True)
class _Scoring:
    """What one evaluator call gets: the examples, as stored and as ``(payload, gold)`` rows."""

    dataset: Dataset
    split: str
    examples: Sequence[tuple[str, dict, object]]
    rows: list[tuple[dict, object]]
    encode: Encode
    similarity: str
    seed: int
    protocol: dict[str, Any]
    corpus: Mapping[str, dict] | None = None


def _sts(s: _Scoring) -> EvaluationResult:
    s1, s2, gold = _columns(s.rows, "sentence1", "sentence2")
    return STSEvaluator(similarity_fn_name=s.similarity).evaluate(s1, s2, gold, encode=s.encode)


def _pair_classification(s: _Scoring) -> EvaluationResult:
    s1, s2, labels = _columns(s.rows, "sentence1", "sentence2")
    return PairClassificationEvaluator().evaluate(s1, s2, [int(label) for label in labels], encode=s.encode)


def _classification(s: _Scoring) -> EvaluationResult:
    dataset = s.dataset
    if s.split == TRAIN_SPLIT or TRAIN_SPLIT not in dataset.splits:
        raise ShiftlabError(
            f"Classification trains on the {TRAIN_SPLIT!r} split and is evaluated on another one: "
            f"{dataset.name} has {', '.join(dataset.splits)}; pass --split with an evaluation split."
        )
    train = list(dataset_item_list(dataset=dataset, split=TRAIN_SPLIT, kind="example").values_list("payload", "gold"))
    train_texts, train_labels = _columns(train, "text")
    test_texts, test_labels = _columns(s.rows, "text")
    return ClassificationEvaluator(seed=s.seed, **s.protocol).evaluate(
        train_texts, train_labels, test_texts, test_labels, encode=s.encode
    )


def _clustering(s: _Scoring) -> EvaluationResult:
    texts, labels = _columns(s.rows, "text")
    return ClusteringEvaluator(seed=s.seed, **s.protocol).evaluate(texts, labels, encode=s.encode)


def _reranking(s: _Scoring) -> EvaluationResult:
    queries, positives, negatives, _ = _columns(s.rows, "query", "positive", "negative")
    return RerankingEvaluator(similarity_fn_name=s.similarity).evaluate(queries, positives, negatives, encode=s.encode)


def _retrieval(s: _Scoring) -> EvaluationResult:
    documents = s.corpus.items() if s.corpus is not None else corpus_payloads(s.dataset)
    corpus = {doc_id: document_text(payload) for doc_id, payload in documents}
    queries = {item_id: payload["text"] for item_id, payload, _ in s.examples}
    qrels = {item_id: gold for item_id, _, gold in s.examples}
    return RetrievalEvaluator(similarity_fn_name=s.similarity).evaluate(corpus, queries, qrels, encode=s.encode)


def _summarization(s: _Scoring) -> EvaluationResult:
    human, machine, ratings = _columns(s.rows, "human_summaries", "machine_summaries")
    return SummarizationEvaluator().evaluate(human, machine, ratings, encode=s.encode)


@dataclass(frozen=True, kw_only=True)
class TaskEvaluator:
    """How evaluation scores one task type, as mteb's abstract tasks: the MTEB protocol that scores
    an encoder on its examples, and what the callers of that protocol ask of it."""

    score: Callable[[_Scoring], EvaluationResult]
    paired_comparison: bool = False
    """Its main score is a correlation over sentence pairs, so two encoders compare pair by pair
    (``dataset_compare``)."""
    items_by_id: bool = False
    """Its per-item scores come keyed by item id (retrieval's queries); the others number their
    inputs in the order of the examples."""


_STS_EVALUATOR = TaskEvaluator(score=_sts, paired_comparison=True)

EVALUATORS: dict[TaskType, TaskEvaluator] = {
    TaskType.STS: _STS_EVALUATOR,
    TaskType.STR: _STS_EVALUATOR,  # relatedness is scored as similarity is (``TaskSpec.scored_as``)
    TaskType.SUMMARIZATION: TaskEvaluator(score=_summarization),
    TaskType.PAIR_CLASSIFICATION: TaskEvaluator(score=_pair_classification),
    TaskType.CLASSIFICATION: TaskEvaluator(score=_classification),
    TaskType.CLUSTERING: TaskEvaluator(score=_clustering),
    TaskType.RERANKING: TaskEvaluator(score=_reranking),
    TaskType.RETRIEVAL: TaskEvaluator(score=_retrieval, items_by_id=True),
}
"""One definition per task type (``corpora/test_task_types.py`` checks that every one has one)."""


# -- Per-dataset protocol options (issue 15) --------------------------------------------------------


def dataset_protocol_options(dataset: Dataset) -> dict[str, Any]:
    """The evaluator options stored under ``dataset.metadata["evaluation"]``, validated."""
    try:
        return protocol_options(dataset.task_type, (dataset.metadata or {}).get(PROTOCOL_METADATA_KEY))
    except ValueError as exc:
        raise ShiftlabError(f"Dataset {dataset.name} has unusable protocol options: {exc}.") from None


def dataset_protocol_set(*, dataset: Dataset, options: Mapping[str, Any]) -> Dataset:
    """Store protocol options on ``dataset`` (replacing earlier ones; an empty mapping restores
    the defaults). Raises ``ShiftlabError`` naming the bad option; nothing is written then."""
    try:
        checked = protocol_options(dataset.task_type, options)
    except ValueError as exc:
        raise ShiftlabError(f"Cannot set protocol options on {dataset.name}: {exc}.") from None
    metadata = {**(dataset.metadata or {}), PROTOCOL_METADATA_KEY: checked}
    if not checked:
        metadata.pop(PROTOCOL_METADATA_KEY)
    Dataset.objects.filter(pk=dataset.pk).update(metadata=metadata)
    dataset.metadata = metadata
    return dataset


# -- end of per-dataset protocol options -------------------------------------------------------------


@dataclass(frozen=True)
class EncoderComparison:
    """Two encoders scored on the same pairs; ``result`` holds a − b with its paired interval."""

    dataset: str
    split: str
    model: str
    model_id: str
    model_revision: str
    baseline: str
    baseline_id: str
    baseline_revision: str
    metric: str
    result: CorrelationDifference
    seed: int
    model_coverage: VariantCoverage | None
    baseline_coverage: VariantCoverage | None


def dataset_compare(
    *,
    dataset: Dataset,
    model: str,
    baseline: str = "default",
    split: str = "test",
    seed: int = DEFAULT_SEED,
    n_resamples: int = 1000,
    batch_size: int | None = None,
) -> EncoderComparison:
    """Main score (cosine Spearman) of ``model`` and ``baseline`` on an STS/STR split, their
    difference and a paired bootstrap interval of it over pairs (seeded by ``seed``)."""
    if not EVALUATORS[TaskType(dataset.task_type)].paired_comparison:
        raise ShiftlabError(
            f"The paired comparison scores sentence pairs (sts or str datasets); {dataset.name} is "
            f"{dataset.task_type}: evaluate each model on its own instead."
        )
    if split not in dataset.splits:
        raise ShiftlabError(
            f"Dataset {dataset.name} has no split {split!r}; its splits are: {', '.join(dataset.splits) or 'none'}."
        )
    rows = list(dataset_item_list(dataset=dataset, split=split, kind="example").values_list("payload", "gold"))
    s1, s2, gold = _columns(rows, "sentence1", "sentence2")
    encoders = [get_encoder(model), get_encoder(baseline)]
    cosines = []
    for encoder in encoders:
        encode = cached_encode(encoder, task=TaskType(dataset.task_type), batch_size=batch_size)
        vectors = encode([*s1, *s2])
        cosines.append(paired_scores(vectors[: len(s1)], vectors[len(s1) :])["cosine"])
    result = spearman_difference_with_ci(
        [float(g) for g in gold], cosines[0], cosines[1], rng=np.random.default_rng(seed), n_resamples=n_resamples
    )
    a, b = encoders
    return EncoderComparison(
        dataset=dataset.name,
        split=split,
        model=model,
        model_id=a.model_id,
        model_revision=a.revision,
        baseline=baseline,
        baseline_id=b.model_id,
        baseline_revision=b.revision,
        metric="cosine_spearman",
        result=result,
        seed=seed,
        model_coverage=variant_coverage(dataset=dataset, split=split, encoder=a),
        baseline_coverage=variant_coverage(dataset=dataset, split=split, encoder=b),
    )


def variant_coverage(*, dataset: Dataset, split: str, encoder: Encoder) -> VariantCoverage | None:
    """For an augmented encoder, how many of the split's transformable texts (those a
    transformation run rewrites) have their variants; None for any other encoder."""
    if not isinstance(encoder, AugmentedEncoder):
        return None
    fields = task_spec(dataset.task_type).transformable_fields
    payloads = dataset_item_list(dataset=dataset, split=split, kind="example").values_list("payload", flat=True)
    return encoder.coverage([payload[name] for payload in payloads for name in fields if name in payload])


def cached_encode(encoder: Encoder, *, task: TaskType, batch_size: int | None) -> Encode:
    """The ``encode`` callable evaluators take: ``encoder`` through the embedding cache, with the
    prompt the model defines for ``task`` and the side (query or document) asked for."""

    def encode(texts: Sequence[str], /, *, prompt_type: str | None = None) -> np.ndarray:
        prompt_name = prompt_name_for(encoder.prompts, task_type=task.value, prompt_type=prompt_type)
        return encode_cached(encoder, texts, prompt_name=prompt_name, batch_size=batch_size)

    return encode


def _columns(examples: list[tuple[dict, object]], *fields: str) -> tuple[list, ...]:
    """Payload fields of every example as columns, then the gold column."""
    return (*([payload[name] for payload, _ in examples] for name in fields), [gold for _, gold in examples])


def corpus_payloads(dataset: Dataset) -> Sequence[tuple[str, dict]]:
    """(document id, payload) of a retrieval dataset's stored corpus."""
    return dataset_item_list(dataset=dataset, kind="document").values_list("item_id", "payload")


def document_text(payload: dict) -> str:
    # MTEB's corpus text: "title text" when there is a title, else the text, stripped.
    title, text = payload.get("title") or "", payload.get("text") or ""
    return f"{title} {text}".strip() if title else text.strip()
