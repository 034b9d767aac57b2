"""Gates say what they rest on (issue 29, item 4): a transformation rated by one counted rater per
item does not pass unless the design declares a single-rater pilot, which the passed gate's
evidence and the exported config carry (and the config schema accepts); agreement comes with
warnings where it can mislead, on the study page, the gate page and the API; an optional minimum
AC2 lower bound is applied."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from django.urls import reverse

from annotation.configs.config_export import config_verify
from annotation.export_services import BenchmarkConfigExportRequest, benchmark_config_export
from annotation.kinds import ItemKind
from annotation.models import Annotator, Rating, Study
from annotation.studies.gate_services import approval_decide, study_gate
from annotation.studies.validation_services import study_validate
from core.errors import ShiftlabError
from core.roles import Role
from tests.support import make_user, published_keyword_study

pytestmark = pytest.mark.django_db
AT = datetime(2026, 1, 1, tzinfo=UTC)
THIN = "fewer than 2 counted raters on 4 of 4 items"
NO_PAIRS = "no item has 2 or more raters: AC2 and α are undefined"


def single_rater_study(researcher, django_user_model, **design_fields) -> Study:
    """4 real items, one rater per item declared, every item rated 4 by one annotator whose
    controls are right."""
    study = published_keyword_study(
        researcher=researcher,
        name="single",
        limit=4,
        items=4,
        batch_size=4,
        design_fields={"raters_per_item": 1, **design_fields},
        argilla_dataset_id=uuid.uuid4(),
    )
    user = make_user(django_user_model, "anna", Role.ANNOTATOR)
    annotator = Annotator.objects.create(study=study, user=user, argilla_user_id=uuid.uuid4())
    for item in study.items.all():
        for question in ("quality", "fluency"):
            value = 4 if item.kind == ItemKind.REAL else item.expected.get(question, 4)
            Rating.objects.create(study_item=item, annotator=annotator, question=question, value=value, submitted_at=AT)
    study_validate(study=study, actor=researcher, estimate=False)
    return study


def page(client, name: str, study: Study) -> str:
    return " ".join(client.get(reverse(f"annotation:{name}", args=[study.pk])).content.decode().split())


def test_one_rater_per_item_does_not_pass_and_every_view_says_why(client, researcher, django_user_model):
    study = single_rater_study(researcher, django_user_model)
    [gate] = study_gate(study=study, actor=researcher)
    assert not gate.passed and gate.evidence["state"] == "failed"
    assert gate.evidence["reasons"][0].startswith(THIN) and "single_rater_pilot" in gate.evidence["reasons"][0]
    assert gate.evidence["items_with_fewer_than_2_raters"] == 4 and "single_rater_pilot" not in gate.evidence
    assert any(w.startswith(NO_PAIRS) for w in gate.evidence["questions"]["quality"]["warnings"])
    with pytest.raises(ShiftlabError, match="failed the gate .fewer than 2 counted raters"):
        approval_decide(gate_result=gate, decision="approve", comment="looks fine", actor=researcher)
    client.force_login(researcher)
    shown = page(client, "gate", study)
    assert THIN in shown and NO_PAIRS in shown
    assert NO_PAIRS in page(client, "study", study)
    progress = client.get(f"/api/studies/{study.pk}/progress/").json()
    assert progress["agreement"]["overall"]["quality"]["warnings"][0].startswith(NO_PAIRS)


def test_a_declared_pilot_passes_marked_and_the_config_carries_it(
    client, researcher, django_user_model, tmp_path, settings
):
    settings.DATA_DIR = tmp_path
    study = single_rater_study(researcher, django_user_model, single_rater_pilot=True)
    [gate] = study_gate(study=study, actor=researcher)
    assert gate.passed and gate.evidence["single_rater_pilot"] is True and not gate.evidence["reasons"]
    client.force_login(researcher)
    assert "Single-rater pilot</strong>: 4 of 4 items rest on one counted rater" in page(client, "gate", study)
    approval_decide(gate_result=gate, decision="approve", comment="pilot only", actor=researcher)
    config = benchmark_config_export(actor=researcher, request=BenchmarkConfigExportRequest(name="pilot"))
    [entry] = config.document["transformations"]
    assert entry["gate"]["single_rater_pilot"] is True and entry["study"]["design"]["single_rater_pilot"] is True
    verification = config_verify(config.json_text, "json", key=settings.CONFIG_SIGNING_KEY)
    assert verification.ok, verification.problems
    assert verification.config.transformations[0].gate.single_rater_pilot is True


def test_a_declared_minimum_agreement_fails_a_gate_whose_ac2_is_undefined(researcher, django_user_model):
    study = single_rater_study(researcher, django_user_model, single_rater_pilot=True, min_ac2_lower=0.2)
    [gate] = study_gate(study=study, actor=researcher)
    assert not gate.passed
    assert gate.evidence["reasons"] == [
        "fluency: AC2 undefined (fewer than 2 items with 2 or more raters), but the design asks for a lower "
        "confidence bound of at least 0.2",
        "quality: AC2 undefined (fewer than 2 items with 2 or more raters), but the design asks for a lower "
        "confidence bound of at least 0.2",
    ]
