"""Publishing a baseline study to Argilla as a background job (issue 41), as a validation study's
publish is (``annotation.studies.publish_job_services``): ``baseline_services.baseline_publish``
run by a task on the default queue, which waits and retries while Argilla cannot be reached, while
the study's page shows the job and updates itself.

One entry starts it (``baseline_publish_start``); a publish of the same annotators still running is
joined, one of others refused until it ends. Publishing is idempotent, so a retried or resumed
task redoes nothing already in Argilla.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from annotation.argilla import ArgillaUnavailable
from annotation.baselines.baseline_services import baseline_publish
from annotation.models import BaselinePublishJob, BaselineStudy
from annotation.studies.publish_job_services import NOTHING_SENT, new_accounts_text, publish_summary
from core.errors import ConflictError, ShiftlabError
from core.job_services import UNFINISHED, JobWait
from core.projects import project_require_write
from core.rosters import roster_require
from core.waiting import BackendUnavailable
from transforms.jobs import JobKind

BASELINE_PUBLISH_TASK = "annotation.baseline_publish"  # registered in annotation/tasks.py (default queue)

BASELINE_PUBLISH_JOBS = JobKind(
    model=BaselinePublishJob,
    noun="publish",
    task=BASELINE_PUBLISH_TASK,
    errback="annotation.baseline_publish_failed",
    kept="What reached Argilla stays there (publishing is idempotent)",
    resume="publish the baseline study again from its page",
)


def baseline_publish_start(
    *, study: BaselineStudy, annotators: Iterable[AbstractBaseUser] = (), actor: AbstractBaseUser | None = None
) -> BaselinePublishJob:
    """The one entry of a baseline study's "Publish to Argilla": the checks that need no Argilla
    (who may, a closed study, the roster, nobody chosen for a first publish), then a job whose task
    publishes once the transaction commits. In the single-machine default (no broker) the job runs
    in this call."""
    study = BaselineStudy.objects.select_related("project").get(pk=study.pk)
    if actor is not None:
        project_require_write(actor, study.project)
    if study.status == BaselineStudy.Status.CLOSED:
        raise ConflictError(f"{study} is closed: it takes no more answers")
    users = list(dict.fromkeys(annotators))
    roster_require(study.project, users)
    if not users and not study.annotators.exists():
        raise ShiftlabError(NOTHING_SENT, field="annotators")
    with transaction.atomic():
        BaselineStudy.objects.select_for_update().filter(pk=study.pk).first()  # one start at a time
        running = BaselinePublishJob.objects.filter(study=study, status__in=UNFINISHED).first()
        if running is not None:
            if set(running.annotators.values_list("pk", flat=True)) == {u.pk for u in users}:
                return running
            raise ConflictError(
                f"{study} is being published already (job {running.pk}, {running.status}): wait until it has "
                "finished, then publish again to add other annotators"
            )
        job = BaselinePublishJob.objects.create(study=study, total=1, created_by=actor)
        job.annotators.set(users)
        BASELINE_PUBLISH_JOBS.dispatch(job.pk)
    return job


def baseline_publish_fail(*, job_id: int, reason: str) -> None:
    BASELINE_PUBLISH_JOBS.fail(job_id, reason=reason)


def baseline_publish_waiting(*, job_id: int) -> JobWait:
    return BASELINE_PUBLISH_JOBS.waiting(job_id)


def baseline_publish_run(*, job_id: int) -> BaselinePublishJob:
    """What the job's task does: ``baseline_publish`` as the job's starter, then the job succeeded
    with what it did in words, or failed with the reason. Argilla out of reach propagates as
    BackendUnavailable (the task waits and retries); a finished job is left as it is."""
    job = BaselinePublishJob.objects.select_related("study__project", "created_by").get(pk=job_id)
    if job.status not in UNFINISHED:
        return job
    rows = BaselinePublishJob.objects.filter(pk=job.pk, status__in=UNFINISHED)
    rows.update(status=BaselinePublishJob.Status.RUNNING, started_at=timezone.now())
    users = list(job.annotators.order_by("pk"))
    try:
        result = baseline_publish(study=job.study, annotators=users, actor=job.created_by)
    except ArgillaUnavailable as exc:
        raise BackendUnavailable(str(exc), backend=f"Argilla at {settings.ARGILLA_API_URL}", reason=str(exc)) from exc
    except ShiftlabError as exc:
        baseline_publish_fail(job_id=job.pk, reason=str(exc))
    else:
        names = sorted(u.get_username() for u in users)
        said = publish_summary(names, result.records)
        if result.new_accounts:
            said += " " + new_accounts_text(result.new_accounts)
        rows.update(
            status=BaselinePublishJob.Status.SUCCEEDED,
            done=1,
            summary=said,
            finished_at=timezone.now(),
            waiting=None,
        )
    return BaselinePublishJob.objects.get(pk=job.pk)


def baseline_publish_job_text(job: BaselinePublishJob) -> str:
    """One line on the newest publish, as the page shows it."""
    if job.status == BaselinePublishJob.Status.PENDING:
        return "Publishing is queued: waiting for a worker (this page updates itself)."
    if job.status == BaselinePublishJob.Status.RUNNING:
        waiting = job.waiting_message
        return f"Publishing to Argilla (this page updates itself).{' ' + waiting if waiting else ''}"
    if job.status == BaselinePublishJob.Status.SUCCEEDED:
        return f"{job.finished_at:%Y-%m-%d %H:%M}: {job.summary}"
    return f"Publishing stopped: {job.error}"
