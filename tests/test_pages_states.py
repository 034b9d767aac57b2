"""What the study and dataset pages say about the state of things (issue 20): the gate's three
states and the decisions each allows, what a sync or a validation did, import errors in the page's
own words with the form kept, dataset sources without server paths, admin names, the α header."""

import re
import uuid
from contextlib import contextmanager
from datetime import UTC, datetime

import pytest
from celery.result import AsyncResult
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from annotation.argilla import client as argilla_client
from annotation.kinds import ItemKind
from annotation.models import Annotator, Rating, Study
from annotation.studies.gate_services import approval_decide, study_gate
from annotation.studies.validation_services import study_validate
from annotation.tasks import sync_study
from core.errors import ShiftlabError
from core.roles import Role
from corpora.models import DatasetImport
from corpora.services import dataset_import
from tests.support import make_user, published_keyword_study

AT = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def study(db, researcher) -> Study:
    """A published study of 4 real items (+ controls) declaring 2 raters per item; no ratings."""
    return published_keyword_study(
        researcher=researcher, name="states", limit=4, items=4, batch_size=4, argilla_dataset_id=uuid.uuid4()
    )


def rate(study: Study, django_user_model, name: str, *, fluency: int = 4, controls_right: bool = True) -> Annotator:
    """Ratings of every item by a new annotator, written as a sync would."""
    user = make_user(django_user_model, name, Role.ANNOTATOR)
    annotator = Annotator.objects.create(study=study, user=user, argilla_user_id=uuid.uuid4())
    for item in study.items.all():
        for question in ("quality", "fluency"):
            if item.kind == ItemKind.REAL:
                value = fluency if question == "fluency" else 4
            else:
                value = item.expected.get(question, 4) if controls_right else 3
            Rating.objects.create(study_item=item, annotator=annotator, question=question, value=value, submitted_at=AT)
    return annotator


def gate_page(client, study: Study) -> str:
    return " ".join(client.get(reverse("annotation:gate", args=[study.pk])).content.decode().split())


@pytest.mark.parametrize(
    ("raters", "state", "badge", "buttons"),
    [
        ((), "not enough ratings", "pending", []),  # 0 of 4 items × 2 raters count
        (("anna",), "not enough ratings", "pending", []),  # 4 of 8 count
        (("anna", "bob"), "passed", "ok", ["approve", "reject"]),
        (("anna", "carl"), "failed", "failed", ["reject"]),  # carl rates fluency 1: mean 2.5 < 3
    ],
)
def test_gate_page_shows_three_states_and_only_the_decisions_each_allows(
    client, researcher, study, django_user_model, raters, state, badge, buttons
):
    for name in raters:
        rate(study, django_user_model, name, fluency=1 if name == "carl" else 4)
    study_validate(study=study, actor=researcher, estimate=False)
    [gate] = study_gate(study=study, actor=researcher)
    client.force_login(researcher)
    page = gate_page(client, study)
    assert f'<span class="badge {badge}">{state}</span>' in page
    assert re.findall(r'name="decision" value="(\w+)"', page) == buttons
    assert gate.evidence["state"] == state.replace(" ", "_") and gate.passed == (state == "passed")
    if state == "not enough ratings":
        counted = 4 * len(raters)
        assert gate.evidence["ratings_missing"] == 8 - counted
        assert (
            f"{8 - counted} more ratings per question needed (the design asks for 4 items × 2 raters = 8; "
            f"{counted} count)"
        ) in page
        with pytest.raises(ShiftlabError, match="not enough ratings to decide on"):
            approval_decide(gate_result=gate, decision="reject", comment="too early", actor=researcher)
        assert "failed" not in page.split('id="gate-random_keywords"')[1]


@contextmanager
def _no_connection(client):
    yield None


def test_sync_says_what_it_found_and_the_study_page_keeps_it(client, researcher, study, django_user_model, monkeypatch):
    anna = Annotator.objects.create(
        study=study, user=make_user(django_user_model, "anna", Role.ANNOTATOR), argilla_user_id=uuid.uuid4()
    )
    items = list(study.items.filter(kind=ItemKind.REAL)[:3])
    answers = {(item.external_id, q): 4 for item in items for q in ("quality", "fluency")}

    def responses_fetch(dataset_id, *, client):
        for (external_id, question), value in answers.items():
            yield argilla_client.ResponseRow(external_id, anna.argilla_user_id, question, value, "submitted", AT)

    monkeypatch.setattr("annotation.studies.sync_services.argilla_connection", _no_connection)
    monkeypatch.setattr(argilla_client, "responses_fetch", responses_fetch)
    client.force_login(researcher)
    url = reverse("annotation:study", args=[study.pk])
    # No broker here (eager Celery): the sync runs in the request and the message says what it found.
    page = client.post(url, {"action": "sync"}, follow=True).content.decode()
    # 3 records, each with 2 questions answered (issue 31: records, not the ratings they hold).
    assert "Synced: 3 records newly submitted (6 ratings), 0 edited, 0 withdrawn; 0 ratings unchanged." in page
    answers[(items[0].external_id, "fluency")] = 2
    page = client.post(url, {"action": "sync"}, follow=True).content.decode()
    assert "Synced: 0 records newly submitted, 1 edited (1 rating), 0 withdrawn; 5 ratings unchanged." in page
    study.refresh_from_db()
    assert study.last_sync == {
        "created": 0,
        "updated": 1,
        "withdrawn": 0,
        "unchanged": 5,
        "stale": 0,
        "invalid": 0,
        "nul_stripped": 0,
        "ignored_users": 0,
        "ignored_records": 0,
        "frozen_ignored": 0,
        "records_created": 0,
        "records_updated": 1,
        "records_withdrawn": 0,
    }
    assert re.search(r"last sync \d{4}-\d\d-\d\d [\d:]+: 0 records newly submitted, 1 edited \(1 rating\)", page)
    # With a broker the task is only queued: the page says so, and keeps showing the last result.
    monkeypatch.setattr(sync_study, "delay", lambda pk: AsyncResult("queued-task"))
    page = client.post(url, {"action": "sync"}, follow=True).content.decode()
    assert "Sync queued: a worker runs it" in page and "1 edited (1 rating), 0 withdrawn; 5 ratings unchanged" in page


