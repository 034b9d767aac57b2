"""An LLM as one more annotator of a human-baseline study: it answers the study's instances with
the instructions and texts the humans get, and its replies are stored as ``BaselineAnswer`` rows
of rater ``llm:<backend alias>`` (prompts and parsers: ``annotation.baselines.llm_annotator``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.base_user import AbstractBaseUser
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.utils import timezone

from annotation.baselines.baseline_tasks import LLMUnit, baseline_task
from annotation.models import BaselineAnswer, BaselineLLMJob, BaselineStudy
from core.errors import ConflictError, ShiftlabError
from core.hashing import sha256_text
from core.job_services import UNFINISHED, job_fail
from core.projects import project_require_write
from core.services import audit_record
from core.task_policy import dispatch_on_commit, task_named
from core.vocabulary import plain_rater
from transforms import planning
from transforms.backends import get_backend
from transforms.backends.base import ChatFailure, ChatRequest

LLM_CHUNK = 16  # LLM requests between two saves / progress updates
LLM_JOB_TASK = "annotation.baseline_llm_answer"  # registered in annotation/tasks.py


def rater_of_llm(backend_alias: str) -> str:
    return f"llm:{backend_alias}"


@dataclass(frozen=True)
class LLMAnnotateResult:
    rater: str
    total: int  # instances in the study
    skipped: int  # already answered by this rater before the call
    valid: int  # answers stored now that parsed
    invalid: int  # answers stored now that did not parse
    failed: int  # instances the backend could not answer (nothing stored; run again)


def _requests(study: BaselineStudy, units: Sequence[LLMUnit]) -> list[ChatRequest]:
    """Greedy decoding, with a seed drawn from the study's seed and the unit's first instance key."""
    return [
        ChatRequest(
            messages=u.messages,
            temperature=0.0,
            top_p=1.0,
            max_tokens=u.max_tokens,
            seed=planning.sampling_seed(seed=study.seed, text_hash=sha256_text(u.instances[0].key), step=0, attempt=0),
        )
        for u in units
    ]


def _answers(
    study: BaselineStudy, rater: str, units: Sequence[LLMUnit], results: Sequence[Any], counts: dict[str, int]
) -> list[BaselineAnswer]:
    """The answer rows of the units the backend answered (a failed request gives none)."""
    task, rows, now = baseline_task(study.task_type), [], timezone.now()
    for unit, result in zip(units, results, strict=True):
        if isinstance(result, ChatFailure):
            continue
        for instance, parsed in zip(unit.instances, task.llm_parse(unit, result.text, study.options), strict=True):
            rows.append(
                BaselineAnswer(
                    instance=instance,
                    rater=rater,
                    source=BaselineAnswer.Source.LLM,
                    value=parsed.value if parsed.ok else None,
                    raw=result.text,
                    valid=parsed.ok,
                    submitted_at=now,
                )
            )
            counts["valid" if parsed.ok else "invalid"] += 1
    return rows


def _llm_check(study: BaselineStudy, backend_alias: str, actor: AbstractBaseUser | None):
    """The study (fresh) and the backend, once ``actor`` may change the study, the study takes
    answers and ``backend_alias`` names a configured backend."""
    study = BaselineStudy.objects.select_related("project").get(pk=study.pk)
    project_require_write(actor, study.project)
    if study.status == BaselineStudy.Status.CLOSED:
        raise ConflictError(f"{study} is closed: it takes no more answers, from humans or LLMs")
    try:
        return study, get_backend(backend_alias)
    except ImproperlyConfigured as exc:
        raise ShiftlabError(str(exc)) from exc


def baseline_llm_annotate(
    *,
    study: BaselineStudy,
    backend_alias: str = "default",
    actor: AbstractBaseUser | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> LLMAnnotateResult:
    """Have the LLM of ``backend_alias`` answer every instance the way an annotator would.

    Same instructions and texts as the humans get; greedy decoding (temperature 0) with a seed
    drawn from the study's seed and the instance key. Each reply is stored as a ``BaselineAnswer``
    of rater ``llm:<alias>`` with its raw text; a reply that does not parse is stored with
    ``valid=False``. Resumable and idempotent: instances this rater answered are skipped, and
    answers are saved every few requests. Clustering is asked per batch (a batch whose reply does
    not parse gets an invalid answer for each of its texts). ``on_progress(done, total)`` counts
    instances. Requests the backend fails are not stored: the call then raises ``ShiftlabError``
    after saving the rest, and running it again retries them. ``actor`` must be able to change the
    study's project.
    """
    study, backend = _llm_check(study, backend_alias, actor)
    rater = rater_of_llm(backend_alias)
    instances = list(study.instances.order_by("position"))
    answered = set(
        BaselineAnswer.objects.filter(instance__study=study, rater=rater).values_list("instance_id", flat=True)
    )
    todo = [i for i in instances if i.pk not in answered]
    units = baseline_task(study.task_type).llm_units(study.instructions, study.options, todo)
    done, counts, failures = len(answered), defaultdict(int), []
    if on_progress:
        on_progress(done, len(instances))
    for start in range(0, len(units), LLM_CHUNK):
        chunk = units[start : start + LLM_CHUNK]
        results = backend.generate(_requests(study, chunk))
        chunk_failures = [r.message for r in results if isinstance(r, ChatFailure)]
        failures.extend(chunk_failures)
        rows = _answers(study, rater, chunk, results, counts)
        with transaction.atomic():
            BaselineAnswer.objects.bulk_create(rows, ignore_conflicts=True)
        done += len(rows)
        if on_progress:
            on_progress(done, len(instances))
        if len(chunk_failures) == len(chunk):
            break  # the backend answers nothing: no point sending the rest now
    result = LLMAnnotateResult(
        rater=rater,
        total=len(instances),
        skipped=len(answered),
        valid=counts["valid"],
        invalid=counts["invalid"],
        failed=len(todo) - counts["valid"] - counts["invalid"],
    )
    if result.valid or result.invalid:
        payload = {"rater": rater, "model": backend.model_id, "valid": result.valid, "invalid": result.invalid}
        with transaction.atomic():
            audit_record(
                actor=actor, verb="baseline.llm_annotate", obj=study, payload={**payload, "failed": result.failed}
            )
    if result.failed:
        reason = failures[0] if failures else "stopped early"
        raise ShiftlabError(
            f"the LLM backend {backend_alias!r} failed on {result.failed} of {len(todo)} instances "
            f"({reason}); the {result.valid + result.invalid} answers received are saved: let the LLM answer "
            "again to retry the rest"
        )
    return result


def llm_result_text(result: LLMAnnotateResult) -> str:
    """What an LLM's pass over a study did, in words."""
    return (
        f"{plain_rater(result.rater)} answered {result.valid + result.invalid} instances "
        f"({result.invalid} unreadable); {result.skipped} were answered before."
    )


