"""Reranking perturbed on the document side or both: the scores of a benchmark run equal mteb's
reranking evaluation on the same perturbed candidate lists, rebuilt here independently from the
raw rows and the rewrites (``transforms.planning.random_keywords`` applied to each distinct
candidate text; only the success flags of the stored outcomes are read back).

The dataset is the SciFact-derived reranking subset of ``tests/test_reranking_candidate_runs.py``
(each claim with its relevant abstracts as positives and abstracts of a small pool as negatives).
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from core.hashing import sha256_text
from core.models import Membership
from corpora.task_types import TaskType
from evaluation.benchmark_services import benchmark_run_create_from_config
from evaluation.encoders import get_encoder
from evaluation.models import BenchmarkResult
from evaluation.services import cached_encode
from tests.support import config_text, page_as
from tests.test_reranking_candidate_runs import SEED, import_rows, scifact_reranking_rows
from transforms.chunk_services import transform_run_execute_inline
from transforms.models import TransformedItem, TransformRun
from transforms.planning import random_keywords
from transforms.services import transform_run_create

pytest.importorskip("mteb")
from mteb.abstasks.retrieval import AbsTaskRetrieval  # noqa: E402

from tests.mteb_reference import mteb_main_score, retrieval_data, task_metadata  # noqa: E402

MODEL = "all-MiniLM-L6-v2"
pytestmark = [pytest.mark.django_db, pytest.mark.heavy]  # a real embedding model and mteb's evaluator


def rewritten(text: str) -> str:
    return random_keywords(text, seed=SEED, text_hash=sha256_text(text))


def failed_texts(run_id: int) -> set[str]:
    return set(TransformedItem.objects.filter(run_id=run_id, ok=False).values_list("source_text", flat=True))


def test_document_and_both_sides_of_reranking_equal_mteb_on_the_same_perturbed_lists(
    shared_data, tmp_path, settings, django_capture_on_commit_callbacks, researcher
):
    settings.EMBEDDING_CACHE_DIR = tmp_path / "embeddings"
    settings.DATA_DIR = tmp_path
    rows = scifact_reranking_rows(shared_data)
    dataset = import_rows(rows, tmp_path)
    query_run = transform_run_create(dataset=dataset, transformation="random_keywords", seed=SEED, dispatch=False)
    query_run = transform_run_execute_inline(run_id=query_run.pk)
    with django_capture_on_commit_callbacks(execute=True):
        run = benchmark_run_create_from_config(
            text=config_text([query_run], fmt="json"), fmt="json", models=[MODEL], sides=("query", "document", "both")
        )
    run.refresh_from_db()
    assert run.status == "succeeded" and run.done == run.total == 4, run.error
    candidate_run = TransformRun.objects.get(
        pk=run.plan["transform_runs"][f"{dataset.name}|random_keywords|{SEED}|documents"]
    )
    assert candidate_run.item_scope == "candidates"

    # The perturbed lists, rebuilt from the raw rows: one id per distinct candidate text, failed
    # candidates dropped from every list, queries left without a positive removed.
    texts = list(dict.fromkeys(t for row in rows for t in [*row["positive"], *row["negative"]]))
    ids = {text: f"c{i}" for i, text in enumerate(texts)}
    failed, failed_queries = failed_texts(candidate_run.pk), failed_texts(query_run.pk)
    stored = dict(TransformedItem.objects.filter(run=candidate_run, ok=True).values_list("source_text", "output_text"))
    assert stored == {t: rewritten(t) for t in texts if t not in failed}
    positives = {row["id"]: [ids[t] for t in row["positive"] if t not in failed] for row in rows}
    negatives = {row["id"]: [ids[t] for t in row["negative"] if t not in failed] for row in rows}
    kept = [row["id"] for row in rows if positives[row["id"]]]
    queries = {row["id"]: row["query"] for row in rows}
    encode = cached_encode(get_encoder(MODEL), task=TaskType.RERANKING, batch_size=None)

    def mteb_score(query_ids, query_text, candidate_text):
        top_ranked = {q: [*positives[q], *negatives[q]] for q in query_ids}
        used = {d for ranked in top_ranked.values() for d in ranked}
        corpus = {ids[t]: {"text": candidate_text(t)} for t in texts if ids[t] in used}
        data = retrieval_data(
            corpus,
            {q: query_text(q) for q in query_ids},
            {q: {d: 1 for d in positives[q]} for q in query_ids},
            top_ranked,
        )
        return mteb_main_score(
            AbsTaskRetrieval, data, encode, metadata=task_metadata("LocalRerankingSides", "Reranking", "map_at_1000")
        )

    document_side = BenchmarkResult.objects.get(run=run, side="document")
    print(
        f"reranking sides: document {document_side.original_main_score:.6f} -> {document_side.main_score:.6f}, "
        f"{len(failed)} failed candidates, {len(rows) - len(kept)} queries left out, {document_side.documents}"
    )
    assert document_side.n_items == len(kept) and document_side.n_left_out == len(rows) - len(kept)
    assert document_side.main_score == pytest.approx(mteb_score(kept, queries.get, rewritten), abs=1e-4)
    assert document_side.original_main_score == pytest.approx(mteb_score(kept, queries.get, lambda t: t), abs=1e-4)
    kept_for_both = [q for q in kept if queries[q] not in failed_queries]
    both = BenchmarkResult.objects.get(run=run, side="both")
    assert both.n_items == len(kept_for_both)
    assert both.main_score == pytest.approx(
        mteb_score(kept_for_both, lambda q: rewritten(queries[q]), rewritten), abs=1e-4
    )
    assert both.original_main_score == pytest.approx(mteb_score(kept_for_both, queries.get, lambda t: t), abs=1e-4)

    # Only the changed candidates are encoded: the original lists' texts come from the cache.
    scored = {t for q in kept for t in texts if ids[t] in positives[q] + negatives[q]}
    changed = {rewritten(t) for t in scored} - scored
    assert document_side.documents == {
        "transform_run": candidate_run.pk,
        "transformed": len(scored),
        "left_out": len(failed & set(texts)),
        "corpus": len({rewritten(t) for t in scored}),
        "encoded": len(changed),
        "reused": len({rewritten(t) for t in scored}) - len(changed),
    }
    # The both unit's lists hold the same rewritten candidates: the document unit encoded them already.
    assert both.documents["encoded"] == 0 and both.documents["reused"] == both.documents["corpus"] > 0
    assert document_side.transform_run_id == candidate_run.pk and both.transform_run_id == query_run.pk

    Membership.objects.create(project=run.project, user=researcher, role="member")
    page = page_as(researcher).get(reverse("evaluation:benchmark", args=[run.pk])).content.decode()
    d = document_side.documents
    assert (
        f"{d['transformed']} candidates rewritten, 1 failed (left out); {d['corpus']} distinct candidates scored: "
        f"{d['encoded']} encoded, {d['reused']} from the embedding cache" in page
    )
    page = page_as(researcher).get(reverse("transforms:run", args=[candidate_run.pk])).content.decode()
    assert "the distinct candidate texts of the run's examples' lists, each rewritten once" in page
