"""MTEB-native Shiftlab: tasks imported by name through mteb's task objects, models named as in
mteb (with their prompts), benchmark results exported as mteb ``TaskResult`` folders, and the
Hugging Face dataset export.

The hub is out of reach here, so each task's data is a local copy of its hub dataset built in
``tmp_path`` from ``../shared/data`` (the layout ``huggingface-cli download`` gives: data files and
a README whose YAML names the configs). mteb's own loader reads it; the items must equal those of
the plain file import, and MiniLM must score them as it scores the file import.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from corpora.models import Dataset
from corpora.mteb_services import dataset_import_mteb
from corpora.services import ImportOptions, dataset_import
from evaluation.benchmark_services import benchmark_run_create_from_config
from evaluation.models import BenchmarkResult
from evaluation.services import dataset_evaluate
from tests.support import LIMIT, config_text, keyword_run

MODEL = "all-MiniLM-L6-v2"
pytestmark = pytest.mark.django_db


def corpora(*args: str) -> str:
    out = io.StringIO()
    call_command("corpora", *args, stdout=out)
    return out.getvalue()


def write_jsonl(path: Path, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")


def write_card(folder: Path, configs: dict[str, dict[str, str]]) -> None:
    """A dataset card whose YAML header declares ``configs`` ({config: {split: path}}), as hub repos do."""
    lines = ["---", "configs:"]
    for config, files in configs.items():
        lines += [f"- config_name: {config}", "  data_files:"]
        lines += [f"  - split: {split}\n    path: {path}" for split, path in files.items()]
    (folder / "README.md").write_text("\n".join([*lines, "---", ""]), encoding="utf-8")


def stsb_copy(data: Path, folder: Path) -> Path:
    """mteb/stsbenchmark-sts: test split with sentence1, sentence2, score (0-5)."""
    with (data / "stsb-multi-mt/stsb-en-test.csv").open(encoding="utf-8", newline="") as handle:
        rows = [{"sentence1": a, "sentence2": b, "score": float(s)} for a, b, s in csv.reader(handle)]
    write_jsonl(folder / "test.jsonl", rows)
    return folder


def banking77_copy(data: Path, folder: Path) -> Path:
    """mteb/banking77: train and test splits with text and label."""
    for split in ("train", "test"):
        with (data / f"banking77/{split}.csv").open(encoding="utf-8", newline="") as handle:
            rows = [{"text": row["text"], "label": row["category"]} for row in csv.DictReader(handle)]
        write_jsonl(folder / f"{split}.jsonl", rows)
    return folder


def scifact_copy(data: Path, folder: Path) -> Path:
    """mteb/scifact: corpus, queries and qrels ("default") configs (the qrels as JSON lines: one
    repository holds one file format)."""
    folder.mkdir(parents=True)
    for name in ("corpus.jsonl", "queries.jsonl"):
        (folder / name).symlink_to(data / "scifact" / name)
    with (data / "scifact/qrels/test.tsv").open(encoding="utf-8", newline="") as handle:
        qrels = [{**row, "score": int(row["score"])} for row in csv.DictReader(handle, delimiter="\t")]
    write_jsonl(folder / "qrels" / "test.jsonl", qrels)
    write_card(
        folder,
        {
            "corpus": {"corpus": "corpus.jsonl"},
            "queries": {"queries": "queries.jsonl"},
            "default": {"test": "qrels/test.jsonl"},
        },
    )
    return folder


def sts17_copy(data: Path, folder: Path) -> Path:
    """mteb/sts17-crosslingual-sts as mteb's fast loader reads it: one table, a "lang" column
    naming each row's subset; here en-en, es-es and en-ar (track 2)."""
    tracks = {"en-en": "track5.en-en", "es-es": "track3.es-es", "en-ar": "track2.ar-en"}
    rows = []
    for subset, track in tracks.items():
        inputs = (data / f"sts17/STS2017.eval.v1.1/STS.input.{track}.txt").read_text(encoding="utf-8").splitlines()
        golds = (data / f"sts17/STS2017.gs/STS.gs.{track}.txt").read_text(encoding="utf-8").splitlines()
        rows += [
            {"sentence1": line.split("\t")[0], "sentence2": line.split("\t")[1], "score": float(gold), "lang": subset}
            for line, gold in zip(inputs, golds, strict=True)
        ]
    write_jsonl(folder / "test.jsonl", rows)
    return folder


