"""Adaptive stopping with the database: a study of a random-keywords run (no LLM), assignments
drawn by ``study_assign``, ratings written as a sync would (``Rating`` rows), and Argilla replaced
by a fake ``study_argilla_reconcile`` (monkeypatched in ``annotation.studies.adaptive_services``) that
records its calls and, like the real one, forgets the record ids of ended assignments."""

import uuid
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.conf import settings
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from annotation import tasks
from annotation.argilla import ArgillaUnavailable
from annotation.kinds import ItemKind
from annotation.models import Annotator, Assignment, Rating, Study
from annotation.science.design import StudyDesign
from annotation.science.gating import GateState, gate_state_of
from annotation.studies import adaptive_services
from annotation.studies.assignment_services import study_assign
from annotation.studies.design_services import StudyCreateRequest, study_create, study_lock
from annotation.studies.gate_services import study_gate
from annotation.studies.sync_services import SyncResult
from annotation.studies.validation_services import study_validate
from core.models import AuditEvent
from core.roles import Role
from corpora.services import dataset_import
from tests.support import FEW_CONTROLS_OVERRIDE, make_user, rostered
from transforms.services import transform_run_create
from transforms.tasks import start_run

pytestmark = pytest.mark.django_db
AT = datetime(2026, 1, 1, tzinfo=UTC)
COMPLETE, PARTIAL = 8, 2  # items both raters submit; items only one of them submits


class FakeArgilla:
    def __init__(self, error: Exception | None = None):
        self.calls, self.error = [], error

    def __call__(self, *, study, client, roles=None):
        self.calls.append(study.pk)
        if self.error is not None:
            raise self.error
        Assignment.objects.filter(annotator__study=study, active=False).update(argilla_record_id=None)
        return 0, {}


def _study(researcher, django_user_model, *, adaptive: bool) -> Study:
    sts = dataset_import(source=settings.BASE_DIR / "fixtures/sts/demo-sts.csv", task="sts", name="demo-sts")
    run = transform_run_create(dataset=sts, transformation="random_keywords", seed=1, limit=20, dispatch=False)
    start_run.delay(run.pk)  # eager: the run finishes here
    run.refresh_from_db()
    design = StudyDesign(
        items_per_transformation=20,
        raters_per_item=2,
        batch_size=10,
        controls_per_batch=2,
        min_control_ratings=2,
        llm_judges=(),
        seed=3,
        adaptive=adaptive,
        adaptive_alpha=0.5,  # few items in a test: settles after 4 perfect items
        adaptive_min_items=4,
        detectability_override=FEW_CONTROLS_OVERRIDE,
    )
    users = [make_user(django_user_model, name, Role.ANNOTATOR) for name in ("anna", "bob", "cara")]
    study = study_lock(
        study=study_create(
            actor=researcher, request=rostered(StudyCreateRequest(name="adaptive", runs=[run], design=design))
        )
    )
    study_assign(study=study, users=users, actor=researcher)
    Study.objects.filter(pk=study.pk).update(published_at=timezone.now(), status=Study.Status.PUBLISHED)
    # Every assignment is "in Argilla" (a record id), so the fake can show what it removed.
    for assignment in Assignment.objects.filter(annotator__study=study):
        Assignment.objects.filter(pk=assignment.pk).update(argilla_record_id=uuid.UUID(int=assignment.pk))
    _rate(study)
    return Study.objects.get(pk=study.pk)


def _rate(study: Study) -> None:
    """Controls answered as expected by everyone; the first COMPLETE real items rated 5 by both
    their raters (item k completes at minute k), the next PARTIAL by one rater only."""
    for annotator in study.annotators.all():
        for a in annotator.assignments.exclude(study_item__kind=ItemKind.REAL).select_related("study_item"):
            for question in ("quality", "fluency"):
                value = a.study_item.expected.get(question, 5)
                Rating.objects.create(
                    study_item=a.study_item, annotator=annotator, question=question, value=value, submitted_at=AT
                )
    real = list(study.items.filter(kind=ItemKind.REAL).order_by("position"))
    for k, item in enumerate(real[: COMPLETE + PARTIAL]):
        holders = list(Assignment.objects.filter(study_item=item).order_by("annotator_id"))
        for a in holders if k < COMPLETE else holders[:1]:
            for question in ("quality", "fluency"):
                Rating.objects.create(
                    study_item=item,
                    annotator_id=a.annotator_id,
                    question=question,
                    value=5,
                    submitted_at=AT + timedelta(minutes=k),
                )


