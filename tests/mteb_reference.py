"""Reference scores from ``mteb``'s own evaluators, for tests that check Shiftlab's against them.

``mteb_main_score`` runs ``mteb.evaluate`` on a custom task whose data is given in memory (no
hub, no network). Its model is :class:`CachedVectors`, which answers each ``encode`` call with the
same ``encode`` callable Shiftlab's evaluators receive (the real model through the embedding
cache), so both sides score identical vectors. ``mteb_dataset_score`` builds that task from a
stored Shiftlab dataset, for any of the eight task types.

Import this module only after ``pytest.importorskip("mteb")``: mteb is a dev requirement.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import mteb
import numpy as np
from datasets import Dataset as HFDataset
from datasets import DatasetDict
from mteb.abstasks.classification import AbsTaskClassification
from mteb.abstasks.clustering import AbsTaskClustering
from mteb.abstasks.clustering_legacy import AbsTaskClusteringLegacy
from mteb.abstasks.pair_classification import AbsTaskPairClassification
from mteb.abstasks.retrieval import AbsTaskRetrieval
from mteb.abstasks.retrieval_dataset_loaders import RetrievalSplitData
from mteb.abstasks.sts import AbsTaskSTS
from mteb.abstasks.task_metadata import TaskMetadata
from mteb.abstasks.text.summarization import AbsTaskSummarization
from mteb.models.abs_encoder import AbsEncoder

from corpora.models import Dataset
from corpora.selectors import dataset_item_list
from corpora.task_types import TaskType
from evaluation.evaluators import ClassificationEvaluator, ClusteringEvaluator

Encode = Callable[..., np.ndarray]


class CachedVectors(AbsEncoder):
    """mteb's model in a parity check: ``encode`` calls go to Shiftlab's ``encode`` callable."""

    def __init__(self, encode: Encode, *, model_id: str):
        self._encode = encode
        self.mteb_model_meta = mteb.get_model_meta(model_id)

    def encode(self, inputs, *, task_metadata, hf_split, hf_subset, prompt_type=None, **kwargs) -> np.ndarray:
        texts = [text for batch in inputs for text in batch["text"]]
        return self._encode(texts, prompt_type=prompt_type.value if prompt_type else None)


def task_metadata(name: str, mteb_type: str, main_score: str) -> TaskMetadata:
    return TaskMetadata(
        name=name,
        type=mteb_type,
        main_score=main_score,
        description="Shiftlab parity check on local data.",
        reference=None,
        dataset={"path": "local", "revision": "local"},
        category="t2t",
        modalities=["text"],
        eval_splits=["test"],
        eval_langs=["eng-Latn"],
        date=None,
        domains=None,
        task_subtypes=None,
        license=None,
        annotations_creators=None,
        dialect=None,
        sample_creation=None,
        bibtex_citation=None,
    )


def mteb_main_score(
    task_class: type,
    data: Any,
    encode: Encode,
    *,
    metadata: TaskMetadata,
    model_id: str = "sentence-transformers/all-MiniLM-L6-v2",
    seed: int = 42,
    **attributes: Any,
) -> float:
    """The main score ``mteb.evaluate`` gives a task of ``task_class`` holding ``data`` (its
    ``dataset`` as ``load_data`` would set it), with class ``attributes`` set (protocol options)."""

    class LocalTask(task_class):
        def load_data(self, num_proc: int | None = None, **kwargs: Any) -> None:
            self.dataset = data
            self.data_loaded = True

    LocalTask.metadata = metadata
    for name, value in attributes.items():
        setattr(LocalTask, name, value)
    results = mteb.evaluate(
        CachedVectors(encode, model_id=model_id),
        LocalTask(seed=seed),
        cache=None,
        show_progress_bar=False,
        encode_kwargs={"batch_size": 64},
    )
    return float(results.task_results[0].scores["test"][0]["main_score"])


# -- data in mteb's layouts -------------------------------------------------------------------------


def eval_split(columns: Mapping[str, Sequence]) -> DatasetDict:
    return DatasetDict({"test": HFDataset.from_dict(dict(columns))})


def retrieval_data(
    corpus: Mapping[str, Mapping[str, str]],
    queries: Mapping[str, str],
    qrels: Mapping[str, Mapping[str, float]],
    top_ranked: Mapping[str, list[str]] | None = None,
) -> dict:
    """``corpus`` maps document ids to ``{"title", "text"}``; ``top_ranked`` makes it reranking."""
    return {
        "default": {
            "test": RetrievalSplitData(
                corpus=HFDataset.from_list(
                    [{"id": d, "title": doc.get("title") or "", "text": doc["text"]} for d, doc in corpus.items()]
                ),
                queries=HFDataset.from_list([{"id": q, "text": text} for q, text in queries.items()]),
                # pytrec_eval (under mteb) takes integer grades only, as qrels files hold them.
                relevant_docs={q: {d: int(g) for d, g in grades.items()} for q, grades in qrels.items()},
                top_ranked=dict(top_ranked) if top_ranked is not None else None,
            )
        }
    }


def clustering_attributes(evaluator: ClusteringEvaluator) -> tuple[type, dict[str, Any]]:
    """The mteb task class and attributes that run ``evaluator``'s protocol."""
    if evaluator.protocol == "single":
        return AbsTaskClusteringLegacy, {}
    return AbsTaskClustering, {
        "n_clusters": evaluator.n_bootstrap,
        "max_documents_per_cluster": evaluator.max_documents_per_cluster,
        "k_mean_batch_size": evaluator.kmeans_batch_size,
        "max_fraction_of_documents_to_embed": evaluator.max_fraction_of_documents_to_embed,
        "max_document_to_embed": evaluator.max_documents_to_embed,
    }


