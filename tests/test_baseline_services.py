"""Baseline-study services without external services: creation (validation, seeded samples per
task), the LLM annotator's bookkeeping against a scripted backend (parse failures, resume after
backend failures, clustering per batch), sync value checks and the command."""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict

import pytest
from django.core.management import CommandError, call_command

from annotation.baselines.baseline_llm_services import baseline_llm_annotate
from annotation.baselines.baseline_services import BaselineCreateRequest, baseline_create
from annotation.baselines.baseline_sync_services import answer_value
from annotation.models import BaselineAnswer, BaselineStudy
from core.errors import ShiftlabError
from core.models import AuditEvent
from corpora.services import dataset_import
from transforms.backends import reset_backends
from transforms.backends.base import ChatFailure, ChatResult, LLMBackend

pytestmark = pytest.mark.django_db

TOPICS = {
    "weather": ["It rained all day", "Snow is expected tonight", "A warm sunny afternoon", "Fog at dawn"],
    "food": ["The soup was too salty", "Fresh bread from the bakery", "We grilled vegetables", "Sweet ripe pears"],
    "sport": ["The team won the final", "She ran a marathon", "A late goal decided it", "He swims every morning"],
}


@pytest.fixture
def sts(tmp_path):
    path = tmp_path / "pairs.csv"
    rows = [f"A dog runs number {k}.,A dog is running number {k}.,{k % 6}" for k in range(20)]
    path.write_text("sentence1,sentence2,score\n" + "\n".join(rows) + "\n")
    return dataset_import(source=path, task="sts", name="pairs")


@pytest.fixture
def classification(tmp_path):
    folder = tmp_path / "topics"
    folder.mkdir()
    for split, texts in (("train", slice(0, 2)), ("test", slice(2, 4))):
        lines = [f"{text},{label}" for label, all_texts in TOPICS.items() for text in all_texts[texts]]
        (folder / f"{split}.csv").write_text("text,label\n" + "\n".join(lines) + "\n")
    return dataset_import(source=folder, task="classification", name="topics")


@pytest.fixture
def clustering(tmp_path):
    path = tmp_path / "clusters.jsonl"
    path.write_text(
        "".join(json.dumps({"text": text, "label": label}) + "\n" for label, texts in TOPICS.items() for text in texts)
    )
    return dataset_import(source=path, task="clustering", name="clusters")


@pytest.fixture
def reranking(tmp_path):
    path = tmp_path / "rerank.jsonl"
    path.write_text(
        "".join(
            json.dumps(
                {
                    "query": f"about {label}",
                    "positive": texts[:2],
                    "negative": [t for other, ts in TOPICS.items() if other != label for t in ts],
                }
            )
            + "\n"
            for label, texts in TOPICS.items()
        )
    )
    return dataset_import(source=path, task="reranking", name="rerank")


# --- create ---------------------------------------------------------------------------------