def test_a_settled_transformation_leaves_the_queues_and_the_gate_passes(
    researcher, django_user_model, monkeypatch, client
):
    argilla = FakeArgilla()
    monkeypatch.setattr(adaptive_services, "study_argilla_reconcile", argilla)
    study = _study(researcher, django_user_model, adaptive=True)
    real_active = Assignment.objects.filter(annotator__study=study, study_item__kind=ItemKind.REAL, active=True)
    submitted = set(Rating.objects.filter(study_item__study=study).values_list("annotator_id", "study_item_id"))
    open_before = [a for a in real_active if (a.annotator_id, a.study_item_id) not in submitted]
    controls_before = Assignment.objects.filter(annotator__study=study, active=True).exclude(
        study_item__kind=ItemKind.REAL
    )
    n_controls = controls_before.count()

    result = adaptive_services.study_adaptive_check(study=study, actor=researcher, client=object())

    [decision] = result.decisions.values()
    # Each perfect item multiplies the pass-side capital by 1.5 (the bet is truncated at 1/2 / 0.5):
    # 1.5^3 = 3.4 < 2/alpha = 4 <= 1.5^4 (the pass side plays at alpha, intersection-union), so 4 items.
    assert decision.state.value == "pass" and decision.n == 4 and decision.observed == COMPLETE
    assert result.withdrawn == {"random_keywords": len(open_before)} and len(open_before) > 0
    ended = Assignment.objects.filter(annotator__study=study, active=False)
    assert {a.pk for a in ended} == {a.pk for a in open_before}
    assert {a.end_reason for a in ended} == {"settled: pass at 4 items"}
    # Every real assignment left is one its annotator submitted; controls stay.
    assert all((a.annotator_id, a.study_item_id) in submitted for a in real_active.all())
    assert controls_before.count() == n_controls
    [event] = AuditEvent.objects.filter(verb="study.adaptive.settled")
    assert event.payload["withdrawn"] == len(open_before) and event.payload["decision"]["state"] == "pass"
    assert event.payload["decision"]["questions"]["quality"]["lower"] > 3.0
    assert argilla.calls == [study.pk]
    assert Study.objects.get(pk=study.pk).sample_info["adaptive"]["random_keywords"]["state"] == "pass"

    # Again with nothing new: no audit, no push.
    adaptive_services.study_adaptive_check(study=study, actor=researcher, client=object())
    assert AuditEvent.objects.filter(verb="study.adaptive.settled").count() == 1 and argilla.calls == [study.pk]

    # The gate takes its state from the settled decision, not "not enough ratings".
    study_validate(study=study, actor=researcher, estimate=False)
    [gate] = study_gate(study=study, actor=researcher)
    assert gate.passed and gate_state_of(gate.evidence) is GateState.PASSED
    assert gate.evidence["ratings_missing"] > 0 and gate.evidence["sequential"]["state"] == "pass"
    assert Assignment.objects.filter(annotator__study=study, active=False).count() == len(open_before)

    # Page, API and command show the decision.
    line = "settled: pass at 4 items (interval fluency ["
    client.force_login(researcher)
    assert line in client.get(reverse("annotation:study", args=[study.pk])).content.decode()
    api = APIClient()
    api.force_authenticate(researcher)
    progress = api.get(f"/api/studies/{study.pk}/progress/").json()
    assert progress["adaptive"]["random_keywords"]["summary"].startswith(line)
    # The saving shown is the study's own: 4 of its 20 items were needed.
    assert (
        "settled at 4 of 20 items: 80% of the items not needed"
        in client.get(reverse("annotation:study", args=[study.pk])).content.decode()
    )
    assert progress["adaptive"]["random_keywords"]["forecast"]["settled"] is True
    out = StringIO()
    call_command("study", "status", str(study.pk), stdout=out)
    assert f"adaptive random_keywords: {line}" in out.getvalue()
    assert "    settled at 4 of 20 items: 80% of the items not needed" in out.getvalue()

    # A rater rejected afterwards: too few complete items now, so the withdrawn work comes back.
    rejected = Annotator.objects.filter(study=study).order_by("pk").first()
    Annotator.objects.filter(pk=rejected.pk).update(status=Annotator.Status.REJECTED)
    result = adaptive_services.study_adaptive_check(study=study, actor=researcher, client=object())
    assert result.decisions["random_keywords"].state.value == "undecided"
    back = Assignment.objects.filter(annotator__study=study, end_reason__startswith="given back")
    assert back.exists() and all(a.active and a.annotator_id != rejected.pk for a in back)
    assert result.restored == {"random_keywords": back.count()}
    assert AuditEvent.objects.filter(verb="study.adaptive.unsettled").count() == 1
    assert len(argilla.calls) == 2


