"""What the study pages say of the state of things, as a researcher reads it after each step
(issue 31): the gate before any rating, a sync counted in records, the control check right after
publishing, publishing again with nobody selected, the Studies list after approval."""

import re
import uuid
from contextlib import contextmanager
from datetime import UTC, datetime

import pytest
from django.urls import reverse

from annotation.argilla import client as argilla_client
from annotation.models import Annotator, Study
from annotation.quality.controls import ItemKind
from annotation.quality.validation_services import study_validate
from core.roles import Role
from tests.support import keywords_approved, make_user, published_keyword_study

AT = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def study(db, researcher) -> Study:
    """A published study of 4 real items (+ controls), 2 raters per item; no ratings."""
    return published_keyword_study(
        researcher=researcher, name="loop", limit=4, items=4, batch_size=4, argilla_dataset_id=uuid.uuid4()
    )


def words(response) -> str:
    return " ".join(response.content.decode().split())


def test_the_gate_before_any_rating_says_there_is_nothing_to_gate(client, researcher, study):
    client.force_login(researcher)
    page = words(client.post(reverse("annotation:study", args=[study.pk]), {"action": "gate"}, follow=True))
    assert "ratings changed since the last validation" not in page
    assert "no ratings yet" in page and "sync" in page
    # Validated with no ratings: the gate runs and says what it lacks.
    study_validate(study=study, actor=researcher, estimate=False)
    page = words(client.post(reverse("annotation:study", args=[study.pk]), {"action": "gate"}, follow=True))
    assert "not enough ratings" in page and "ratings changed since" not in page


@contextmanager
def _no_connection(client):
    yield None


def test_sync_counts_records_not_the_ratings_they_hold(client, researcher, study, django_user_model, monkeypatch):
    anna = Annotator.objects.create(
        study=study, user=make_user(django_user_model, "anna", Role.ANNOTATOR), argilla_user_id=uuid.uuid4()
    )
    items = list(study.items.filter(kind=ItemKind.REAL)[:3])
    answers = {(item.external_id, q): 4 for item in items for q in ("quality", "fluency")}

    def responses_fetch(dataset_id, *, client):
        for (external_id, question), value in answers.items():
            yield argilla_client.ResponseRow(external_id, anna.argilla_user_id, question, value, "submitted", AT)

    monkeypatch.setattr("annotation.publishing.sync_services.argilla_connection", _no_connection)
    monkeypatch.setattr(argilla_client, "responses_fetch", responses_fetch)
    client.force_login(researcher)
    url = reverse("annotation:study", args=[study.pk])
    page = words(client.post(url, {"action": "sync"}, follow=True))
    # 3 records submitted, each with 2 questions answered: 3 records, 6 ratings.
    assert "Synced: 3 records newly submitted (6 ratings), 0 edited, 0 withdrawn; 0 ratings unchanged." in page
    answers[(items[0].external_id, "fluency")] = 2
    page = words(client.post(url, {"action": "sync"}, follow=True))
    assert "Synced: 0 records newly submitted, 1 edited (1 rating), 0 withdrawn; 5 ratings unchanged." in page


def test_control_check_right_after_publishing_waits_for_ratings(client, researcher, study, django_user_model):
    Annotator.objects.create(
        study=study, user=make_user(django_user_model, "anna", Role.ANNOTATOR), argilla_user_id=uuid.uuid4()
    )
    client.force_login(researcher)
    page = words(client.post(reverse("annotation:study", args=[study.pk]), {"action": "validate"}, follow=True))
    assert "insufficient" not in page
    assert "control checks: 1 waiting for ratings" in page
    assert re.search(r"<td>waiting for ratings \(0 of 2 control answers\)</td>", page)


def test_studies_list_shows_the_gate_and_the_approval(client, researcher, study):
    client.force_login(researcher)
    page = words(client.get(reverse("annotation:studies")))
    assert "awaiting ratings" in page
    keywords_approved(study, researcher, comment="meaning kept")
    page = words(client.get(reverse("annotation:studies")))
    row = re.search(rf'<tr> <td><a href="/annotation/studies/{study.pk}/">.*?</tr>', page).group(0)
    assert "random_keywords: passed, approved" in row
