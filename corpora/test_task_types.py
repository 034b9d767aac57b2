"""The task-type definitions: every spec names a layout and a summary that exist. That every app's
table of per-task-type behaviour has one definition per task type is tested in
tests/test_task_type_completeness.py (corpora imports no app downstream of it, its tests included)."""

import pytest

from corpora.layouts import BEIR, ROW_LAYOUTS
from corpora.task_types import MTEB_TASK_TYPES, TASK_SPECS, TaskType, UnknownTaskTypeError, task_spec


@pytest.mark.parametrize("task", list(TaskType))
def test_every_task_type_has_a_spec_whose_layout_reads_its_required_fields(task):
    spec = task_spec(task.value)
    assert spec.task is task and spec is TASK_SPECS[task]
    assert spec.layout in ROW_LAYOUTS or spec.layout == BEIR
    assert spec.summary in (None, "gold_range", "labels", "documents", "candidates")
    assert set(spec.transformable_fields) <= set(spec.required_fields) | {"text"}
    assert (spec.gold_field is None) == (spec.gold_kind is None)


def test_mteb_types_and_pair_tasks_come_from_the_specs():
    assert MTEB_TASK_TYPES["STS"] is TaskType.STS and TaskType.STR not in MTEB_TASK_TYPES.values()
    assert len(MTEB_TASK_TYPES) == 7
    pairs = {task for task, spec in TASK_SPECS.items() if spec.sentence_pairs}
    assert pairs == {TaskType.STS, TaskType.STR, TaskType.PAIR_CLASSIFICATION}
    assert {task for task, spec in TASK_SPECS.items() if spec.documents} == {TaskType.RETRIEVAL, TaskType.RERANKING}
    gold_controls = {task for task, spec in TASK_SPECS.items() if spec.controls_from_gold}
    assert gold_controls == {TaskType.STS, TaskType.PAIR_CLASSIFICATION}


def test_an_unknown_task_type_is_a_shiftlab_error_and_a_value_error():
    with pytest.raises(UnknownTaskTypeError, match="unknown task type 'nope': choose one of sts, str"):
        task_spec("nope")
    with pytest.raises(ValueError):
        task_spec("nope")
