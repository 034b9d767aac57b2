"""States that read right (issue 42).

The project page said its studies were published to the Argilla workspace named after it, while
each annotator rates in a workspace of their own; a second lock from a stale tab answered "Locked:
4 items and 2 controls drawn" as if it had just happened; a paraphrase run listed target languages
it never uses; a study an annotator had finished still offered "Rate in Argilla", where Argilla
then says the task is complete; and the baseline page sent annotators to "their Shiftlab home page"
for the password set on the page every other page calls "My Argilla account".
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from django.urls import reverse

from annotation.models import Rating, Study
from core.models import Project
from corpora.services import dataset_import
from tests.support import LIMIT
from tests.test_annotator_home import world  # noqa: F401 (a fixture)
from tests.test_loop_states_annotation import _draft
from transforms.services import transform_run_create

pytestmark = pytest.mark.django_db
DEMO_STS = "fixtures/sts/demo-sts.csv"


def words(response) -> str:
    return " ".join(response.content.decode().split())


def test_the_project_page_says_each_annotator_has_a_workspace_of_their_own(client, researcher):
    project = Project.objects.create(slug="ux-lab", open=True)
    client.force_login(researcher)
    page = words(client.get(reverse("project", args=[project.slug])))
    assert "published to the Argilla workspace" not in page
    assert "in a workspace of their own per study that holds only their batch" in page


def test_a_second_lock_says_when_and_by_whom_the_study_was_locked(client, researcher):
    draft = _draft(researcher, "twice")
    client.force_login(researcher)
    url = reverse("annotation:publish", args=[draft.pk])
    first = words(client.post(url, {"action": "lock"}, follow=True))
    study = Study.objects.get(pk=draft.pk)
    controls = study.items.exclude(kind="real").count()
    assert f"Locked: 4 items and {controls} controls drawn; the design is frozen." in first
    second = words(client.post(url, {"action": "lock"}, follow=True))  # the same button, from a stale tab
    when = study.locked_at.strftime("%Y-%m-%d %H:%M")
    assert f"Already locked on {when} by {researcher.username}: 4 items and {controls} controls; nothing changed." in (
        second
    )
    assert "Locked: 4 items" not in second
    assert Study.objects.get(pk=draft.pk).locked_at == study.locked_at


def test_a_run_shows_languages_only_for_a_transformation_that_uses_them(client, researcher, settings):
    sts = dataset_import(source=settings.BASE_DIR / DEMO_STS, task="sts", name="demo-sts")
    client.force_login(researcher)
    paraphrase = transform_run_create(
        dataset=sts, transformation="paraphrase", seed=1, limit=LIMIT, dispatch=False, languages=["es", "fr", "de"]
    )
    page = words(client.get(reverse("transforms:run", args=[paraphrase.pk])))
    assert "es, fr, de" not in page and "Seed, languages" not in page
    assert "the output keeps each text's language" in page
    translation = transform_run_create(
        dataset=sts, transformation="translation", seed=1, limit=LIMIT, dispatch=False, languages=["es", "fr", "de"]
    )
    page = words(client.get(reverse("transforms:run", args=[translation.pk])))
    assert "Seed, languages" in page and "es, fr, de" in page


def test_a_finished_study_tells_the_annotator_so_instead_of_offering_to_rate(client, world):  # noqa: F811
    at = datetime(2026, 1, 2, tzinfo=UTC)
    for item in world["items"][2:]:  # anna submits her last records
        Rating.objects.create(study_item=item, annotator=world["seat"], question="quality", value=4, submitted_at=at)
    client.force_login(world["anna"])
    page = words(client.get(reverse("home")))
    study_card, baseline_card = re.findall(r'<li class="card">(.*?)</li>', page)
    assert "You have finished this study." in study_card and "Rate in Argilla" not in study_card
    assert "Rate in Argilla" in baseline_card  # the baseline still has records to rate


def test_the_annotators_page_has_one_name(client, researcher, settings):
    from annotation.baselines.baseline_services import BaselineCreateRequest, baseline_create

    sts = dataset_import(source=settings.BASE_DIR / DEMO_STS, task="sts", name="demo-sts")
    baseline = baseline_create(
        actor=researcher,
        request=BaselineCreateRequest(name="humans", dataset=sts, task_type="sts", n_instances=3, seed=1),
    )
    client.force_login(researcher)
    page = words(client.get(reverse("evaluation:baseline", args=[baseline.pk])))
    assert "Shiftlab home page" not in page
    assert "on their <strong>My Argilla account</strong> page" in page
