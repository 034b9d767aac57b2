"""Thin Celery tasks of studies: syncing responses from Argilla (retried while it is unreachable),
then the adaptive check of adaptive designs (``adaptive_services``); the LLM judges scoring every
output of a study (``judge_population_services``, retried while the judge's backend cannot answer);
validating a study (``validation_job_services``, likewise) and publishing it
(``publish_job_services``, retried while Argilla is unreachable); syncing a human baseline's answers."""

from dataclasses import asdict

from celery import shared_task
from django.contrib.auth import get_user_model

from annotation.argilla import ArgillaUnavailable
from annotation.baselines.baseline_llm_services import (
    LLM_JOB_TASK,
    baseline_llm_job_dispatch,
    baseline_llm_job_fail,
    baseline_llm_job_run,
)
from annotation.baselines.baseline_publish_job_services import (
    BASELINE_PUBLISH_JOBS,
    BASELINE_PUBLISH_TASK,
    baseline_publish_fail,
    baseline_publish_run,
    baseline_publish_waiting,
)
from annotation.baselines.baseline_sync_services import baseline_sync
from annotation.models import BaselineLLMJob, BaselineStudy, Study, StudyJob
from annotation.selectors import study_sync_due_list
from annotation.studies.adaptive_services import study_adaptive_check
from annotation.studies.argilla_services import study_release_batches
from annotation.studies.judge_population_services import (
    JUDGE_POPULATION_JOBS,
    JUDGE_POPULATION_TASK,
    judge_population_job_dispatch,
    judge_population_job_fail,
    judge_population_job_run,
    judge_population_job_waiting,
)
from annotation.studies.publish_job_services import (
    PUBLISH_JOBS,
    PUBLISH_TASK,
    study_publish_fail,
    study_publish_run,
    study_publish_waiting,
)
from annotation.studies.sync_services import study_sync
from annotation.studies.validation_job_services import (
    VALIDATION_JOBS,
    VALIDATION_TASK,
    study_validation_fail,
    study_validation_run,
    study_validation_waiting,
)
from core.errors import ForbiddenError
from core.sweeper import StuckJobKind, stuck_job_kind_register
from core.task_policy import ARGILLA_UNAVAILABLE, TRANSIENT_BACKEND, failure_reason
from core.waiting import BackendUnavailable
from transforms.backends.base import TransientBackendError


@shared_task(
    name="annotation.sync_study",
    acks_late=True,
    reject_on_worker_lost=True,
    **ARGILLA_UNAVAILABLE.task_options(ArgillaUnavailable),
)
def sync_study(study_id: int) -> dict:
    """Sync one study's submitted responses, then (adaptive designs) withdraw the open items of
    transformations the sequential gate has settled, and (designs releasing batches one by one)
    give annotators their next batches; idempotent, so a redelivered task is harmless."""
    study = Study.objects.get(pk=study_id)
    result = study_sync(study=study)
    study_adaptive_check(study=study)
    study_release_batches(study=study)
    return asdict(result)


@shared_task(
    name="annotation.sync_baseline",
    acks_late=True,
    reject_on_worker_lost=True,
    **ARGILLA_UNAVAILABLE.task_options(ArgillaUnavailable),
)
def sync_baseline(study_id: int, actor_id: int | None = None) -> dict:
    """Sync one human baseline's submitted answers, as ``actor_id`` (who asked; checked again here);
    idempotent, so a redelivered task is harmless."""
    actor = None  # the system
    if actor_id is not None:
        actor = get_user_model().objects.filter(pk=actor_id, is_active=True).first()
        if actor is None:  # never fall back to the system's rights for someone who is gone
            raise ForbiddenError(f"the user #{actor_id} who asked for this sync no longer exists or is inactive")
    return asdict(baseline_sync(study=BaselineStudy.objects.get(pk=study_id), actor=actor))


@shared_task(name="annotation.sync_published_studies", acks_late=True, reject_on_worker_lost=True)
def sync_published_studies() -> int:
    """Queue one ``sync_study`` per published validation study (run by Celery beat every
    ``SHIFTLAB_SYNC_EVERY_SECONDS``: the fallback for webhooks that never arrived, and what
    releases annotators' next batches when no webhook does). Returns how many were queued."""
    ids = study_sync_due_list()
    for study_id in ids:
        sync_study.delay(study_id)
    return len(ids)


@shared_task(name="annotation.baseline_llm_answer", acks_late=True, reject_on_worker_lost=True)
def baseline_llm_answer(job_id: int) -> str:
    """Let an LLM answer a baseline study (``baseline_llm_job_run``); resumable, so a redelivered
    task only asks for the instances still unanswered."""
    return baseline_llm_job_run(job_id=job_id).status


stuck_job_kind_register(
    StuckJobKind(
        label="baseline LLM answers",
        model=BaselineLLMJob,
        task_names=frozenset({LLM_JOB_TASK}),
        resume=lambda job: baseline_llm_job_dispatch(job_id=job.pk),
        fail=lambda job_id, reason: baseline_llm_job_fail(job_id=job_id, reason=reason),
    )
)