def examples(dataset: Dataset) -> list[tuple]:
    return list(
        dataset.items.order_by("split", "kind", "item_id").values_list("split", "kind", "item_id", "payload", "gold")
    )


@pytest.fixture(scope="module")
def minilm():
    from evaluation.encoders import get_encoder

    return get_encoder(MODEL)


# --- MTEB tasks by name ---------------------------------------------------------------------------


def test_stsbenchmark_by_name_equals_the_csv_import_and_scores_0_8203(shared_data, tmp_path, minilm):
    local = stsb_copy(shared_data, tmp_path / "stsb")
    out = corpora("import", "--mteb", "STSBenchmark", "--from-dir", str(local))
    assert "Imported 1379 items into STSBenchmark (project shiftlab; sts; test: 1379; languages en;" in out
    by_name = Dataset.objects.get(name="STSBenchmark")
    from_csv = dataset_import(
        source=shared_data / "stsb-multi-mt/stsb-en-test.csv",
        task="sts",
        name="stsb-csv",
        options=ImportOptions(columns=["sentence1", "sentence2", "score"]),
    )
    assert examples(by_name) == examples(from_csv)
    assert by_name.content_hash == from_csv.content_hash
    mteb_meta = by_name.metadata["mteb"]
    assert mteb_meta["task_name"] == "STSBenchmark" and mteb_meta["type"] == "STS"
    assert mteb_meta["main_score"] == "cosine_spearman" and mteb_meta["eval_splits"] == ["test"]
    assert mteb_meta["eval_langs"] == ["eng-Latn"] and mteb_meta["hf_subset"] == "default"
    assert mteb_meta["dataset"] == {
        "path": "mteb/stsbenchmark-sts",
        "revision": "b0fddb56ed78048fa8b90373c8a3cfc37b684831",
    }
    assert mteb_meta["loaded_from"] == str(local.resolve())
    assert by_name.source == "mteb:STSBenchmark" and by_name.source_format == "mteb"
    score = dataset_evaluate(dataset=by_name, encoder_alias_or_model=MODEL, split="test").main_score
    assert score == pytest.approx(0.8203, abs=0.002)  # MTEB leaderboard, all-MiniLM-L6-v2
    assert score == dataset_evaluate(dataset=from_csv, encoder_alias_or_model=MODEL, split="test").main_score


def test_banking77_from_the_mteb_data_dir_equals_the_csv_import(shared_data, tmp_path, settings):
    settings.MTEB_DATA_DIR = str(tmp_path / "mteb-data")
    banking77_copy(shared_data, tmp_path / "mteb-data" / "Banking77Classification")
    dataset = dataset_import_mteb(task_name="Banking77Classification", name="banking77-mteb")
    from_csv = dataset_import(
        source=shared_data / "banking77",
        task="classification",
        name="banking77-csv",
        options=ImportOptions(field_map={"label": "category"}),
    )
    assert dataset.splits == {"test": 3080, "train": 10003}
    assert examples(dataset) == examples(from_csv)
    assert dataset.metadata["mteb"]["license"] == "mit" and dataset.metadata["mteb"]["main_score"] == "accuracy"
    # The same items, in the same order, under the same hash: the evaluation (seeded, keyed by the
    # items) is the CSV import's, whose 0.8004 test_evaluation_mteb checks; its 10 classifier fits
    # are not repeated here (about a minute of CPU).
    assert dataset.content_hash == from_csv.content_hash
    for split in ("train", "test"):  # each split in the file's order (the splits' blocks may be swapped)
        in_order = [
            list(d.items.filter(split=split).order_by("position").values_list("item_id")) for d in (dataset, from_csv)
        ]
        assert in_order[0] == in_order[1]


def test_scifact_by_name_equals_the_beir_import(shared_data, tmp_path):
    dataset = dataset_import_mteb(task_name="SciFact", from_dir=scifact_copy(shared_data, tmp_path / "scifact"))
    from_beir = dataset_import(source=shared_data / "scifact", task="retrieval", name="scifact-beir")
    assert dataset.name == "SciFact" and dataset.task_type == "retrieval"
    assert dataset.metadata["n_documents"] == 5183 and dataset.metadata["n_queries"] == 300
    assert examples(dataset) == examples(from_beir)
    assert dataset.metadata["mteb"]["main_score"] == "ndcg_at_10"
    assert dataset.metadata["mteb"]["license"] == "cc-by-nc-4.0"


