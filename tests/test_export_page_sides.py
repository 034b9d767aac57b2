"""The export page fixes the perturbed sides of a config as the API and the command do (issue 30):
the same service entry, the same refusals, the same bytes for the same choices, and a Preview
that shows the ``perturbation`` block before anything is written."""

from __future__ import annotations

import datetime
from html import escape

import pytest
from django.conf import settings
from django.urls import reverse
from django.utils import timezone

from annotation.models import Approval, BenchmarkConfig, GateResult
from annotation.studies.design_services import StudyCreateRequest, study_create
from corpora.services import dataset_import
from tests.support import api_as, keyword_run, page_as, rostered
from tests.test_projects_annotation import DESIGN as STUDY_DESIGN

pytestmark = pytest.mark.django_db
DEMO_STS = settings.BASE_DIR / "fixtures/sts/demo-sts.csv"
FIXED = datetime.datetime(2026, 3, 4, 5, 6, 7, tzinfo=datetime.UTC)


@pytest.fixture
def approved(researcher, monkeypatch):
    """A project with one approved random_keywords transformation, and the clock held still."""
    monkeypatch.setattr(timezone, "now", lambda: FIXED)
    sts = dataset_import(source=DEMO_STS, task="sts", name="demo-sts")
    study = study_create(
        actor=None,
        request=rostered(StudyCreateRequest(name="approved", runs=[keyword_run(sts, 1)], design=STUDY_DESIGN)),
    )
    gate = GateResult.objects.create(
        study=study, transformation="random_keywords", passed=True, evidence={"state": "passed"}, evidence_hash="0" * 64
    )
    Approval.objects.create(gate_result=gate, decision="approve", comment="ok", decided_by=researcher)
    return study.project.slug


def by_page(user, **fields) -> tuple[BenchmarkConfig | None, str]:
    """Export through the page: the config written (None when refused) and the page shown after."""
    before = set(BenchmarkConfig.objects.values_list("pk", flat=True))
    response = page_as(user).post(reverse("annotation:exports"), fields, follow=True)
    assert response.status_code == 200
    written = BenchmarkConfig.objects.exclude(pk__in=before)
    return written.first(), response.content.decode()


@pytest.mark.parametrize(
    ("sides", "scope"),
    [(["document"], ""), (["query", "both"], "documents"), (["document"], "relevant_documents"), ([], "")],
)
def test_the_page_writes_the_same_bytes_as_the_api_for_the_same_choices(researcher, approved, sides, scope):
    body = {"project": approved, "name": "sided", "sides": sides, **({"document_scope": scope} if scope else {})}
    response = api_as(researcher).post("/api/benchmark-configs/", body, format="json")
    assert response.status_code == 201, response.content
    api = BenchmarkConfig.objects.get(pk=response.json()["id"])
    texts = (api.yaml_text, api.json_text)
    api.delete()  # the same inputs at the same instant are the same config hash, which is unique
    page, html = by_page(researcher, project=approved, name="sided", sides=sides, document_scope=scope)
    assert page is not None, html
    assert (page.yaml_text, page.json_text) == texts
    expected = {"sides": sides, "document_scope": scope or "relevant_documents"} if sides else None
    assert page.document.get("perturbation") == expected


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"document_scope": "documents"}, "a document scope needs sides: name the sides the config's runs perturb"),
        ({"sides": ["corpus"]}, "perturbation.sides[0]: 'corpus' is not a side: choose among query, document, both"),
        (
            {"sides": ["query"], "document_scope": "all"},
            "perturbation.document_scope: expected 'relevant_documents' or 'documents', got 'all'",
        ),
    ],
)
def test_a_bad_combination_shows_the_service_message_and_writes_nothing(researcher, approved, fields, message):
    written, html = by_page(researcher, project=approved, name="kept", **fields)
    assert written is None and escape(message) in html
    # The form comes back as it was sent, for the user to mend.
    assert 'name="name" placeholder="optional" value="kept"' in html
    assert f'<option value="{approved}" selected' in html
    ticked = {side for side in ("query", "document", "both") if f'name="sides" value="{side}" checked' in html}
    assert ticked == set(fields.get("sides", [])) & {"query", "document", "both"}
    preview = page_as(researcher).get(reverse("annotation:exports"), {"preview": "1", "project": approved, **fields})
    html = preview.content.decode()
    assert escape(message) in html and 'id="export-preview"' not in html


def test_the_form_offers_sides_and_scope_and_the_preview_shows_the_block(researcher, approved):
    html = page_as(researcher).get(reverse("annotation:exports")).content.decode()
    for side in ("query", "document", "both"):
        assert f'name="sides" value="{side}"' in html
    assert 'name="document_scope"' in html and "Perturbed sides" in html and "Documents rewritten" in html
    chosen = {"preview": "1", "project": approved, "sides": ["document", "both"], "document_scope": "documents"}
    html = page_as(researcher).get(reverse("annotation:exports"), chosen).content.decode()
    assert 'id="export-preview"' in html and 'id="preview-perturbation"' in html
    assert "perturbation:\n  document_scope: documents\n  sides:\n  - document\n  - both\n" in html
    assert 'name="sides" value="document" checked' in html and 'name="sides" value="query" checked' not in html
    assert '<option value="documents" selected' in html
    plain = page_as(researcher).get(reverse("annotation:exports"), {"preview": "1", "project": approved})
    assert "perturbation" not in plain.content.decode().split('id="export-preview"')[1].split("</section>")[0]
    assert not BenchmarkConfig.objects.exists()