@shared_task(
    name=JUDGE_POPULATION_TASK, acks_late=True, reject_on_worker_lost=True, **TRANSIENT_BACKEND.retry_options()
)
def judge_population(self, job_id: int) -> str:
    """Have a study's judges score every output of one transformation (``judge_population_job_run``);
    resumable, so a redelivered or retried task only asks for the judgements still missing."""
    try:
        return judge_population_job_run(job_id=job_id).status
    except TransientBackendError as exc:
        TRANSIENT_BACKEND.retry(self, exc, job=judge_population_job_waiting(job_id=job_id))


@shared_task(name=JUDGE_POPULATION_JOBS.errback)
def judge_population_failed(request, exc, traceback, job_id: int) -> None:
    """Errback of ``judge_population``: an unexpected error fails the job instead of leaving it running."""
    judge_population_job_fail(job_id=job_id, reason=f"The judging task failed: {failure_reason(exc)}")


stuck_job_kind_register(
    JUDGE_POPULATION_JOBS.stuck(
        "judges on every output",
        tasks={JUDGE_POPULATION_TASK},
        resume=lambda job: judge_population_job_dispatch(job_id=job.pk),
    )
)


@shared_task(name=VALIDATION_TASK, acks_late=True, reject_on_worker_lost=True, **TRANSIENT_BACKEND.retry_options())
def study_validate(self, job_id: int) -> str:
    """Validate a study (``study_validation_run``); resumable, so a redelivered or retried task only
    asks the judges for the estimates still missing."""
    try:
        return study_validation_run(job_id=job_id).status
    except TransientBackendError as exc:
        TRANSIENT_BACKEND.retry(self, exc, job=study_validation_waiting(job_id=job_id))


@shared_task(name=VALIDATION_JOBS.errback)
def study_validate_failed(request, exc, traceback, job_id: int) -> None:
    """Errback of ``study_validate``: an unexpected error fails the job instead of leaving it running."""
    study_validation_fail(job_id=job_id, reason=f"The validation task failed: {failure_reason(exc)}")


@shared_task(name=PUBLISH_TASK, acks_late=True, reject_on_worker_lost=True, **ARGILLA_UNAVAILABLE.retry_options())
def study_publish(self, job_id: int) -> str:
    """Publish a study to Argilla (``study_publish_run``); idempotent, so a redelivered or retried
    task only upserts what is already there."""
    try:
        return study_publish_run(job_id=job_id).status
    except BackendUnavailable as exc:
        ARGILLA_UNAVAILABLE.retry(self, exc, job=study_publish_waiting(job_id=job_id))


@shared_task(name=PUBLISH_JOBS.errback)
def study_publish_failed(request, exc, traceback, job_id: int) -> None:
    """Errback of ``study_publish``: an unexpected error fails the job instead of leaving it running."""
    study_publish_fail(job_id=job_id, reason=f"The publish task failed: {failure_reason(exc)}")


@shared_task(
    name=BASELINE_PUBLISH_TASK, acks_late=True, reject_on_worker_lost=True, **ARGILLA_UNAVAILABLE.retry_options()
)
def baseline_publish(self, job_id: int) -> str:
    """Publish a baseline study to Argilla (``baseline_publish_run``); idempotent."""
    try:
        return baseline_publish_run(job_id=job_id).status
    except BackendUnavailable as exc:
        ARGILLA_UNAVAILABLE.retry(self, exc, job=baseline_publish_waiting(job_id=job_id))


@shared_task(name=BASELINE_PUBLISH_JOBS.errback)
def baseline_publish_failed(request, exc, traceback, job_id: int) -> None:
    """Errback of ``baseline_publish``: an unexpected error fails the job instead of leaving it running."""
    baseline_publish_fail(job_id=job_id, reason=f"The publish task failed: {failure_reason(exc)}")


stuck_job_kind_register(
    BASELINE_PUBLISH_JOBS.stuck(
        "baseline publish",
        tasks={BASELINE_PUBLISH_TASK},
        resume=lambda job: BASELINE_PUBLISH_JOBS.dispatch(job.pk),
    )
)


# Validations and publishes share their model (StudyJob): one kind, whose job's action says which
# task resumes it and how its failure reads.
_STUDY_JOBS = {StudyJob.Action.VALIDATE: VALIDATION_JOBS, StudyJob.Action.PUBLISH: PUBLISH_JOBS}
stuck_job_kind_register(
    StuckJobKind(
        label="study validation or publish",
        model=StudyJob,
        task_names=frozenset({VALIDATION_TASK, PUBLISH_TASK}),
        resume=lambda job: _STUDY_JOBS[job.action].dispatch(job.pk),
        fail=lambda job_id, reason: _STUDY_JOBS[StudyJob.objects.get(pk=job_id).action].fail(job_id, reason=reason),
    )
)
