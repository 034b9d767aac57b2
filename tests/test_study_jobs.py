"""No action waits inside a request (issue 41): validating a study, publishing it and scoring models
on a human baseline each run as a job row, started by one entry (page, API, command), executed by
a task on its queue, with progress, joining, resuming and failures on the row.

The judges are the rule-based backend of ``test_judge_population`` (every call recorded); the
models are ``test_augmented``'s tiny counting encoder (every encoded text recorded). Publishing
itself (Argilla) is covered against a real server by the publish tests; here ``study_publish`` is
replaced by a recorder, to check the job around it without a server.
"""

from __future__ import annotations

import html
import io
import json

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from annotation import tasks
from annotation.argilla import ArgillaUnavailable
from annotation.baselines.baseline_services import BaselineCreateRequest, baseline_create
from annotation.kinds import ItemKind
from annotation.models import Study, StudyJob
from annotation.studies.argilla_services import PublishResult
from annotation.studies.publish_job_services import study_publish_run, study_publish_start
from annotation.studies.validation_job_services import study_validation_run, study_validation_start
from core.errors import ConflictError, ShiftlabError
from core.roles import Role
from core.waiting import BackendUnavailable
from corpora.services import dataset_import
from evaluation import baseline_services
from evaluation.baseline_services import (
    baseline_report_build,
    baseline_score_job_run,
    baseline_score_job_scores,
    baseline_score_start,
)
from evaluation.encoders import get_encoder
from evaluation.models import BaselineScoreJob
from tests.support import make_user
from tests.test_judge_population import RuleJudge, expected_estimate, judges, locked_study  # noqa: F401 (fixture)
from transforms.backends.base import TransientBackendError

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("judges")]  # the rule judges of every test


def words(response) -> str:
    return " ".join(html.unescape(response.content.decode()).split())


@pytest.fixture
def queued(monkeypatch):
    """A broker that only queues: jobs stay pending until the test runs their task itself."""
    monkeypatch.setattr("transforms.jobs.dispatch_on_commit", lambda send, **_: None)
    monkeypatch.setattr("evaluation.baseline_services.dispatch_on_commit", lambda send, **_: None)


def published(study: Study) -> Study:
    """The study as publishing leaves it for validation (ratings need no Argilla here)."""
    Study.objects.filter(pk=study.pk).update(published_at=timezone.now())
    return Study.objects.get(pk=study.pk)


def real_items(study: Study):
    return list(study.items.filter(kind=ItemKind.REAL).order_by("position"))


# --- validation ----------------------------------------------------------------------------------


def test_validation_is_a_job_counting_each_judge_call(monkeypatch, django_capture_on_commit_callbacks):
    monkeypatch.setattr("annotation.studies.validation_services.ESTIMATE_CHUNK", 4)
    study = published(locked_study())
    items = real_items(study)
    seen = []
    answer = RuleJudge.generate

    def generate(self, requests, *, on_result=None):
        seen.extend(StudyJob.objects.filter(status="running").values_list("done", flat=True))
        return answer(self, requests, on_result=on_result)

    monkeypatch.setattr(RuleJudge, "generate", generate)
    with django_capture_on_commit_callbacks(execute=True):
        job = study_validation_start(study=study)
    job.refresh_from_db()
    assert job.status == "succeeded", job.error
    calls = len(items) * 2 * 2  # rated items × judged questions (quality, fluency) × judges
    assert (job.action, job.done, job.total) == ("validate", calls + 1, calls + 1)
    # Two chunks (4 items, then 2): done moved by the chunk's items after each judge's call.
    assert sorted(set(seen)) == [0, 4, 8, 12, 16, 18, 20, 22]
    assert job.summary.startswith("Validated: ") and job.result["estimated_items"] == len(items)
    assert len(RuleJudge.calls) == calls
    for item in real_items(study):
        for question in ("quality", "fluency"):
            assert item.llm_estimates[question]["estimate"] == expected_estimate(question, item.text_b)


