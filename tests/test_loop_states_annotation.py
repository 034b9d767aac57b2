"""What the study pages say of the state of things, as a researcher reads it after each step
(issue 31): the gate before any rating, the control check right after publishing, the publish
step (lock only after a warning, the items drawn shown), publishing with nobody selected, the
Studies list after approval. A sync counted in records: tests/test_pages_states.py."""

import html
import re
import uuid
from datetime import UTC, datetime

import pytest
from django.conf import settings
from django.urls import reverse

from annotation.kinds import ItemKind
from annotation.models import Annotator, Study
from annotation.science.design import StudyDesign
from annotation.studies.design_services import StudyCreateRequest, study_create
from annotation.studies.validation_services import study_validate
from core.roles import Role
from corpora.services import dataset_import
from tests.support import (
    FEW_CONTROLS_OVERRIDE,
    eager_keyword_run,
    keywords_approved,
    make_user,
    published_keyword_study,
    rostered,
)

AT = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def study(db, researcher) -> Study:
    """A published study of 4 real items (+ controls), 2 raters per item; no ratings."""
    return published_keyword_study(
        researcher=researcher, name="loop", limit=4, items=4, batch_size=4, argilla_dataset_id=uuid.uuid4()
    )


def words(response) -> str:
    return " ".join(html.unescape(response.content.decode()).split())


def test_the_gate_before_any_rating_says_there_is_nothing_to_gate(client, researcher, study):
    client.force_login(researcher)
    page = words(client.post(reverse("annotation:study", args=[study.pk]), {"action": "gate"}, follow=True))
    assert "ratings changed since the last validation" not in page
    assert "no ratings yet" in page and "sync" in page
    # Validated with no ratings: the gate runs and says what it lacks.
    study_validate(study=study, actor=researcher, estimate=False)
    page = words(client.post(reverse("annotation:study", args=[study.pk]), {"action": "gate"}, follow=True))
    assert "not enough ratings" in page and "ratings changed since" not in page


def test_control_check_right_after_publishing_waits_for_ratings(
    client, researcher, study, django_user_model, django_capture_on_commit_callbacks
):
    Annotator.objects.create(
        study=study, user=make_user(django_user_model, "anna", Role.ANNOTATOR), argilla_user_id=uuid.uuid4()
    )
    client.force_login(researcher)
    with django_capture_on_commit_callbacks(execute=True):  # no broker: the validation job runs in the request
        client.post(reverse("annotation:study", args=[study.pk]), {"action": "validate"})
    page = words(client.get(reverse("annotation:study", args=[study.pk])))
    assert "insufficient" not in page
    assert "control checks: 1 waiting for ratings" in page
    assert re.search(r"<td data-label=\"Control check\">waiting for ratings \(0 of 2 control answers\)</td>", page)


def test_studies_list_shows_the_gate_and_the_approval(client, researcher, study):
    client.force_login(researcher)
    page = words(client.get(reverse("annotation:studies")))
    assert "awaiting ratings" in page
    keywords_approved(study, researcher, comment="meaning kept")
    page = words(client.get(reverse("annotation:studies")))
    row = re.search(rf'<tr> <td><a href="/annotation/studies/{study.pk}/">.*?</tr>', page).group(0)
    assert "random_keywords: passed, approved" in row


def _draft(researcher, name: str) -> Study:
    """A draft study (not locked) of a random-keywords run over 4 demo STS pairs."""
    sts = dataset_import(source=settings.BASE_DIR / "fixtures/sts/demo-sts.csv", task="sts", name="demo-sts")
    design = StudyDesign(
        items_per_transformation=4,
        raters_per_item=2,
        batch_size=4,
        controls_per_batch=2,
        min_control_ratings=2,
        llm_judges=(),
        seed=3,
        detectability_override=FEW_CONTROLS_OVERRIDE,
    )
    return study_create(
        actor=researcher,
        request=rostered(StudyCreateRequest(name=name, runs=[eager_keyword_run(sts, limit=4)], design=design)),
    )


