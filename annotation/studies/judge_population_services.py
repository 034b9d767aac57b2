"""The LLM judges on every output of a study's transformation runs (issue 40): the population over
which the prediction-powered gate takes the judges' mean, the background job that has the judges
score it (on the ``llm`` queue, cached, with progress), and the judges' estimates read back from
the cache alone.

The judges are asked exactly what ``validation_services.study_estimate`` asks about the sampled
items (same kinds, prompts, parameters and seed), so both share their cache entries: a rated item's
judge estimate is its output's. A judge answer that never parsed counts as the midpoint of the
question's scale, a stand-in fixed here before any human rating is seen.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field

import numpy as np
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction
from django.db.models import F, Q, QuerySet
from django.utils import timezone

from annotation.kinds import ItemKind
from annotation.models import JudgePopulationJob, Study
from annotation.science.design import JUDGE_KIND_OF_QUESTION, Question
from annotation.science.validation import llm_estimate
from annotation.studies.design_services import study_design
from core.errors import ConflictError, NotFoundError, ShiftlabError
from core.hashing import sha256_json
from core.job_services import UNFINISHED, JobWait
from core.projects import project_require_write
from core.services import audit_record
from transforms.backends import backend_chosen
from transforms.backends.base import TransientBackendError
from transforms.jobs import JobKind
from transforms.judgement_services import JudgeParams, LookupStatus, cached_judge_scores, judge_pairs
from transforms.judging import JUDGE_PROMPTS, SCALES, JudgeKind
from transforms.models import TransformedItem
from transforms.prompts import prompt_hash

JUDGE_POPULATION_TASK = "annotation.judge_population"  # registered in annotation/tasks.py
JUDGE_POPULATION_CHUNK = 8  # pairs per judge call between two progress updates
# What stands in for an estimate no judge answered with a number on the scale (every attempt of
# every judge unparsed): part of the fingerprint, so that a changed rule voids the gate's evidence.
STAND_IN = "midpoint of the question's scale"

JUDGE_POPULATION_JOBS = JobKind(
    model=JudgePopulationJob,
    noun="judging of every output",
    task=JUDGE_POPULATION_TASK,
    errback="annotation.judge_population_failed",
    kept="Judgements made so far are cached",
    resume="start it again on the study's page",
)


def judging_fingerprint(
    *, judges: tuple[str, ...], models: dict[str, str], prompt_hashes: dict[str, str], params: dict, seed: int
) -> str:
    """A short hash of what decides the judges' estimates: a changed judge, model, prompt,
    parameter, seed or stand-in rule gives another fingerprint."""
    return sha256_json(
        {
            "judges": list(judges),
            "models": models,
            "prompt_hashes": prompt_hashes,
            "params": params,
            "seed": seed,
            "stand_in": STAND_IN,
        }
    )[:16]


@dataclass(frozen=True)
class _Judging:
    """How a study's judges are asked: its judged questions, the judges and their models, the
    prompts, parameters and seed (those of ``study_estimate``)."""

    questions: tuple[Question, ...]
    judges: tuple[str, ...]
    models: dict[str, str]
    prompt_hashes: dict[str, str]
    params: JudgeParams
    seed: int

    def fingerprint(self) -> str:
        return judging_fingerprint(
            judges=self.judges,
            models=self.models,
            prompt_hashes=self.prompt_hashes,
            params=asdict(self.params),
            seed=self.seed,
        )


def _judge_kind(question: Question) -> JudgeKind:
    return JudgeKind(JUDGE_KIND_OF_QUESTION[question.name])


def _judging(study: Study) -> _Judging:
    """The study's judging; ShiftlabError when a judge names no configured backend."""
    design = study_design(study)
    questions = tuple(q for q in design.questions if q.name in JUDGE_KIND_OF_QUESTION)
    kinds = [_judge_kind(q) for q in questions]
    return _Judging(
        questions=questions,
        judges=tuple(design.llm_judges),
        models={alias: backend_chosen(alias).model_id for alias in design.llm_judges},
        prompt_hashes={kind.value: prompt_hash(*JUDGE_PROMPTS[kind]) for kind in kinds},
        params=JudgeParams(),
        seed=design.seed,
    )


