"""One rating per item for the gate (``adaptive_gate_raters`` = 1) with the database: a declared share
of items, drawn before any rating, gets every rater; the others one; the gate waits for enough
distinct raters and the end-of-study gate does not call single-rated items "thin". Ratings are
written as a sync would (``Rating`` rows); Argilla is not involved."""

from collections import Counter

import pytest

from annotation.kinds import ItemKind
from annotation.models import Rating, Study
from annotation.science.design import DesignError, StudyDesign
from annotation.studies import adaptive_services
from annotation.studies.assignment_services import open_items, study_overlap_items, study_pull
from tests.test_pull_assignment import _raters, _study, _submit_open

pytestmark = pytest.mark.django_db


def test_the_design_declares_the_overlap_and_keeps_old_hashes():
    base = StudyDesign(adaptive=True, assignment="pull", batches_released=1, batch_size=5)
    for name in ("adaptive_overlap_share", "adaptive_min_raters", "adaptive_sequence", "gate_estimator"):
        assert name not in base.to_dict()
    one = base.revised(adaptive_gate_raters=1, adaptive_overlap_share=0.2)
    assert one.gate_raters == 1 and one.min_raters == 3 and not one.classic_gate
    assert base.classic_gate and base.min_raters == 2
    with pytest.raises(DesignError, match="adaptive_overlap_share must be above 0"):
        base.revised(adaptive_gate_raters=1)
    with pytest.raises(DesignError, match="adaptive_overlap_share is for a gate on one rating per item"):
        base.revised(adaptive_overlap_share=0.2)
    with pytest.raises(DesignError, match="adaptive_min_raters must be 0"):
        one.revised(adaptive_min_raters=1)
    with pytest.raises(DesignError, match="adaptive_sequence must be one of"):
        one.revised(adaptive_sequence="fast")
    with pytest.raises(DesignError, match="choose at least one LLM judge"):
        one.revised(gate_estimator="prediction_powered", adaptive_sequence="asymptotic", llm_judges=())
    with pytest.raises(DesignError, match="needs adaptive_sequence 'asymptotic'"):
        one.revised(gate_estimator="prediction_powered")
    # Long runs of one annotator's items would put their bias into the gate's first items.
    with pytest.raises(DesignError, match="batch_size × batches_released is 20, above 10"):
        one.revised(batch_size=10, batches_released=2)
    with pytest.raises(DesignError, match="is 10, above 5"):
        one.revised(batch_size=10, adaptive_sequence="asymptotic")
    assert one.revised(batch_size=10).batch_size == 10
    with pytest.raises(DesignError, match="set adaptive to true"):
        StudyDesign(adaptive_sequence="asymptotic")


# A pull study of 20 items, 2 raters per item, 4 annotators, the gate on one rating per item.
ONE_RATER = {"raters_per_item": 2, "adaptive": True, "adaptive_gate_raters": 1, "adaptive_overlap_share": 0.25}


def one_rater_study(researcher, django_user_model, tmp_path, **design) -> Study:
    study, _ = _study(researcher, django_user_model, tmp_path, ("anna", "bob", "cara", "dan"), **(ONE_RATER | design))
    return study


def everyone_rates(study: Study) -> None:
    """Every annotator submits what they hold, then pulls more, until nothing is left to hand out."""
    annotators = list(study.annotators.order_by("pk"))
    for minute in range(1, 30):
        if not sum([_submit_open(a, minute) for a in annotators]):
            study_pull(study=Study.objects.get(pk=study.pk))
            if not any(open_items(a) for a in annotators):
                break


def test_only_the_overlap_items_get_every_rater(researcher, django_user_model, tmp_path):
    # nothing settles in this test (α 0.01): it is about who rates what
    study = one_rater_study(researcher, django_user_model, tmp_path, adaptive_alpha=0.01)
    overlap = study_overlap_items(study, StudyDesign.from_dict({**study.design}))
    real = list(study.items.filter(kind=ItemKind.REAL).values_list("pk", flat=True))
    assert len(overlap) == 5 and overlap <= set(real)  # 25% of 20, drawn before any rating
    everyone_rates(study)
    raters = _raters(study)
    assert set(raters) == set(real)  # every item rated
    assert {item for item, who in raters.items() if len(who) == 2} == overlap
    assert Counter(len(who) for item, who in raters.items() if item not in overlap) == {1: 15}
    # 15 single ratings + 5 x 2: 25 of the 40 ratings of a design with 2 raters on every item
    assert sum(len(who) for who in raters.values()) == 25


def test_the_gate_decides_on_single_ratings_once_three_people_are_behind_them(researcher, django_user_model, tmp_path):
    study = one_rater_study(
        researcher, django_user_model, tmp_path, adaptive_alpha=0.5, adaptive_min_items=4, adaptive_sequence="agrapa"
    )
    anna = study.annotators.get(user__username="anna")
    _submit_open(anna, 1)  # anna alone: 4 items, all rated 4 by her
    [row] = adaptive_services.study_adaptive_rows(study=Study.objects.get(pk=study.pk))
    assert row.decision.state.value == "undecided" and row.outcome.raters == 1
    for minute, name in enumerate(("bob", "cara", "dan"), start=2):
        _submit_open(study.annotators.get(user__username=name), minute)
    result = adaptive_services.study_adaptive_check(study=Study.objects.get(pk=study.pk))
    [outcome] = adaptive_services.study_adaptive_observations(study=Study.objects.get(pk=study.pk)).values()
    assert outcome[1].raters >= 3
    decision = result.decisions[study.runs.get().transformation]
    assert decision.state.value == "pass"
    stored = Study.objects.get(pk=study.pk).sample_info["adaptive"][study.runs.get().transformation]
    assert stored["estimator"] == "human" and stored["sequence"] == "agrapa"
    assert "human-rated items from" in stored["basis"]
    assert Rating.objects.filter(study_item__study=study).exists()
