"""No branch on the task type outside the definitions (issue 43, STYLE.md "One definition per task
type"): behaviour that differs by task type lives in a definition keyed by ``TaskType`` (the
corpora's ``TaskSpec``, evaluation's ``TaskEvaluator`` and baseline scorings, annotation's
``BaselineTask``), and the rest of the code asks it. This AST scan fails on any comparison
(``==``, ``!=``, ``is``, ``in``, ``match``) against a task-type value, a ``TaskType`` member or a
name's string, outside the one module that declares the task types."""

from __future__ import annotations

import ast
from pathlib import Path

from corpora.task_types import TaskType

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("core", "corpora", "transforms", "annotation", "evaluation", "shiftlab", "benchmarks", "scripts")
DEFINITIONS = {"corpora/task_types.py"}
"""Where the task types are declared: the one module that may name them in a comparison."""
VALUES = {t.value for t in TaskType}
MEMBERS = {t.name for t in TaskType}


def _modules():
    for folder in SCANNED:
        for path in sorted((ROOT / folder).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if "/migrations/" in relative or path.name.startswith("test_") or relative in DEFINITIONS:
                continue
            yield relative, ast.parse(path.read_text(encoding="utf-8"), filename=relative)


def _task_type_values(node: ast.AST) -> list[str]:
    """The task types ``node`` names: a string equal to one, ``TaskType.X``, or a literal holding them."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in VALUES:
        return [node.value]
    if isinstance(node, ast.Attribute) and node.attr in MEMBERS and getattr(node.value, "id", None) == "TaskType":
        return [f"TaskType.{node.attr}"]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [value for element in node.elts for value in _task_type_values(element)]
    return []


def task_type_branches(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, what it names) of each comparison or ``case`` against a task type in ``tree``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            named = [value for operand in (node.left, *node.comparators) for value in _task_type_values(operand)]
            line = node.lineno
        elif isinstance(node, ast.match_case):
            named = [value for part in ast.walk(node.pattern) for value in _task_type_values(part)]
            line = node.pattern.lineno
        else:
            continue
        if named:
            found.append((line, ", ".join(named)))
    return found


def test_no_module_outside_the_definitions_branches_on_a_task_type():
    branches = [
        f"{module}:{line} compares against {named}"
        for module, tree in _modules()
        for line, named in task_type_branches(tree)
    ]
    assert branches == [], "ask the task type's definition instead:\n" + "\n".join(branches)


def test_the_scan_sees_every_form_of_branch():
    source = """
if dataset.task_type == "sts": pass
if task in ("clustering", "reranking"): pass
if TaskType(task) is TaskType.RETRIEVAL: pass
if spec.layout == "pair": pass
match task:
    case "classification": pass
    case TaskType.STR: pass
"""
    lines = [line for line, _ in task_type_branches(ast.parse(source))]
    assert sorted(lines) == [2, 3, 4, 7, 8]