def judge_population_outputs(study: Study, transformation: str) -> list[TransformedItem]:
    """The outputs the judges score for ``transformation``: those recorded at lock in
    ``sample_info[transformation]["population"]`` (TransformedItem ids, in that order), else every
    successful output with text of the study's runs of that transformation, in id order."""
    runs = study.runs.filter(transformation=transformation)
    if not runs.exists():
        known = ", ".join(sorted({r.transformation for r in study.runs.all()})) or "none"
        raise NotFoundError(f"{study} has no run of {transformation!r} (its transformations: {known})")
    recorded = (study.sample_info or {}).get(transformation, {}).get("population")
    if recorded is None:
        return list(TransformedItem.objects.filter(run__in=runs, ok=True).exclude(output_text="").order_by("pk"))
    found = TransformedItem.objects.in_bulk(recorded)
    lost = [pk for pk in recorded if pk not in found]
    if lost:
        raise ShiftlabError(
            f"{len(lost)} outputs of the {transformation} population recorded when {study} was locked no longer "
            f"exist (ids {', '.join(map(str, lost[:5]))}{'…' if len(lost) > 5 else ''}): the judges' mean over "
            "them cannot be computed; create a new version of the study"
        )
    return [found[pk] for pk in recorded]


# --- the job ------------------------------------------------------------------------------------


def study_judge_population_start(*, study: Study, actor: AbstractBaseUser | None = None) -> list[JudgePopulationJob]:
    """Have the study's judges score every output of each of its transformations: one job per
    transformation, queued on the ``llm`` queue once the transaction commits. A job of the same
    judging (fingerprint) still unfinished, or succeeded, is returned instead of a new one. Refuses
    an unlocked study, a design without judges or judged questions, and judges that name no
    configured backend. In the single-machine default (no broker) the jobs run in this call."""
    study = Study.objects.select_related("project").get(pk=study.pk)
    if actor is not None:
        project_require_write(actor, study.project)
    if not study.is_locked:
        raise ConflictError(f"{study} is not locked: lock it first, which fixes the outputs its judges score")
    judging = _judging(study)
    if not judging.judges:
        raise ShiftlabError(
            f"the design of {study} names no LLM judge: create a version whose llm_judges names at least one "
            "backend alias (TRANSFORM_BACKENDS)",
            field="llm_judges",
        )
    if not judging.questions:
        raise ShiftlabError(
            f"no question of {study} has an LLM judge (judged: {', '.join(JUDGE_KIND_OF_QUESTION)}): "
            "there is nothing for the judges to score"
        )
    fingerprint = judging.fingerprint()
    per_output = len(judging.questions) * len(judging.judges)
    jobs, started = [], []
    with transaction.atomic():
        for transformation in sorted({r.transformation for r in study.runs.all()}):
            reusable = JudgePopulationJob.objects.select_for_update().filter(
                Q(status__in=UNFINISHED) | Q(status=JudgePopulationJob.Status.SUCCEEDED),
                study=study,
                transformation=transformation,
                fingerprint=fingerprint,
            )
            job = reusable.first()
            # A finished job is reused only while what it scored is still all there (a cache emptied
            # since, or outputs added, need a new one).
            if job is not None and (
                job.status != JudgePopulationJob.Status.SUCCEEDED
                or study_judge_population(study=study, transformation=transformation).complete
            ):
                jobs.append(job)
                continue
            job = JudgePopulationJob.objects.create(
                study=study,
                transformation=transformation,
                judges=list(judging.judges),
                fingerprint=fingerprint,
                total=len(judge_population_outputs(study, transformation)) * per_output,
                created_by=actor,
            )
            JUDGE_POPULATION_JOBS.dispatch(job.pk)
            jobs.append(job)
            started.append(job)
        if started:
            audit_record(
                actor=actor,
                verb="study.judge_population.start",
                obj=study,
                payload={
                    "jobs": {job.transformation: job.pk for job in started},
                    "judges": list(judging.judges),
                    "models": judging.models,
                    "fingerprint": fingerprint,
                },
            )
    return jobs


def judge_population_job_fail(*, job_id: int, reason: str) -> None:
    """Fail an unfinished job with ``reason`` and say how to go on."""
    JUDGE_POPULATION_JOBS.fail(job_id, reason=reason)


def judge_population_job_waiting(*, job_id: int) -> JobWait:
    """How the job's task records that it waits on a judge's backend, and fails it when it gives up."""
    return JUDGE_POPULATION_JOBS.waiting(job_id)


def judge_population_job_dispatch(*, job_id: int) -> None:
    """Queue the job's task again (the stuck-job sweeper): it resumes from the cache."""
    JUDGE_POPULATION_JOBS.dispatch(job_id)