def test_create_draws_a_seeded_sample_and_audits_it(sts, researcher):
    study = baseline_create(
        actor=researcher,
        request=BaselineCreateRequest(name="b-sts", dataset=sts, task_type="sts", n_instances=8, seed=4),
    )
    twin = baseline_create(
        request=BaselineCreateRequest(name="b-sts-twin", dataset=sts, task_type="sts", n_instances=8, seed=4)
    )
    other = baseline_create(
        request=BaselineCreateRequest(name="b-sts-other", dataset=sts, task_type="sts", n_instances=8, seed=5)
    )
    rows = lambda s: [(i.key, i.item_id, i.texts, i.gold) for i in s.instances.all()]  # noqa: E731
    assert rows(study) == rows(twin) != rows(other)
    assert [i.key for i in study.instances.all()] == [f"sts-{k:04d}" for k in range(8)]
    for instance in study.instances.select_related("item"):
        assert instance.texts == [instance.item.payload["sentence1"], instance.item.payload["sentence2"]]
        assert instance.gold == float(instance.item.gold)
    assert study.status == "draft" and study.instructions.startswith("Each task shows two sentences")
    assert study.options == {"raters_per_instance": 3}
    event = AuditEvent.objects.get(verb="baseline.create", object_id=str(study.pk))
    assert event.payload["content_hash"] == sts.content_hash and event.payload["instances"] == 8


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"task_type": "classification"}, "pairs is a sts dataset; a classification baseline needs"),
        ({"task_type": "retrieval"}, "unknown baseline task type 'retrieval'"),
        ({"n_instances": 21}, "asked for 21 pairs but only 20 are available"),
        ({"split": "dev"}, "has no split 'dev'; its splits: test"),
        ({"options": {"batch_size": 5}}, "unknown option.* batch_size for a sts baseline"),
        ({"options": {"raters_per_instance": 0}}, "raters_per_instance must be a positive whole number"),
        ({"seed": -1}, "seed must be zero or positive"),
        ({"name": "Bad Name"}, "invalid baseline study"),
    ],
)
def test_create_refuses_bad_input_and_writes_nothing(sts, kwargs, message):
    with pytest.raises(ShiftlabError, match=message):
        baseline_create(
            request=BaselineCreateRequest(
                **{"name": "b", "dataset": sts, "task_type": "sts", "n_instances": 5, **kwargs}
            )
        )
    assert not BaselineStudy.objects.exists() and not AuditEvent.objects.filter(verb="baseline.create").exists()


def test_create_refuses_a_taken_name(sts):
    baseline_create(request=BaselineCreateRequest(name="b", dataset=sts, task_type="sts", n_instances=5))
    with pytest.raises(ShiftlabError, match="named 'b' exists"):
        baseline_create(request=BaselineCreateRequest(name="b", dataset=sts, task_type="sts", n_instances=5))


def test_classification_records_the_full_label_set(classification):
    study = baseline_create(
        request=BaselineCreateRequest(
            name="b-cls", dataset=classification, task_type="classification", n_instances=6, options={"stratify": True}
        )
    )
    assert study.options["labels"] == ["food", "sport", "weather"]
    assert Counter(i.gold for i in study.instances.all()) == {"food": 2, "sport": 2, "weather": 2}
    assert all(i.item.split == "test" for i in study.instances.select_related("item"))
    with pytest.raises(ShiftlabError, match="label set comes from the dataset"):
        baseline_create(
            request=BaselineCreateRequest(
                name="b-cls2",
                dataset=classification,
                task_type="classification",
                n_instances=2,
                options={"labels": ["x"]},
            )
        )


def test_clustering_batches_and_reranking_candidates(clustering, reranking):
    study = baseline_create(
        request=BaselineCreateRequest(
            name="b-clu", dataset=clustering, task_type="clustering", n_instances=12, options={"batch_size": 6}
        )
    )
    batches = defaultdict(list)
    for instance in study.instances.all():
        batches[instance.group].append(instance.gold)
    assert sorted(batches) == ["b00", "b01"] and all(len(set(golds)) >= 2 for golds in batches.values())
    assert study.options == {"raters_per_instance": 3, "batch_size": 6, "clusters_per_batch": None}
    with pytest.raises(ShiftlabError, match="last batch of one text"):
        baseline_create(
            request=BaselineCreateRequest(
                name="b-clu2", dataset=clustering, task_type="clustering", n_instances=7, options={"batch_size": 6}
            )
        )

    study = baseline_create(
        request=BaselineCreateRequest(
            name="b-rr", dataset=reranking, task_type="reranking", n_instances=2, options={"candidates": 5}
        )
    )
    queries = defaultdict(list)
    for instance in study.instances.all():
        queries[instance.group].append(instance)
    assert len(queries) == 2
    for group in queries.values():
        assert len(group) == 5 and {i.gold for i in group} == {0, 1}
        label = group[0].texts[0].removeprefix("about ")
        for instance in group:
            assert instance.gold == (1 if instance.texts[1] in TOPICS[label] else 0)


