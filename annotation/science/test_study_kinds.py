"""The sensitivity study (issue 30): the inverse question, its controls and what its gate passes on."""

from __future__ import annotations

import copy

import pytest

from annotation.configs.config_export import config_seal
from annotation.configs.config_schema import ConfigError, config_read
from annotation.kinds import ItemKind
from annotation.science.control_check import ControlRating, control_check, expected_value
from annotation.science.design import (
    DesignContext,
    GateDirection,
    StudyDesign,
    StudyKind,
    design_problems,
)
from annotation.science.gating import gate_decide
from annotation.science.study_kinds import kind_mismatch
from tests.support import minimal_config_body


def test_a_sensitivity_study_asks_whether_the_meaning_changed_and_passes_on_changed():
    design = StudyDesign(kind="sensitivity")
    changed, fluency = design.questions
    assert (changed.name, changed.inverse, changed.meaning, changed.values) == ("changed", True, True, (1, 2, 3, 4, 5))
    assert (fluency.name, fluency.inverse) == ("fluency", False)
    assert "change the meaning" in changed.title
    assert design.passes_on is GateDirection.MEANING_CHANGED
    assert StudyDesign().passes_on is StudyDesign(kind="similarity").passes_on is GateDirection.MEANING_KEPT


def test_designs_of_the_older_kinds_keep_their_hash():
    # Content hashes of these designs as the code before issue 30 computed them.
    assert StudyDesign().content_hash == "fcbe9e5ba64078907add82210683fd20de1c151f29657811661be2b237632e5a"
    similarity = StudyDesign(kind="similarity", raters_per_item=2)
    assert similarity.content_hash == "7d8b26eca098824ea794a5f17a294d5b43515c7f1dcf74e28d8f0d921fa6a4ee"
    assert StudyDesign(kind="sensitivity").content_hash != StudyDesign().content_hash


@pytest.mark.parametrize(
    ("kind", "question", "expected"),
    [
        # A faithful paraphrase (or unchanged copy) must be rated "not changed", an unrelated text "changed".
        (ItemKind.EASY_POSITIVE, "changed", 1),
        (ItemKind.EASY_NEGATIVE, "changed", 5),
        (ItemKind.EASY_POSITIVE, "fluency", 5),
        (ItemKind.EASY_NEGATIVE, "fluency", None),
        (ItemKind.REAL, "changed", None),
    ],
)
def test_controls_of_the_inverse_question_expect_the_other_end(kind, question, expected):
    q = StudyDesign(kind="sensitivity").question(question)
    assert expected_value(kind, q) == expected
    assert expected_value(kind, q, keywords=True) == (expected if question == "changed" else None)


def test_the_rewrite_questions_keep_their_expectations():
    quality = StudyDesign().question("quality")
    assert expected_value(ItemKind.EASY_POSITIVE, quality) == 5 and expected_value(ItemKind.EASY_NEGATIVE, quality) == 1


def test_a_rater_who_calls_a_faithful_paraphrase_changed_fails_the_control_check():
    changed = StudyDesign(kind="sensitivity").question("changed")
    careful = [ControlRating(expected_value(ItemKind.EASY_POSITIVE, changed), 1), ControlRating(5, 4)]
    blind = [ControlRating(expected_value(ItemKind.EASY_POSITIVE, changed), 5), ControlRating(5, 5)]
    assert control_check(careful, margin=1, min_ratings=2).status == "passed"
    assert control_check(blind, margin=1, min_ratings=2).status == "failed"


def test_the_gate_passes_when_raters_found_the_meaning_changed():
    threshold = StudyDesign(kind="sensitivity", acceptance_threshold=4.0).acceptance_threshold
    assert gate_decide({"changed": 4.5, "fluency": 4.2}, threshold=threshold).passed
    refused = gate_decide({"changed": 2.0, "fluency": 4.8}, threshold=threshold)
    assert not refused.passed and refused.reasons == ("changed: mean 2.000 < 4",)


@pytest.mark.parametrize(
    ("kind", "transformations", "problem"),
    [
        (StudyKind.SENSITIVITY, ["negation", "role_swap"], None),
        (StudyKind.SENSITIVITY, ["negation", "paraphrase"], "paraphrase must keep the meaning"),
        (StudyKind.REWRITE, ["paraphrase"], None),
        (StudyKind.REWRITE, ["antonym", "paraphrase"], "antonym must change the meaning"),
        (StudyKind.SIMILARITY, ["number_entity_swap"], "choose the sensitivity kind"),
    ],
)
def test_a_study_kind_must_fit_its_transformations(kind, transformations, problem):
    message = kind_mismatch(kind, transformations)
    assert (message is None) if problem is None else problem in message
    problems = design_problems(
        StudyDesign(kind=kind, items_per_transformation=1), DesignContext({t: 5 for t in transformations})
    )
    assert [p.field for p in problems] == ([] if problem is None else ["kind"])


def _gate_config(*, evidence: str | None, marked: str | None) -> dict:
    document = copy.deepcopy(config_seal(minimal_config_body(), key="a-test-signing-key"))
    gate = document["transformations"][0]["gate"]
    if evidence is not None:
        gate["evidence"] = {**gate["evidence"], "passes_on": evidence}
    if marked is not None:
        gate["passes_on"] = marked
    return document


def test_an_exported_config_carries_what_the_gate_passed_on():
    assert config_read(_gate_config(evidence=None, marked=None)).transformations[0].gate.passes_on == "meaning_kept"
    changed = config_read(_gate_config(evidence="meaning_changed", marked="meaning_changed"))
    assert changed.transformations[0].gate.passes_on == "meaning_changed"
    for evidence, marked in (("meaning_changed", None), (None, "meaning_changed"), ("sideways", "sideways")):
        with pytest.raises(ConfigError, match=r"transformations\[0\]\.gate\.passes_on: must be what the gate's"):
            config_read(_gate_config(evidence=evidence, marked=marked))
