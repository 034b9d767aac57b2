"""Evaluation end to end: all-MiniLM-L6-v2 must reproduce its published MTEB scores on the public
data (../shared/data), and every task type must run through the service and the CLI.

The model runs for real (packaged offline copy). One encoder serves the whole session and the
embedding cache under DATA_DIR/embeddings is shared, so repeated texts are encoded once.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from core.errors import ShiftlabError
from corpora.models import Dataset
from corpora.services import ImportOptions, dataset_import
from corpora.task_types import TaskType
from evaluation.encoders import get_encoder
from evaluation.management.commands.seed_demo import DEMO_DATASETS
from evaluation.services import cached_encode, dataset_evaluate, dataset_protocol_set

MODEL = "all-MiniLM-L6-v2"
FIXTURES = settings.BASE_DIR / "fixtures"
pytestmark = pytest.mark.django_db


@pytest.fixture(scope="session")
def minilm():
    return get_encoder(MODEL)


def line_aligned_jsonl(target: Path, pairs: list[tuple[Path, Path]]) -> Path:
    """SemEval STS layout (``STS.input.*`` sentence pairs + ``STS.gs.*`` gold, line by line) as one
    JSONL file the importer reads. Blank gold lines are unscored pairs: MTEB leaves them out."""
    with target.open("w", encoding="utf-8") as out:
        for input_path, gold_path in pairs:
            inputs = input_path.read_text(encoding="utf-8").splitlines()
            golds = gold_path.read_text(encoding="utf-8").splitlines()
            assert len(inputs) == len(golds), f"{input_path} and {gold_path} are not line-aligned"
            for line, gold in zip(inputs, golds, strict=True):
                if gold.strip():
                    sentence1, sentence2 = line.split("\t")[:2]  # STS16 adds two source columns
                    out.write(json.dumps({"sentence1": sentence1, "sentence2": sentence2, "score": float(gold)}) + "\n")
    return target


def semeval_year(data: Path, year: int, subsets: list[str]) -> list[tuple[Path, Path]]:
    folder = data / "sts12-16" / f"STS{year % 100}"
    prefix = "STS2016" if year == 2016 else "STS"
    return [(folder / f"{prefix}.input.{s}.txt", folder / f"{prefix}.gs.{s}.txt") for s in subsets]


def sick_jsonl(data: Path, target: Path) -> Path:
    """SICK-R as MTEB evaluates it: train, trial and test files together."""
    with target.open("w", encoding="utf-8") as out:
        for name in ("SICK_train.txt", "SICK_trial.txt", "SICK_test_annotated.txt"):
            with (data / "sick" / name).open(encoding="utf-8", newline="") as handle:
                for row in csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE):
                    record = {
                        "id": row["pair_ID"],
                        "sentence1": row["sentence_A"],
                        "sentence2": row["sentence_B"],
                        "score": float(row["relatedness_score"]),
                    }
                    out.write(json.dumps(record) + "\n")
    return target


def sts17(data: Path, target: Path, track: str) -> Path:
    pair = (data / f"sts17/STS2017.eval.v1.1/STS.input.{track}.txt", data / f"sts17/STS2017.gs/STS.gs.{track}.txt")
    return line_aligned_jsonl(target, [pair])


# name -> (task, language, builder(data, tmp_path) -> (source, options), published main score, tolerance)
Case = tuple[str, str, Callable[[Path, Path], tuple[Path, ImportOptions | None]], float, float]
STS_SUBSETS = {
    2012: ["MSRpar", "MSRvid", "SMTeuroparl", "surprise.OnWN", "surprise.SMTnews"],
    2013: ["FNWN", "OnWN", "headlines"],  # MTEB's STS13 has no SMT subset (licence)
    2014: ["OnWN", "deft-forum", "deft-news", "headlines", "images", "tweet-news"],
    2015: ["answers-forums", "answers-students", "belief", "headlines", "images"],
    2016: ["answer-answer", "headlines", "plagiarism", "postediting", "question-question"],
}
REFERENCE_CASES: dict[str, Case] = {
    "STSBenchmark": (
        "sts",
        "en",
        lambda d, t: (d / "stsb-multi-mt/stsb-en-test.csv", ImportOptions(columns=["sentence1", "sentence2", "score"])),
        0.8203,
        0.002,
    ),
    **{
        f"STS{year % 100}": (
            "sts",
            "en",
            lambda d, t, year=year: (
                line_aligned_jsonl(t / "sts.jsonl", semeval_year(d, year, STS_SUBSETS[year])),
                None,
            ),
            score,
            0.002,
        )
        for year, score in ((2012, 0.7237), (2013, 0.8060), (2014, 0.7559), (2015, 0.8539), (2016, 0.7899))
    },
    "SICK-R": ("sts", "en", lambda d, t: (sick_jsonl(d, t / "sick.jsonl"), None), 0.7758, 0.002),
    "STS17-en-en": ("sts", "en", lambda d, t: (sts17(d, t / "en.jsonl", "track5.en-en"), None), 0.8759, 0.002),
    "STS17-es-es": ("sts", "es", lambda d, t: (sts17(d, t / "es.jsonl", "track3.es-es"), None), 0.7612, 0.002),
    "STS17-ar-ar": ("sts", "ar", lambda d, t: (sts17(d, t / "ar.jsonl", "track1.ar-ar"), None), 0.5089, 0.002),
    "Banking77": (
        "classification",
        "en",
        lambda d, t: (d / "banking77", ImportOptions(field_map={"label": "category"})),
        0.8004,
        0.01,
    ),
}


@pytest.mark.parametrize("name", list(REFERENCE_CASES))
def test_minilm_reproduces_published_mteb_score(name, shared_data, tmp_path, minilm):
    task, language, build, published, tolerance = REFERENCE_CASES[name]
    source, options = build(shared_data, tmp_path)
    options = options or ImportOptions()
    options = ImportOptions(**{**options.as_dict(), "language": language})
    dataset = dataset_import(source=source, task=task, name=name, options=options)
    result = dataset_evaluate(dataset=dataset, encoder_alias_or_model=MODEL, split="test")
    assert result.main_score == pytest.approx(published, abs=tolerance), f"{name}: {result.main_score:.4f}"


def test_line_aligned_loader_skips_unscored_pairs(shared_data, tmp_path):
    path = line_aligned_jsonl(tmp_path / "sts16.jsonl", semeval_year(shared_data, 2016, STS_SUBSETS[2016]))
    assert sum(1 for _ in path.open()) == 1186  # MTEB's STS16 test size


@pytest.mark.parametrize("name,task,relative", DEMO_DATASETS)
def test_every_task_type_scores_its_demo_fixture_as_mteb_does(name, task, relative, minilm):
    """The service's score of each demo dataset equals what mteb's own evaluator gives the same
    stored items with the same vectors (tests/mteb_reference.py)."""
    pytest.importorskip("mteb", reason="mteb comes with the dev requirements")
    from tests.mteb_reference import mteb_dataset_score

    dataset = dataset_import(source=FIXTURES / relative, task=task, name=name)
    result = dataset_evaluate(dataset=dataset, encoder_alias_or_model=MODEL)
    reference = mteb_dataset_score(dataset, cached_encode(minilm, task=TaskType(task), batch_size=None))
    assert result.main_score == pytest.approx(reference, abs=1e-4), (
        f"{name}: {result.main_score:.6f} vs {reference:.6f}"
    )
    assert result.metrics()[result.main_metric] == result.main_score


@pytest.mark.parametrize(
    "name,task,relative,options,took_effect",
    [
        (
            "demo-intents",
            "classification",
            "classification/demo-intents",
            {"samples_per_label": 2, "n_experiments": 3},
            lambda result: len(result.experiments) == 3,
        ),
        (
            "demo-topics",
            "clustering",
            "clustering/demo-topics.jsonl",
            {"protocol": "single"},
            lambda result: result.cluster_accuracy is not None,
        ),
        (
            "demo-topics",
            "clustering",
            "clustering/demo-topics.jsonl",
            {"n_bootstrap": 3, "max_documents_per_cluster": 64, "max_fraction_of_documents_to_embed": 0.5},
            lambda result: len(result.v_measures) == 3 and result.n_documents < 40,
        ),
    ],
)
def test_protocol_options_stored_on_a_dataset_change_its_evaluation_as_in_mteb(
    name, task, relative, options, took_effect, minilm
):
    pytest.importorskip("mteb", reason="mteb comes with the dev requirements")
    from tests.mteb_reference import mteb_dataset_score

    dataset = dataset_import(source=FIXTURES / relative, task=task, name=name)
    dataset = dataset_protocol_set(dataset=dataset, options=options)
    assert Dataset.objects.get(pk=dataset.pk).metadata["evaluation"] == options
    result = dataset_evaluate(dataset=Dataset.objects.get(pk=dataset.pk), encoder_alias_or_model=MODEL)
    assert took_effect(result)
    reference = mteb_dataset_score(
        dataset, cached_encode(minilm, task=TaskType(task), batch_size=None), protocol=options
    )
    assert result.main_score == pytest.approx(reference, abs=1e-4)


def test_protocol_options_are_refused_with_the_option_named():
    sts = dataset_import(source=FIXTURES / "sts/demo-sts.csv", task="sts", name="demo-sts")
    with pytest.raises(ShiftlabError, match="sts datasets have no protocol options"):
        dataset_protocol_set(dataset=sts, options={"n_experiments": 3})
    topics = dataset_import(source=FIXTURES / "clustering/demo-topics.jsonl", task="clustering", name="demo-topics")
    with pytest.raises(ShiftlabError, match="unknown clustering protocol option.*n_clusters"):
        dataset_protocol_set(dataset=topics, options={"n_clusters": 3})
    with pytest.raises(ShiftlabError, match="protocol must be 'bootstrap' or 'single'"):
        dataset_protocol_set(dataset=topics, options={"protocol": "kmeans"})
    with pytest.raises(ShiftlabError, match="n_bootstrap must be int"):
        dataset_protocol_set(dataset=topics, options={"n_bootstrap": "3"})
    assert "evaluation" not in Dataset.objects.get(pk=topics.pk).metadata  # nothing written
    Dataset.objects.filter(pk=topics.pk).update(metadata={"evaluation": {"n_bootstrap": 0}})
    with pytest.raises(ShiftlabError, match="demo-topics has unusable protocol options"):
        dataset_evaluate(dataset=Dataset.objects.get(pk=topics.pk), encoder_alias_or_model=MODEL)


def test_missing_benchmark_data_fails_where_it_is_required(request, monkeypatch, tmp_path):
    import conftest

    monkeypatch.setattr(conftest, "SHARED_DATA", tmp_path / "absent")
    monkeypatch.setenv("SHIFTLAB_REQUIRE_SERVICES", "1")
    with pytest.raises(pytest.fail.Exception, match="public benchmark data not found"):
        request.getfixturevalue("shared_data")


def test_evaluate_command_prints_the_main_score_and_json(minilm):
    dataset_import(source=FIXTURES / "sts/demo-sts.csv", task="sts", name="demo-sts")
    out, err = io.StringIO(), io.StringIO()
    call_command("evaluate", "--dataset", "demo-sts", "--model", MODEL, stdout=out, stderr=err)
    score = float(out.getvalue())
    assert len(out.getvalue().strip().split(".")[1]) == 4
    assert "cosine_spearman" in err.getvalue()
    out = io.StringIO()
    call_command("evaluate", "--dataset", "demo-sts", "--model", MODEL, "--json", stdout=out)
    document = json.loads(out.getvalue())
    assert document["main_metric"] == "cosine_spearman" and round(document["main_score"], 4) == score
    assert document["model_id"] == "sentence-transformers/all-MiniLM-L6-v2" and len(document["revision"]) == 64
    assert {"cosine_pearson", "manhattan_spearman", "euclidean_spearman"} <= set(document["metrics"])


def test_evaluate_command_names_unknown_dataset_model_and_split():
    dataset_import(source=FIXTURES / "sts/demo-sts.csv", task="sts", name="demo-sts")
    with pytest.raises(CommandError, match="No dataset named 'nope'"):
        call_command("evaluate", "--dataset", "nope", "--model", MODEL)
    with pytest.raises(CommandError, match="Unknown model 'no-such/model'"):
        call_command("evaluate", "--dataset", "demo-sts", "--model", "no-such/model")
    with pytest.raises(CommandError, match="has no split 'dev'"):
        call_command("evaluate", "--dataset", "demo-sts", "--model", MODEL, "--split", "dev")


def test_the_protocol_command_shows_sets_and_resets_a_datasets_options():
    from io import StringIO

    from django.core.management import call_command
    from django.core.management.base import CommandError

    dataset_import(source=FIXTURES / "clustering/demo-topics.jsonl", task="clustering", name="demo-topics")
    out = StringIO()
    call_command("protocol", "demo-topics", "--set", "n_bootstrap=3", "--set", "protocol=bootstrap", stdout=out)
    assert Dataset.objects.get(name="demo-topics").metadata["evaluation"] == {"n_bootstrap": 3, "protocol": "bootstrap"}
    assert 'demo-topics (clustering): {"n_bootstrap": 3, "protocol": "bootstrap"}' in out.getvalue()
    call_command("protocol", "demo-topics", "--set", "max_documents_per_cluster=64", stdout=StringIO())
    assert Dataset.objects.get(name="demo-topics").metadata["evaluation"]["n_bootstrap"] == 3  # the others kept
    with pytest.raises(CommandError, match="unknown clustering protocol option"):
        call_command("protocol", "demo-topics", "--set", "n_clusters=3")
    call_command("protocol", "demo-topics", "--reset", stdout=(out := StringIO()))
    assert "evaluation" not in Dataset.objects.get(name="demo-topics").metadata
    assert "the defaults" in out.getvalue() and "n_bootstrap" in out.getvalue()
    with pytest.raises(CommandError, match="no dataset 'nope'"):
        call_command("protocol", "nope")
