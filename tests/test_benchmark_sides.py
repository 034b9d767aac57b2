"""Retrieval perturbed on the query side, the document side or both: the scores of a benchmark run
equal mteb's own retrieval evaluator on the same perturbed corpus, built here independently.

The data is a SciFact subset from ``../shared/data``: the first test queries with their relevant
documents plus a seeded sample of the other documents (mteb scores exactly this subset). The
transformation is ``random_keywords`` (no LLM); the independent corpus applies
``transforms.planning.random_keywords`` to the raw files' texts, and only the success flags of the
stored outputs are read back (a rewrite the error checks refuse is dropped on both sides).
"""

from __future__ import annotations

import csv
import io
import json
import random
from pathlib import Path

import pytest
from django.core.management import call_command
from django.urls import reverse

from annotation.export_services import BenchmarkConfigExportRequest, benchmark_config_export, benchmark_config_verify
from annotation.models import BenchmarkConfig, Study
from core.errors import ShiftlabError
from core.hashing import sha256_text
from core.models import Membership
from corpora.services import dataset_import
from corpora.task_types import TaskType
from evaluation.benchmark_services import benchmark_run_create_from_config
from evaluation.encoders import get_encoder
from evaluation.models import BenchmarkResult, BenchmarkRun
from evaluation.report_robustness import CSV_NAME, robustness_report_files, robustness_report_get
from evaluation.reports import benchmark_report
from evaluation.services import cached_encode
from tests.support import api_as, config_text, keywords_approved, page_as, published_keyword_study
from tests.test_front_doors_evaluation import alpha_config, by_api, by_command, by_page, world  # noqa: F401
from transforms.chunk_services import transform_run_execute_inline
from transforms.models import TransformedItem
from transforms.planning import random_keywords
from transforms.services import transform_run_create

pytest.importorskip("mteb")
from tests.mteb_reference import mteb_main_score, retrieval_data, task_metadata  # noqa: E402

MODEL = "all-MiniLM-L6-v2"
N_QUERIES, N_OTHER_DOCUMENTS, SEED = 12, 150, 1
pytestmark = pytest.mark.django_db


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture
def scifact_subset(shared_data, tmp_path, settings):
    """(folder, corpus, queries, qrels) of the subset, written in the BEIR layout."""
    settings.EMBEDDING_CACHE_DIR = tmp_path / "embeddings"
    settings.DATA_DIR = tmp_path
    source = shared_data / "scifact"
    with (source / "qrels/test.tsv").open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    qrels: dict[str, dict[str, int]] = {}
    for row in rows:
        if len(qrels) == N_QUERIES and row["query-id"] not in qrels:
            continue
        qrels.setdefault(row["query-id"], {})[row["corpus-id"]] = int(row["score"])
    relevant = {doc for grades in qrels.values() for doc in grades}
    all_documents = read_jsonl(source / "corpus.jsonl")
    others = [d["_id"] for d in all_documents if d["_id"] not in relevant]
    kept = relevant | set(random.Random(SEED).sample(others, N_OTHER_DOCUMENTS))
    corpus = {d["_id"]: {"title": d["title"], "text": d["text"]} for d in all_documents if d["_id"] in kept}
    queries = {q["_id"]: q["text"] for q in read_jsonl(source / "queries.jsonl") if q["_id"] in qrels}
    folder = tmp_path / "scifact-subset"
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": d, **doc}) + "\n" for d, doc in corpus.items()), encoding="utf-8"
    )
    (folder / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": q, "text": text}) + "\n" for q, text in queries.items()), encoding="utf-8"
    )
    (folder / "qrels/test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{g}\n" for q, gs in qrels.items() for d, g in gs.items()),
        encoding="utf-8",
    )
    return folder, corpus, queries, qrels


def keyword_query_run(dataset):
    run = transform_run_create(dataset=dataset, transformation="random_keywords", seed=SEED, dispatch=False)
    return transform_run_execute_inline(run_id=run.pk)


def rewritten(text: str) -> str:
    return random_keywords(text, seed=SEED, text_hash=sha256_text(text))


def failed_ids(run_id: int) -> set[str]:
    return set(TransformedItem.objects.filter(run_id=run_id, ok=False).values_list("item__item_id", flat=True))