def baseline_llm_job_start(
    *, study: BaselineStudy, backend_alias: str = "default", actor: AbstractBaseUser | None = None
) -> BaselineLLMJob:
    """The one entry of the study page's "Let the LLM answer": the checks of
    ``baseline_llm_annotate`` now (who may, a closed study, an unknown backend), then a job row
    whose task (``LLM_JOB_TASK``) lets the LLM answer in the background, counting ``done`` of
    ``total`` instances as it goes. A job of the same backend still unfinished is returned, not
    started twice. In the single-machine default (no broker) the task runs at once, in this call."""
    study, _ = _llm_check(study, backend_alias, actor)
    with transaction.atomic():
        unfinished = BaselineLLMJob.objects.select_for_update().filter(
            study=study, backend_alias=backend_alias, status__in=UNFINISHED
        )
        if job := unfinished.first():
            return job
        job = BaselineLLMJob.objects.create(
            study=study, backend_alias=backend_alias, total=study.instances.count(), created_by=actor
        )
        baseline_llm_job_dispatch(job_id=job.pk)
    return job


def baseline_llm_job_dispatch(*, job_id: int) -> None:
    """Queue the job's task once the transaction commits (again, for the stuck-job sweeper: the
    task resumes where the answers stored end); an unreachable broker fails the job with why."""
    dispatch_on_commit(
        lambda: task_named(LLM_JOB_TASK, job_id).apply_async(),
        on_broker_down=lambda message: baseline_llm_job_fail(job_id=job_id, reason=message),
    )


def baseline_llm_job_fail(*, job_id: int, reason: str) -> None:
    job_fail(
        model=BaselineLLMJob,
        job_id=job_id,
        message=f"{reason}; the answers received are kept: let the LLM answer again",
    )


def baseline_llm_job_run(*, job_id: int) -> BaselineLLMJob:
    """What the job's task does: ``baseline_llm_annotate`` as the job's starter, with its progress
    on the job row, then the job succeeded with what it did, or failed with the reason (the
    answers received are kept: starting again retries the rest). A job that has ended is left
    as it is (a redelivered task)."""
    job = BaselineLLMJob.objects.select_related("study", "created_by").get(pk=job_id)
    if job.status not in UNFINISHED:
        return job
    rows = BaselineLLMJob.objects.filter(pk=job.pk)
    rows.update(status=BaselineLLMJob.Status.RUNNING, started_at=timezone.now())

    def progress(done: int, total: int) -> None:
        rows.update(done=done, total=total)

    try:
        result = baseline_llm_annotate(
            study=job.study, backend_alias=job.backend_alias, actor=job.created_by, on_progress=progress
        )
    except ShiftlabError as exc:  # its message says what to do already
        job_fail(model=BaselineLLMJob, job_id=job.pk, message=str(exc))
    else:
        rows.filter(status__in=UNFINISHED).update(
            status=BaselineLLMJob.Status.SUCCEEDED, finished_at=timezone.now(), summary=llm_result_text(result)
        )
    return BaselineLLMJob.objects.get(pk=job.pk)
