"""A run of a reranking dataset's candidates (``TransformRun.item_scope`` "candidates"): its work
units are the distinct candidate texts of the examples in range, each rewritten once and stored
under its sha256 key; it resumes and re-executes without doing a unit twice.

The dataset is built from SciFact (``../shared/data``): each of the first test claims with its
relevant abstracts as positives and abstracts drawn from a small pool as negatives, so that
candidates recur across queries as they do in real reranking sets; one short candidate whose
rewrite fails is added to the first lists, and as the only positive of one more query."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from core.errors import ShiftlabError
from corpora.services import dataset_import
from tests.test_evaluator_parity import document_text, scifact
from transforms.chunk_services import transform_run_execute_chunk, transform_run_execute_inline
from transforms.models import TransformedItem
from transforms.services import transform_run_create, transform_run_pending_chunks

N_QUERIES, POOL, NEGATIVES, SEED = 12, 60, 10, 1
# A candidate whose random-keyword rewrite is refused (its three words, comma-joined, are already
# the keyword list: an identical output), and a query whose only positive it is.
REFUSED = "Vitamin, D, bone"
pytestmark = pytest.mark.django_db


def scifact_reranking_rows(shared_data: Path) -> list[dict]:
    """The rows of the reranking subset, as the importer reads them (jsonl)."""
    corpus, queries, qrels = scifact(shared_data)
    chosen = sorted(queries)[:N_QUERIES]
    pool = sorted(corpus)[:POOL]

    def words(text: str) -> set[str]:
        return set(text.lower().split())

    def negatives(q: str) -> list[str]:
        # The pool's abstracts sharing the most words with the claim: negatives a model can confuse.
        ranked = sorted(
            (d for d in pool if d not in qrels[q]), key=lambda d: -len(words(queries[q]) & words(corpus[d]["text"]))
        )
        return [document_text(corpus[d]) for d in ranked[:NEGATIVES]]

    rows = [
        {
            "id": q,
            "split": "test",
            "query": queries[q],
            "positive": [document_text(corpus[d]) for d in qrels[q]],
            "negative": negatives(q),
        }
        for q in chosen
    ]
    for row in rows[:3]:
        row["negative"].append(REFUSED)
    extra = {"id": "short", "split": "test", "query": "Does vitamin D strengthen bone?", "positive": [REFUSED]}
    return [*rows, {**extra, "negative": rows[0]["negative"][:3]}]


def import_rows(rows: list[dict], folder: Path, name: str = "scifact-reranking"):
    path = folder / f"{name}.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return dataset_import(source=path, task="reranking", name=name)


def distinct(rows: list[dict]) -> list[str]:
    return list(dict.fromkeys(t for row in rows for t in [*row["positive"], *row["negative"]]))


def key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def test_a_run_of_candidates_rewrites_each_distinct_candidate_once_and_resumes(
    shared_data, tmp_path, settings, monkeypatch
):
    rows = scifact_reranking_rows(shared_data)
    texts = distinct(rows)
    assert len(texts) < sum(len(r["positive"]) + len(r["negative"]) for r in rows)  # candidates recur
    dataset = import_rows(rows, tmp_path)
    run = transform_run_create(
        dataset=dataset, transformation="random_keywords", seed=SEED, dispatch=False, item_scope="candidates"
    )
    assert run.total == len(texts)
    limited = transform_run_create(
        dataset=dataset, transformation="random_keywords", seed=SEED, dispatch=False, item_scope="candidates", limit=2
    )
    assert limited.total == len(distinct(rows[:2])) and limited.run_hash != run.run_hash

    # Executed chunk by chunk: a chunk delivered twice adds nothing; what is left is resumed. The
    # examples' lists are read and hashed once for the run, not once per chunk.
    from transforms import selectors

    reads = []
    read_units = selectors._candidate_units
    monkeypatch.setattr(selectors, "_candidate_units", lambda items: reads.append(1) or read_units(items))
    selectors._UNITS_SEEN.clear()
    chunks = transform_run_pending_chunks(run_id=run.pk, chunk_size=3)
    assert sum(len(chunk) for chunk in chunks) <= N_QUERIES
    first = transform_run_execute_chunk(run_id=run.pk, item_ids=chunks[0])
    assert first > 0 and transform_run_execute_chunk(run_id=run.pk, item_ids=chunks[0]) == 0
    assert transform_run_pending_chunks(run_id=run.pk, chunk_size=3) == chunks[1:]
    done = transform_run_execute_inline(run_id=run.pk)
    assert done.status == "succeeded" and done.done == done.total == len(texts)
    assert transform_run_pending_chunks(run_id=run.pk) == []
    assert len(chunks) > 2 and len(reads) == 1, (len(chunks), len(reads))

    stored = TransformedItem.objects.filter(run=run)
    assert sorted(stored.values_list("side", "source_text")) == sorted((key(t), t) for t in texts)
    # Each candidate is stored under the first row whose lists hold it.
    owners = dict(stored.values_list("side", "item__item_id"))
    first_row = {}
    for row in rows:
        for text in [*row["positive"], *row["negative"]]:
            first_row.setdefault(key(text), row["id"])
    assert owners == first_row


def test_candidates_and_documents_are_each_refused_on_the_other_kind_of_dataset(shared_data, tmp_path, settings):
    reranking = import_rows(scifact_reranking_rows(shared_data)[:2], tmp_path)
    with pytest.raises(ShiftlabError, match="only retrieval datasets have a corpus of documents to transform"):
        transform_run_create(dataset=reranking, transformation="random_keywords", seed=SEED, item_scope="documents")
    sts = dataset_import(source=settings.BASE_DIR / "fixtures/sts/demo-sts.csv", task="sts", name="sts")
    with pytest.raises(ShiftlabError, match="only reranking datasets have candidate lists to transform; sts is sts"):
        transform_run_create(dataset=sts, transformation="random_keywords", seed=SEED, item_scope="candidates")