def test_multilingual_and_crosslingual_subsets(shared_data, tmp_path, minilm):
    local = sts17_copy(shared_data, tmp_path / "sts17")
    with pytest.raises(CommandError, match=r"has 11 subsets \(ko-ko, ar-ar, en-ar.*choose one with --subset"):
        corpora("import", "--mteb", "STS17", "--from-dir", str(local))
    assert not Dataset.objects.exists()
    spanish = dataset_import_mteb(task_name="STS17", subset="es-es", from_dir=local)
    assert spanish.name == "STS17-es-es" and spanish.languages == ["es"] and spanish.n_items == 250
    assert spanish.metadata["mteb"]["eval_langs"] == ["spa-Latn"]
    score = dataset_evaluate(dataset=spanish, encoder_alias_or_model=MODEL, split="test").main_score
    assert score == pytest.approx(0.7612, abs=0.002)  # MTEB leaderboard, STS17 es-es
    crossed = dataset_import_mteb(task_name="STS17", subset="en-ar", from_dir=local, name="sts17-en-ar")
    assert crossed.languages == ["en-ar"] and crossed.metadata["mteb"]["eval_langs"] == ["eng-Latn", "ara-Arab"]
    with pytest.raises(CommandError, match="has no subset 'xx-yy': choose one of ko-ko"):
        corpora("import", "--mteb", "STS17", "--subset", "xx-yy", "--from-dir", str(local))


def test_bad_requests_say_what_to_do_and_import_nothing(shared_data, tmp_path, settings):
    settings.MTEB_DATA_DIR = ""
    with pytest.raises(CommandError, match="MTEB has no task 'STSBenchmarkk'.*Did you mean: 'STSBenchmark'"):
        corpora("import", "--mteb", "STSBenchmarkk")
    with pytest.raises(CommandError, match="'Tatoeba' is a BitextMining task; Shiftlab evaluates STS"):
        corpora("import", "--mteb", "Tatoeba")
    with pytest.raises(CommandError, match="is a sts task, not classification"):
        corpora("import", "--mteb", "STSBenchmark", "--task", "classification", "--from-dir", str(tmp_path))
    # HF_DATASETS_OFFLINE=1 (tests) and no local copy: mteb's hub loader fails, the message says what to do.
    with pytest.raises(
        CommandError, match=r"(?s)Could not load the data of MTEB task 'SICK-R'.*Offline\? .*--from-dir"
    ):
        corpora("import", "--mteb", "SICK-R")
    with pytest.raises(CommandError, match="either PATH"):
        corpora("import", "x.csv", "--mteb", "STSBenchmark")
    assert not Dataset.objects.exists()
    relatedness = dataset_import_mteb(
        task_name="STSBenchmark", task="str", from_dir=stsb_copy(shared_data, tmp_path / "s")
    )
    assert relatedness.task_type == "str"