def test_validate_reports_its_counts(client, researcher, study, django_user_model, django_capture_on_commit_callbacks):
    rate(study, django_user_model, "anna")
    rate(study, django_user_model, "sloppy", controls_right=False)
    client.force_login(researcher)
    with django_capture_on_commit_callbacks(execute=True):  # no broker: the validation job runs in the request
        client.post(reverse("annotation:study", args=[study.pk]), {"action": "validate"})
    page = client.get(reverse("annotation:study", args=[study.pk]))
    assert (
        "Validated: 0 flags raised, 0 removed; raters rejected: sloppy (failed controls); "
        "control checks: 1 failed, 1 passed; LLM estimates for 0 items."
    ) in page.content.decode()


def test_study_page_reads_krippendorff_alpha_and_admin_says_studies(client, admin_client, researcher, study):
    client.force_login(researcher)
    page = client.get(reverse("annotation:study", args=[study.pk])).content.decode()
    # Table headers are upper-cased by the style sheet; the α keeps its case (upper-cased it reads A).
    assert """<th class="num">Krippendorff's <span class="symbol">α</span> (ordinal)</th>""" in page
    assert "th .symbol { text-transform: none; }" in (settings.BASE_DIR / "static/shiftlab.css").read_text()
    admin = admin_client.get("/admin/").content.decode()
    assert "Studies" in admin and "Baseline studies" in admin and "Studys" not in admin


HEADERLESS = b"A girl is styling her hair.,A girl is brushing her hair.,2.5\nA man plays.,A man sings.,1.0\n"


@pytest.mark.django_db(transaction=True)  # the import is queued with transaction.on_commit
def test_refused_upload_speaks_the_page_s_language_and_keeps_the_form(client, researcher):
    client.force_login(researcher)
    form = {"name": "stsb-en", "task": "sts", "language": "de", "split": "dev", "field_map": "score=similarity"}
    response = client.post(reverse("corpora:list"), {"files": SimpleUploadedFile("stsb.csv", HEADERLESS), **form})
    page = response.content.decode()
    assert "Nothing was imported" in page
    # The line named is the line quoted (the first line was taken for the header).
    assert (
        "stsb.csv, line 1: missing column(s) sentence1, sentence2, score (found: A girl is styling her hair., "
        "A girl is brushing her hair., 2.5). Name the columns of a headerless file with the Columns field, "
        "or map a column with the Column mapping field (FIELD=COLUMN)."
    ) in page
    assert "--columns" not in page and "--map" not in page and str(settings.MEDIA_ROOT) not in page
    for name, value in form.items():
        assert re.search(rf'name="{name}"[^>]*value="{re.escape(value)}"|<option value="{value}" selected', page), name
    # The import page of the failed job offers the same settings again.
    job = DatasetImport.objects.get(name="stsb-en")
    assert job.status == DatasetImport.Status.FAILED
    assert (
        f'href="/datasets/?again={job.pk}#upload-form"'
        in client.get(reverse("corpora:import", args=[job.pk])).content.decode()
    )
    again = client.get(reverse("corpora:list"), {"again": job.pk}).content.decode()
    assert 'name="name" value="stsb-en"' in again and 'name="field_map" value="score=similarity"' in again
    # Named, the columns import, and the dataset's page shows the file's name, not where it was stored.
    response = client.post(
        reverse("corpora:list"),
        {
            "files": SimpleUploadedFile("stsb.csv", HEADERLESS),
            **form,
            "field_map": "",
            "columns": "sentence1,sentence2,score",
        },
        follow=True,
    )
    assert "Imported 2 items into stsb-en" in response.content.decode()
    detail = client.get(reverse("corpora:detail", args=["stsb-en"])).content.decode()
    assert "<code>stsb.csv</code> (csv)" in detail and str(settings.MEDIA_ROOT) not in detail


def test_dataset_page_shows_the_file_name_of_a_server_import(client, researcher):
    dataset_import(source=settings.BASE_DIR / "fixtures/sts/demo-sts.csv", task="sts", name="demo-sts")
    client.force_login(researcher)
    detail = client.get(reverse("corpora:detail", args=["demo-sts"])).content.decode()
    assert "<code>demo-sts.csv</code> (csv)" in detail and str(settings.BASE_DIR) not in detail
