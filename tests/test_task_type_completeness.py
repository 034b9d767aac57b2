"""Every app's table of per-task-type behaviour has one definition per task type (completeness).
Here rather than beside ``corpora/task_types.py``: corpora imports no app downstream of it, its unit
tests included (.importlinter)."""

from corpora.task_types import TASK_SPECS, TaskType


def test_evaluation_defines_every_task_type_and_scores_alike_the_types_scored_alike():
    from evaluation.services import EVALUATORS

    assert set(EVALUATORS) == set(TaskType)
    assert all(isinstance(task, TaskType) for task in EVALUATORS)
    for task, spec in TASK_SPECS.items():
        assert EVALUATORS[task] is EVALUATORS[spec.scored_as]
        assert TASK_SPECS[spec.scored_as].scored_as is spec.scored_as