@pytest.mark.heavy  # a real embedding model and mteb's evaluator
def test_document_and_both_sides_equal_mteb_on_the_same_perturbed_corpus(
    scifact_subset, django_capture_on_commit_callbacks, researcher
):
    folder, corpus, queries, qrels = scifact_subset
    dataset = dataset_import(source=folder, task="retrieval", name="scifact-subset")
    query_run = keyword_query_run(dataset)
    with django_capture_on_commit_callbacks(execute=True):
        run = benchmark_run_create_from_config(
            text=config_text([query_run], fmt="json"),
            fmt="json",
            models=[MODEL],
            sides=("query", "document", "both"),
        )
    run.refresh_from_db()
    assert run.status == "succeeded" and run.done == run.total == 4, run.error
    assert run.plan["document_scope"] == "relevant_documents"
    document_run_id = run.plan["transform_runs"][f"scifact-subset|random_keywords|{SEED}|documents"]

    # The perturbed data, built from the raw files: relevant documents' texts rewritten (titles
    # kept), failed rewrites dropped from the corpus, queries judging them relevant left out.
    relevant = {doc for grades in qrels.values() for doc, grade in grades.items() if grade >= 1}
    failed_docs, failed_queries = failed_ids(document_run_id), failed_ids(query_run.pk)
    original_corpus = {d: doc for d, doc in corpus.items() if d not in failed_docs}
    perturbed = {
        d: {**doc, "text": rewritten(doc["text"])} if d in relevant else doc for d, doc in original_corpus.items()
    }
    stored = dict(
        TransformedItem.objects.filter(run_id=document_run_id, ok=True).values_list("item__item_id", "output_text")
    )
    assert stored == {d: perturbed[d]["text"] for d in relevant - failed_docs}
    encode = cached_encode(get_encoder(MODEL), task=TaskType.RETRIEVAL, batch_size=None)

    def mteb_score(documents, query_texts, query_ids):
        data = retrieval_data(documents, {q: query_texts[q] for q in query_ids}, {q: qrels[q] for q in query_ids})
        return mteb_main_score(
            _retrieval_task(), data, encode, metadata=task_metadata("LocalRetrieval", "Retrieval", "ndcg_at_10")
        )

    kept_for_documents = [q for q in qrels if not set(qrels[q]) & failed_docs]
    document_side = BenchmarkResult.objects.get(run=run, side="document")
    assert document_side.n_items == len(kept_for_documents)
    assert document_side.main_score == pytest.approx(mteb_score(perturbed, queries, kept_for_documents), abs=1e-4)
    assert document_side.original_main_score == pytest.approx(
        mteb_score(original_corpus, queries, kept_for_documents), abs=1e-4
    )
    rewritten_queries = {q: rewritten(text) for q, text in queries.items()}
    kept_for_both = [q for q in kept_for_documents if q not in failed_queries]
    both = BenchmarkResult.objects.get(run=run, side="both")
    assert both.n_items == len(kept_for_both)
    assert both.main_score == pytest.approx(mteb_score(perturbed, rewritten_queries, kept_for_both), abs=1e-4)
    # The document side re-encodes only the rewritten documents: the rest come from the cache.
    changed = {perturbed[d]["text"] for d in relevant - failed_docs} - {doc["text"] for doc in corpus.values()}
    assert document_side.documents["transformed"] == len(relevant - failed_docs)
    assert document_side.documents["encoded"] == len(changed)
    assert document_side.documents["reused"] == len(original_corpus) - len(changed)
    assert both.documents["encoded"] == 0  # the document unit encoded them already

    query_side = BenchmarkResult.objects.get(run=run, side="query", transformation="random_keywords")
    assert query_side.documents is None and query_side.transform_run_id == query_run.pk
    assert document_side.transform_run_id == document_run_id and both.transform_run_id == query_run.pk

    # Reports put the three sides next to each other; only the query side counts toward the total.
    report = benchmark_report(run=run)
    sided = ["random_keywords", "random_keywords [both]", "random_keywords [document]"]
    assert report.transformations == sided
    assert report.axes == ["extra", "extra [both]", "extra [document]"]  # random_keywords is of the extra axis
    deltas = {t: report.aggregates[MODEL].transformations[t].delta for t in sided}
    assert deltas["random_keywords [document]"] == pytest.approx(document_side.delta)
    assert deltas["random_keywords"] == pytest.approx(query_side.delta)
    robustness = robustness_report_get(run=run)
    assert [row for row in robustness.as_dict()["transformations"]] == [
        {"name": t, "axis": a} for t, a in zip(sided, report.axes, strict=True)
    ]
    assert "random_keywords [document]" in robustness_report_files(robustness, figures=False)[CSV_NAME]
    # The run page shows each unit's side and what the document side cost.
    Membership.objects.create(project=run.project, user=researcher, role="member")
    page = page_as(researcher).get(reverse("evaluation:benchmark", args=[run.pk])).content.decode()
    assert "11 documents rewritten; corpus of 161: 11 encoded, 150 from the embedding cache" in page
    assert "query, documents, query and documents on retrieval datasets" in page  # the sides in words
    assert page_as(researcher).get(reverse("evaluation:robustness", args=[run.pk])).status_code == 200