def test_argilla_down_keeps_the_decision_and_the_next_check_repairs_it(researcher, django_user_model, monkeypatch):
    down = FakeArgilla(error=ArgillaUnavailable("Argilla at http://argilla.test is not reachable"))
    monkeypatch.setattr(adaptive_services, "study_argilla_reconcile", down)
    study = _study(researcher, django_user_model, adaptive=True)
    result = adaptive_services.study_adaptive_check(study=study, actor=researcher, client=object())
    assert "not reachable" in result.argilla_error and result.withdrawn["random_keywords"] > 0
    assert Assignment.objects.filter(annotator__study=study, end_reason__startswith="settled:").exists()
    assert AuditEvent.objects.filter(verb="study.adaptive.settled").count() == 1
    up = FakeArgilla()
    monkeypatch.setattr(adaptive_services, "study_argilla_reconcile", up)
    again = adaptive_services.study_adaptive_check(study=study, actor=researcher, client=object())
    assert not again.argilla_error and up.calls == [study.pk] and not any(again.withdrawn.values())
    assert not Assignment.objects.filter(annotator__study=study, active=False).exclude(argilla_record_id=None).exists()


def test_a_non_adaptive_design_is_left_alone(researcher, django_user_model, monkeypatch):
    argilla = FakeArgilla()
    monkeypatch.setattr(adaptive_services, "study_argilla_reconcile", argilla)
    study = _study(researcher, django_user_model, adaptive=False)
    before = dict(Study.objects.get(pk=study.pk).sample_info)
    result = adaptive_services.study_adaptive_check(study=study, actor=researcher, client=object())
    assert result.decisions == {} and argilla.calls == []
    assert not Assignment.objects.filter(annotator__study=study, active=False).exists()
    assert Study.objects.get(pk=study.pk).sample_info == before
    assert not AuditEvent.objects.filter(verb__startswith="study.adaptive").exists()
    study_validate(study=study, actor=researcher, estimate=False)
    [gate] = study_gate(study=study, actor=researcher)
    assert gate_state_of(gate.evidence) is GateState.NOT_ENOUGH_RATINGS and "sequential" not in gate.evidence


def test_the_sync_task_runs_the_check_after_the_sync(researcher, monkeypatch):
    calls = []
    monkeypatch.setattr(tasks, "study_sync", lambda *, study: calls.append(("sync", study.pk)) or SyncResult())
    monkeypatch.setattr(tasks, "study_adaptive_check", lambda *, study: calls.append(("check", study.pk)))
    study = Study.objects.create(name="s", design=StudyDesign().to_dict(), design_hash="x")
    assert tasks.sync_study(study.pk) == asdict(SyncResult())
    assert calls == [("sync", study.pk), ("check", study.pk)]


def test_the_gate_sees_items_in_the_order_they_first_completed(researcher, django_user_model, monkeypatch):
    monkeypatch.setattr(adaptive_services, "study_argilla_reconcile", FakeArgilla())
    study = _study(researcher, django_user_model, adaptive=False)
    Study.objects.filter(pk=study.pk).update(design={**study.design, "adaptive": True, "adaptive_min_items": 50})
    study = Study.objects.get(pk=study.pk)
    adaptive_services.study_adaptive_check(study=study, actor=researcher, client=object())
    real = list(study.items.filter(kind=ItemKind.REAL).order_by("position"))
    order = Study.objects.get(pk=study.pk).sample_info["adaptive_order"]["random_keywords"]
    assert [item for item, _ in order] == [item.pk for item in real[:COMPLETE]]
    # A partial item's second rating arrives now with an earlier time (synced late): it goes last.
    late = real[COMPLETE]
    holder = Assignment.objects.filter(study_item=late).order_by("annotator_id").last()
    for question in ("quality", "fluency"):
        Rating.objects.create(
            study_item=late, annotator_id=holder.annotator_id, question=question, value=5, submitted_at=AT
        )
    adaptive_services.study_adaptive_check(study=Study.objects.get(pk=study.pk), actor=researcher, client=object())
    order = Study.objects.get(pk=study.pk).sample_info["adaptive_order"]["random_keywords"]
    assert [item for item, _ in order] == [item.pk for item in real[:COMPLETE]] + [late.pk]
    [decision] = adaptive_services.study_adaptive_decisions(study=Study.objects.get(pk=study.pk)).values()
    assert decision.observed == COMPLETE + 1
    # Not settled yet: the saving is predicted from its own 9 items, never a fixed figure.
    client = APIClient()
    client.force_authenticate(researcher)
    progress = client.get(f"/api/studies/{study.pk}/progress/").json()["adaptive"]["random_keywords"]
    assert progress["forecast"]["observed"] == COMPLETE + 1 and progress["forecast"]["total"] == 20
    assert progress["forecast_summary"].startswith("expected to settle at about 20 of 20 items")
    assert "predicted from 9 items (fluency mean 5.00, SD 0.00" in progress["forecast_summary"]
