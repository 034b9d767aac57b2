"""Pull assignment (``design.assignment = "pull"``) with the database: nothing is drawn ahead; an
annotator who finished their released batch gets the next one from the items closest to completion,
so the work follows whoever rates. Ratings are written as a sync would (``Rating`` rows); Argilla is
not involved (publishing reads the same ``Assignment`` rows, see tests/test_annotation_isolation.py)."""

import json
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta

import pytest
from django.conf import settings

from annotation.kinds import ItemKind
from annotation.models import Annotator, Assignment, Rating, Study
from annotation.science.design import DesignContext, DesignError, StudyDesign, design_implications
from annotation.studies.assignment_services import annotator_release, open_items, study_assign, study_pull
from annotation.studies.control_pool import control_pool_read
from annotation.studies.design_services import StudyCreateRequest, study_create, study_lock
from core.models import AuditEvent
from core.roles import Role
from corpora.services import dataset_import
from tests.support import FEW_CONTROLS_OVERRIDE, make_user, rostered
from transforms.services import transform_run_create
from transforms.tasks import start_run

pytestmark = pytest.mark.django_db
AT = datetime(2026, 1, 1, tzinfo=UTC)


POSITIVES = [
    ("I would like to close my account.", "Please shut down my account."),
    ("How do I change my PIN?", "What is the way to set a new PIN?"),
    ("The train leaves at noon.", "At twelve o'clock the train departs."),
    ("She bought three apples at the market.", "At the market she purchased three apples."),
    ("My card was declined at the shop.", "The shop refused my card."),
]


def _pool(tmp_path):
    rows = [{"text_a": a, "text_b": b, "kind": "easy_positive"} for a, b in POSITIVES]
    path = tmp_path / "pool.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return control_pool_read(path)


def _study(researcher, django_user_model, tmp_path, names=("anna", "bob", "cara"), **design) -> tuple[Study, list]:
    sts = dataset_import(source=settings.BASE_DIR / "fixtures/sts/demo-sts.csv", task="sts", name="demo-sts")
    run = transform_run_create(dataset=sts, transformation="random_keywords", seed=1, limit=20, dispatch=False)
    start_run.delay(run.pk)  # eager: the run finishes here
    run.refresh_from_db()
    fields = {
        "items_per_transformation": 20,
        "raters_per_item": 2,
        "batch_size": 4,
        "controls_per_batch": 1,
        "min_control_ratings": 1,
        "llm_judges": (),
        "seed": 5,
        "batches_released": 1,
        "assignment": "pull",
        "detectability_override": FEW_CONTROLS_OVERRIDE,
    }
    draft = study_create(
        actor=researcher,
        request=rostered(StudyCreateRequest(name="pull", runs=[run], design=StudyDesign(**(fields | design)))),
    )
    study = study_lock(study=draft, control_pool=_pool(tmp_path))
    users = [make_user(django_user_model, name, Role.ANNOTATOR) for name in names]
    study_assign(study=study, users=users, actor=researcher)
    return Study.objects.get(pk=study.pk), users


def _submit_open(annotator: Annotator, minute: int) -> int:
    """The annotator submits every open item of their queue (controls too); returns real items."""
    done = {r for r in Rating.objects.filter(annotator=annotator).values_list("study_item_id", flat=True)}
    rows = annotator.assignments.filter(active=True).select_related("study_item").order_by("position")
    real = 0
    for a in rows:
        if a.study_item_id in done:
            continue
        for question in ("quality", "fluency"):
            Rating.objects.create(
                study_item=a.study_item,
                annotator=annotator,
                question=question,
                value=a.study_item.expected.get(question, 4),
                submitted_at=AT + timedelta(minutes=minute),
            )
        real += a.study_item.kind == ItemKind.REAL
    return real


def _raters(study: Study) -> dict[int, set[int]]:
    raters: dict[int, set[int]] = defaultdict(set)
    for item, annotator in Rating.objects.filter(
        study_item__study=study, study_item__kind=ItemKind.REAL, active=True
    ).values_list("study_item_id", "annotator_id"):
        raters[item].add(annotator)
    return raters


def test_pull_needs_a_released_batch():
    with pytest.raises(DesignError, match="set batches_released to at least 1"):
        StudyDesign(assignment="pull")
    with pytest.raises(DesignError, match="design.assignment must be one of fixed, pull"):
        StudyDesign(assignment="push", batches_released=1)


def test_the_first_pull_gives_each_item_its_raters_in_a_group(researcher, django_user_model, tmp_path):
    study, _ = _study(researcher, django_user_model, tmp_path)
    queues = {
        a.user.username: list(
            a.assignments.filter(active=True, study_item__kind=ItemKind.REAL).values_list("study_item_id", flat=True)
        )
        for a in study.annotators.select_related("user")
    }
    assert all(len(q) == 4 for q in queues.values())  # one batch each, nothing drawn ahead
    # anna and bob hold the same first four items (an item's raters come together), cara the next four
    assert set(queues["anna"]) == set(queues["bob"]) and not set(queues["cara"]) & set(queues["anna"])
    for annotator in study.annotators.all():
        controls = annotator.assignments.exclude(study_item__kind=ItemKind.REAL)
        assert controls.count() == 1 and set(controls.values_list("batch", flat=True)) == {0}


