"""A human baseline finished in the browser (issue 31): publish to annotators, let the LLM answer
as a background job with progress, sync, close, each a button on the study's page; no baseline
page says ``manage.py``. The LLM is a scripted backend (its bookkeeping is what is checked); the
publish, sync and close test runs against a real local Argilla server."""

from __future__ import annotations

import html
import json
import re

import pytest
from django.urls import reverse

from annotation.argilla import client as argilla
from annotation.baselines.baseline_llm_services import baseline_llm_job_run
from annotation.baselines.baseline_services import BaselineCreateRequest, baseline_create
from annotation.models import BaselineAnnotator, BaselineAnswer, BaselineLLMJob, BaselineStudy
from core.projects import project_create
from core.roles import Role
from corpora.services import dataset_import
from tests import test_baseline_services
from tests.support import argilla_annotator_client, argilla_pending, make_user
from tests.test_baseline_services import ScriptedBackend

pytestmark = pytest.mark.django_db
scripted = test_baseline_services.scripted  # the fixture: a scripted LLM backend


def words(response) -> str:
    return " ".join(html.unescape(response.content.decode()).split())


@pytest.fixture
def study(tmp_path, researcher) -> BaselineStudy:
    path = tmp_path / "pairs.csv"
    rows = [f"A dog runs number {k}.,A dog is running number {k}.,{k % 6}" for k in range(20)]
    path.write_text("sentence1,sentence2,score\n" + "\n".join(rows) + "\n")
    sts = dataset_import(source=path, task="sts", name="pairs")
    return baseline_create(
        actor=researcher,
        request=BaselineCreateRequest(name="b-page", dataset=sts, task_type="sts", n_instances=20, seed=1),
    )


def test_let_the_llm_answer_runs_as_a_job_whose_progress_the_page_shows(
    client,
    researcher,
    study,
    scripted,
    monkeypatch,
):
    client.force_login(researcher)
    url = reverse("evaluation:baseline", args=[study.pk])
    progress_url = reverse("evaluation:baseline-llm-progress", args=[study.pk])
    assert json.loads(client.get(progress_url).content) == {"status": "none"}
    # With a broker the request only queues the job: the page answers at once and shows it waiting.
    monkeypatch.setattr("annotation.baselines.baseline_llm_services.dispatch_on_commit", lambda send, **_: None)
    response = client.post(url, {"action": "llm-annotate", "backend": "scripted"})
    assert response.status_code == 302 and not BaselineAnswer.objects.exists()
    job = BaselineLLMJob.objects.get()
    assert (job.status, job.done, job.total, job.created_by) == ("pending", 0, 20, researcher)
    page = words(client.get(url))
    assert "is queued: waiting for a worker" in page and f'data-progress-url="{progress_url}"' in page
    assert 'http-equiv="refresh"' not in page  # no page reload on a timer (axe: meta-refresh)
    # Asking again while it waits starts nothing new.
    client.post(url, {"action": "llm-annotate", "backend": "scripted"})
    assert BaselineLLMJob.objects.count() == 1

    # The worker runs it: progress is on the row after every chunk of requests (16), as it goes.
    seen = []
    real_generate = ScriptedBackend.generate

    def generate(self, requests, *, on_result=None):
        seen.append(json.loads(client.get(progress_url).content))
        return real_generate(self, requests, on_result=on_result)

    monkeypatch.setattr(ScriptedBackend, "generate", generate)
    baseline_llm_job_run(job_id=job.pk)
    assert [(s["status"], s["done"], s["total"]) for s in seen] == [("running", 0, 20), ("running", 16, 20)]
    assert seen[1]["text"] == "The LLM (scripted) is answering: 16 of 20 instances done."
    done = json.loads(client.get(progress_url).content)
    assert done["finished"] and (done["status"], done["done"]) == ("succeeded", 20)
    assert (
        done["text"] == "The LLM (scripted) finished: the LLM “scripted” answered 20 instances (7 unreadable); "
        "0 were answered before."
    )
    assert BaselineAnswer.objects.filter(rater="llm:scripted").count() == 20
    page = words(client.get(url))
    assert "data-progress-url" not in page and "The LLM (scripted) finished" in page


