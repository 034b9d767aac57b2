"""Validating a study as a background job (issue 41): the LLM judge estimates of its rated items,
then the control checks, flags and rejections of ``validation_services.study_validate``, run by
a task on the ``llm`` queue while the page, the API and the command show the job's progress.

One entry starts it (``study_validation_start``); a validation already running is joined, not
started twice. The task is resumable: estimates are saved a few items at a time and judgements
are cached, so a retried or resumed task only asks the judges what is still missing.
"""

from __future__ import annotations

from dataclasses import asdict

from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from annotation.models import Study, StudyJob
from annotation.studies.validation_services import study_estimate_calls, study_validate, study_validate_check
from core.errors import ShiftlabError
from core.job_services import UNFINISHED, JobWait
from core.projects import project_require_write
from transforms.backends.base import TransientBackendError
from transforms.jobs import JobKind

VALIDATION_TASK = "annotation.study_validate"  # registered in annotation/tasks.py, routed to the llm queue

VALIDATION_JOBS = JobKind(
    model=StudyJob,
    noun="validation",
    task=VALIDATION_TASK,
    errback="annotation.study_validate_failed",
    kept="The LLM estimates made so far are kept",
    resume="press Validate on the study's page again",
)


def study_validation_start(*, study: Study, actor: AbstractBaseUser | None = None) -> StudyJob:
    """The one entry of "Validate" (page, API, command): check that ``actor`` may change the study
    and that it is published, then queue a validation job on the ``llm`` queue once the
    transaction commits; a validation of the study still unfinished is returned instead (a second
    click joins it). In the single-machine default (no broker) the job runs in this call."""
    study = Study.objects.select_related("project").get(pk=study.pk)
    if actor is not None:
        project_require_write(actor, study.project)
    study = study_validate_check(study)
    with transaction.atomic():
        Study.objects.select_for_update().filter(pk=study.pk).first()  # one start at a time per study
        running = StudyJob.objects.filter(study=study, action=StudyJob.Action.VALIDATE, status__in=UNFINISHED)
        if job := running.first():
            return job
        job = StudyJob.objects.create(
            study=study,
            action=StudyJob.Action.VALIDATE,
            total=study_estimate_calls(study=study) + 1,
            created_by=actor,
        )
        VALIDATION_JOBS.dispatch(job.pk)
    return job


def study_validation_fail(*, job_id: int, reason: str) -> None:
    """Fail an unfinished validation with ``reason`` and say how to go on."""
    VALIDATION_JOBS.fail(job_id, reason=reason)


def study_validation_waiting(*, job_id: int) -> JobWait:
    """How the task records that it waits on a judge's backend, and fails the job when it gives up."""
    return VALIDATION_JOBS.waiting(job_id)


def study_validation_run(*, job_id: int) -> StudyJob:
    """What the job's task does: ``study_validate`` as the job's starter, counting each judge
    call settled on the row, then the job succeeded with the result, or failed with the reason.
    Transient backend trouble propagates as TransientBackendError (the task waits and retries,
    the job left running); any other ShiftlabError fails the job. A finished job is left as it is
    (a redelivered task)."""
    job = StudyJob.objects.select_related("study", "created_by").get(pk=job_id)
    if job.status not in UNFINISHED:
        return job
    rows = StudyJob.objects.filter(pk=job.pk, status__in=UNFINISHED)
    rows.update(status=StudyJob.Status.RUNNING, started_at=timezone.now(), done=0)

    def progress(calls: int) -> None:
        rows.update(done=F("done") + calls, waiting=None)  # the backend answered: the job waits no more

    try:
        result = study_validate(study=job.study, actor=job.created_by, on_progress=progress)
    except TransientBackendError:
        raise
    except ShiftlabError as exc:
        study_validation_fail(job_id=job.pk, reason=str(exc))
    else:
        rows.update(
            status=StudyJob.Status.SUCCEEDED,
            done=F("total"),
            result=asdict(result),
            summary=result.summary(),
            finished_at=timezone.now(),
            waiting=None,
        )
    return StudyJob.objects.get(pk=job.pk)
