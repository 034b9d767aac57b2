"""Human performance baselines read against models (SPEC §6): score a baseline study's human and
LLM answers and the requested models on the study's instances, in one report.

The scoring itself is ``evaluation.human_baseline`` (pure); this module reads the annotation
side's rows, encodes through the embedding cache and assembles the rows a page or a command shows.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields
from functools import partial

from django.contrib.auth.base_user import AbstractBaseUser
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.utils import timezone

from annotation.models import BaselineAnswer, BaselineStudy
from core.errors import NotFoundError, ShiftlabError
from core.job_services import UNFINISHED, job_fail
from core.projects import scoped
from core.task_policy import dispatch_on_commit, task_named
from corpora.selectors import dataset_item_list
from corpora.task_types import TaskType, task_spec
from evaluation.baseline_predictions import score_model_on_instances
from evaluation.encoders import get_encoder
from evaluation.human_baseline import (
    Agreement,
    Answer,
    Instance,
    RaterScore,
    baseline_scoring,
    interval_position,
    score_answers,
)
from evaluation.models import BaselineScoreJob
from evaluation.services import DEFAULT_SEED, TRAIN_SPLIT, cached_encode

KIND_ORDER = {"humans": 0, "human": 1, "llm": 2, "model": 3}
ModelScore = tuple[RaterScore, str, str]  # a model's score, model id and revision


@dataclass(frozen=True)
class ReportRow:
    """One line of the ranking: the pooled humans, one human, one LLM or one model."""

    kind: str
    name: str
    score: float | None
    ci_low: float | None
    ci_high: float | None
    ci_method: str | None
    n_instances: int
    n_units: int
    n_answers: int | None = None
    n_invalid: int | None = None
    against_humans: str | None = None
    """"above", "below" or "inside" the pooled human interval (LLMs and models); None without one."""
    model_id: str = ""
    revision: str = ""
    metrics: dict = field(default_factory=dict)

    @property
    def outside_human_interval(self) -> bool:
        return self.against_humans in ("above", "below")


@dataclass(frozen=True)
class BaselineReport:
    study_id: int
    study: str
    dataset: str
    task_type: str
    split: str
    metric: str
    unit: str
    interval: str
    n_instances: int
    n_human_answers: int
    n_llm_answers: int
    rows: tuple[ReportRow, ...]
    agreement: tuple[Agreement, ...]
    """Between the human raters."""
    llm_agreement: tuple[Agreement, ...]
    """Between the LLM raters, when there are two or more."""
    models_requested: tuple[str, ...] = ()

    @property
    def humans(self) -> ReportRow | None:
        return next((row for row in self.rows if row.kind == "humans"), None)

    @property
    def rater_note(self) -> str:
        """What the page says of single raters' and models' intervals, for this task type."""
        return baseline_scoring(self.task_type).rater_note

    @property
    def ties(self) -> str:
        """How tied answers are scored, where the task type says so."""
        return baseline_scoring(self.task_type).ties

    def to_dict(self) -> dict:
        document = asdict(self)
        for row, source in zip(document["rows"], self.rows, strict=True):
            row["outside_human_interval"] = source.outside_human_interval
        return document


def baseline_instances(*, study: BaselineStudy) -> list[Instance]:
    """The study's instances in their shown order, as the pure module's ``Instance``."""
    return [
        Instance(key=key, task_type=study.task_type, texts=tuple(texts), gold=gold, group=group)
        for key, texts, gold, group in study.instances.order_by("position").values_list("key", "texts", "gold", "group")
    ]


def baseline_report_build(
    *,
    study: BaselineStudy,
    models: Sequence[str] = (),
    batch_size: int | None = None,
    model_scores: Sequence[ModelScore] = (),
) -> BaselineReport:
    """Score the study's human answers (pooled and per rater), each LLM rater, and each of
    ``models`` (aliases or model names) on the study's instances; rows best first.
    ``model_scores`` adds models scored before (a ``BaselineScoreJob``'s, ``baseline_score_job_scores``)
    without encoding anything.

    Only current, valid answers count (a human answer withdrawn in Argilla does not); LLM replies
    that did not parse are counted per rater. Raises ``ShiftlabError`` when the study has no
    instances, an answer cannot be scored, or a model cannot be (e.g. classification without a
    train split to fit on).
    """
    instances = baseline_instances(study=study)
    if not instances:
        raise ShiftlabError(f"Baseline study {study.name} has no instances yet: create its sample first.")
    answers, invalid, llm_names = _current_answers(study)
    try:
        humans = score_answers(instances, answers[BaselineAnswer.Source.HUMAN])
        llms = score_answers(instances, answers[BaselineAnswer.Source.LLM])
    except ValueError as exc:
        raise ShiftlabError(f"Baseline study {study.name}: {exc}") from None
    counts = Counter(a.annotator for group in answers.values() for a in group)
    pooled = humans.pooled
    low, high = (pooled.ci_low, pooled.ci_high) if pooled else (None, None)

    row = partial(_report_row, humans=(low, high))

    report_rows = []
    if pooled is not None:
        report_rows.append(row("humans", pooled, n_answers=humans.n_answers))
    report_rows += [row("human", r, n_answers=counts[r.rater], n_invalid=invalid[r.rater]) for r in humans.raters]
    scored = {r.rater: r for r in llms.raters}
    for name in sorted(llm_names):
        if name in scored:
            report_rows.append(row("llm", scored[name], n_answers=counts[name], n_invalid=invalid[name]))
        else:  # every reply of this LLM was invalid
            report_rows.append(ReportRow("llm", name, None, None, None, None, 0, 0, 0, invalid[name]))
    report_rows += [
        row("model", score, model_id=model_id, revision=revision)
        for score, model_id, revision in [*model_scores, *_score_models(study, instances, models, batch_size)]
    ]
    report_rows.sort(key=lambda r: (r.score is None, -(r.score or 0.0), KIND_ORDER[r.kind], r.name))
    return BaselineReport(
        study_id=study.pk,
        study=study.name,
        dataset=study.dataset.name,
        task_type=study.task_type,
        split=study.split,
        metric=humans.metric,
        unit=baseline_scoring(study.task_type).unit,
        interval=baseline_scoring(study.task_type).interval,
        n_instances=len(instances),
        n_human_answers=humans.n_answers,
        n_llm_answers=llms.n_answers,
        rows=tuple(report_rows),
        agreement=humans.agreement,
        llm_agreement=llms.agreement if len(llms.raters) >= 2 else (),
        models_requested=tuple(models) + tuple(score.rater for score, _, _ in model_scores),
    )


def _current_answers(study: BaselineStudy) -> tuple[dict[str, list[Answer]], Counter[str], set[str]]:
    """The study's current answers: the valid ones by source, the count of invalid ones per rater,
    and the names of its LLM raters."""
    answers: dict[str, list[Answer]] = {BaselineAnswer.Source.HUMAN: [], BaselineAnswer.Source.LLM: []}
    invalid: Counter[str] = Counter()
    llm_names = set()
    rows = BaselineAnswer.objects.filter(instance__study=study, active=True).values_list(
        "rater", "source", "instance__key", "value", "valid"
    )
    for rater, source, key, value, valid in rows:
        if source == BaselineAnswer.Source.LLM:
            llm_names.add(rater)
        if valid and value is not None:
            answers[source].append(Answer(rater, key, value))
        else:
            invalid[rater] += 1
    return answers, invalid, llm_names


_SCORED = ("score", "ci_low", "ci_high", "ci_method", "n_instances", "n_units")  # of a RaterScore, as a row shows it


def _report_row(kind: str, score: RaterScore, *, humans: tuple[float | None, float | None], **extra) -> ReportRow:
    """A row of the report; an LLM's or a model's says where its score lies against the humans' interval."""
    against = interval_position(score.score, *humans) if kind in ("llm", "model") else None
    scored = {
        name: getattr(score, name) for name in ("score", "ci_low", "ci_high", "ci_method", "n_instances", "n_units")
    }
    return ReportRow(kind, score.rater, **scored, against_humans=against, metrics=dict(score.metrics), **extra)


def _train_examples(study: BaselineStudy) -> tuple[tuple | None, tuple | None]:
    """The texts and labels classification models are fitted on (the dataset's train split, as the
    benchmark does); (None, None) for other tasks."""
    if not task_spec(study.task_type).trains_on_train_split:
        return None, None
    _train_split_check(study)
    dataset = study.dataset
    train = dataset_item_list(dataset=dataset, split=TRAIN_SPLIT, kind="example").values_list("payload", "gold")
    texts, labels = zip(*[(payload["text"], gold) for payload, gold in train], strict=True)
    return texts, labels


def _score_models(
    study: BaselineStudy,
    instances: list[Instance],
    models: Sequence[str],
    batch_size: int | None,
    on_scored: Callable[[ModelScore], None] | None = None,
) -> list[ModelScore]:
    """Each model's score on the instances, in order; ``on_scored`` hears each as it is done."""
    if not models:
        return []
    train_texts, train_labels = _train_examples(study)
    task = TaskType(study.dataset.task_type)
    scores = []
    for name in models:
        try:
            encoder = get_encoder(name)
        except ImproperlyConfigured as exc:  # EVALUATION_ENCODERS cannot serve this model
            raise ShiftlabError(str(exc)) from None
        encode = cached_encode(encoder, task=task, batch_size=batch_size)
        try:
            score = score_model_on_instances(
                instances,
                encode,
                rater=name,
                train_texts=train_texts,
                train_labels=train_labels,
                seed=DEFAULT_SEED,
                similarity_fn_name=encoder.similarity_fn_name,
            )
        except ValueError as exc:
            raise ShiftlabError(f"Scoring {name} on baseline study {study.name}: {exc}") from None
        scores.append((score, encoder.model_id, encoder.revision))
        if on_scored:
            on_scored(scores[-1])
    return scores


# --- scoring models as a background job (issue 41) ---------------------------------------------

SCORE_JOB_TASK = "evaluation.baseline_score_models"  # registered in evaluation/tasks.py (encode queue)


def baseline_score_start(
    *,
    study: BaselineStudy,
    models: Sequence[str],
    actor: AbstractBaseUser | None = None,
    batch_size: int | None = None,
) -> BaselineScoreJob:
    """The one entry of "Score models" (the page and the ``baseline_report`` command): a job whose
    task encodes the study's instances with each of ``models`` (aliases or model names) and scores
    them, on the ``encode`` queue once the transaction commits; a job of the same models still
    unfinished is returned instead (a second click joins it). Anyone who may read the study may
    ask (the scores change nothing of it). Refuses no model, and models a classification study
    cannot be scored with. In the single-machine default (no broker) the job runs in this call."""
    names = list(dict.fromkeys(m.strip() for m in models if m.strip()))
    if not names:
        raise ShiftlabError("Name at least one model to score (an encoder alias or a model name)", field="models")
    if actor is not None and not scoped(BaselineStudy.objects.filter(pk=study.pk), actor).exists():
        raise NotFoundError(f"No baseline study {study.pk}")
    if not study.instances.exists():
        raise ShiftlabError(f"Baseline study {study.name} has no instances yet: create its sample first.")
    _train_split_check(study)
    with transaction.atomic():
        BaselineStudy.objects.select_for_update().filter(pk=study.pk).first()  # one start at a time per study
        running = BaselineScoreJob.objects.filter(study=study, model_names=names, status__in=UNFINISHED).first()
        if running is not None:
            return running
        job = BaselineScoreJob.objects.create(
            study=study, model_names=names, batch_size=batch_size, total=len(names), created_by=actor
        )
        baseline_score_job_dispatch(job_id=job.pk)
    return job


def _train_split_check(study: BaselineStudy) -> None:
    """Refuse to score models on a classification study drawn from the train split, or from a
    dataset without one: there would be nothing to fit their classifier on."""
    dataset = study.dataset
    trains = task_spec(study.task_type).trains_on_train_split
    if trains and (study.split == TRAIN_SPLIT or TRAIN_SPLIT not in dataset.splits):
        raise ShiftlabError(
            f"Models classify with a logistic regression fitted on the {TRAIN_SPLIT!r} split, as the benchmark "
            f"does; {dataset.name} has splits {', '.join(dataset.splits)} and the study samples "
            f"{study.split!r}. Score models on a study drawn from another split of a dataset with a train split."
        )


def baseline_score_job_dispatch(*, job_id: int) -> None:
    """Queue the job's task once the transaction commits (again, for the stuck-job sweeper: the
    task scores only the models still missing); an unreachable broker fails the job with why."""
    dispatch_on_commit(
        lambda: task_named(SCORE_JOB_TASK, job_id).apply_async(),
        on_broker_down=lambda message: baseline_score_job_fail(job_id=job_id, reason=message),
    )


def baseline_score_job_fail(*, job_id: int, reason: str) -> None:
    job_fail(
        model=BaselineScoreJob,
        job_id=job_id,
        message=f"{reason}. The texts encoded so far are cached: fix the cause, then score the models again",
    )


def _score_as_json(scored: ModelScore) -> dict:
    score, model_id, revision = scored
    document = {f.name: getattr(score, f.name) for f in fields(RaterScore)}
    document["metrics"] = {k: _plain(v) for k, v in dict(score.metrics).items()}
    return {"score": {k: _plain(v) for k, v in document.items()}, "model_id": model_id, "revision": revision}


def _plain(value):
    """A number as JSON stores it (NumPy scalars become Python's)."""
    return value.item() if hasattr(value, "item") else value


def baseline_score_job_scores(job: BaselineScoreJob) -> list[ModelScore]:
    """The models the job has scored so far, as ``baseline_report_build`` takes them."""
    return [(RaterScore(**entry["score"]), entry["model_id"], entry["revision"]) for entry in job.scores]


def baseline_score_job_run(*, job_id: int) -> BaselineScoreJob:
    """What the job's task does: score each model not scored yet (``done`` counts models, each saved
    as it is scored), then mark the job succeeded, or failed with the reason. A retried or resumed
    task scores only the models still missing; encodings are cached, so scoring again re-encodes
    nothing. A job that has ended is left as it is (a redelivered task)."""
    job = BaselineScoreJob.objects.select_related("study__dataset").get(pk=job_id)
    if job.status not in UNFINISHED:
        return job
    rows = BaselineScoreJob.objects.filter(pk=job.pk, status__in=UNFINISHED)
    rows.update(status=BaselineScoreJob.Status.RUNNING, started_at=timezone.now())
    scored = list(job.scores)
    done = {entry["score"]["rater"] for entry in scored}

    def keep(result: ModelScore) -> None:
        scored.append(_score_as_json(result))
        rows.update(scores=scored, done=len(scored))

    try:
        todo = [name for name in job.model_names if name not in done]
        _score_models(job.study, baseline_instances(study=job.study), todo, job.batch_size, on_scored=keep)
    except ShiftlabError as exc:
        baseline_score_job_fail(job_id=job.pk, reason=str(exc))
    else:
        rows.update(status=BaselineScoreJob.Status.SUCCEEDED, done=len(scored), finished_at=timezone.now())
    return BaselineScoreJob.objects.get(pk=job.pk)
