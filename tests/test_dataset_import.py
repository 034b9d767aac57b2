"""Dataset import through the service and the CLI, on demo fixtures and real public data."""

import io
import json

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from core.models import AuditEvent
from corpora.models import Dataset, DatasetItem
from evaluation.management.commands.seed_demo import DEMO_DATASETS

FIXTURES = settings.BASE_DIR / "fixtures"
pytestmark = pytest.mark.django_db


def run(*args) -> str:
    out = io.StringIO()
    call_command("corpora", *args, stdout=out)
    return out.getvalue()


def test_cli_imports_stsb_test_csv(shared_data):
    out = run(
        "import",
        str(shared_data / "stsb-multi-mt/stsb-en-test.csv"),
        "--task",
        "sts",
        "--name",
        "stsb-en-test",
        "--columns",
        "sentence1,sentence2,score",
    )
    assert "Imported 1379 items into stsb-en-test" in out
    dataset = Dataset.objects.get(name="stsb-en-test")
    assert dataset.n_items == dataset.items.count() == 1379
    assert dataset.splits == {"test": 1379} and dataset.languages == ["en"]
    first = dataset.items.order_by("position").first()
    assert first.payload == {"sentence1": "A girl is styling her hair.", "sentence2": "A girl is brushing her hair."}
    assert first.gold == 2.5
    assert dataset.metadata["gold_min"] == 0.0 and dataset.metadata["gold_max"] == 5.0
    listing = run("list")
    assert "stsb-en-test" in listing and "1379" in listing
    shown = json.loads(run("show", "stsb-en-test", "--json", "--items", "2"))
    assert shown["content_hash"] == dataset.content_hash and len(shown["items"]) == 2


def test_malformed_file_imports_nothing_and_says_where(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("sentence1,sentence2,score\nfine,good,3\n" + "ok,ok,2\n" * 500 + "x,,high\n", encoding="utf-8")
    before = (Dataset.objects.count(), DatasetItem.objects.count(), AuditEvent.objects.count())
    with pytest.raises(CommandError) as exc:
        run("import", str(bad), "--task", "sts", "--name", "bad")
    message = str(exc.value)
    assert message.startswith("Nothing was imported.")
    assert "bad.csv, line 503: 'sentence2' is empty" in message
    assert "bad.csv, line 503: 'score' must be a number, found 'high'" in message
    assert (Dataset.objects.count(), DatasetItem.objects.count(), AuditEvent.objects.count()) == before


def test_database_failure_mid_import_rolls_back(monkeypatch, tmp_path):
    from corpora import services

    def broken_bulk_create(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(services.DatasetItem.objects, "bulk_create", broken_bulk_create)
    with pytest.raises(RuntimeError):
        services.dataset_import(source=FIXTURES / "sts/demo-sts.csv", task="sts", name="half")
    assert not Dataset.objects.filter(name="half").exists()


def test_duplicate_name_is_refused_with_a_hint():
    run("import", str(FIXTURES / "sts/demo-sts.csv"), "--task", "sts", "--name", "demo")
    with pytest.raises(CommandError, match="already exists.*corpora delete demo"):
        run("import", str(FIXTURES / "sts/demo-sts.csv"), "--task", "sts", "--name", "demo")


def test_delete_is_audited():
    run("import", str(FIXTURES / "sts/demo-sts.csv"), "--task", "sts", "--name", "gone")
    run("delete", "gone")
    assert not Dataset.objects.filter(name="gone").exists()
    assert AuditEvent.objects.filter(verb="dataset.delete", object_repr="gone").exists()


@pytest.mark.parametrize("name,task,relative", DEMO_DATASETS)
def test_every_demo_fixture_imports(name, task, relative):
    run("import", str(FIXTURES / relative), "--task", task, "--name", name)
    dataset = Dataset.objects.get(name=name)
    assert dataset.task_type == task and dataset.n_items > 0
    event = AuditEvent.objects.get(verb="dataset.import", object_id=str(dataset.pk))
    assert event.payload["content_hash"] == dataset.content_hash


def test_same_content_gives_same_hash_whatever_the_format(tmp_path):
    rows = [("a b", "c d", "1.0"), ("e f", "g h", "4.5")]
    csv_path = tmp_path / "p.csv"
    csv_path.write_text("sentence1,sentence2,score\n" + "".join(f"{a},{b},{s}\n" for a, b, s in rows))
    jsonl_path = tmp_path / "p.jsonl"
    jsonl_path.write_text(
        "".join(json.dumps({"sentence1": a, "sentence2": b, "score": float(s)}) + "\n" for a, b, s in rows)
    )
    run("import", str(csv_path), "--task", "sts", "--name", "from-csv")
    run("import", str(jsonl_path), "--task", "sts", "--name", "from-jsonl")
    hashes = set(Dataset.objects.values_list("content_hash", flat=True))
    assert len(hashes) == 1


def test_banking77_folder_with_column_mapping(shared_data):
    out = run(
        "import",
        str(shared_data / "banking77"),
        "--task",
        "classification",
        "--name",
        "banking77",
        "--map",
        "label=category",
    )
    assert "Imported 13083 items" in out
    dataset = Dataset.objects.get(name="banking77")
    assert dataset.splits == {"test": 3080, "train": 10003}
    assert len(dataset.metadata["labels"]) == 77


def test_scifact_beir_folder(shared_data):
    run("import", str(shared_data / "scifact"), "--task", "retrieval", "--name", "scifact")
    dataset = Dataset.objects.get(name="scifact")
    assert dataset.metadata["n_documents"] == 5183
    assert dataset.metadata["n_queries"] == 300
    assert sum(len(q.gold) for q in dataset.items.filter(kind="example")) == 339


def test_sick_tsv_with_field_mapping(shared_data):
    run(
        "import",
        str(shared_data / "sick/SICK_test_annotated.txt"),
        "--task",
        "sts",
        "--name",
        "sick-test",
        "--map",
        "sentence1=sentence_A",
        "--map",
        "sentence2=sentence_B",
        "--map",
        "score=relatedness_score",
        "--map",
        "id=pair_ID",
    )
    dataset = Dataset.objects.get(name="sick-test")
    assert dataset.n_items == 4927  # 9927 pairs in all with train (4500) and trial (500)
    assert dataset.metadata["gold_min"] >= 1.0 and dataset.metadata["gold_max"] <= 5.0


def test_hugging_face_loader_path_works_offline_on_a_local_folder(tmp_path):
    """The hub importer runs datasets.load_dataset in the Django process; a local folder exercises
    that same code path without network (a real hub id needs internet)."""
    folder = tmp_path / "hf-local"
    folder.mkdir()
    (folder / "test.csv").write_text(
        "sentence1,sentence2,score\nA dog runs.,A dog is running.,4.8\nA cat sleeps.,Stocks fell.,0.2\n",
        encoding="utf-8",
    )
    out = run("import", str(folder), "--format", "hf", "--task", "sts", "--name", "hf-sts")
    assert "Imported 2 items" in out
    assert Dataset.objects.get(name="hf-sts").splits == {"test": 2}


def test_hugging_face_failure_is_reported_cleanly():
    with pytest.raises(CommandError, match="could not load it with datasets.load_dataset"):
        run("import", "no-such-owner/no-such-dataset", "--format", "hf", "--task", "sts", "--name", "nope")
    assert not Dataset.objects.filter(name="nope").exists()