def test_without_a_broker_the_llm_answers_in_the_request_and_the_page_says_what_it_did(
    client,
    researcher,
    study,
    scripted,
    django_capture_on_commit_callbacks,
):
    client.force_login(researcher)
    url = reverse("evaluation:baseline", args=[study.pk])
    with django_capture_on_commit_callbacks(execute=True):  # the job is queued when the request commits
        client.post(url, {"action": "llm-annotate", "backend": "scripted"})
    page = words(client.get(url))
    assert "finished: the LLM “scripted” answered 20 instances (7 unreadable); 0 were answered before." in page
    assert BaselineLLMJob.objects.get().status == "succeeded"
    # A failing backend: the job fails with the reason and how to go on; the answers received stay.
    # Five instances lose their answers; the request for the first of them fails (which instances come
    # first depends on the database's ids, so the failing text is taken from them).
    first = list(study.instances.all()[:5])
    ScriptedBackend.FAIL = {re.search(r"number \d+\.", " ".join(first[0].texts)).group(0)}
    BaselineAnswer.objects.filter(instance__in=first).delete()
    with django_capture_on_commit_callbacks(execute=True):
        client.post(url, {"action": "llm-annotate", "backend": "scripted"})
    page = words(client.get(url))
    job = BaselineLLMJob.objects.latest("pk")
    assert job.status == "failed" and "let the LLM answer again to retry the rest" in job.error
    assert "The LLM (scripted) stopped:" in page


def test_baseline_pages_name_no_command(client, researcher, study):
    client.force_login(researcher)
    for url in (reverse("evaluation:baselines"), reverse("evaluation:baseline", args=[study.pk])):
        page = client.get(url).content.decode()
        assert "manage.py" not in page and "POST /api" not in page


@pytest.mark.services
def test_publish_sync_and_close_a_baseline_with_the_page_buttons(
    client, argilla_server, settings, django_user_model, tmp_path, django_capture_on_commit_callbacks
):
    settings.ARGILLA_API_URL, settings.ARGILLA_API_KEY = argilla_server.url, argilla_server.api_key
    rita = make_user(django_user_model, "rita", Role.RESEARCHER)
    team = project_create(slug="bp-project", owner=rita, actor=None)  # also the Argilla workspace
    ann = make_user(django_user_model, "bp-ann", Role.ANNOTATOR, roster=team)
    path = tmp_path / "pairs.csv"
    path.write_text("sentence1,sentence2,score\n" + "".join(f"Cat {k} sat.,A cat {k} sat.,{k % 6}\n" for k in range(6)))
    sts = dataset_import(source=path, task="sts", name="bp-pairs", project=team)
    study = baseline_create(
        actor=rita,
        request=BaselineCreateRequest(
            name="bp", dataset=sts, task_type="sts", n_instances=6, seed=2, project="bp-project"
        ),
    )
    client.force_login(rita)
    url = reverse("evaluation:baseline", args=[study.pk])
    page = words(client.get(url))
    assert f'type="checkbox" name="annotators" value="{ann.pk}"' in page and "Publish to Argilla" in page

    # Nobody chosen on a study nobody rates yet: nothing is sent, and the page says why.
    page = words(client.post(url, {"action": "publish"}, follow=True))
    assert "Nothing was sent: choose the annotators of the project to publish to" in page
    assert BaselineStudy.objects.get(pk=study.pk).status == "draft" and not study.publish_jobs.exists()

    # Publishing is a job (issue 41): the button answers at once, the page then shows what it did.
    with django_capture_on_commit_callbacks(execute=True):
        started = words(client.post(url, {"action": "publish", "annotators": [str(ann.pk)]}, follow=True))
    assert "Publishing started" in started
    page = words(client.get(url))
    assert "Published to bp-ann: the annotators' Argilla datasets hold 6 records." in page
    assert "New Argilla accounts: bp-ann." in page and "Sync answers" in page
    # Publishing again with nobody ticked adds nobody, and says so (no "Published 6 records").
    with django_capture_on_commit_callbacks(execute=True):
        client.post(url, {"action": "publish"})
    page = words(client.get(url))
    assert "No annotator was selected, so nobody was added and no new work was sent" in page
    assert "Published to" not in page
    assert list(study.publish_jobs.values_list("status", flat=True)) == ["succeeded", "succeeded"]

    # The annotator answers 4 of the 6 in Argilla; the sync counts instances, not anything else.
    owner = argilla.client_get()
    seat = BaselineAnnotator.objects.get(study=study, user=ann)
    mine = argilla_annotator_client(owner, seat.argilla_user_id)
    for record in argilla_pending(mine, seat.argilla_dataset_id)[:4]:
        body = {"status": "submitted", "values": {"similarity": {"value": 3}}}
        mine.post(f"/api/v1/records/{record['id']}/responses", json=body).raise_for_status()
    mine.close()
    owner.close()
    page = words(client.post(url, {"action": "sync"}, follow=True))
    assert "Synced: 4 instances newly answered, 0 answers changed, 0 withdrawn (0 unchanged)." in page

    # Closing needs the box ticked: it cannot be undone.
    page = words(client.post(url, {"action": "close"}, follow=True))
    assert "Tick the box that says the answers become final" in page
    assert BaselineStudy.objects.get(pk=study.pk).status == "published"
    page = words(client.post(url, {"action": "close", "final": "yes"}, follow=True))
    assert "Closed baseline bp: its answers are final" in page
    assert BaselineStudy.objects.get(pk=study.pk).status == "closed"
    assert "Sync answers" not in page and "Let the LLM answer" not in page


