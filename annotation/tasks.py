"""Thin Celery tasks of studies: syncing responses from Argilla (retried while it is unreachable),
then the adaptive check of adaptive designs (``adaptive_services``)."""

from dataclasses import asdict

from celery import shared_task

from annotation.argilla import ArgillaUnavailable
from annotation.baselines.baseline_llm_services import (
    LLM_JOB_TASK,
    baseline_llm_job_dispatch,
    baseline_llm_job_fail,
    baseline_llm_job_run,
)
from annotation.models import BaselineLLMJob, Study
from annotation.publishing.argilla_services import study_release_batches
from annotation.publishing.sync_services import study_sync
from annotation.quality.adaptive_services import study_adaptive_check
from annotation.selectors import study_sync_due_list
from core.sweeper import StuckJobKind, stuck_job_kind_register
from core.task_policy import ARGILLA_UNAVAILABLE


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