def test_a_second_start_joins_the_running_validation(queued):
    study = published(locked_study())
    job = study_validation_start(study=study)
    assert study_validation_start(study=study) == job and StudyJob.objects.count() == 1
    assert job.status == "pending" and not RuleJudge.calls  # nothing asked before the worker runs it
    done = study_validation_run(job_id=job.pk)
    assert done.status == "succeeded" and done.done == done.total
    again = study_validation_start(study=study)  # a finished job is not joined: validate anew
    assert again.pk != job.pk and again.status == "pending"
    assert study_validation_run(job_id=job.pk) == done  # a redelivered task leaves a finished job as it is


def test_a_retried_validation_asks_the_judges_only_what_is_missing(queued, monkeypatch):
    monkeypatch.setattr("annotation.studies.validation_services.ESTIMATE_CHUNK", 2)
    study = published(locked_study())
    items = real_items(study)
    RuleJudge.DOWN = {items[3].text_b}  # the second chunk: the first is estimated and saved before
    job = study_validation_start(study=study)
    with pytest.raises(TransientBackendError, match="connection refused"):
        study_validation_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == "running" and 0 < job.done < job.total  # the task retries: the job goes on
    first = {item.text_b for item in items[:2]}
    assert all(item.llm_estimates for item in real_items(study)[:2])
    assert not any(item.llm_estimates for item in real_items(study)[2:])
    RuleJudge.DOWN, RuleJudge.calls = set(), []
    job = study_validation_run(job_id=job.pk)
    assert job.status == "succeeded" and job.done == job.total
    asked = {text for _, _, text in RuleJudge.calls}
    assert asked and not asked & first  # the saved chunk is not asked again


def test_a_judge_down_fails_the_job_with_the_reason_and_how_to_go_on(queued):
    study = published(locked_study())
    RuleJudge.DOWN = {item.text_b for item in real_items(study)}
    job = study_validation_start(study=study)
    # In-process (eager) tasks cannot wait: the task gives up at once and says so on the row.
    with pytest.raises(TransientBackendError):
        tasks.study_validate.apply(args=[job.pk], throw=True)
    job.refresh_from_db()
    assert job.status == "failed" and "Gave up at once" in job.error and "connection refused" in job.error
    assert "LLM estimates made so far are kept" in job.error and "press Validate" in job.error
    assert job.waiting is None


def test_refusals_come_before_any_job():
    draft = locked_study(name="unpublished")
    with pytest.raises(ShiftlabError, match="is not published: there are no ratings to validate"):
        study_validation_start(study=draft)
    assert not StudyJob.objects.exists()


def test_the_validate_button_answers_at_once_and_the_page_follows_the_job(client, researcher, queued):
    study = published(locked_study())
    client.force_login(researcher)
    url = reverse("annotation:study", args=[study.pk])
    response = client.post(url, {"action": "validate"}, follow=True)
    assert "Validation started: this page shows its progress." in words(response)
    assert not RuleJudge.calls  # no judge was asked inside the request
    client.post(url, {"action": "validate"})  # a second click joins the job
    job = StudyJob.objects.get()
    page = client.get(url).content.decode()
    assert '<meta name="shiftlab-poll"' in page and 'id="study-jobs" data-live' in page
    assert "Validation queued: waiting for a worker" in words(client.get(url))
    study_validation_run(job_id=job.pk)  # the worker
    page = words(client.get(url))
    assert "Validation finished" in page and "Validated: " in page
    assert '<meta name="shiftlab-poll"' not in client.get(url).content.decode()


def test_without_a_broker_validate_runs_in_the_request_and_says_what_it_did(
    client, researcher, django_capture_on_commit_callbacks
):
    study = published(locked_study())
    client.force_login(researcher)
    url = reverse("annotation:study", args=[study.pk])
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(url, {"action": "validate"})
    assert response.status_code == 302
    page = words(client.get(url))
    assert "Validated: 0 flags raised, 0 removed" in page and "LLM estimates for 6 items" in page


def test_the_api_starts_the_same_job(researcher, django_capture_on_commit_callbacks):
    from rest_framework.test import APIClient

    study = published(locked_study())
    api = APIClient()
    api.force_authenticate(researcher)
    with django_capture_on_commit_callbacks(execute=True):  # queued when the request's transaction commits
        answer = api.post(f"/api/studies/{study.pk}/validate/")
    assert answer.status_code == 202 and answer.json()["status"] == "pending", answer.content
    [body] = api.get(f"/api/studies/{study.pk}/jobs/").json()
    assert body["id"] == answer.json()["id"]
    assert (body["action"], body["status"], body["done"], body["total"]) == ("validate", "succeeded", 25, 25)
    assert body["result"]["estimated_items"] == 6 and body["summary"].startswith("Validated: ")