def test_an_llm_job_a_lost_worker_left_is_resumed_by_the_sweeper(
    researcher, study, scripted, django_capture_on_commit_callbacks
):
    from datetime import timedelta

    from django.utils import timezone

    from core.sweeper import stuck_job_kinds, stuck_jobs_sweep

    # A job a worker took and then died with: running, its task gone.
    job = BaselineLLMJob.objects.create(study=study, backend_alias="scripted", total=20, created_by=researcher)
    BaselineLLMJob.objects.filter(pk=job.pk).update(status="running", started_at=timezone.now() - timedelta(hours=2))
    kind = next(k for k in stuck_job_kinds() if k.label == "baseline LLM answers")
    with django_capture_on_commit_callbacks(execute=True):
        swept = stuck_jobs_sweep(
            [kind], last_activity_before=timezone.now() - timedelta(minutes=30), live=set(), age_minutes=30
        )
    assert swept.resumed == {"baseline LLM answers": [job.pk]}
    job.refresh_from_db()
    assert (job.status, job.done) == ("succeeded", 20)


def test_a_queued_baseline_sync_answers_at_once_and_the_page_follows_it(client, researcher, study, monkeypatch):
    """Sync reads every annotator's Argilla dataset: with a broker the button only queues the
    ``annotation.sync_baseline`` task (issue 41) and the page shows its state until it has finished;
    the refusals (not published, closed, read-only project) still come at once, from the service."""
    import uuid

    from celery.result import AsyncResult
    from django.utils import timezone
    from django_celery_results.models import TaskResult

    from annotation.tasks import sync_baseline

    client.force_login(researcher)
    url = reverse("evaluation:baseline", args=[study.pk])
    sent = []
    task_id = str(uuid.uuid4())
    monkeypatch.setattr(sync_baseline, "delay", lambda *args: sent.append(args) or AsyncResult(task_id))
    refused = words(client.post(url, {"action": "sync"}, follow=True))
    assert "is not published yet: publish it before syncing answers" in refused and sent == []
    BaselineStudy.objects.filter(pk=study.pk).update(
        status=BaselineStudy.Status.PUBLISHED, argilla_dataset_id=uuid.uuid4()
    )
    response = client.post(url, {"action": "sync"})
    assert response["Location"] == f"{url}?sync={task_id}#sync-job"
    assert sent == [(study.pk, researcher.pk)]
    waiting = words(client.get(f"{url}?sync={task_id}"))
    assert "Queued sync: waiting for a worker" in waiting and 'name="shiftlab-poll"' in waiting
    counts = {"created": 4, "updated": 1, "withdrawn": 0, "unchanged": 3, "ignored_users": 2}
    TaskResult.objects.create(
        task_id=task_id,
        task_name="annotation.sync_baseline",
        task_args=f"({study.pk}, {researcher.pk})",
        status="SUCCESS",
        result=json.dumps(counts),
        date_done=timezone.now(),
    )
    done = words(client.get(f"{url}?sync={task_id}"))
    assert "Queued sync: finished" in done and 'name="shiftlab-poll"' not in done
    assert "4 instances newly answered, 1 answers changed, 0 withdrawn (3 unchanged); ignored 2 answers" in done
    # A study sync's task id is no sync of this baseline.
    TaskResult.objects.filter(task_id=task_id).update(task_name="annotation.sync_study")
    assert "Queued sync" not in words(client.get(f"{url}?sync={task_id}"))


def test_a_queued_baseline_sync_of_a_user_gone_since_never_runs_as_the_system(researcher, study):
    """The task re-checks the asker: a deleted or deactivated user is refused before any Argilla
    read, instead of the sync running with the system's rights (actor None)."""
    import uuid

    from annotation.tasks import sync_baseline
    from core.errors import ForbiddenError

    BaselineStudy.objects.filter(pk=study.pk).update(
        status=BaselineStudy.Status.PUBLISHED, argilla_dataset_id=uuid.uuid4()
    )
    researcher.is_active = False
    researcher.save(update_fields=["is_active"])
    with pytest.raises(ForbiddenError, match="no longer exists or is inactive"):
        sync_baseline.run(study.pk, researcher.pk)
    with pytest.raises(ForbiddenError, match="no longer exists or is inactive"):
        sync_baseline.run(study.pk, 10**9)