def test_a_draft_is_locked_only_after_a_warning_and_nothing_is_sent_without_annotators(client, researcher):
    draft = _draft(researcher, "confirm")
    client.force_login(researcher)
    study_page = words(client.get(reverse("annotation:study", args=[draft.pk])))
    publish_url = reverse("annotation:publish", args=[draft.pk])
    # The study page no longer publishes (nor locks) in one click: it leads to the publish step.
    assert f'href="{publish_url}">Lock and publish…</a>' in study_page
    assert 'value="publish"' not in study_page and 'value="lock"' not in study_page
    page = words(client.get(publish_url))
    assert "Locking cannot be undone." in page and "Lock the design and draw items" in page
    assert 'id="publish-form"' not in page  # nothing to publish before the items are drawn
    # Publishing a draft with nobody ticked sends nothing, says why, and does not lock it.
    page = words(client.post(publish_url, {"action": "publish"}, follow=True))
    assert "Nothing was sent: choose the annotators of the project to publish to" in page
    assert Study.objects.get(pk=draft.pk).status == Study.Status.DRAFT


def test_after_locking_the_researcher_sees_the_items_and_controls_drawn(client, researcher, django_user_model):
    draft = _draft(researcher, "drawn")
    make_user(django_user_model, "anna", Role.ANNOTATOR)
    client.force_login(researcher)
    publish_url = reverse("annotation:publish", args=[draft.pk])
    page = words(client.post(publish_url, {"action": "lock"}, follow=True))
    study = Study.objects.get(pk=draft.pk)
    items = list(study.items.all())
    real = [i for i in items if i.kind == ItemKind.REAL]
    controls = [i for i in items if i.kind != ItemKind.REAL]
    assert study.status == Study.Status.LOCKED and len(real) == 4 and controls
    assert f"Locked: 4 items and {len(controls)} controls drawn; the design is frozen." in page
    assert f"Drawn: {len(items)} items" in page
    assert page.count('<span class="badge draft">control: easy') == len(controls)
    assert page.count('<span class="badge ok">item</span>') == 4
    for item in items:
        assert " ".join(item.text_b.split()) in page
    assert 'type="checkbox" name="annotators"' in page and "Publish to Argilla" in page


def test_annotators_never_reach_the_publish_step(client, study, django_user_model):
    anna = make_user(django_user_model, "anna", Role.ANNOTATOR)
    client.force_login(anna)
    response = client.get(reverse("annotation:publish", args=[study.pk]))
    assert response.status_code in (302, 403) and "control:" not in response.content.decode()


@pytest.mark.services
def test_publish_again_with_nobody_selected_says_nothing_new_was_sent(
    client, researcher, django_user_model, argilla_server, settings, django_capture_on_commit_callbacks
):
    settings.ARGILLA_API_URL, settings.ARGILLA_API_KEY = argilla_server.url, argilla_server.api_key
    draft = _draft(researcher, "again")
    names = ("ls-ann-a", "ls-ann-b")  # unlike other tests': the Argilla server is shared per session
    users = [make_user(django_user_model, name, Role.ANNOTATOR) for name in names]
    client.force_login(researcher)
    publish_url = reverse("annotation:publish", args=[draft.pk])
    client.post(publish_url, {"action": "lock"})
    with django_capture_on_commit_callbacks(execute=True):  # no broker: the publish job runs in the request
        answer = client.post(publish_url, {"action": "publish", "annotators": [str(u.pk) for u in users]})
    page = words(client.get(answer.url))
    records = Study.objects.get(pk=draft.pk).items.count() * 2  # each item to both (2 raters per item)
    assert f"Published to ls-ann-a, ls-ann-b: the annotators' Argilla datasets hold {records} records." in page
    with django_capture_on_commit_callbacks(execute=True):
        answer = client.post(publish_url, {"action": "publish"})
    page = words(client.get(answer.url))
    assert "No annotator was selected, so nobody was added and no new work was sent" in page
    assert f"hold {records} records, as before" in page and "Published to" not in page
