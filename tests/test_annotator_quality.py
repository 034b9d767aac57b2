"""Annotator quality of a study (issue 18): the declared annotator-level rules in the validation,
the page, the API endpoint and the command, for researchers only."""

from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotation.kinds import ItemKind
from annotation.models import Annotator, Flag, Rating, Study
from annotation.studies.design_services import study_design
from annotation.studies.quality_services import study_annotator_quality
from annotation.studies.validation_services import flag_review, study_validate
from core.roles import Role
from tests.support import make_user, published_keyword_study

pytestmark = pytest.mark.django_db
START = datetime(2026, 1, 1, 9, tzinfo=UTC)


def rate_all(study: Study, django_user_model, name: str, *, answer, seconds: float) -> Annotator:
    """Ratings of every item by a new annotator, one item every ``seconds``, written as a sync would."""
    annotator = Annotator.objects.create(study=study, user=make_user(django_user_model, name, Role.ANNOTATOR))
    for n, item in enumerate(study.items.order_by("position")):
        for question in ("quality", "fluency"):
            Rating.objects.create(
                study_item=item,
                annotator=annotator,
                question=question,
                value=answer(item, question, n),
                submitted_at=START + timedelta(seconds=seconds * n),
            )
    return annotator


def careful(item, question, n):
    if item.kind != ItemKind.REAL:
        return item.expected.get(question, 4)
    return 1 + (item.position * 7 + (question == "fluency")) % 5


def sloppy(item, question, n):
    """Gets the controls right (so the control check passes) and answers 3 to everything else."""
    return item.expected.get(question, 4) if item.kind != ItemKind.REAL else 3


@pytest.fixture
def study(researcher, django_user_model) -> Study:
    study = published_keyword_study(researcher=researcher, name="quality", limit=12, items=12, batch_size=6)
    rate_all(study, django_user_model, "anna", answer=careful, seconds=40)
    rate_all(study, django_user_model, "bob", answer=careful, seconds=25)
    rate_all(study, django_user_model, "liner", answer=sloppy, seconds=2)
    return study


def declare(study: Study, **rules) -> None:
    design = study_design(study).revised(**rules)
    Study.objects.filter(pk=study.pk).update(design=design.to_dict(), design_hash=design.content_hash)


def test_figures_per_annotator(study):
    report = study_annotator_quality(study=study)
    rows = {r.username: r for r in report.rows}
    liner, anna = rows["liner"].quality, rows["anna"].quality
    assert liner.timing.median_seconds == 2.0 and liner.timing.share_too_fast == 1.0
    assert anna.timing.median_seconds == 40.0 and anna.timing.share_too_fast == 0.0
    assert liner.straight_lining.longest_run == 12 and liner.straight_lining.entropy_bits == 0.0
    assert anna.controls.rate == 1.0 and anna.controls.ci_high == 1.0 and anna.controls.ci_low < 1.0
    assert liner.deviation.peer_mad > anna.deviation.peer_mad
    assert rows["liner"].competence.competence == 0.0 < rows["anna"].competence.competence
    assert rows["liner"].carefulness == 0.0 < rows["bob"].carefulness
    assert report.model.converged and report.scale == (1, 5)


def test_a_straight_liner_is_flagged_only_when_the_rule_is_declared(study, researcher):
    study_validate(study=study, actor=researcher, estimate=False)
    assert not Flag.objects.filter(rule__in=["straight_lining", "too_fast", "low_competence"]).exists()

    declare(study, flag_straight_line_run=10, flag_too_fast_share=0.5, flag_low_competence=0.6, max_confirmed_flags=2)
    first = study_validate(study=study, actor=researcher, estimate=False)
    flags = Flag.objects.filter(rule__in=["straight_lining", "too_fast", "low_competence"])
    assert {(f.rule, f.rating.annotator.user.username) for f in flags} == {
        ("straight_lining", "liner"),
        ("too_fast", "liner"),
        ("low_competence", "liner"),
    }
    assert flags.get(rule="too_fast").deviation == 1.0
    assert first.flags_created >= 3
    again = study_validate(study=study, actor=researcher, estimate=False)  # stable: nothing churns
    assert set(flags.values_list("pk", flat=True)) == {f.pk for f in flags}
    assert again.flags_created == again.flags_removed == 0

    # Confirmed annotator-level flags count towards the "repeatedly deviant" rule.
    for flag in flags.filter(rule__in=["straight_lining", "too_fast"]):
        flag_review(flag=flag, decision="confirmed", actor=researcher)
    assert Annotator.objects.get(user__username="liner").status == Annotator.Status.REJECTED

    # Turned off again: open flags go, reviewed ones stay.
    declare(study, flag_straight_line_run=0, flag_too_fast_share=0, flag_low_competence=0)
    study_validate(study=study, actor=researcher, estimate=False)
    assert set(
        Flag.objects.filter(rule__in=["straight_lining", "too_fast", "low_competence"]).values_list("rule", flat=True)
    ) == {"straight_lining", "too_fast"}