def test_the_other_task_types_load_through_mteb_and_map_to_shiftlab_items(tmp_path):
    """Pair classification, summarization, clustering (current and legacy) and reranking, each a
    small local copy written here in its hub layout; mteb's own ``dataset_transform`` runs (it
    renames TwitterURLCorpus's columns and flattens TwentyNewsgroupsClustering.v2's sets)."""
    pairs = tmp_path / "twitter"
    write_jsonl(
        pairs / "test.jsonl",
        [{"sent1": f"headline {n}", "sent2": f"tweet {n}", "labels": n % 2} for n in range(6)],
    )
    dataset = dataset_import_mteb(task_name="TwitterURLCorpus", from_dir=pairs)
    assert dataset.task_type == "pair_classification" and dataset.metadata["labels"] == {"0": 3, "1": 3}
    first = dataset.items.order_by("position").first()
    assert (first.payload, first.gold) == ({"sentence1": "headline 0", "sentence2": "tweet 0"}, 0)

    summaries = tmp_path / "summeval"
    write_jsonl(
        summaries / "test.jsonl",
        [
            {
                "id": f"doc{n}",
                "text": f"A long article number {n}.",
                "human_summaries": [f"Summary {n} by a person."],
                "machine_summaries": [f"System summary {n}a.", f"System summary {n}b."],
                "relevance": [4.0, 2.5],
            }
            for n in range(3)
        ],
    )
    dataset = dataset_import_mteb(task_name="SummEval", from_dir=summaries)
    item = dataset.items.get(item_id="doc1")
    assert item.gold == [4.0, 2.5] and item.payload["machine_summaries"] == ["System summary 1a.", "System summary 1b."]

    clusters = tmp_path / "newsgroups"
    sets = [
        {"sentences": [f"post {s}-{n}" for n in range(4)], "labels": ["sport", "space", "sport", "space"]}
        for s in range(2)
    ]
    write_jsonl(clusters / "test.jsonl", sets)
    for task_name in ("TwentyNewsgroupsClustering.v2", "TwentyNewsgroupsClustering"):
        dataset = dataset_import_mteb(task_name=task_name, from_dir=clusters, name=task_name.replace(".", "-"))
        assert dataset.task_type == "clustering" and dataset.n_items == 8
        assert dataset.metadata["labels"] == {"space": 4, "sport": 4}

    reranking = tmp_path / "stackoverflow"
    write_jsonl(reranking / "corpus.jsonl", [{"id": f"d{n}", "title": "", "text": f"question {n}"} for n in range(4)])
    write_jsonl(reranking / "queries.jsonl", [{"id": "q1", "text": "how to sort a list"}])
    write_jsonl(reranking / "qrels.jsonl", [{"query-id": "q1", "corpus-id": "d2", "score": 1}])
    write_jsonl(reranking / "top_ranked.jsonl", [{"query-id": "q1", "corpus-ids": ["d0", "d1", "d2", "d3"]}])
    write_card(
        reranking,
        {
            "corpus": {"test": "corpus.jsonl"},
            "queries": {"test": "queries.jsonl"},
            "default": {"test": "qrels.jsonl"},
            "top_ranked": {"test": "top_ranked.jsonl"},
        },
    )
    dataset = dataset_import_mteb(task_name="StackOverflowDupQuestions", from_dir=reranking)
    (query,) = dataset.items.all()
    assert dataset.task_type == "reranking" and query.item_id == "q1"
    assert query.payload == {
        "query": "how to sort a list",
        "positive": ["question 2"],
        "negative": ["question 0", "question 1", "question 3"],
    }


# --- exports of a benchmark run -------------------------------------------------------------------


@pytest.fixture
def finished_run(shared_data, tmp_path, minilm, django_capture_on_commit_callbacks):
    """A real run on STSBenchmark (imported by name): the original data and an approved
    transformation (random keywords, no LLM) with two seeds, on the first LIMIT items."""
    dataset = dataset_import_mteb(task_name="STSBenchmark", from_dir=stsb_copy(shared_data, tmp_path / "stsb"))
    runs = [keyword_run(dataset, 1), keyword_run(dataset, 2)]
    with django_capture_on_commit_callbacks(execute=True):
        run = benchmark_run_create_from_config(text=config_text(runs), fmt="yaml", models=[MODEL], limit=LIMIT)
    run.refresh_from_db()
    assert run.status == "succeeded" and run.done == run.total == 3, run.error
    return run