def test_answer_values_from_argilla_are_checked(classification):
    study = baseline_create(
        request=BaselineCreateRequest(name="b-cls", dataset=classification, task_type="classification", n_instances=2)
    )
    assert answer_value(study, "food") == "food" and answer_value(study, "drinks") is None
    study.task_type = "sts"
    assert answer_value(study, 4) == 4.0 and answer_value(study, 6) is None and answer_value(study, "4") is None
    study.task_type = "clustering"
    assert answer_value(study, "  Rainy   Days ") == "rainy days" and answer_value(study, "  ") is None
    study.task_type = "reranking"
    assert answer_value(study, "1") == 1 and answer_value(study, "0") == 0 and answer_value(study, "yes") is None


# --- LLM annotator against a scripted backend --------------------------------------------------


class ScriptedBackend(LLMBackend):
    """Answers from the prompt alone: STS pairs by their number, labels by keyword, clusters by
    each text's topic; ``FAIL`` names texts whose request fails (transiently) once."""

    FAIL: set[str] = set()
    calls: list[str] = []

    def generate(self, requests, *, on_result=None):
        results = []
        for request in requests:
            assert request.temperature == 0.0
            prompt = request.messages[-1]["content"]
            type(self).calls.append(prompt)
            results.append(self._answer(prompt))
        return results

    def _answer(self, prompt: str):
        for text in list(self.FAIL):
            if text in prompt:
                self.FAIL.discard(text)
                return ChatFailure("server overloaded", transient=True)
        if match := re.search(r"number (\d+)\.", prompt):
            k = int(match.group(1))
            return ChatResult(text=f"{k % 6}" if k % 3 else "It is about 3")
        if "Texts:" in prompt:
            lines = re.findall(r"^(\d+)\. (.+)$", prompt, re.MULTILINE)
            topic = {t: label for label, texts in TOPICS.items() for t in texts}
            return ChatResult(text="\n".join(f"{n}: {topic[text].upper()}" for n, text in lines))
        raise AssertionError(prompt)

    def ping(self) -> str:
        return "scripted"


@pytest.fixture
def scripted(settings):
    settings.TRANSFORM_BACKENDS = {
        "scripted": {"BACKEND": f"{__name__}.ScriptedBackend", "OPTIONS": {"model": "scripted-1"}}
    }
    reset_backends()
    ScriptedBackend.FAIL, ScriptedBackend.calls = set(), []
    yield ScriptedBackend
    reset_backends()


def test_llm_annotate_counts_parse_failures_and_resumes_after_backend_failures(sts, scripted, researcher):
    study = baseline_create(
        request=BaselineCreateRequest(name="b-llm", dataset=sts, task_type="sts", n_instances=20, seed=1)
    )
    scripted.FAIL = {"number 4.", "number 7."}
    with pytest.raises(
        ShiftlabError, match="failed on 2 of 20 instances .*server overloaded.* let the LLM answer again"
    ):
        baseline_llm_annotate(study=study, backend_alias="scripted", actor=researcher)
    answers = BaselineAnswer.objects.filter(instance__study=study)
    assert answers.count() == 18
    assert scripted.calls[0].startswith(study.instructions) and "Sentence 1: A dog runs" in scripted.calls[0]

    scripted.calls.clear()
    progress = []
    result = baseline_llm_annotate(study=study, backend_alias="scripted", on_progress=lambda *p: progress.append(p))
    assert (result.skipped, result.valid + result.invalid, result.failed) == (18, 2, 0)
    assert len(scripted.calls) == 2 and progress == [(18, 20), (20, 20)]
    by_number = {
        int(re.search(r"number (\d+)\.", a.instance.texts[0]).group(1)): a for a in answers.select_related("instance")
    }
    for k, answer in by_number.items():
        assert answer.rater == "llm:scripted" and answer.source == "llm" and answer.user is None
        if k % 3:
            assert (answer.valid, answer.value, answer.raw) == (True, float(k % 6), str(k % 6))
        else:
            assert (answer.valid, answer.value, answer.raw) == (False, None, "It is about 3")
    assert baseline_llm_annotate(study=study, backend_alias="scripted").skipped == 20
    assert AuditEvent.objects.filter(verb="baseline.llm_annotate").count() == 2


