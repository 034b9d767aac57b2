"""Studies through the researcher API and pages, without external services: a non-LLM run
(random keywords), ratings written as a sync would, and the role × endpoint permission matrix
(annotators, whose ratings live in these tables, get nothing)."""

from datetime import UTC, datetime

import pytest
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotation.export_services import BenchmarkConfigExportRequest, benchmark_config_export
from annotation.kinds import ItemKind
from annotation.models import Annotator, Flag, GateResult, Rating, Study
from annotation.studies.gate_services import approval_decide, study_gate
from annotation.studies.validation_services import study_validate
from core.errors import ShiftlabError
from core.roles import Role
from tests.support import make_user, published_keyword_study

pytestmark = pytest.mark.django_db
AT = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def study(researcher, django_user_model) -> Study:
    study = published_keyword_study(researcher=researcher, name="api", limit=5, items=6, batch_size=3)
    for name, good in (("anna", True), ("bob", True), ("sloppy", False)):
        user = make_user(django_user_model, name, Role.ANNOTATOR)
        annotator = Annotator.objects.create(study=study, user=user)
        for item in study.items.all():
            for question in ("quality", "fluency"):
                value = item.expected.get(question, 4) if good else 3
                if name == "bob" and item.kind == ItemKind.REAL and question == "fluency":
                    value = 1
                Rating.objects.create(
                    study_item=item, annotator=annotator, question=question, value=value, submitted_at=AT
                )
    return study


def test_validation_gate_and_approval_rules(study, researcher):
    result = study_validate(study=study, actor=researcher, estimate=False)
    assert result.rejected == {"sloppy": "failed_controls"}
    assert Flag.objects.filter(rule="low_rating").count() == study.items.filter(kind="real").count()
    [gate] = study_gate(study=study, actor=researcher)
    assert not gate.passed and gate.evidence["reasons"][0].startswith("fluency: mean")
    with pytest.raises(ShiftlabError, match="cannot be approved"):
        approval_decide(gate_result=gate, decision="approve", comment="looks fine", actor=researcher)
    with pytest.raises(ShiftlabError, match="comment"):
        approval_decide(gate_result=gate, decision="reject", comment=" ", actor=researcher)
    approval_decide(gate_result=gate, decision="reject", comment="fluency too low", actor=researcher)
    with pytest.raises(ShiftlabError, match="no approved transformation"):
        benchmark_config_export(actor=researcher, request=BenchmarkConfigExportRequest())


def _endpoints(study: Study, flag: Flag, gate: GateResult) -> list[tuple[str, str, dict]]:
    annotator = study.annotators.first()
    return [
        ("get", "/api/studies/", {}),
        ("get", f"/api/studies/{study.pk}/", {}),
        ("get", f"/api/studies/{study.pk}/progress/", {}),
        ("get", f"/api/studies/{study.pk}/items/", {}),
        ("get", f"/api/studies/{study.pk}/annotators/", {}),
        ("post", "/api/studies/", {"name": "x", "runs": [1]}),
        ("post", f"/api/studies/{study.pk}/lock/", {}),
        ("post", f"/api/studies/{study.pk}/sync/", {}),
        ("post", f"/api/studies/{study.pk}/validate/", {}),
        ("post", f"/api/studies/{study.pk}/gate/", {}),
        ("post", f"/api/study-annotators/{annotator.pk}/reject/", {"reason": "x"}),
        ("post", f"/api/study-annotators/{annotator.pk}/replace/", {"username": "anna", "reason": "x"}),
        ("get", "/api/study-flags/", {}),
        ("get", f"/api/study-flags/{flag.pk}/", {}),
        ("post", f"/api/study-flags/{flag.pk}/review/", {"decision": "dismissed"}),
        ("get", "/api/gate-results/", {}),
        ("get", f"/api/gate-results/{gate.pk}/", {}),
        ("post", f"/api/gate-results/{gate.pk}/decide/", {"decision": "reject", "comment": "x"}),
        ("get", "/api/benchmark-configs/", {}),
        ("post", "/api/benchmark-configs/", {}),
        ("post", "/api/benchmark-configs/verify/", {"text": "{}", "format": "json"}),
    ]


def test_annotators_and_anonymous_get_nothing_researchers_get_everything(study, researcher):
    study_validate(study=study, actor=researcher, estimate=False)
    [gate] = study_gate(study=study, actor=researcher)
    flag = Flag.objects.first()
    anna = Annotator.objects.get(user__username="anna").user
    token = Token.objects.create(user=anna)
    as_annotator = APIClient()
    as_annotator.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    anonymous = APIClient()
    as_researcher = APIClient()
    as_researcher.force_authenticate(researcher)
    for method, url, body in _endpoints(study, flag, gate):
        assert getattr(as_annotator, method)(url, body, format="json").status_code == 403, url
        assert getattr(anonymous, method)(url, body, format="json").status_code == 401, url
    # Researchers reach every read endpoint, and what they read holds what annotators must not see.
    items = as_researcher.get(f"/api/studies/{study.pk}/items/").json()["results"]
    assert {i["kind"] for i in items} == {"real", "easy_positive", "easy_negative"}
    flags = as_researcher.get("/api/study-flags/", {"study": study.pk}).json()["results"]
    assert flags and flags[0]["annotator"] in {"anna", "bob"}
    progress = as_researcher.get(f"/api/studies/{study.pk}/progress/").json()
    assert {a["username"]: a["control_status"] for a in progress["annotators"]}["sloppy"] == "failed"
    decided = as_researcher.post(
        f"/api/gate-results/{gate.pk}/decide/", {"decision": "approve", "comment": "ok"}, format="json"
    )
    assert decided.status_code == 400 and "cannot be approved" in decided.json()["detail"]


def test_pages_render_for_researchers_only(study, researcher, client):
    study_validate(study=study, actor=researcher, estimate=False)
    study_gate(study=study, actor=researcher)
    pages = [
        reverse("annotation:studies"),
        reverse("annotation:study", args=[study.pk]),
        reverse("annotation:review", args=[study.pk]),
        reverse("annotation:gate", args=[study.pk]),
        reverse("annotation:exports"),
    ]
    anna = Annotator.objects.get(user__username="anna").user
    client.force_login(anna)
    for url in pages:
        assert client.get(url).status_code == 403, url
    client.force_login(researcher)
    for url in pages:
        assert client.get(url).status_code == 200, url
    page = client.get(reverse("annotation:study", args=[study.pk])).content.decode()
    assert "sloppy" in page and "failed" in page and "AC2" in page
    gate = client.get(reverse("annotation:gate", args=[study.pk])).content.decode()
    assert "Reject" in gate and "random_keywords" in gate
