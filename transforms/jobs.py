"""How the app's two kinds of job, transformation runs and judge reports, are queued, failed and
waited on: one description per kind, so that both queue alike and say alike how to resume."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from core.job_services import JobWait, job_fail
from core.models import TrackedJob
from core.sweeper import StuckJobKind
from core.task_policy import dispatch_on_commit, task_named
from transforms.models import JudgeReport, TransformRun


@dataclass(frozen=True)
class JobKind:
    model: type[TrackedJob]
    noun: str
    task: str
    """The registered name of the task that executes a job (it receives the job's id)."""
    errback: str
    """The task that fails the job when one of its tasks fails for good."""
    kept: str
    """What a resumed job reuses."""
    resume: str
    """How to resume a job, with ``{id}`` for its id."""

    def dispatch(self, job_id: int) -> None:
        """Queue the job's task once the current transaction commits; if the task fails for good,
        or cannot be queued, the job is failed with the reason."""
        dispatch_on_commit(
            lambda: task_named(self.task, job_id).apply_async(link_error=task_named(self.errback, job_id)),
            on_broker_down=lambda message: self.fail(job_id, reason=message),
        )

    def fail(self, job_id: int, *, reason: str) -> None:
        """Fail an unfinished job with ``reason`` and say how to go on."""
        how = self.resume.format(id=job_id)
        message = f"{reason}. {self.kept}: fix the cause, then resume the {self.noun} ({how})."
        job_fail(model=self.model, job_id=job_id, message=message)

    def stuck(self, label: str, *, tasks: set[str], resume: Callable[[TrackedJob], object]) -> StuckJobKind:
        """What the sweeper needs to resume or fail a job of this kind that ``tasks`` left stuck."""
        return StuckJobKind(
            label=label,
            model=self.model,
            task_names=frozenset(tasks),
            resume=resume,
            fail=lambda job_id, reason: self.fail(job_id, reason=reason),
        )

    def waiting(self, job_id: int) -> JobWait:
        """How the job's tasks record that they wait on a backend, and fail it when they give up."""
        return JobWait(model=self.model, job_id=job_id, fail=partial(self.fail, job_id))


RUNS = JobKind(
    model=TransformRun,
    noun="run",
    task="transforms.start_run",
    errback="transforms.run_failed",
    kept="Texts done so far are kept",
    resume="python manage.py transform --run {id} --resume, or POST /api/transform-runs/{id}/resume/",
)
REPORTS = JobKind(
    model=JudgeReport,
    noun="report",
    task="transforms.execute_judge_report",
    errback="transforms.judge_report_failed",
    kept="Judgements made so far are cached",
    resume="POST /api/judge-reports/{id}/resume/",
)