def test_llm_annotates_clustering_per_batch(clustering, scripted):
    study = baseline_create(
        request=BaselineCreateRequest(
            name="b-clu", dataset=clustering, task_type="clustering", n_instances=12, options={"batch_size": 6}
        )
    )
    result = baseline_llm_annotate(study=study, backend_alias="scripted")
    assert (result.valid, result.invalid) == (12, 0) and len(scripted.calls) == 2
    for answer in BaselineAnswer.objects.filter(instance__study=study).select_related("instance"):
        assert answer.value == answer.instance.gold  # the scripted LLM names each topic, lower-cased


def test_llm_annotate_reports_an_unknown_backend(sts, scripted):
    study = baseline_create(request=BaselineCreateRequest(name="b-llm", dataset=sts, task_type="sts", n_instances=2))
    with pytest.raises(ShiftlabError, match="No LLM backend 'nope'"):
        baseline_llm_annotate(study=study, backend_alias="nope")


# --- command ---------------------------------------------------------------------------------


def test_command_create_llm_annotate_and_status(sts, scripted, tmp_path):
    out = tmp_path / "out.txt"
    with out.open("w") as handle:
        call_command(
            "baseline",
            "create",
            "b-cmd",
            "--dataset",
            "pairs",
            "--task",
            "sts",
            "-n",
            "6",
            "--seed",
            "2",
            stdout=handle,
        )
        call_command("baseline", "llm-annotate", "b-cmd", "--backend", "scripted", stdout=handle)
        call_command("baseline", "status", "b-cmd", stdout=handle)
    text = out.read_text()
    assert "Created baseline b-cmd" in text and "6 instances of sts from pairs/test, seed 2" in text
    assert "6/6 instances" in text
    assert re.search(r"llm:scripted\s+llm\s+6 answers( \(\d did not parse\))?$", text, re.MULTILINE), text
    with pytest.raises(CommandError, match="no dataset 'missing'"):
        call_command("baseline", "create", "x", "--dataset", "missing", "--task", "sts", "-n", "2")
    with pytest.raises(CommandError, match="--options is not valid JSON"):
        call_command("baseline", "create", "x", "--dataset", "pairs", "--task", "sts", "-n", "2", "--options", "{")
    with pytest.raises(CommandError, match="no baseline study 'nope'"):
        call_command("baseline", "sync", "nope")


# --- who answers what -----------------------------------------------------------------------


def test_instances_are_dealt_whole_batches_and_queries_at_a_time(clustering, reranking, django_user_model):
    from annotation.baselines.baseline_services import _baseline_assign
    from annotation.models import BaselineAnnotator

    users = [django_user_model.objects.create_user(f"deal-{k}") for k in range(3)]
    for dataset, task, n, options in (
        (clustering, "clustering", 12, {"batch_size": 6, "raters_per_instance": 2}),
        (reranking, "reranking", 3, {"candidates": 4, "raters_per_instance": 2}),
    ):
        study = baseline_create(
            request=BaselineCreateRequest(
                name=f"deal-{task}", dataset=dataset, task_type=task, n_instances=n, options=options
            )
        )
        study.annotators.add(*users)
        instances = list(study.instances.order_by("position"))
        given, short = _baseline_assign(study, instances)
        assert short == 0 and sum(given.values()) == 2 * len(instances)
        seats = {s.user.username: set(s.keys) for s in BaselineAnnotator.objects.filter(study=study)}
        groups = defaultdict(set)
        for instance in instances:
            groups[instance.group].add(instance.key)
        for keys in seats.values():  # whole groups only
            assert all(members <= keys or not members & keys for members in groups.values())
        assert all(sum(members <= keys for keys in seats.values()) == 2 for members in groups.values())
        # Dealing again (publishing again) gives nobody anything more.
        assert _baseline_assign(study, instances) == ({}, 0)