@pytest.mark.django_db(transaction=True)  # real commits: the command's job is queued when it commits
def test_the_command_starts_the_same_job_and_waits_for_it():
    study = published(locked_study())
    out = io.StringIO()
    call_command("study", "validate", str(study.pk), stdout=out)
    assert f"Validate job {StudyJob.objects.get().pk} of {study}:" in out.getvalue()
    assert "[##############################] 25/25 succeeded" in out.getvalue()
    assert "Control checks: {}" in out.getvalue() and "Flags: 0 new, 0 withdrawn" in out.getvalue()


def test_the_api_answers_202_while_the_job_runs(researcher, queued):
    from rest_framework.test import APIClient

    study = published(locked_study())
    api = APIClient()
    api.force_authenticate(researcher)
    answer = api.post(f"/api/studies/{study.pk}/validate/")
    assert answer.status_code == 202 and answer.json()["status"] == "pending"
    assert api.post(f"/api/studies/{study.pk}/validate/").json()["id"] == answer.json()["id"]


# --- publishing ----------------------------------------------------------------------------------


class RecordingPublish:
    """Stands in for ``study_publish`` (Argilla): records each call; ``down`` makes Argilla unreachable."""

    def __init__(self):
        self.calls, self.down = [], False

    def __call__(self, *, study, annotators, actor):
        self.calls.append((study.pk, sorted(u.get_username() for u in annotators)))
        if self.down:
            raise ArgillaUnavailable("Argilla at http://127.0.0.1:6900 cannot be reached: connection refused")
        Study.objects.filter(pk=study.pk).update(published_at=timezone.now())
        return PublishResult(study=study, dataset_id="", records=12, new_accounts=("pj-anna",))


@pytest.fixture
def publish(monkeypatch) -> RecordingPublish:
    recorder = RecordingPublish()
    monkeypatch.setattr("annotation.studies.publish_job_services.study_publish", recorder)
    return recorder


@pytest.fixture
def raters(django_user_model):
    """Three annotators on the roster of the default project, the studies' project."""
    return [make_user(django_user_model, name, Role.ANNOTATOR) for name in ("pj-anna", "pj-ben", "pj-cleo")]


def test_publish_is_a_job_joined_while_it_runs(queued, publish, raters):
    study = locked_study()
    job = study_publish_start(study=study, annotators=raters[:2])
    assert study_publish_start(study=study, annotators=list(reversed(raters[:2]))) == job
    with pytest.raises(ConflictError, match="is being published already"):
        study_publish_start(study=study, annotators=raters)
    assert not publish.calls and job.status == "pending"  # nothing sent before the worker runs it
    job = study_publish_run(job_id=job.pk)
    assert job.status == "succeeded" and (job.done, job.total) == (1, 1)
    assert publish.calls == [(study.pk, ["pj-anna", "pj-ben"])]
    assert job.result == {"records": 12, "new_accounts": ["pj-anna"], "annotators": ["pj-anna", "pj-ben"]}
    assert job.summary == (
        "Published to pj-anna, pj-ben: the annotators' Argilla datasets hold 12 records. New Argilla accounts: "
        "pj-anna. Each annotator sets their own Argilla password on Shiftlab's My Argilla account page, signed in "
        "as themselves."
    )
    assert study_publish_run(job_id=job.pk) == job and len(publish.calls) == 1  # a redelivered task


def test_publish_refusals_come_before_any_job(publish, raters, django_user_model):
    study = locked_study()
    outsider = make_user(django_user_model, "pj-outsider", None)
    with pytest.raises(ShiftlabError, match="not on the annotator roster"):
        study_publish_start(study=study, annotators=[raters[0], outsider])
    with pytest.raises(ShiftlabError, match="Nothing was sent: choose the annotators") as refused:
        study_publish_start(study=study, annotators=[])
    assert refused.value.field == "annotators"
    assert not StudyJob.objects.exists() and not publish.calls


