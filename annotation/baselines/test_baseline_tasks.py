"""The task-type definitions of human baselines: one per baseline task type, each asked the same
questions (no database)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from annotation.baselines import baseline_sampling as sampling
from annotation.baselines.baseline_tasks import BASELINE_TASKS, BATCH_FIELD, OPTION_DEFAULTS, baseline_task
from annotation.models import BASELINE_TASK_TYPES
from core.errors import ShiftlabError
from corpora.task_types import TASK_SPECS, TaskType


@dataclass(frozen=True)
class Instance:
    key: str
    texts: tuple[str, ...]
    group: str = ""


def test_every_baseline_task_type_has_one_definition():
    assert set(BASELINE_TASKS) == set(BASELINE_TASK_TYPES) == set(OPTION_DEFAULTS)
    assert all(isinstance(task_type, TaskType) for task_type in BASELINE_TASKS)
    for task_type, task in BASELINE_TASKS.items():
        assert task.task_type == task_type and task.instructions and task.question
        assert task.gold_field == TASK_SPECS[task_type].gold_field
        assert [q.name for q in task.questions({"labels": ["a_b"]})] == [task.question]


def test_an_unknown_task_type_is_refused_with_the_choices():
    with pytest.raises(ShiftlabError, match="unknown baseline task type 'retrieval': choose one of sts, "):
        baseline_task("retrieval")


def test_options_are_checked_per_task():
    assert baseline_task("sts").check_options({}) == {"raters_per_instance": 3}
    assert baseline_task("classification").check_options({"stratify": True}, ["b", "a", "a"]) == {
        "raters_per_instance": 3,
        "stratify": True,
        "labels": ["a", "b"],
    }
    with pytest.raises(ShiftlabError, match="unknown option.* batch_size for a sts baseline") as refused:
        baseline_task("sts").check_options({"batch_size": 4})
    assert refused.value.field is None
    with pytest.raises(ShiftlabError, match="option candidates must be a positive") as refused:
        baseline_task("reranking").check_options({"candidates": 0})
    assert refused.value.field == "candidates"
    with pytest.raises(ShiftlabError, match="option labels belongs to classification baselines, not clustering"):
        baseline_task("clustering").check_options({"labels": ["x"]})
    with pytest.raises(ShiftlabError, match="the label set comes from the dataset"):
        baseline_task("classification").check_options({"labels": ["x"]})


def test_clustering_records_show_the_batch_and_the_llm_answers_per_batch():
    task = baseline_task("clustering")
    instances = [
        Instance("clu-0000", ("rain",), "b0"),
        Instance("clu-0001", ("sun",), "b0"),
        Instance("c2", ("x",), "b1"),
    ]
    records = task.records(instances)
    assert records[1].fields == {"text": "sun", BATCH_FIELD.name: "1. rain\n2. sun"}
    assert BATCH_FIELD in task.argilla_fields()
    units = task.llm_units("Group them.", {}, instances)
    assert [len(u.instances) for u in units] == [2, 1]
    assert [p.value for p in task.llm_parse(units[0], "1: Weather\n2: weather", {})] == ["weather", "weather"]
    assert [p.ok for p in task.llm_parse(units[0], "1: weather", {})] == [False, False]


def test_per_instance_tasks_ask_the_llm_once_per_instance():
    sts = baseline_task("sts")
    units = sts.llm_units("Rate.", {}, [Instance("sts-0000", ("a", "b")), Instance("sts-0001", ("c", "d"))])
    assert [u.max_tokens for u in units] == [16, 16] and "Sentence 2: b" in units[0].messages[1]["content"]
    assert [p.value for p in sts.llm_parse(units[0], "4", {})] == [4.0]
    cls = baseline_task("classification")
    assert cls.llm_units("Pick.", {"labels": ["x"]}, [Instance("cls-0000", ("t",))])[0].max_tokens == 48
    assert baseline_task("reranking").answer_value("1", {}) == 1


def test_each_task_samples_with_its_own_sampler():
    items = [
        sampling.SourceItem(ref=k, payload={"sentence1": f"a{k}", "sentence2": f"b{k}"}, gold=k % 5) for k in range(6)
    ]
    drawn = baseline_task("sts").sample(items, 3, rng=np.random.default_rng(0), options={})
    assert drawn == sampling.sample_sts(items, 3, rng=np.random.default_rng(0))
