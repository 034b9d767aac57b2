"""Publishing a human-baseline study is a job (issue 41), as a validation study's publish is: the
button answers at once, a second click joins it, refusals come before any job, Argilla out of
reach waits and then fails with how to go on, and a redelivered task redoes nothing.

``baseline_publish`` (Argilla) is replaced by a recorder here; tests/test_baseline_pages.py
publishes a baseline to a real local Argilla through the page's button.
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from annotation import tasks
from annotation.argilla import ArgillaUnavailable
from annotation.baselines.baseline_publish_job_services import baseline_publish_run, baseline_publish_start
from annotation.baselines.baseline_services import BaselineCreateRequest, baseline_create
from annotation.models import BaselinePublishJob, BaselineStudy
from annotation.studies.argilla_services import PublishResult
from core.errors import ConflictError, ShiftlabError
from core.roles import Role
from core.waiting import BackendUnavailable
from corpora.services import dataset_import
from tests.support import make_user

pytestmark = pytest.mark.django_db


class RecordingPublish:
    """Stands in for ``baseline_publish``: records each call; ``down`` makes Argilla unreachable."""

    def __init__(self):
        self.calls, self.down = [], False

    def __call__(self, *, study, annotators, actor):
        self.calls.append(sorted(u.get_username() for u in annotators))
        if self.down:
            raise ArgillaUnavailable("Argilla at http://127.0.0.1:6900 cannot be reached: connection refused")
        BaselineStudy.objects.filter(pk=study.pk).update(status=BaselineStudy.Status.PUBLISHED)
        study.annotators.add(*annotators)
        return PublishResult(study=study, dataset_id="", records=6, new_accounts=("bj-anna",))


@pytest.fixture
def publish(monkeypatch) -> RecordingPublish:
    recorder = RecordingPublish()
    monkeypatch.setattr("annotation.baselines.baseline_publish_job_services.baseline_publish", recorder)
    monkeypatch.setattr("transforms.jobs.dispatch_on_commit", lambda send, **_: None)  # a broker that only queues
    return recorder


@pytest.fixture
def world(django_user_model, tmp_path):
    researcher = make_user(django_user_model, "bj-rita", Role.RESEARCHER)
    raters = [make_user(django_user_model, name, Role.ANNOTATOR) for name in ("bj-anna", "bj-ben")]
    path = tmp_path / "pairs.csv"
    path.write_text("sentence1,sentence2,score\n" + "".join(f"Cat {k} sat.,A cat {k} sat.,{k % 6}\n" for k in range(6)))
    sts = dataset_import(source=path, task="sts", name="bj-pairs")
    study = baseline_create(
        actor=researcher, request=BaselineCreateRequest(name="bj", dataset=sts, task_type="sts", n_instances=6, seed=2)
    )
    return researcher, raters, study


def test_publish_is_a_job_joined_while_it_runs_and_redone_by_nobody(publish, world):
    researcher, raters, study = world
    job = baseline_publish_start(study=study, annotators=raters, actor=researcher)
    assert baseline_publish_start(study=study, annotators=list(reversed(raters)), actor=researcher) == job
    with pytest.raises(ConflictError, match="is being published already"):
        baseline_publish_start(study=study, annotators=raters[:1], actor=researcher)
    assert not publish.calls and job.status == "pending"
    job = baseline_publish_run(job_id=job.pk)
    assert job.status == "succeeded" and (job.done, job.total) == (1, 1)
    assert publish.calls == [["bj-anna", "bj-ben"]]
    assert job.summary.startswith("Published to bj-anna, bj-ben: the annotators' Argilla datasets hold 6 records.")
    assert "New Argilla accounts: bj-anna." in job.summary
    assert baseline_publish_run(job_id=job.pk) == job and len(publish.calls) == 1  # a redelivered task


def test_refusals_come_before_any_job(publish, world, django_user_model):
    researcher, raters, study = world
    outsider = make_user(django_user_model, "bj-outsider", None)
    with pytest.raises(ShiftlabError, match="not on the annotator roster"):
        baseline_publish_start(study=study, annotators=[raters[0], outsider], actor=researcher)
    with pytest.raises(ShiftlabError, match="Nothing was sent"):
        baseline_publish_start(study=study, annotators=[], actor=researcher)
    BaselineStudy.objects.filter(pk=study.pk).update(status=BaselineStudy.Status.CLOSED)
    with pytest.raises(ConflictError, match="closed"):
        baseline_publish_start(study=study, annotators=raters, actor=researcher)
    assert not BaselinePublishJob.objects.exists() and not publish.calls


def test_argilla_out_of_reach_waits_then_fails_with_how_to_go_on(publish, world):
    researcher, raters, study = world
    publish.down = True
    job = baseline_publish_start(study=study, annotators=raters, actor=researcher)
    with pytest.raises(BackendUnavailable, match="cannot be reached"):
        baseline_publish_run(job_id=job.pk)
    assert BaselinePublishJob.objects.get(pk=job.pk).status == "running"
    with pytest.raises(BackendUnavailable):
        tasks.baseline_publish.apply(args=[job.pk], throw=True)
    job.refresh_from_db()
    assert job.status == "failed" and "publish the baseline study again from its page" in job.error


def test_the_button_answers_at_once_and_the_page_shows_the_job(client, publish, world):
    researcher, raters, study = world
    client.force_login(researcher)
    url = reverse("evaluation:baseline", args=[study.pk])
    page = client.post(url, {"action": "publish", "annotators": [u.pk for u in raters]}, follow=True)
    text = page.content.decode()
    assert "Publishing started" in text and 'id="publish-job"' in text and "queued" in text
    assert 'name="shiftlab-poll"' in text  # the page refreshes itself while the job runs
    assert not publish.calls