def test_the_fastest_annotators_take_the_work_and_every_item_ends_with_its_raters(
    researcher, django_user_model, tmp_path
):
    study, _ = _study(researcher, django_user_model, tmp_path)
    anna, bob, cara = (study.annotators.get(user__username=n) for n in ("anna", "bob", "cara"))
    minute = 0
    # anna rates whenever she has work; bob every second round; cara every fourth
    for round_ in range(200):
        progressed = False
        for annotator, every in ((anna, 1), (bob, 2), (cara, 4)):
            if round_ % every == 0 and open_items(annotator):
                minute += 1
                progressed |= _submit_open(annotator, minute) > 0
        study_pull(study=study)
        if not progressed and not any(open_items(a) for a in (anna, bob, cara)):
            break
    raters = _raters(study)
    real = set(study.items.filter(kind=ItemKind.REAL).values_list("pk", flat=True))
    assert set(raters) == real and all(len(v) == 2 for v in raters.values())
    loads = Counter(a for who in raters.values() for a in who)
    # the work followed the paces (a fixed draw gives 13, 13 and 14)
    assert loads[anna.pk] >= loads[bob.pk] > loads[cara.pk] and loads[anna.pk] > 14 > loads[cara.pk]
    for annotator in (anna, bob, cara):
        rows = list(annotator.assignments.select_related("study_item"))
        per_batch = Counter(a.batch for a in rows if a.study_item.kind != ItemKind.REAL)
        batches = {a.batch for a in rows}
        assert all(per_batch[b] == 1 for b in batches)  # every batch has its control
        controls = [a.study_item_id for a in rows if a.study_item.kind != ItemKind.REAL]
        assert len(controls) == len(set(controls))  # never the same control twice
    assert AuditEvent.objects.filter(verb="study.assignment.pull").exists()


def test_settled_items_are_not_handed_out_and_a_rejected_raters_items_go_back_to_the_pool(
    researcher, django_user_model, tmp_path
):
    study, _ = _study(researcher, django_user_model, tmp_path)
    anna, bob, cara = (study.annotators.get(user__username=n) for n in ("anna", "bob", "cara"))
    _submit_open(anna, 1)
    transformation = study.runs.get().transformation
    Study.objects.filter(pk=study.pk).update(
        sample_info={**study.sample_info, "adaptive": {transformation: {"state": "pass"}}}
    )
    assert study_pull(study=study) == {}  # settled: anna finished, but nothing more to give
    Study.objects.filter(pk=study.pk).update(sample_info={**study.sample_info, "adaptive": {}})
    first = set(open_items(bob))
    Annotator.objects.filter(pk=bob.pk).update(status=Annotator.Status.REJECTED)
    result = annotator_release(annotator=Annotator.objects.get(pk=bob.pk), reason="rejected", actor=researcher)
    # anna (done with her batch) takes bob's items at once, first of all the ones she lacks most
    assert result.given == {"anna": 4} and result.unplaced == 0
    assert not Assignment.objects.filter(annotator=bob, active=True).exists()
    anna_open = set(open_items(anna))
    assert anna_open.isdisjoint(first)  # she held those already: never the same item twice
    # cara's items had one rater; anna completes them first (closest to completion)
    assert anna_open == set(
        cara.assignments.filter(active=True, study_item__kind=ItemKind.REAL).values_list("study_item_id", flat=True)
    )


def test_an_item_whose_first_two_raters_agree_gets_no_third_rater(researcher, django_user_model, tmp_path):
    """``adaptive_gate_raters`` = 2 of 3: an item whose first two counted raters agree (within 1
    point on every question) is complete for the gate and never handed to a third rater; a
    contested one is, first of all (it has the most raters)."""
    study, _ = _study(
        researcher,
        django_user_model,
        tmp_path,
        ("anna", "bob", "cara", "dan"),
        raters_per_item=3,
        adaptive=True,
        adaptive_gate_raters=2,
    )
    anna, bob, cara, dan = (study.annotators.get(user__username=n) for n in ("anna", "bob", "cara", "dan"))
    first = sorted(open_items(anna))
    assert set(open_items(bob)) == set(first) and len(first) == 4  # two raters, not three, to begin with
    contested = first[:2]
    for annotator in (anna, bob, cara, dan):
        _submit_open(annotator, 1)
    # bob's quality answers on the first two items are 3 points above anna's (4): contested
    Rating.objects.filter(annotator=bob, study_item_id__in=contested, question="quality").update(value=1)
    study_pull(study=study)
    given = set(open_items(cara)) | set(open_items(dan))
    assert set(contested) <= given  # the contested items get their third rater first
    assert not given & set(first[2:])  # the agreeing ones never do
    assert not set(open_items(anna)) & set(first)


def test_gate_raters_need_adaptive_pull_and_leave_old_design_hashes_alone():
    base = StudyDesign(adaptive=True, assignment="pull", batches_released=1)
    assert "adaptive_gate_raters" not in base.to_dict() and base.gate_raters == 3  # old hashes kept
    fewer = base.revised(adaptive_gate_raters=2)
    assert fewer.to_dict()["adaptive_gate_raters"] == 2 and fewer.gate_raters == 2
    assert fewer.content_hash != base.content_hash
    with pytest.raises(DesignError, match="from 1 to raters_per_item - 1"):
        base.revised(adaptive_gate_raters=3)
    with pytest.raises(DesignError, match="needs adaptive stopping with pull assignment"):
        StudyDesign(adaptive_gate_raters=2)
    # Before any rating: no decision before 10 items x 2 gate raters x 2 questions = 40 ratings, and
    # at best 2 of the 3 raters' ratings of the items before it settles are spent.
    implied = design_implications(fewer, DesignContext({"paraphrase": 100}))
    assert implied.adaptive_floor_ratings == 10 * 2 * 2
    assert implied.adaptive_best_saving == pytest.approx(1 - implied.adaptive_best_items * 2 / 3 / 100)