def _retrieval_task():
    from mteb.abstasks.retrieval import AbsTaskRetrieval

    return AbsTaskRetrieval


def test_sides_are_refused_where_they_cannot_apply(scifact_subset, tmp_path, settings):
    sts = dataset_import(source=settings.BASE_DIR / "fixtures/sts/demo-sts.csv", task="sts", name="bench-sts")
    sts_run = keyword_query_run(sts)
    with pytest.raises(
        ShiftlabError, match="none of the run's datasets is a retrieval or reranking dataset"
    ) as refused:
        benchmark_run_create_from_config(
            text=config_text([sts_run], fmt="json"), fmt="json", models=[MODEL], sides=("document",), dispatch=False
        )
    assert refused.value.field == "sides"
    with pytest.raises(ShiftlabError, match="unknown side corpus: choose among query, document, both"):
        from evaluation.benchmark_services import BenchmarkRunStartRequest, benchmark_run_start

        benchmark_run_start(
            actor=None,
            request=BenchmarkRunStartRequest(project=None, models=[MODEL], datasets=["bench-sts"], sides=["corpus"]),
        )


def test_a_document_side_without_a_retrieval_dataset_is_refused_alike_through_every_door(world, alpha_config):  # noqa: F811
    carl, path = world["carl"], Path(world["tmp"]) / "a-config.json"
    path.write_text(alpha_config.json_text, encoding="utf-8")
    page = by_page(carl, config=str(alpha_config.pk), sides=["document"])
    api = by_api(carl, status=400, config_id=alpha_config.pk, sides=["document"])
    command = by_command(carl, "--config", str(path), "--sides", "document")
    refusal = "none of the run's datasets is a retrieval or reranking dataset"
    assert refusal in page and refusal in command
    assert api.startswith("{'sides': [") and refusal in api
    assert not BenchmarkRun.objects.exists()
    # Without a config there is nothing to perturb a corpus with.
    api = by_api(carl, status=400, datasets=["a-sts"], sides=["both"])
    command = by_command(carl, "--dataset", "a-sts", "--sides", "both")
    page = by_page(carl, datasets=["a-sts"], sides=["both"])
    for refused in (api, command, page):
        assert "a document side needs a config" in refused


def test_a_run_of_documents_covers_the_relevant_ones_or_the_whole_corpus(scifact_subset):
    folder, corpus, _, qrels = scifact_subset
    dataset = dataset_import(source=folder, task="retrieval", name="scifact-subset")
    relevant = {doc for grades in qrels.values() for doc, grade in grades.items() if grade >= 1}
    first = next(iter(qrels))  # with a limit: the documents the first query judges relevant
    runs = {
        (scope, limit): transform_run_create(
            dataset=dataset, transformation="random_keywords", seed=SEED, dispatch=False, item_scope=scope, limit=limit
        )
        for scope, limit in (("", None), ("relevant_documents", None), ("relevant_documents", 1), ("documents", None))
    }
    assert {key: run.total for key, run in runs.items()} == {
        ("", None): len(qrels),
        ("relevant_documents", None): len(relevant),
        ("relevant_documents", 1): len(qrels[first]),
        ("documents", None): len(corpus),
    }
    assert len({run.run_hash for run in runs.values()}) == 4
    done = transform_run_execute_inline(run_id=runs[("relevant_documents", 1)].pk)
    outputs = TransformedItem.objects.filter(run=done)
    assert sorted(outputs.values_list("item__item_id", "side")) == sorted((d, "text") for d in qrels[first])
    sts = dataset_import(source=Path(__file__).parents[1] / "fixtures/sts/demo-sts.csv", task="sts", name="sts")
    with pytest.raises(ShiftlabError, match="only retrieval datasets have a corpus of documents to transform"):
        transform_run_create(dataset=sts, transformation="random_keywords", seed=SEED, item_scope="documents")