def judge_population_job_run(*, job_id: int) -> JudgePopulationJob:
    """What the job's task does: look up which judgements the cache lacks, ask the judges for
    them a chunk at a time (``done`` counts judge calls settled, cached ones included), then mark
    the job succeeded with the counts of scored and failed answers. Transient backend trouble
    propagates as TransientBackendError (the task waits and retries, the job left running); any
    other ShiftlabError fails the job. A job that has ended is left as it is (a redelivered task)."""
    job = JudgePopulationJob.objects.select_related("study").get(pk=job_id)
    if job.status not in UNFINISHED:
        return job
    rows = JudgePopulationJob.objects.filter(pk=job.pk, status__in=UNFINISHED)
    rows.update(status=JudgePopulationJob.Status.RUNNING, started_at=timezone.now())
    try:
        result = _judge_every_output(job, rows)
    except TransientBackendError:
        raise
    except ShiftlabError as exc:
        judge_population_job_fail(job_id=job.pk, reason=str(exc))
    else:
        rows.update(
            status=JudgePopulationJob.Status.SUCCEEDED,
            done=F("total"),
            result=result,
            finished_at=timezone.now(),
            waiting=None,
        )
    return JudgePopulationJob.objects.get(pk=job.pk)


def _judge_every_output(job: JudgePopulationJob, rows: QuerySet) -> dict:
    judging = _judging(job.study)
    if judging.fingerprint() != job.fingerprint:
        raise ShiftlabError(
            f"the judges, their models or prompts changed since job {job.pk} was started (models now: {judging.models})"
        )
    pairs = [(o.source_text, o.output_text) for o in judge_population_outputs(job.study, job.transformation)]
    counts: Counter[str] = Counter()
    todo: list[tuple[JudgeKind, str, list[int]]] = []
    for question in judging.questions:
        kind = _judge_kind(question)
        for alias in judging.judges:
            lookups = cached_judge_scores(
                kind=kind, pairs=pairs, backend_alias=alias, seed=judging.seed, params=judging.params
            )
            counts.update(lookup.status.value for lookup in lookups)
            todo.append((kind, alias, [i for i, lookup in enumerate(lookups) if lookup.status == LookupStatus.MISSING]))
    total = len(pairs) * len(judging.questions) * len(judging.judges)
    rows.update(total=total, done=total - counts[LookupStatus.MISSING.value])
    for kind, alias, missing in todo:
        for start in range(0, len(missing), JUDGE_POPULATION_CHUNK):
            chunk = [pairs[i] for i in missing[start : start + JUDGE_POPULATION_CHUNK]]
            kept = judge_pairs(kind=kind, pairs=chunk, backend_alias=alias, seed=judging.seed, params=judging.params)
            counts.update(LookupStatus.SCORED.value if j.score is not None else LookupStatus.FAILED.value for j in kept)
            # The backend answered: the job waits no more.
            rows.update(done=F("done") + len(chunk), waiting=None)
    return {
        "outputs": len(pairs),
        "questions": [q.name for q in judging.questions],
        "judges": list(judging.judges),
        "scored": counts[LookupStatus.SCORED.value],
        "failed": counts[LookupStatus.FAILED.value],
        "fingerprint": job.fingerprint,
    }


# --- the estimates, read from the cache -----------------------------------------------------------


@dataclass(frozen=True)
class JudgeJobState:
    """The latest judging job of a transformation, as the study page shows it."""

    id: int
    status: str
    done: int
    total: int
    waiting: str | None  # e.g. "Waiting for the LLM backend 'default' since 05:09: ..."
    error: str


@dataclass(frozen=True, eq=False)
class JudgePopulation:
    """The judges' estimates of every output of one transformation, on each judged question's
    scale: the mean of the judges' parsed scores (``annotation.science.validation.llm_estimate``),
    or the question's scale midpoint (``stand_ins``) where no judge's answer parsed.

    ``scored``, ``failed`` and ``missing`` count estimates (output × judged question): from a
    parsed answer, stand-ins, and those still waiting for some judge's answer. ``scores`` holds one
    array per question, in the order of ``output_ids``, only when ``complete``; ``item_scores``
    gives each real study item of the transformation the estimates of its pair that are settled
    (stand-ins included), so a rated item's judge score is its output's.
    """

    transformation: str
    total: int
    output_ids: tuple[int, ...]
    questions: tuple[str, ...]
    judges: tuple[str, ...]
    models: dict[str, str]
    prompt_hashes: dict[str, str]
    params: dict
    seed: int
    stand_ins: dict[str, float]
    scored: int
    failed: int
    missing: int
    complete: bool
    scores: dict[str, np.ndarray] = field(default_factory=dict)
    item_scores: dict[int, dict[str, float]] = field(default_factory=dict)
    job: JudgeJobState | None = None

    @property
    def estimates(self) -> int:
        """Estimates a complete population has: outputs × judged questions."""
        return self.total * len(self.questions)

    def fingerprint(self) -> str:
        """A short hash of the judges, models, prompts, parameters, seed and stand-in rule: the
        gate's evidence stores it, and evidence with another fingerprint is void."""
        return judging_fingerprint(
            judges=self.judges,
            models=self.models,
            prompt_hashes=self.prompt_hashes,
            params=self.params,
            seed=self.seed,
        )


