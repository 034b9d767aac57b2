"""The document side of reranking against ``mteb``: Shiftlab's reranking evaluator on the lists
``perturbed_candidate_lists`` makes equals mteb's reranking task on the same perturbation, built
here independently by document id (rewritten corpus texts, failed ids dropped from ``top_ranked``
and ``qrels``, queries left without a relevant document removed), to 1e-4."""

from __future__ import annotations

import random

import pytest

pytest.importorskip("mteb", reason="mteb comes with the dev requirements")
from mteb.abstasks.retrieval import AbsTaskRetrieval  # noqa: E402

from corpora.task_types import TaskType  # noqa: E402
from evaluation.encoders import get_encoder  # noqa: E402
from evaluation.evaluators import RerankingEvaluator  # noqa: E402
from evaluation.reranking_candidates import candidate_key, perturbed_candidate_lists  # noqa: E402
from tests.mteb_reference import mteb_main_score, retrieval_data, task_metadata  # noqa: E402
from tests.test_evaluator_parity import MODEL, assert_parity, document_text, encoder_for, scifact  # noqa: E402

QUERIES = 60
NEGATIVES = 9
pytestmark = pytest.mark.heavy


@pytest.fixture(scope="module")
def minilm():
    return get_encoder(MODEL)


def rewrite(text: str) -> str:
    """A deterministic stand-in for an LLM rewrite: every third word dropped, the rest reversed."""
    return " ".join(w for i, w in enumerate(text.split()) if i % 3 != 2)[::-1]


def test_scifact_reranking_with_rewritten_and_failed_candidates_matches_mteb(shared_data, minilm):
    corpus, queries, qrels = scifact(shared_data)
    chosen = sorted(queries)[:QUERIES]
    rng = random.Random(30)
    pool = sorted(corpus)[:120]  # a small pool, so that candidates recur across queries
    negatives = {q: [d for d in rng.sample(pool, 20) if d not in qrels[q]][:NEGATIVES] for q in chosen}
    # about one candidate in six fails, and the only positive of the first query fails too
    failed_ids = {d for d in pool if int(candidate_key(document_text(corpus[d])), 16) % 6 == 0}
    failed_ids |= set(qrels[chosen[0]])
    used = {d for q in chosen for d in [*qrels[q], *negatives[q]]}
    texts = {d: document_text(corpus[d]) for d in used}

    outputs = {candidate_key(texts[d]): (d not in failed_ids, rewrite(texts[d])) for d in used}
    examples = [
        (
            q,
            {
                "query": queries[q],
                "positive": [texts[d] for d in qrels[q]],
                "negative": [texts[d] for d in negatives[q]],
            },
            None,
            i,
        )
        for i, q in enumerate(chosen)
    ]
    result = perturbed_candidate_lists(examples, outputs)
    assert result.queries_left_out >= 1 and result.candidates_left_out >= 5
    encode = encoder_for(minilm, TaskType.RERANKING)
    rows = [p for _, p, _, _ in result.transformed]
    ours = (
        RerankingEvaluator()
        .evaluate(
            [p["query"] for p in rows], [p["positive"] for p in rows], [p["negative"] for p in rows], encode=encode
        )
        .main_score
    )

    kept = {q: [d for d in qrels[q] if d not in failed_ids] for q in chosen}
    kept_queries = {q: queries[q] for q in chosen if kept[q]}
    assert list(kept_queries) == [i for i, _, _, _ in result.transformed]
    top_ranked = {q: [*kept[q], *(d for d in negatives[q] if d not in failed_ids)] for q in kept_queries}
    rewritten = {d: {"text": rewrite(texts[d])} for ids in top_ranked.values() for d in ids}
    theirs = mteb_main_score(
        AbsTaskRetrieval,
        retrieval_data(rewritten, kept_queries, {q: {d: 1 for d in kept[q]} for q in kept_queries}, top_ranked),
        encode,
        metadata=task_metadata("LocalSciFactRerankingDocuments", "Reranking", "map_at_1000"),
    )
    assert_parity(ours, theirs, "SciFact reranking, document side")