def test_page_api_and_command_for_researchers_only(study, researcher, client):
    url = reverse("annotation:annotators", args=[study.pk])
    api = f"/api/studies/{study.pk}/annotator-quality/"
    anna = Annotator.objects.get(user__username="anna").user
    client.force_login(anna)
    assert client.get(url).status_code == 403
    as_annotator = APIClient()
    as_annotator.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=anna).key}")
    assert as_annotator.get(api).status_code == 403
    assert APIClient().get(api).status_code == 401

    client.force_login(researcher)
    page = client.get(url)
    assert page.status_code == 200
    html = page.content.decode()
    assert "liner" in html and html.count("<svg") == 3
    assert " style=" not in html and "<style" not in html  # inline SVG that the CSP lets through
    as_researcher = APIClient()
    as_researcher.force_authenticate(researcher)
    data = as_researcher.get(api).json()
    rows = {a["username"]: a for a in data["annotators"]}
    assert rows["liner"]["straight_lining"]["entropy_bits"] == 0.0
    assert rows["anna"]["competence"]["ci_low"] <= rows["anna"]["competence"]["competence"]
    assert rows["liner"]["carefulness"] == 0.0 < rows["anna"]["carefulness"]
    assert "Annotator quality" in client.get(reverse("annotation:study", args=[study.pk])).content.decode()

    out = StringIO()
    call_command("study", "annotators", "quality", stdout=out)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("annotator") and any(line.startswith("liner") for line in lines)


def test_low_carefulness_is_flagged_when_declared_shown_everywhere_and_a_rejected_rater_leaves_it(
    study, researcher, client
):
    """Issue 29: the low-carefulness rule flags the annotator whose carefulness is below the
    declared fraction of the upper quartile (anna and bob agree perfectly: 1.0 each; liner
    follows no item: 0.0; floor 0.4 x 1.0), on the page, in the API and in the command. A rejected
    annotator is flagged no more: their open flag goes at the next validation."""
    study_validate(study=study, actor=researcher, estimate=False)
    assert not Flag.objects.filter(rule="low_carefulness").exists()  # off by default
    rows = {r.username: r for r in study_annotator_quality(study=study).rows}
    assert rows["liner"].carefulness_flagged is None

    declare(study, flag_low_carefulness=0.4)
    study.refresh_from_db()
    study_validate(study=study, actor=researcher, estimate=False)
    flags = Flag.objects.filter(rule="low_carefulness")
    assert [(f.rating.annotator.user.username, f.deviation) for f in flags] == [("liner", 0.0)]
    report = study_annotator_quality(study=study)
    rows = {r.username: r for r in report.rows}
    assert rows["anna"].carefulness == pytest.approx(1.0) and report.carefulness_floor == pytest.approx(0.4)
    assert (rows["liner"].carefulness_flagged, rows["anna"].carefulness_flagged) == (True, False)

    client.force_login(researcher)
    html = client.get(reverse("annotation:annotators", args=[study.pk])).content.decode()
    assert html.count(">flagged</span>") == 1 and "flags a carefulness below 0.4" in html
    api = APIClient()
    api.force_authenticate(researcher)
    data = api.get(f"/api/studies/{study.pk}/annotator-quality/").json()
    assert {a["username"]: a["carefulness_flagged"] for a in data["annotators"]} == {
        "anna": False,
        "bob": False,
        "liner": True,
    }
    out = StringIO()
    call_command("study", "annotators", "quality", stdout=out)
    flagged = [line.split()[0] for line in out.getvalue().splitlines() if "flagged: low carefulness" in line]
    assert flagged == ["liner"]

    Annotator.objects.filter(user__username="liner").update(status=Annotator.Status.REJECTED)
    study_validate(study=study, actor=researcher, estimate=False)
    assert not Flag.objects.filter(rule="low_carefulness").exists()
    rows = {r.username: r for r in study_annotator_quality(study=study).rows}
    assert rows["liner"].carefulness_flagged is None and rows["anna"].carefulness_flagged is False
