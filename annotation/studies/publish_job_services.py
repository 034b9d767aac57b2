"""Publishing a study to Argilla as a background job (issue 41): ``argilla_services.study_publish``
run by a task on the ``default`` queue, which waits and retries while Argilla cannot be reached,
while the study's page, the API and the command show the job's state.

One entry starts it (``study_publish_start``); a publish of the same annotators still running is
joined, not started twice. Publishing is idempotent (workspaces, accounts and datasets reused,
records upserted), so a retried or resumed task redoes nothing already in Argilla.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from annotation.argilla import ArgillaUnavailable
from annotation.models import Annotator, Study, StudyJob
from annotation.studies.argilla_services import PublishResult, study_publish
from core.errors import ConflictError, ShiftlabError
from core.job_services import UNFINISHED, JobWait
from core.projects import project_require_write
from core.rosters import roster_require
from core.waiting import BackendUnavailable
from transforms.jobs import JobKind

PUBLISH_TASK = "annotation.study_publish"  # registered in annotation/tasks.py (default queue)
NOTHING_SENT = "Nothing was sent: choose the annotators of the project to publish to"

PUBLISH_JOBS = JobKind(
    model=StudyJob,
    noun="publish",
    task=PUBLISH_TASK,
    errback="annotation.study_publish_failed",
    kept="What reached Argilla stays there (publishing is idempotent)",
    resume="publish the study again from its page",
)


def study_publish_start(
    *, study: Study, annotators: Iterable[AbstractBaseUser] = (), actor: AbstractBaseUser | None = None
) -> StudyJob:
    """The one entry of "Publish" (pages, API, command): the checks of ``study_publish`` that need
    no Argilla (who may, the roster, annotators who left the study, nobody chosen for a first
    publish), then a job whose task publishes on the ``default`` queue once the transaction
    commits. A publish of the study still unfinished is returned when it adds the same annotators,
    and refused otherwise (wait for it, then publish again). In the single-machine default (no
    broker) the job runs in this call."""
    study = Study.objects.select_related("project").get(pk=study.pk)
    if actor is not None:
        project_require_write(actor, study.project)
    users = list(dict.fromkeys(annotators))
    roster_require(study.project, users)
    if not users and study.published_at is None:
        raise ShiftlabError(NOTHING_SENT, field="annotators")
    for user in users:
        left = Annotator.objects.filter(study=study, user=user).exclude(status=Annotator.Status.ACTIVE).first()
        if left:
            raise ShiftlabError(f"{user.get_username()} was {left.status} in {study}: they cannot rate it again")
    with transaction.atomic():
        Study.objects.select_for_update().filter(pk=study.pk).first()  # one start at a time per study
        running = StudyJob.objects.filter(study=study, action=StudyJob.Action.PUBLISH, status__in=UNFINISHED).first()
        if running is not None:
            if set(running.annotators.values_list("pk", flat=True)) == {u.pk for u in users}:
                return running
            raise ConflictError(
                f"{study} is being published already (job {running.pk}, {running.status}): wait until it has "
                "finished, then publish again to add other annotators"
            )
        names = sorted(u.get_username() for u in users)
        job = StudyJob.objects.create(
            study=study, action=StudyJob.Action.PUBLISH, total=1, created_by=actor, result={"annotators": names}
        )
        job.annotators.set(users)
        PUBLISH_JOBS.dispatch(job.pk)
    return job


def study_publish_fail(*, job_id: int, reason: str) -> None:
    """Fail an unfinished publish with ``reason`` and say how to go on."""
    PUBLISH_JOBS.fail(job_id, reason=reason)


def study_publish_waiting(*, job_id: int) -> JobWait:
    """How the task records that it waits on Argilla, and fails the job when it gives up."""
    return PUBLISH_JOBS.waiting(job_id)


def publish_job_result(job: StudyJob) -> PublishResult:
    """A finished publish job's outcome, as ``study_publish`` returned it."""
    return PublishResult(
        study=job.study,
        dataset_id="",
        records=job.result.get("records", 0),
        new_accounts=tuple(job.result.get("new_accounts", ())),
    )


def publish_summary(names: list[str], records: int) -> str:
    """What a publish to the annotators ``names`` did, in words (the page's message, the job's summary)."""
    if not names:
        return (
            "No annotator was selected, so nobody was added and no new work was sent; the annotators' "
            f"Argilla datasets were checked and hold {records} records, as before."
        )
    return f"Published to {', '.join(sorted(names))}: the annotators' Argilla datasets hold {records} records."


def new_accounts_text(usernames: Iterable[str]) -> str:
    """The Argilla accounts a publish made, and who sets their passwords (nobody is shown one)."""
    return (
        f"New Argilla accounts: {', '.join(sorted(usernames))}. Each annotator sets their own Argilla password "
        "on Shiftlab's My Argilla account page, signed in as themselves."
    )


def study_publish_run(*, job_id: int) -> StudyJob:
    """What the job's task does: ``study_publish`` as the job's starter, then the job succeeded
    with the records the annotators' datasets hold and the Argilla accounts made, or failed with
    the reason. Argilla out of reach propagates as BackendUnavailable (the task waits and
    retries, the job left running); any other ShiftlabError fails the job. A finished job is left
    as it is (a redelivered task)."""
    job = StudyJob.objects.select_related("study__project", "created_by").get(pk=job_id)
    if job.status not in UNFINISHED:
        return job
    rows = StudyJob.objects.filter(pk=job.pk, status__in=UNFINISHED)
    rows.update(status=StudyJob.Status.RUNNING, started_at=timezone.now())
    users = list(job.annotators.order_by("pk"))
    try:
        result = study_publish(study=job.study, annotators=users, actor=job.created_by)
    except ArgillaUnavailable as exc:
        raise BackendUnavailable(str(exc), backend=f"Argilla at {settings.ARGILLA_API_URL}", reason=str(exc)) from exc
    except ShiftlabError as exc:
        study_publish_fail(job_id=job.pk, reason=str(exc))
    else:
        names = sorted(u.get_username() for u in users)
        rows.update(
            status=StudyJob.Status.SUCCEEDED,
            done=1,
            result={"records": result.records, "new_accounts": list(result.new_accounts), "annotators": names},
            summary=" ".join(
                [publish_summary(names, result.records)]
                + ([new_accounts_text(result.new_accounts)] if result.new_accounts else [])
            ),
            finished_at=timezone.now(),
            waiting=None,
        )
    return StudyJob.objects.get(pk=job.pk)
