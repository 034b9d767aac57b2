"""Shiftlab's evaluators against ``mteb``'s own, task type by task type, on public data.

For each of the eight task types the same data runs through ``mteb.evaluate`` (a custom task built
offline from ``../shared/data``) and through Shiftlab's evaluator, and the main scores must agree
to 1e-4. Both sides see identical vectors: the real all-MiniLM-L6-v2 encodes each text once into
Shiftlab's embedding cache, and mteb's model is a wrapper that answers its ``encode`` calls from
that cache (``CachedVectors``). Any difference is therefore a difference of protocol (sampling,
ranking, tie handling, scoring), which is what these tests pin down.

Subsets (deterministic) keep each pass short; docs/evaluation.md lists them with both scores.
"""

from __future__ import annotations

import csv
import json
import random
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("mteb", reason="mteb comes with the dev requirements")
from mteb.abstasks.pair_classification import AbsTaskPairClassification  # noqa: E402
from mteb.abstasks.retrieval import AbsTaskRetrieval  # noqa: E402
from mteb.abstasks.sts import AbsTaskSTS  # noqa: E402
from mteb.abstasks.text.summarization import AbsTaskSummarization  # noqa: E402

from corpora.task_types import TaskType  # noqa: E402
from evaluation.encoders import get_encoder  # noqa: E402
from evaluation.evaluators import (  # noqa: E402
    ClassificationEvaluator,
    ClusteringEvaluator,
    PairClassificationEvaluator,
    RerankingEvaluator,
    RetrievalEvaluator,
    STSEvaluator,
    SummarizationEvaluator,
)
from evaluation.services import cached_encode  # noqa: E402
from tests.mteb_reference import (  # noqa: E402
    classification_score,
    clustering_score,
    eval_split,
    mteb_main_score,
    retrieval_data,
    task_metadata,
)

MODEL = "all-MiniLM-L6-v2"
TOLERANCE = 1e-4
pytestmark = pytest.mark.heavy


@pytest.fixture(scope="module")
def minilm():
    return get_encoder(MODEL)


def encoder_for(minilm, task: TaskType) -> Callable[..., np.ndarray]:
    return cached_encode(minilm, task=task, batch_size=None)


def read_jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def assert_parity(shiftlab: float, reference: float, name: str) -> None:
    print(f"parity {name}: shiftlab {shiftlab:.6f} mteb {reference:.6f}")
    assert shiftlab == pytest.approx(reference, abs=TOLERANCE), f"{name}: shiftlab {shiftlab:.6f}, mteb {reference:.6f}"


def test_sts_benchmark(shared_data, minilm):
    """STS Benchmark test, all 1,379 pairs."""
    with (shared_data / "stsb-multi-mt/stsb-en-test.csv").open(encoding="utf-8", newline="") as handle:
        rows = list(csv.reader(handle))
    s1, s2, gold = [r[0] for r in rows], [r[1] for r in rows], [float(r[2]) for r in rows]
    encode = encoder_for(minilm, TaskType.STS)
    ours = STSEvaluator().evaluate(s1, s2, gold, encode=encode).main_score
    theirs = mteb_main_score(
        AbsTaskSTS,
        eval_split({"sentence1": s1, "sentence2": s2, "score": gold}),
        encode,
        metadata=task_metadata("LocalSTSB", "STS", "cosine_spearman"),
        min_score=0,
        max_score=5,
    )
    assert_parity(ours, theirs, "STS-B")


def test_banking77_classification(shared_data, minilm):
    """Banking77, all 10,003 training and 3,080 test texts; MTEB's draws of 8 examples per label,
    in 3 experiments rather than MTEB's 10 (the draws chain from one experiment to the next)."""

    def split(name: str) -> tuple[list[str], list[str]]:
        with (shared_data / f"banking77/{name}.csv").open(encoding="utf-8", newline="") as handle:
            rows = list(csv.DictReader(handle))
        return [r["text"] for r in rows], [r["category"] for r in rows]

    train, test = split("train"), split("test")
    evaluator = ClassificationEvaluator(n_experiments=3)
    encode = encoder_for(minilm, TaskType.CLASSIFICATION)
    ours = evaluator.evaluate(*train, *test, encode=encode).main_score
    assert_parity(ours, classification_score(train, test, encode, evaluator), "Banking77")