def _midpoint(question: Question) -> float:
    return (question.low + question.high) / 2


@dataclass(frozen=True)
class _Estimate:
    value: float | None  # None: some judge has not answered yet
    stand_in: bool = False


def _estimates(judging: _Judging, question: Question, pairs: list[tuple[str, str]]) -> list[_Estimate]:
    """Each pair's estimate on the question's scale: the judges' mean, the midpoint where no
    judge's answer parsed, none where a judge has not answered yet (or there is no judge)."""
    if not judging.judges:
        return [_Estimate(None)] * len(pairs)
    kind = _judge_kind(question)
    per_judge = [
        cached_judge_scores(kind=kind, pairs=pairs, backend_alias=alias, seed=judging.seed, params=judging.params)
        for alias in judging.judges
    ]
    estimates = []
    for lookups in zip(*per_judge, strict=True):
        if any(lookup.status == LookupStatus.MISSING for lookup in lookups):
            estimates.append(_Estimate(None))
            continue
        value = llm_estimate(
            [lookup.score for lookup in lookups], judge_scale=SCALES[kind], question_scale=(question.low, question.high)
        )
        estimates.append(_Estimate(_midpoint(question), stand_in=True) if value is None else _Estimate(value))
    return estimates


def _job_state(study: Study, transformation: str) -> JudgeJobState | None:
    job = JudgePopulationJob.objects.filter(study=study, transformation=transformation).first()
    if job is None:
        return None
    return JudgeJobState(
        id=job.pk, status=job.status, done=job.done, total=job.total, waiting=job.waiting_message, error=job.error
    )


def study_judge_population(*, study: Study, transformation: str) -> JudgePopulation:
    """The judges' estimates of every output of ``transformation`` and of the study's real items
    of it, read from the judge's cache alone (never an LLM call)."""
    judging = _judging(study)
    outputs = judge_population_outputs(study, transformation)
    items = list(study.items.filter(kind=ItemKind.REAL, transformation=transformation).order_by("position"))
    output_pairs = [(o.source_text, o.output_text) for o in outputs]
    pairs = list(dict.fromkeys(output_pairs + [(i.text_a, i.text_b) for i in items]))
    index = {pair: n for n, pair in enumerate(pairs)}
    by_question = {q.name: _estimates(judging, q, pairs) for q in judging.questions}
    counts = Counter(
        "missing" if e.value is None else "failed" if e.stand_in else "scored"
        for estimates in by_question.values()
        for e in (estimates[index[pair]] for pair in output_pairs)
    )
    complete = bool(judging.judges and judging.questions and outputs) and not counts["missing"]
    scores = (
        {
            name: np.array([estimates[index[pair]].value for pair in output_pairs], dtype=float)
            for name, estimates in by_question.items()
        }
        if complete
        else {}
    )
    item_scores = {}
    for item in items:
        settled = {name: estimates[index[(item.text_a, item.text_b)]].value for name, estimates in by_question.items()}
        item_scores[item.pk] = {name: value for name, value in settled.items() if value is not None}
    return JudgePopulation(
        transformation=transformation,
        total=len(outputs),
        output_ids=tuple(o.pk for o in outputs),
        questions=tuple(q.name for q in judging.questions),
        judges=judging.judges,
        models=judging.models,
        prompt_hashes=judging.prompt_hashes,
        params=asdict(judging.params),
        seed=judging.seed,
        stand_ins={q.name: _midpoint(q) for q in judging.questions},
        scored=counts["scored"],
        failed=counts["failed"],
        missing=counts["missing"],
        complete=complete,
        scores=scores,
        item_scores=item_scores,
        job=_job_state(study, transformation),
    )


def study_judge_populations(*, study: Study) -> list[JudgePopulation]:
    """Each transformation's judge scores and job, for the study page (cache reads only)."""
    if not study.is_locked:
        return []
    return [
        study_judge_population(study=study, transformation=name)
        for name in sorted({r.transformation for r in study.runs.all()})
    ]


def judge_jobs_summary(jobs: list[JudgePopulationJob]) -> str:
    """One line per start, e.g. ``paraphrase: 0 of 1,379 judge calls done (queued)``."""
    return "; ".join(
        f"{job.transformation}: {job.done:,} of {job.total:,} judge calls done ({job.status})" for job in jobs
    )
