"""The pages of a study read a fixed number of queries, whatever the number of its annotators
(issue 41 item 4): the annotator quality page and the study page read ratings, checks and
agreement in a few set-wise queries, never one per annotator or per rating."""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from annotation.kinds import ItemKind
from annotation.models import Annotator, Rating, RatingRevision, Study
from core.roles import Role
from tests.support import make_user, page_as, published_keyword_study

pytestmark = pytest.mark.django_db
START = datetime(2026, 1, 1, 9, tzinfo=UTC)


def rated_by_new_annotators(study: Study, django_user_model, names: list[str]) -> None:
    """Annotators who rated every item, written as a sync writes them: a rating and its first
    revision per question; controls answered as expected, real items by a per-rater rule."""
    for r, name in enumerate(names):
        annotator = Annotator.objects.create(study=study, user=make_user(django_user_model, name, Role.ANNOTATOR))
        for n, item in enumerate(study.items.order_by("position")):
            for question in ("quality", "fluency"):
                if item.kind == ItemKind.REAL:
                    value = 1 + (item.position * 7 + r * (question == "fluency")) % 5
                else:
                    value = item.expected.get(question, 4)
                at = START + timedelta(seconds=30 * n + r)
                rating = Rating.objects.create(
                    study_item=item, annotator=annotator, question=question, value=value, submitted_at=at
                )
                RatingRevision.objects.create(rating=rating, value=value, status="submitted", argilla_updated_at=at)


def queries_of(client, url: str) -> int:
    client.get(url)  # once before: what the first request alone reads (the session, caches) is not counted
    with CaptureQueriesContext(connection) as queries:
        assert client.get(url).status_code == 200
    return len(queries)


def test_study_pages_read_as_many_queries_for_20_annotators_as_for_3(researcher, django_user_model):
    study = published_keyword_study(researcher=researcher, name="queries", limit=12, items=12, batch_size=6)
    client = page_as(researcher)
    pages = [reverse("annotation:annotators", args=[study.pk]), reverse("annotation:study", args=[study.pk])]

    rated_by_new_annotators(study, django_user_model, [f"rater-{n:02d}" for n in range(3)])
    few = {url: queries_of(client, url) for url in pages}
    page = client.get(pages[0]).content.decode()
    assert "rater-02" in page and page.count("<svg") == 3  # the figures are drawn: the ratings were read

    rated_by_new_annotators(study, django_user_model, [f"rater-{n:02d}" for n in range(3, 20)])
    many = {url: queries_of(client, url) for url in pages}
    assert "rater-19" in client.get(pages[0]).content.decode()
    assert many == few, (few, many)