def test_mteb_export_is_read_back_by_mteb_with_the_stored_scores(finished_run, tmp_path):
    import mteb
    from mteb.results import TaskResult

    out = tmp_path / "mteb-results"
    printed = io.StringIO()
    call_command("benchmark", "export", str(finished_run.pk), "--format", "mteb", "--out", str(out), stdout=printed)
    assert "load_results(" in printed.getvalue()
    stored = {(r.transformation, r.seed): r for r in BenchmarkResult.objects.filter(run=finished_run)}
    cache = mteb.ResultCache(out)
    # By default mteb loads a model's plain results: here the original data's.
    (plain,) = cache.load_results(include_remote=False).model_results
    assert plain.experiment_name is None and plain.task_results[0].get_score() == pytest.approx(
        stored[("original", 0)].main_score, abs=1e-6
    )
    # One transformed unit, chosen by its experiment kwargs as mteb users choose experiments.
    kwargs = {
        "shiftlab_transformation": "random_keywords",
        "shiftlab_seed": 2,
        "shiftlab_config_hash": finished_run.config_hash,
    }
    (picked,) = cache.load_results(include_remote=False, experiment_kwargs=kwargs).model_results
    assert picked.task_results[0].get_score() == pytest.approx(stored[("random_keywords", 2)].main_score, abs=1e-6)
    loaded = cache.load_results(
        include_remote=False, validate_and_filter=True, tasks=["STSBenchmark"], load_experiments="match_name"
    )
    found = {}
    for model_result in loaded.model_results:
        assert model_result.model_name == "sentence-transformers/all-MiniLM-L6-v2"
        for task_result in model_result.task_results:
            assert task_result.task_name == "STSBenchmark"
            assert task_result.dataset_revision == "b0fddb56ed78048fa8b90373c8a3cfc37b684831"
            (entry,) = task_result.scores["test"]
            unit = entry["shiftlab"]
            found[(unit["transformation"], unit["seed"])] = (task_result.get_score(), entry, model_result)
    assert set(found) == set(stored) == {("original", 0), ("random_keywords", 1), ("random_keywords", 2)}
    for key, result in stored.items():
        score, entry, model_result = found[key]
        assert score == pytest.approx(result.main_score, abs=1e-6)  # mteb rounds to 6 decimals
        assert entry["cosine_spearman"] == pytest.approx(result.metrics["cosine_spearman"], abs=1e-6)
        assert entry["shiftlab"]["config_hash"] == finished_run.config_hash != ""
        assert entry["hf_subset"] == "default" and entry["languages"] == ["eng-Latn"]
        assert model_result.model_revision == result.model_revision
    # Transformed units are experiments of the model, named by mteb from their kwargs.
    experiments = sorted(p.name for p in out.glob("results/*/*/experiments/*"))
    assert experiments == [
        f"shiftlab_config_hash_{finished_run.config_hash}__shiftlab_seed_{seed}__shiftlab_transformation_random_keywords"
        for seed in (1, 2)
    ]
    for path in out.glob("results/**/STSBenchmark.json"):
        assert TaskResult.from_disk(path).task_name == "STSBenchmark"


def test_hf_export_loads_with_datasets(finished_run, tmp_path):
    import datasets

    out = tmp_path / "hf"
    call_command("benchmark", "export", str(finished_run.pk), "--format", "hf", "--out", str(out), stdout=io.StringIO())
    # A cache of its own: the shared HF cache may hold an older folder at this same temporary path.
    results = datasets.load_dataset(str(out), cache_dir=str(tmp_path / "hf-cache"))["results"]
    stored = {(r.transformation, r.seed): r for r in BenchmarkResult.objects.filter(run=finished_run)}
    assert len(results) == len(stored) == 3
    for row in results:
        result = stored[(row["transformation"], row["seed"])]
        assert row["main_score"] == result.main_score and row["mteb_task"] == "STSBenchmark"
        assert row["config_hash"] == finished_run.config_hash
        assert json.loads(row["metrics_json"]) == result.metrics
        if result.original_main_score is not None:
            assert row["delta"] == pytest.approx(result.main_score - result.original_main_score)
    card = (out / "README.md").read_text(encoding="utf-8")
    assert f"Config hash: `{finished_run.config_hash}`" in card
    assert "| random_keywords | extra | test-study v1 | approve | rita |" in card
    assert (out / "report" / "robustness.csv").is_file() and any((out / "report").glob("*.svg"))
    assert json.loads((out / "approval.json").read_text())[0]["gate_passed"] is True
    with pytest.raises(CommandError, match=r"Not pushed: .*HF_HUB_OFFLINE=1.*huggingface-cli upload me/robustness"):
        call_command(
            "benchmark", "export", str(finished_run.pk), "--format", "hf", "--out", str(out), "--push", "me/robustness"
        )


# --- models named as in mteb ----------------------------------------------------------------------


def test_mteb_named_minilm_resolves_to_the_packaged_model(minilm):
    from evaluation.encoders import get_encoder
    from evaluation.mteb_models import MtebEncoder

    named = get_encoder("mteb:sentence-transformers/all-MiniLM-L6-v2")
    assert isinstance(named, MtebEncoder) and named.model_id == "sentence-transformers/all-MiniLM-L6-v2"
    assert named.model_path == minilm.model_path  # the packaged weights, no download
    assert named.prompts == {} and named.similarity_fn_name == "cosine"
    assert named.revision != minilm.revision  # its own cache entries
    # Its vectors: see the next test, where MiniLM's weights run through the same encoder class.


