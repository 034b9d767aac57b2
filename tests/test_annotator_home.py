"""An annotator's Shiftlab home (issue 31): their studies and baselines, how much of their own
work they submitted, where they rate, and the way to set or reset their own Argilla password;
and nothing else: not which records are controls, what anything is expected to be, what an LLM
estimated, what others answered, nor another annotator's work."""

import re
import uuid
from datetime import UTC, datetime

import pytest
from django.urls import reverse

from annotation.baselines.baseline_services import BaselineCreateRequest, baseline_create
from annotation.kinds import ItemKind
from annotation.models import Annotator, Assignment, BaselineAnnotator, BaselineAnswer, Rating, Study
from core.roles import Role
from tests.support import make_user, published_keyword_study

pytestmark = pytest.mark.django_db
AT = datetime(2026, 1, 1, tzinfo=UTC)
SECRET_ESTIMATE = 2.71828  # an LLM estimate nobody but researchers may read
SECRET_REPLY = "LLM-REPLY-ONLY-RESEARCHERS-READ"


@pytest.fixture
def world(researcher, django_user_model):
    study = published_keyword_study(
        researcher=researcher, name="home", limit=4, items=4, batch_size=4, argilla_dataset_id=uuid.uuid4()
    )
    anna = make_user(django_user_model, "anna", Role.ANNOTATOR)
    bob = make_user(django_user_model, "bobby-other", Role.ANNOTATOR)
    seats = {}
    for user in (anna, bob):
        seat = Annotator.objects.create(
            study=study, user=user, argilla_user_id=uuid.uuid4(), argilla_dataset_id=uuid.uuid4()
        )
        seat.control_status = "failed"
        seat.save(update_fields=["control_status"])
        seats[user.username] = seat
    items = list(study.items.order_by("position"))
    for k, item in enumerate(items):
        item.llm_estimates = {"quality": {"estimate": SECRET_ESTIMATE}}
        item.save(update_fields=["llm_estimates"])
        Assignment.objects.create(annotator=seats["anna"], study_item=item, position=k, batch=k // 4)
    for item in items[:2]:  # anna submitted 2 of her records, bob all of his
        Rating.objects.create(study_item=item, annotator=seats["anna"], question="quality", value=4, submitted_at=AT)
    for item in items:
        Rating.objects.create(
            study_item=item, annotator=seats["bobby-other"], question="quality", value=1, submitted_at=AT
        )
    sts = study.runs.first().dataset
    baseline = baseline_create(
        actor=researcher,
        request=BaselineCreateRequest(name="home-b", dataset=sts, task_type="sts", n_instances=3, seed=1),
    )
    instances = list(baseline.instances.order_by("position"))
    BaselineStudy = type(baseline)
    BaselineStudy.objects.filter(pk=baseline.pk).update(status="published")
    BaselineAnnotator.objects.create(
        study=baseline, user=anna, argilla_dataset_id=uuid.uuid4(), keys=[i.key for i in instances]
    )
    BaselineAnswer.objects.create(
        instance=instances[0], rater="anna", source="human", user=anna, value=3.0, submitted_at=AT
    )
    BaselineAnswer.objects.create(
        instance=instances[1], rater="llm:default", source="llm", value=1.0, raw=SECRET_REPLY, submitted_at=AT
    )
    return {"study": study, "items": items, "anna": anna, "seat": seats["anna"], "baseline": baseline}


def test_the_annotator_home_shows_their_own_work_and_where_they_rate(client, world):
    client.force_login(world["anna"])
    page = " ".join(client.get(reverse("home")).content.decode().split())
    work = re.search(r'<ul class="work-list" id="my-work">.*?</ul>', page).group(0)
    n = len(world["items"])  # 4 items and the controls among them, all in anna's queue (batch 0 and 1)
    batches = "1 batch" if n <= 4 else "2 batches"
    assert (
        "Study home v1" in work and f"2 of {n} records submitted ({batches} given to you so far): {n - 2} to go" in work
    )
    assert 'href="http://' in work and f"/dataset/{world['seat'].argilla_dataset_id}/annotation-mode" in work
    assert "Baseline home-b" in work and "1 of 3 records submitted: 2 to go" in work
    assert f'href="{reverse("annotation:my-argilla")}"' in page and "Set or reset my Argilla password" in page


def test_the_annotator_home_never_shows_what_only_researchers_may_read(client, world):
    client.force_login(world["anna"])
    page = client.get(reverse("home")).content.decode()
    lowered = page.lower()
    for hidden in ("control", "easy", "expected", "gold", "failed", "estimate", "bobby-other"):
        assert hidden not in lowered, hidden
    assert str(SECRET_ESTIMATE) not in page and SECRET_REPLY not in page
    for item in world["items"]:
        assert item.text_b not in page and item.text_a not in page  # the texts are read in Argilla only
    for instance in world["baseline"].instances.all():
        assert str(instance.gold) not in re.sub(r"\d{4}-\d\d-\d\d", "", page.split('id="my-work"')[1])
    assert Study.objects.get(pk=world["study"].pk).items.filter(kind=ItemKind.EASY_POSITIVE).exists()


def test_an_annotator_with_nothing_to_rate_is_told_so(client, django_user_model, db):
    client.force_login(make_user(django_user_model, "newcomer", Role.ANNOTATOR))
    page = " ".join(client.get(reverse("home")).content.decode().split())
    assert "Nothing to rate yet" in page and "Set or reset my Argilla password" in page