def clustering_score(texts: list[str], labels: list, encode: Encode, evaluator: ClusteringEvaluator) -> float:
    task_class, attributes = clustering_attributes(evaluator)
    # The legacy task holds one row per cluster set; the bootstrap task one row per document.
    columns = (
        {"sentences": [texts], "labels": [labels]}
        if evaluator.protocol == "single"
        else {
            "sentences": texts,
            "labels": labels,
        }
    )
    return mteb_main_score(
        task_class,
        eval_split(columns),
        encode,
        metadata=task_metadata("LocalClustering", "Clustering", "v_measure"),
        seed=evaluator.seed,
        **attributes,
    )


def classification_score(
    train: tuple[list[str], list], test: tuple[list[str], list], encode: Encode, evaluator: ClassificationEvaluator
) -> float:
    from sklearn.linear_model import LogisticRegression

    data = DatasetDict(
        {
            "train": HFDataset.from_dict({"text": train[0], "label": train[1]}),
            "test": HFDataset.from_dict({"text": test[0], "label": test[1]}),
        }
    )
    return mteb_main_score(
        AbsTaskClassification,
        data,
        encode,
        metadata=task_metadata("LocalClassification", "Classification", "accuracy"),
        seed=evaluator.seed,
        samples_per_label=evaluator.samples_per_label,
        n_experiments=evaluator.n_experiments,
        evaluator_model=LogisticRegression(max_iter=evaluator.max_iter),
    )


def mteb_dataset_score(
    dataset: Dataset,
    encode: Encode,
    *,
    split: str = "test",
    seed: int = 42,
    protocol: Mapping[str, Any] | None = None,
) -> float:
    """mteb's main score for a stored Shiftlab dataset (its ``split``), with Shiftlab's
    per-dataset ``protocol`` options translated to the mteb task's attributes."""
    task = TaskType(dataset.task_type)
    rows = list(
        dataset_item_list(dataset=dataset, split=split, kind="example").values_list("item_id", "payload", "gold")
    )
    payloads, golds = [r[1] for r in rows], [r[2] for r in rows]
    if task in (TaskType.STS, TaskType.STR):
        data = eval_split(
            {
                "sentence1": [p["sentence1"] for p in payloads],
                "sentence2": [p["sentence2"] for p in payloads],
                "score": [float(g) for g in golds],
            }
        )
        return mteb_main_score(
            AbsTaskSTS,
            data,
            encode,
            metadata=task_metadata("LocalSTS", "STS", "cosine_spearman"),
            min_score=min(golds),
            max_score=max(golds),
        )
    if task is TaskType.PAIR_CLASSIFICATION:
        data = eval_split(
            {
                "sentence1": [p["sentence1"] for p in payloads],
                "sentence2": [p["sentence2"] for p in payloads],
                "labels": [int(g) for g in golds],
            }
        )
        return mteb_main_score(
            AbsTaskPairClassification,
            data,
            encode,
            metadata=task_metadata("LocalPairs", "PairClassification", "max_ap"),
        )
    if task is TaskType.CLASSIFICATION:
        train = list(dataset_item_list(dataset=dataset, split="train", kind="example").values_list("payload", "gold"))
        evaluator = ClassificationEvaluator(seed=seed, **(protocol or {}))
        return classification_score(
            ([p["text"] for p, _ in train], [g for _, g in train]),
            ([p["text"] for p in payloads], golds),
            encode,
            evaluator,
        )
    if task is TaskType.CLUSTERING:
        evaluator = ClusteringEvaluator(seed=seed, **(protocol or {}))
        return clustering_score([p["text"] for p in payloads], golds, encode, evaluator)
    if task is TaskType.RERANKING:
        corpus, queries, qrels, top_ranked = {}, {}, {}, {}
        for i, payload in enumerate(payloads):
            query = f"q{i}"
            queries[query] = payload["query"]
            candidates = [*payload["positive"], *payload["negative"]]
            ids = [f"{query}-d{j}" for j in range(len(candidates))]
            corpus.update({d: {"text": text} for d, text in zip(ids, candidates, strict=True)})
            qrels[query] = {d: 1 for d in ids[: len(payload["positive"])]}
            top_ranked[query] = ids
        return mteb_main_score(
            AbsTaskRetrieval,
            retrieval_data(corpus, queries, qrels, top_ranked),
            encode,
            metadata=task_metadata("LocalReranking", "Reranking", "map_at_1000"),
        )
    if task is TaskType.RETRIEVAL:
        documents = dataset_item_list(dataset=dataset, kind="document").values_list("item_id", "payload")
        corpus = {doc_id: payload for doc_id, payload in documents}
        queries = {item_id: payload["text"] for item_id, payload, _ in rows}
        qrels = {item_id: gold for item_id, _, gold in rows}
        return mteb_main_score(
            AbsTaskRetrieval,
            retrieval_data(corpus, queries, qrels),
            encode,
            metadata=task_metadata("LocalRetrieval", "Retrieval", "ndcg_at_10"),
        )
    if task is TaskType.SUMMARIZATION:
        ratings = [float(r) for g in golds for r in g]
        data = eval_split(
            {
                "text": [p["text"] for p in payloads],
                "human_summaries": [p["human_summaries"] for p in payloads],
                "machine_summaries": [p["machine_summaries"] for p in payloads],
                "relevance": golds,
            }
        )
        return mteb_main_score(
            AbsTaskSummarization,
            data,
            encode,
            metadata=task_metadata("LocalSummarization", "Summarization", "cosine_spearman"),
            min_score=min(ratings),
            max_score=max(ratings),
        )
    raise AssertionError(f"no mteb task for {task}")