def test_prompts_of_an_mteb_model_meta_are_chosen_and_applied_as_mteb_does(minilm):
    """e5's ModelMeta declares "query: "/"passage: " prompts; no e5 weights are packaged, so the
    MiniLM weights run under e5's meta. The reference is sentence-transformers' own
    ``encode(prompt=...)``, the call mteb makes, and mteb's own prompt choice."""
    import mteb
    from mteb.abstasks.task_metadata import TaskMetadata
    from mteb.models.abs_encoder import get_prompt_name
    from mteb.types import PromptType
    from sentence_transformers import SentenceTransformer

    from evaluation.encoders import EncoderError, prompt_name_for
    from evaluation.mteb_models import MtebEncoder

    encoder = MtebEncoder(alias="e5-meta", mteb_model="intfloat/multilingual-e5-small", model=MODEL)
    assert encoder.prompts == {"query": "query: ", "document": "passage: "}
    assert encoder.model_id == "intfloat/multilingual-e5-small"
    for task_name, task_type in (
        ("SciFact", "retrieval"),
        ("STSBenchmark", "sts"),
        ("Banking77Classification", "classification"),
    ):
        metadata: TaskMetadata = mteb.get_task(task_name).metadata
        for side in ("query", "document", None):
            expected = get_prompt_name(dict(encoder.prompts), metadata, PromptType(side) if side else None)
            assert prompt_name_for(encoder.prompts, task_type=task_type, prompt_type=side) == expected
    texts = ["how do antibodies work", "Antibodies bind antigens."]
    reference = SentenceTransformer(str(minilm.model_path), device="cpu")
    for name, prompt in (("query", "query: "), ("document", "passage: ")):
        expected = reference.encode(texts, prompt=prompt, convert_to_numpy=True)
        assert encoder.encode(texts, prompt_name=name) == pytest.approx(expected, abs=1e-5)
    assert encoder.encode(texts) == pytest.approx(reference.encode(texts, convert_to_numpy=True), abs=1e-5)
    with pytest.raises(EncoderError, match="has no prompt 'STS'"):
        encoder.encode(texts, prompt_name="STS")
    encoder.close()


def test_unknown_and_unsupported_mteb_models_are_clear_errors():
    from evaluation.encoders import EncoderError, get_encoder

    with pytest.raises(EncoderError, match="mteb does not know a model 'no/such-model'"):
        _ = get_encoder("mteb:no/such-model").model_id
    with pytest.raises(EncoderError, match="with CrossEncoderWrapper, which Shiftlab does not run"):
        _ = get_encoder("mteb:cross-encoder/ms-marco-MiniLM-L12-v2").model_id


def test_api_imports_an_mteb_task_by_name(shared_data, tmp_path, settings, researcher_client):
    settings.MTEB_DATA_DIR = str(tmp_path)
    stsb_copy(shared_data, tmp_path / "mteb" / "stsbenchmark-sts")  # found by the task's hub path
    response = researcher_client.post("/api/dataset-imports/", {"mteb_task": "STSBenchmark", "name": "stsb-api"})
    assert response.status_code == 201, response.content
    assert response.json()["n_items"] == 1379 and response.json()["metadata"]["mteb"]["task_name"] == "STSBenchmark"
    refused = researcher_client.post("/api/dataset-imports/", {"mteb_task": "STS17"})
    assert refused.status_code == 400 and 'choose one with "mteb_subset"' in refused.json()["detail"]
    incomplete = researcher_client.post("/api/dataset-imports/", {"name": "x"}).json()
    assert set(incomplete) == {"files", "task_type"} and 'or send "mteb_task"' in incomplete["files"][0]


def test_the_datasets_page_imports_an_mteb_task_by_name(shared_data, tmp_path, settings, client, researcher):
    settings.MTEB_DATA_DIR = str(tmp_path)
    stsb_copy(shared_data, tmp_path / "mteb" / "stsbenchmark-sts")
    client.force_login(researcher)
    page = client.get("/datasets/").content.decode()
    assert 'id="mteb-form"' in page and "Import from MTEB" in page
    refused = client.post("/datasets/", {"action": "mteb", "mteb-task_name": "STS17"}).content.decode()
    assert "choose one with the Subset field" in refused and not Dataset.objects.exists()  # the form stays
    response = client.post("/datasets/", {"action": "mteb", "mteb-task_name": "STSBenchmark", "mteb-name": "stsb-page"})
    assert response.status_code == 302 and response["Location"] == "/datasets/stsb-page/"
    assert Dataset.objects.get(name="stsb-page").n_items == 1379