def test_argilla_out_of_reach_waits_then_fails_the_publish_with_how_to_go_on(queued, publish, raters):
    study = locked_study()
    publish.down = True
    job = study_publish_start(study=study, annotators=raters[:2])
    with pytest.raises(BackendUnavailable, match="cannot be reached"):
        study_publish_run(job_id=job.pk)  # what the task retries on
    assert StudyJob.objects.get(pk=job.pk).status == "running"
    with pytest.raises(BackendUnavailable):
        tasks.study_publish.apply(args=[job.pk], throw=True)
    job.refresh_from_db()
    assert job.status == "failed" and "Gave up at once, without retrying: Argilla at" in job.error
    assert "publish the study again from its page" in job.error
    publish.down = False
    again = study_publish_start(study=study, annotators=raters[:2])
    assert again.pk != job.pk and study_publish_run(job_id=again.pk).status == "succeeded"


def test_the_publish_button_answers_at_once(client, researcher, queued, publish, raters):
    study = locked_study()
    client.force_login(researcher)
    step = reverse("annotation:publish", args=[study.pk])
    response = client.post(step, {"action": "publish", "annotators": [u.pk for u in raters[:2]]}, follow=True)
    assert response.redirect_chain[-1][0] == reverse("annotation:study", args=[study.pk])
    page = words(response)
    assert "Publishing started" in page and "Publish to pj-anna, pj-ben queued" in page
    assert not publish.calls


def test_without_a_broker_the_publish_page_says_what_was_published(
    client, researcher, publish, raters, django_capture_on_commit_callbacks
):
    study = locked_study()
    client.force_login(researcher)
    step = reverse("annotation:publish", args=[study.pk])
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(step, {"action": "publish", "annotators": [u.pk for u in raters[:2]]})
    page = words(client.get(response.url))
    assert "Published to pj-anna, pj-ben: the annotators' Argilla datasets hold 12 records." in page
    assert "New Argilla accounts: pj-anna." in page


# --- scoring models on a human baseline ----------------------------------------------------------


@pytest.fixture
def baseline(tmp_path, researcher, settings):
    settings.EMBEDDING_CACHE_DIR = tmp_path / "embeddings"
    settings.EVALUATION_ENCODERS = {
        **settings.EVALUATION_ENCODERS,
        **{
            f"{name}-{tmp_path.name}": {"BACKEND": "tests.test_augmented.CountingEncoder", "OPTIONS": {"unit": unit}}
            for name, unit in (("plain", False), ("unit", True))
        },
    }
    path = tmp_path / "pairs.csv"
    rows = [f"A dog runs number {k}.,A dog is running fast number {k * 7}.,{k % 6}" for k in range(20)]
    path.write_text("sentence1,sentence2,score\n" + "\n".join(rows) + "\n")
    sts = dataset_import(source=path, task="sts", name="pairs")
    return baseline_create(
        actor=researcher,
        request=BaselineCreateRequest(name="b-jobs", dataset=sts, task_type="sts", n_instances=20, seed=1),
    )


def models_of(tmp_path) -> list[str]:
    return [f"plain-{tmp_path.name}", f"unit-{tmp_path.name}"]


def test_scoring_models_is_a_job_counting_models_and_resumable(baseline, tmp_path, queued, researcher, monkeypatch):
    models = models_of(tmp_path)
    job = baseline_score_start(study=baseline, models=models, actor=researcher)
    assert baseline_score_start(study=baseline, models=list(reversed(models)), actor=researcher) != job
    assert baseline_score_start(study=baseline, models=models, actor=researcher) == job  # joined
    assert (job.status, job.done, job.total) == ("pending", 0, 2)
    assert not get_encoder(models[0]).encoded  # nothing encoded in the request
    scored, progress = [], []
    real = baseline_services.score_model_on_instances

    def score(instances, encode, *, rater, **kwargs):
        scored.append(rater)
        progress.append(BaselineScoreJob.objects.get(pk=job.pk).done)
        return real(instances, encode, rater=rater, **kwargs)

    monkeypatch.setattr(baseline_services, "score_model_on_instances", score)
    job = baseline_score_job_run(job_id=job.pk)
    assert job.status == "succeeded" and job.done == 2 and scored == models and progress == [0, 1]
    # The worker died after the first model: its score is on the row, the second model's is not.
    BaselineScoreJob.objects.filter(pk=job.pk).update(status="running", scores=job.scores[:1], done=1)
    scored.clear()
    job = baseline_score_job_run(job_id=job.pk)  # the task again (redelivered)
    assert job.status == "succeeded" and job.done == 2 and len(job.scores) == 2
    assert scored == models[1:]  # the first model was not scored again
    # The stored scores rank as the in-request computation would.
    stored = baseline_report_build(study=baseline, model_scores=baseline_score_job_scores(job))
    direct = baseline_report_build(study=baseline, models=models)
    assert [(r.name, r.score, r.ci_low, r.against_humans) for r in stored.rows] == [
        (r.name, r.score, r.ci_low, r.against_humans) for r in direct.rows
    ]