def test_a_config_that_fixes_the_sides_gives_them_to_its_runs_which_may_only_narrow_them(scifact_subset):
    folder, *_ = scifact_subset
    dataset = dataset_import(source=folder, task="retrieval", name="scifact-subset")
    block = {"sides": ["document", "both"], "document_scope": "relevant_documents"}
    text = config_text([keyword_query_run(dataset)], fmt="json", perturbation=block)

    def run_of(**asked):
        return benchmark_run_create_from_config(text=text, fmt="json", models=[MODEL], dispatch=False, **asked)

    unasked = run_of()
    assert unasked.plan["sides"] == ["document", "both"] and unasked.plan["document_scope"] == "relevant_documents"
    # A query-side unit's dict names no side (plans read as before sides existed).
    sides = sorted(u.get("side", "query") for u in unasked.plan["units"] if u["transformation"] != "original")
    assert sides == ["both", "document"]
    assert run_of(sides=("both",), document_scope="relevant_documents").plan["sides"] == ["both"]
    with pytest.raises(ShiftlabError, match="the config fixes the perturbed sides to document, both") as refused:
        run_of(sides=("query", "document"))
    assert refused.value.field == "sides"
    with pytest.raises(ShiftlabError, match="the config fixes the document scope to 'relevant_documents'"):
        run_of(document_scope="documents")
    # A config without the block leaves the sides to the run: the query side by default, as before.
    plain = benchmark_run_create_from_config(
        text=config_text([keyword_query_run(dataset)], fmt="json"), fmt="json", models=[MODEL], dispatch=False
    )
    assert "sides" not in plain.plan and not any("side" in u for u in plain.plan["units"])


def test_an_export_with_sides_writes_the_block_which_verifies_and_its_runs_apply(researcher, tmp_path, settings):
    settings.EMBEDDING_CACHE_DIR = tmp_path / "embeddings"
    study = published_keyword_study(researcher=researcher, name="sided", limit=5, items=6, batch_size=3)
    keywords_approved(study, researcher, comment="ok")
    config = benchmark_config_export(
        actor=researcher,
        request=BenchmarkConfigExportRequest(name="sided", sides=["document"], document_scope="documents"),
    )
    assert config.document["perturbation"] == {"sides": ["document"], "document_scope": "documents"}
    assert benchmark_config_verify(text=config.yaml_text, fmt="yaml").accepted
    assert (
        "perturbation"
        not in benchmark_config_export(actor=researcher, request=BenchmarkConfigExportRequest(name="plain")).document
    )
    with pytest.raises(ShiftlabError, match="perturbation.sides\\[0\\]: 'corpus' is not a side"):
        benchmark_config_export(actor=researcher, request=BenchmarkConfigExportRequest(sides=["corpus"]))
    with pytest.raises(ShiftlabError, match="a document scope needs sides"):
        benchmark_config_export(actor=researcher, request=BenchmarkConfigExportRequest(document_scope="documents"))
    # The stored config's document side applies to a run that names no sides: its only dataset is
    # STS, so the run is refused as one that asked for the document side itself would be.
    from evaluation.benchmark_services import BenchmarkRunStartRequest, benchmark_run_start

    with pytest.raises(ShiftlabError, match="none of the run's datasets is a retrieval or reranking dataset"):
        benchmark_run_start(
            actor=researcher,
            dispatch=False,
            request=BenchmarkRunStartRequest(project=None, models=[MODEL], config_id=config.pk),
        )


def test_sides_fixed_in_a_config_apply_and_are_checked_alike_through_every_door(world, alpha_config):  # noqa: F811
    carl, path = world["carl"], Path(world["tmp"]) / "sided.json"
    study = Study.objects.get(name="a-study")
    call_command(
        "benchmark_config", "export", "--out", str(path), "--study", str(study.pk), "--sides", "document",
        "--as", carl.username, stdout=io.StringIO(),
    )  # fmt: skip
    exported = api_as(carl).post(
        "/api/benchmark-configs/", {"studies": [study.pk], "sides": ["document"]}, format="json"
    )
    assert exported.status_code == 201, exported.content
    block = {"sides": ["document"], "document_scope": "relevant_documents"}
    assert json.loads(path.read_text(encoding="utf-8"))["perturbation"] == block
    config = BenchmarkConfig.objects.get(pk=exported.json()["id"])
    assert config.document["perturbation"] == block
    # Naming no side, each door runs the config's document side: refused, its only dataset being STS.
    refusal = "none of the run's datasets is a retrieval or reranking dataset"
    assert refusal in by_page(carl, config=str(config.pk))
    assert refusal in by_api(carl, status=400, config_id=config.pk)
    assert refusal in by_command(carl, "--config", str(path))
    # Asking for a side the config lacks is refused before that.
    narrowed = "the config fixes the perturbed sides to document, and the run asks for query"
    assert narrowed in by_page(carl, config=str(config.pk), sides=["query"])
    assert narrowed in by_api(carl, status=400, config_id=config.pk, sides=["query"])
    assert narrowed in by_command(carl, "--config", str(path), "--sides", "query")
    assert not BenchmarkRun.objects.exists()