def test_twitter_url_corpus_pair_classification(shared_data, minilm):
    """TwitterURLCorpus, every 10th of its 51,534 pairs."""
    rows = read_jsonl(shared_data / "twitterurlcorpus/test.jsonl")[::10]
    s1, s2, labels = [r["sentence1"] for r in rows], [r["sentence2"] for r in rows], [r["label"] for r in rows]
    encode = encoder_for(minilm, TaskType.PAIR_CLASSIFICATION)
    ours = PairClassificationEvaluator().evaluate(s1, s2, labels, encode=encode).main_score
    theirs = mteb_main_score(
        AbsTaskPairClassification,
        eval_split({"sentence1": s1, "sentence2": s2, "labels": labels}),
        encode,
        metadata=task_metadata("LocalTwitterURL", "PairClassification", "max_ap"),
    )
    assert_parity(ours, theirs, "TwitterURLCorpus")


def test_stackoverflow_clustering_bootstrap(shared_data, minilm):
    """StackOverflow titles, every 10th of the 20,000 (all 20 tags), bootstrap protocol (MTEB's
    ``AbsTaskClustering``) with 5 draws of 1,024 documents (MTEB: 10 of 16,384)."""
    folder = shared_data / "stackoverflow-clustering"
    texts = (folder / "title_StackOverflow.txt").read_text(encoding="utf-8").splitlines()[::10]
    labels = [int(line) for line in (folder / "label_StackOverflow.txt").read_text().split()][::10]
    evaluator = ClusteringEvaluator(n_bootstrap=5, max_documents_per_cluster=1024)
    encode = encoder_for(minilm, TaskType.CLUSTERING)
    ours = evaluator.evaluate(texts, labels, encode=encode).main_score
    assert_parity(ours, clustering_score(texts, labels, encode, evaluator), "StackOverflow")


def test_twenty_newsgroups_clustering_single(shared_data, minilm):
    """20 Newsgroups test subject lines, all 7,532, single protocol (``AbsTaskClusteringLegacy``)."""
    rows = read_jsonl(shared_data / "twentynewsgroups/test.jsonl")
    texts, labels = [r["text"] for r in rows], [r["label_text"] for r in rows]
    evaluator = ClusteringEvaluator(protocol="single")
    encode = encoder_for(minilm, TaskType.CLUSTERING)
    ours = evaluator.evaluate(texts, labels, encode=encode).main_score
    assert_parity(ours, clustering_score(texts, labels, encode, evaluator), "20 Newsgroups")


def test_twenty_newsgroups_clustering_embedding_a_share(shared_data, minilm):
    """The same texts with TwentyNewsgroupsClustering.v2's share of documents embedded (4%, drawn
    from the same seeded stream as the bootstrap draws), 5 draws of 1,024 (v2: 10 of 16,384)."""
    rows = read_jsonl(shared_data / "twentynewsgroups/test.jsonl")
    texts, labels = [r["text"] for r in rows], [r["label_text"] for r in rows]
    evaluator = ClusteringEvaluator(
        max_fraction_of_documents_to_embed=0.04, n_bootstrap=5, max_documents_per_cluster=1024
    )
    encode = encoder_for(minilm, TaskType.CLUSTERING)
    ours = evaluator.evaluate(texts, labels, encode=encode).main_score
    assert_parity(ours, clustering_score(texts, labels, encode, evaluator), "20 Newsgroups (4% embedded)")


SCIFACT_DOCUMENTS = 800


