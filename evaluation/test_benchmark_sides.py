"""The pure parts of perturbation sides: units per side, labels, the perturbed corpus."""

from __future__ import annotations

import pytest

from annotation.configs.config_schema import PERTURBATION_DOCUMENT_SCOPES, PERTURBATION_SIDES, PerturbationEntry
from core.errors import ShiftlabError
from evaluation.benchmark_plan import (
    SIDES,
    DatasetRef,
    Plan,
    PlanError,
    TransformationSpec,
    Unit,
    sided,
    sides_checked,
    transform_run_key,
)
from evaluation.benchmark_sides import perturbed_corpus, sides_with_config, without_failed_relevant
from transforms.selectors import DOCUMENT_SCOPES

SPEC = TransformationSpec("random_keywords", "lexical", (1, 2), "default", "none", {}, "g" * 64, {}, ())


def test_sided_datasets_get_one_unit_per_side_and_the_others_the_query_side_only():
    plan = Plan((DatasetRef("scifact"), DatasetRef("sts")), (SPEC,), sides=("query", "both"))
    units = plan.units(["m"], sided={"scifact"})
    assert [(u.dataset, u.transformation, u.seed, u.side) for u in units] == [
        ("scifact", "original", 0, "query"),
        ("scifact", "random_keywords", 1, "query"),
        ("scifact", "random_keywords", 1, "both"),
        ("scifact", "random_keywords", 2, "query"),
        ("scifact", "random_keywords", 2, "both"),
        ("sts", "original", 0, "query"),
        ("sts", "random_keywords", 1, "query"),
        ("sts", "random_keywords", 2, "query"),
    ]


def test_a_query_unit_reads_and_writes_as_before_sides_existed():
    old = {"model": "m", "dataset": "d", "transformation": "t", "seed": 3}
    assert Unit.from_dict(old).as_dict() == old and Unit.from_dict(old).side == "query"
    both = Unit("m", "d", "t", 3, "both")
    assert Unit.from_dict(both.as_dict()) == both and both.as_dict()["side"] == "both"
    assert both.perturbs_queries and both.perturbs_documents
    assert (
        transform_run_key("d", "t", 3) == "d|t|3"
        and transform_run_key("d", "t", 3, documents=True) == "d|t|3|documents"
    )


def test_sides_are_checked_and_ordered():
    assert sides_checked(None) == ("query",) == sides_checked([])
    assert sides_checked(["both", "document", "both"]) == ("document", "both")
    with pytest.raises(PlanError, match="unknown side corpus") as refused:
        sides_checked(["corpus"])
    assert refused.value.field == "sides"
    assert (sided("lexical", "query"), sided("lexical", "document"), sided("", "both")) == (
        "lexical",
        "lexical [document]",
        "",
    )


def test_failed_documents_leave_both_corpora_and_the_queries_judging_them_relevant():
    corpus = {"a": {"title": "A", "text": "alpha one"}, "b": {"title": "", "text": "beta"}, "c": {"text": "gamma"}}
    original, transformed, failed = perturbed_corpus(corpus, {"a": (True, "one"), "b": (False, "")})
    assert failed == {"b"}
    assert original == {"a": corpus["a"], "c": corpus["c"]}
    assert transformed == {"a": {"title": "A", "text": "one"}, "c": corpus["c"]}  # the title is kept
    examples = [("q1", {}, {"a": 1}, 1), ("q2", {}, {"b": 1, "a": 0}, 2), ("q3", {}, {"c": 2, "b": 0}, 3)]
    kept, _ = without_failed_relevant(examples, examples, failed)
    assert [e[0] for e in kept] == ["q1", "q3"]  # q3 only judges b irrelevant: it stays


def test_a_config_that_fixes_the_sides_is_narrowed_by_a_run_never_widened():
    fixed = PerturbationEntry(sides=("document", "both"), document_scope="documents")
    assert sides_with_config(fixed, None, None) == (("document", "both"), "documents")
    assert sides_with_config(fixed, ("both",), "documents") == (("both",), "documents")
    with pytest.raises(ShiftlabError, match="fixes the perturbed sides to document, both, and the run asks for query"):
        sides_with_config(fixed, ("query", "both"), None)
    with pytest.raises(ShiftlabError, match="fixes the document scope to 'documents'") as refused:
        sides_with_config(fixed, None, "relevant_documents")
    assert refused.value.field == "document_scope"
    # Without a block the run's choice stands (None: the defaults, query and relevant_documents).
    assert sides_with_config(None, ("query", "document"), None) == (("query", "document"), None)
    assert sides_with_config(None, None, "documents") == (None, "documents")


def test_the_config_format_names_the_same_sides_and_scopes_as_a_run():
    assert PERTURBATION_SIDES == SIDES and PERTURBATION_DOCUMENT_SCOPES == DOCUMENT_SCOPES