@pytest.fixture
def unserved(monkeypatch) -> str:
    """A model name EVALUATION_ENCODERS cannot serve (looked up by the worker, never in the request)."""
    name = "nowhere/unserved-model"
    real = get_encoder

    def lookup(alias_or_model, *args, **kwargs):
        if alias_or_model == name:
            raise ImproperlyConfigured(f"Model {name!r} is not one of the models set up on this server")
        return real(alias_or_model, *args, **kwargs)

    monkeypatch.setattr("evaluation.baseline_services.get_encoder", lookup)
    return name


def test_a_model_that_cannot_be_scored_fails_the_job_and_keeps_the_others(
    baseline, tmp_path, queued, researcher, unserved
):
    first = models_of(tmp_path)[0]
    job = baseline_score_start(study=baseline, models=[first, unserved], actor=researcher)
    job = baseline_score_job_run(job_id=job.pk)
    assert job.status == "failed" and "is not one of the models set up" in job.error
    assert "fix the cause, then score the models again" in job.error
    assert [entry["score"]["rater"] for entry in job.scores] == [first] and job.done == 1
    with pytest.raises(ShiftlabError, match="Name at least one model") as refused:
        baseline_score_start(study=baseline, models=[" "], actor=researcher)
    assert refused.value.field == "models"


def test_the_score_button_answers_at_once_and_the_page_ranks_the_models_once_scored(
    client, researcher, baseline, tmp_path, queued
):
    client.force_login(researcher)
    url = reverse("evaluation:baseline", args=[baseline.pk])
    models = models_of(tmp_path)
    response = client.post(url, {"action": "score", "models": " ".join(models)}, follow=True)
    page = words(response)
    assert "Scoring started" in page and "is queued: waiting for a worker" in page
    assert '<meta name="shiftlab-poll"' in response.content.decode()
    assert not get_encoder(models[0]).encoded
    client.post(url, {"action": "score", "models": ", ".join(models)})  # a second click joins
    job = BaselineScoreJob.objects.get()
    baseline_score_job_run(job_id=job.pk)
    page = client.get(url).content.decode()
    ranking = page.split('id="baseline-ranking"')[1].split("</table>")[0]
    assert all(m in ranking for m in models) and '<meta name="shiftlab-poll"' not in page


def test_without_a_broker_scoring_runs_in_the_request(
    client, researcher, baseline, tmp_path, unserved, django_capture_on_commit_callbacks
):
    client.force_login(researcher)
    url = reverse("evaluation:baseline", args=[baseline.pk])
    with django_capture_on_commit_callbacks(execute=True):
        client.post(url, {"action": "score", "models": unserved})
    page = words(client.get(url))
    job = BaselineScoreJob.objects.get()
    assert job.status == "failed" and f"Scoring {unserved} stopped:" in page


@pytest.mark.django_db(transaction=True)  # real commits: the command's job is queued when it commits
def test_the_report_command_scores_models_through_the_same_job(baseline, tmp_path):
    out, err = io.StringIO(), io.StringIO()
    model = models_of(tmp_path)[0]
    call_command("baseline_report", str(baseline.pk), "--models", model, "--json", stdout=out, stderr=err)
    document = json.loads(out.getvalue())  # the progress went to stderr: stdout stays JSON
    assert model in {row["name"] for row in document["rows"] if row["kind"] == "model"}
    job = BaselineScoreJob.objects.get()
    assert (job.status, job.model_names, job.done) == ("succeeded", [model], 1)
    assert "1/1 succeeded" in err.getvalue()