def scifact(shared_data: Path) -> tuple[dict[str, dict], dict[str, str], dict[str, dict[str, int]]]:
    """SciFact's test claims that have judgements, the judgements, and a corpus of 800 abstracts:
    every judged one, then the others in file order (encoding all 5,183 abstracts on a CPU takes
    longer than a CI pass should)."""
    folder = shared_data / "scifact"
    qrels: dict[str, dict[str, int]] = {}
    with (folder / "qrels/test.tsv").open(encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            qrels.setdefault(row["query-id"], {})[row["corpus-id"]] = int(row["score"])
    queries = {row["_id"]: row["text"] for row in read_jsonl(folder / "queries.jsonl") if row["_id"] in qrels}
    judged = {doc_id for grades in qrels.values() for doc_id in grades}
    rows = read_jsonl(folder / "corpus.jsonl")
    others = [row for row in rows if row["_id"] not in judged][: SCIFACT_DOCUMENTS - len(judged)]
    corpus = {row["_id"]: row for row in rows if row["_id"] in judged} | {row["_id"]: row for row in others}
    return corpus, queries, qrels


def document_text(row: dict) -> str:
    # MTEB's corpus text, and what Shiftlab's retrieval service passes its evaluator: "title text".
    return f"{row['title']} {row['text']}".strip() if row["title"] else row["text"]


def test_scifact_retrieval(shared_data, minilm):
    """SciFact's 300 test claims against 800 of its abstracts (the 283 judged ones among them)."""
    corpus, queries, qrels = scifact(shared_data)
    encode = encoder_for(minilm, TaskType.RETRIEVAL)
    texts = {doc_id: document_text(row) for doc_id, row in corpus.items()}
    ours = RetrievalEvaluator().evaluate(texts, queries, qrels, encode=encode).main_score
    theirs = mteb_main_score(
        AbsTaskRetrieval,
        retrieval_data(corpus, queries, qrels),
        encode,
        metadata=task_metadata("LocalSciFact", "Retrieval", "ndcg_at_10"),
    )
    assert_parity(ours, theirs, "SciFact")


def test_scifact_reranking(shared_data, minilm):
    """Each of SciFact's 300 test claims reranks its relevant abstracts among 19 others drawn at
    random (seeded) from the corpus."""
    corpus, queries, qrels = scifact(shared_data)
    rng = random.Random(15)
    ids = sorted(corpus)
    negatives = {q: [d for d in rng.sample(ids, 40) if d not in qrels[q]][:19] for q in queries}
    encode = encoder_for(minilm, TaskType.RERANKING)
    ours = (
        RerankingEvaluator()
        .evaluate(
            list(queries.values()),
            [[document_text(corpus[d]) for d in qrels[q]] for q in queries],
            [[document_text(corpus[d]) for d in negatives[q]] for q in queries],
            encode=encode,
        )
        .main_score
    )
    top_ranked = {q: [*qrels[q], *negatives[q]] for q in queries}
    used = {d: corpus[d] for candidates in top_ranked.values() for d in candidates}
    theirs = mteb_main_score(
        AbsTaskRetrieval,
        retrieval_data(used, queries, qrels, top_ranked),
        encode,
        metadata=task_metadata("LocalSciFactReranking", "Reranking", "map_at_1000"),
    )
    assert_parity(ours, theirs, "SciFact reranking")


def test_summeval_summarization(shared_data, minilm):
    """SummEval, all 100 articles x 16 machine summaries and their expert relevance ratings. This
    copy has no human reference summaries, so both sides take the article itself as the one
    reference (MTEB's SummEval has 11 human summaries per article: see docs/evaluation.md)."""
    articles: dict[str, dict] = {}
    for row in read_jsonl(shared_data / "summeval/summeval.jsonl"):
        entry = articles.setdefault(row["article_id"], {"article": row["article"], "summaries": [], "relevance": []})
        entry["summaries"].append(row["summary"])
        entry["relevance"].append(float(row["relevance"]))
    references = [[a["article"]] for a in articles.values()]
    machine = [a["summaries"] for a in articles.values()]
    relevance = [a["relevance"] for a in articles.values()]
    encode = encoder_for(minilm, TaskType.SUMMARIZATION)
    ours = SummarizationEvaluator().evaluate(references, machine, relevance, encode=encode).main_score
    columns = {
        "text": [a["article"] for a in articles.values()],
        "human_summaries": references,
        "machine_summaries": machine,
        "relevance": relevance,
    }
    theirs = mteb_main_score(
        AbsTaskSummarization,
        eval_split(columns),
        encode,
        metadata=task_metadata("LocalSummEval", "Summarization", "cosine_spearman"),
        min_score=1,
        max_score=5,
    )
    assert_parity(ours, theirs, "SummEval")
