"""Judge reports: the judge's evaluation against gold STS scores and judged transformation runs,
and the entry points for every report kind (generator selection is in
:mod:`transforms.selection_services`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction
from django.db.models import F, QuerySet
from django.utils import timezone

from core.errors import InvalidError, NotFoundError, ShiftlabError
from core.models import Project
from core.projects import User, project_for_new, project_require_same, project_require_write, scoped
from core.services import audit_record
from corpora.models import Dataset
from corpora.selectors import dataset_get
from transforms.backends import get_backend
from transforms.backends.base import TransientBackendError
from transforms.judgement_services import (
    RUN_KINDS,
    JudgeParams,
    ReportProgress,
    judge_report_fail,
    judge_with_progress,
    report_declare,
    report_options,
    report_start,
    run_texts,
)
from transforms.judging import (
    GOLD_SIMILARITY_TASKS,
    JudgeKind,
    degenerate_judges,
    evaluate_judge,
    score_counts,
    summarize_run,
)
from transforms.models import JudgeReport, TransformRun
from transforms.params import GenerationParams
from transforms.presets import resolve_preset
from transforms.selection_services import execute_selection, judge_report_create_selection
from transforms.services import transform_run_settings
from transforms.text_metrics import word_count


@dataclass(frozen=True)
class JudgeReportSettings:
    """A judge request's settings once a preset has filled the unset ones."""

    seed: int
    params: JudgeParams
    generation_params: GenerationParams | None  # for the candidates' runs of a selection
    preset: str


def judge_report_settings(
    *, preset: str = "", seed: int | None = None, temperature: float | None = None, max_attempts: int | None = None
) -> JudgeReportSettings:
    """Resolve a judge request: an unset seed is the preset's first seed (else 0), an unset
    temperature the preset's (else the judge's greedy default); a selection's candidates are
    generated with the preset's settings. A value that conflicts with the preset is an error."""
    resolved = resolve_preset(preset or None, seeds=None if seed is None else [seed], temperature=temperature)
    params = JudgeParams(
        temperature=JudgeParams.temperature if resolved.temperature is None else resolved.temperature,
        max_attempts=JudgeParams.max_attempts if max_attempts is None else max_attempts,
    )
    chosen_seed = resolved.seeds[0] if resolved.seeds else 0
    generation = transform_run_settings(preset=resolved.preset, seed=chosen_seed).params if resolved.preset else None
    return JudgeReportSettings(chosen_seed, params, generation, resolved.preset)


def _preset_option(preset: str) -> dict:
    """The report option naming its preset; none for a report without one (older reports' options)."""
    return {"preset": preset} if preset else {}


def judge_report_create_evaluation(
    *,
    dataset: Dataset,
    judge: str = "default",
    limit: int | None = None,
    split: str | None = None,
    seed: int = 0,
    params: JudgeParams | None = None,
    preset: str = "",
    created_by: AbstractBaseUser | None = None,
    dispatch: bool = True,
    project: Project | None = None,
) -> JudgeReport:
    """Declare (and by default queue) the judge's evaluation against an STS dataset's gold scores,
    in ``project`` (default: the dataset's; the default project for a shared dataset)."""
    project = project or project_for_new(None, None, dataset)
    project_require_same(project, dataset, role="the evaluated dataset")
    if dataset.task_type not in GOLD_SIMILARITY_TASKS:
        raise ShiftlabError(f"judge evaluation needs an sts or str dataset; {dataset.name} is {dataset.task_type}")
    if limit is not None and limit < 3:
        raise ShiftlabError("--limit must be at least 3 (a correlation needs three pairs)", field="limit")
    options = report_options(
        seed=seed, params=params or JudgeParams(), n_resamples=1000, limit=limit, split=split, **_preset_option(preset)
    )
    return report_declare(
        kind=JudgeReport.Kind.EVALUATION,
        project=project,
        dataset=dataset,
        judges=[judge],
        options=options,
        created_by=created_by,
        dispatch=dispatch,
    )


def judge_report_create_run(
    *,
    run: TransformRun,
    judges: Sequence[str] = ("default",),
    seed: int = 0,
    params: JudgeParams | None = None,
    n_resamples: int = 1000,
    preset: str = "",
    created_by: AbstractBaseUser | None = None,
    dispatch: bool = True,
    project: Project | None = None,
) -> JudgeReport:
    """Declare (and by default queue) quality and fluency judgements of a finished run's outputs,
    in ``project`` (default, and the only one allowed: the run's)."""
    project = project or run.project
    project_require_same(project, run, role="the judged run")
    if run.status != TransformRun.Status.SUCCEEDED:
        raise ShiftlabError(
            f"run {run.pk} is {run.status}: judge it once it has succeeded (resume it if it failed)", field="run"
        )
    options = report_options(
        seed=seed, params=params or JudgeParams(), n_resamples=n_resamples, **_preset_option(preset)
    )
    return report_declare(
        kind=JudgeReport.Kind.RUN,
        project=project,
        dataset=run.dataset,
        judges=judges,
        options=options,
        runs=[run],
        audited={"run": run.pk},
        created_by=created_by,
        dispatch=dispatch,
    )


# The one wording of an input a kind of report cannot do without, whichever interface asks.
REPORT_NEEDS = "a {kind} report needs a {input}"


@dataclass(frozen=True)
class JudgeReportCreateRequest:
    """A judge report of any kind as the page, the API and ``manage.py judge`` ask for it, from
    plain values (names and ids); they only fill it in, ``judge_report_create`` checks every rule.
    ``None`` is unset: filled from ``preset``, else seed 0 and the judge's default temperature."""

    kind: str
    project: str | None = None
    dataset: str | None = None
    run: int | None = None
    runs: Sequence[int] = ()
    candidates: Sequence[str] = ()
    judges: Sequence[str] | None = None
    transformation: str = "paraphrase"
    transformations: Sequence[str] = ()
    criteria: Sequence[str] | None = None
    top_k: int = 3
    limit: int | None = None
    split: str | None = None
    seed: int | None = None
    temperature: float | None = None
    max_attempts: int = JudgeParams.max_attempts
    resamples: int = 1000
    alpha: float = 0.05
    preset: str = ""


def judge_report_create(*, actor: User = None, request: JudgeReportCreateRequest, dispatch: bool = True) -> JudgeReport:
    """THE entry of the page, the API and ``manage.py judge`` for every kind of report.

    Inputs are looked up as ``actor`` (None: the system) may read them. The report goes into the
    project :func:`core.projects.project_for_new` picks, or a ProjectAccessError (403) is raised
    before anything is created. ``dispatch=False`` leaves the report to the caller to execute."""
    r = request
    kind, project, dataset, run, runs, judges = r.kind, r.project, r.dataset, r.run, r.runs, r.judges
    preset, seed, temperature, max_attempts, limit, split = (
        r.preset,
        r.seed,
        r.temperature,
        r.max_attempts,
        r.limit,
        r.split,
    )
    transformation, transformations, criteria, top_k = r.transformation, r.transformations, r.criteria, r.top_k
    candidates, resamples, alpha = r.candidates, r.resamples, r.alpha
    found = _dataset_named(dataset, actor=actor, project=project) if dataset else None
    settings = judge_report_settings(preset=preset, seed=seed, temperature=temperature, max_attempts=max_attempts)
    common = dict(
        seed=settings.seed, params=settings.params, preset=settings.preset, created_by=actor, dispatch=dispatch
    )
    if kind == JudgeReport.Kind.EVALUATION:
        if found is None:
            raise InvalidError(REPORT_NEEDS.format(kind=kind, input="dataset"), field="dataset", code="required")
        return judge_report_create_evaluation(
            project=project_for_new(actor, project, found),
            dataset=found,
            judge=(judges or ["default"])[0],
            limit=limit,
            split=split,
            **common,
        )
    readable_runs = scoped(TransformRun.objects, actor)
    if kind == JudgeReport.Kind.RUN:
        if run is None:
            raise InvalidError(REPORT_NEEDS.format(kind=kind, input="run"), field="run", code="required")
        judged = readable_runs.filter(pk=run).first()
        if judged is None:
            raise NotFoundError(f"no transformation run {run}", field="run")
        return judge_report_create_run(
            project=project_for_new(actor, project, judged),
            run=judged,
            judges=judges or ["default"],
            n_resamples=resamples,
            **common,
        )
    if kind != JudgeReport.Kind.SELECTION:
        raise ShiftlabError(f"unknown report kind {kind!r}: use evaluation, run or selection")
    found_runs = _runs_named(readable_runs, runs)
    return judge_report_create_selection(
        project=project_for_new(actor, project, *found_runs, found),
        dataset=found,
        transformation=transformation,
        transformations=transformations,
        criteria=criteria,
        top_k=top_k,
        candidates=candidates,
        runs=found_runs,
        judges=judges,
        limit=limit,
        generation_params=settings.generation_params,
        n_resamples=resamples,
        alpha=alpha,
        **common,
    )


def _runs_named(readable: QuerySet[TransformRun], ids: Sequence[int]) -> list[TransformRun]:
    found = list(readable.filter(pk__in=ids).select_related("generator", "dataset"))
    missing = set(ids) - {r.pk for r in found}
    if missing:
        raise NotFoundError(f"no transformation run(s) {sorted(missing)}", field="runs")
    return found


def _dataset_named(name: str, *, actor: User, project: str | None) -> Dataset:
    try:
        return dataset_get(name=name, user=actor, project=project or None)
    except Dataset.DoesNotExist:
        raise NotFoundError(f"No dataset named {name!r}. See: python manage.py corpora list", field="dataset") from None


@dataclass(frozen=True)
class JudgeReportResumeRequest:
    """Resume a judge report (``judge_report_resume``), as the API and the sweeper ask for it."""

    report: int


def judge_report_resume(*, request: JudgeReportResumeRequest, actor: AbstractBaseUser | None = None) -> JudgeReport:
    """Queue a report again; judgements already made come from the cache. ``actor`` (None: the
    system) must be able to change the report's project (403)."""
    with transaction.atomic():
        report = JudgeReport.objects.select_for_update().select_related("project").get(pk=request.report)
        project_require_write(actor, report.project)
        report.status, report.error, report.finished_at = JudgeReport.Status.PENDING, "", None
        report.save(update_fields=["status", "error", "finished_at"])
        audit_record(actor=actor, verb="judge.report.resume", obj=report, payload={"done": report.done})
        report_start(report, dispatch=True)
    return report


def judge_report_execute(*, report_id: int, on_progress: Callable[[int, int], None] | None = None) -> JudgeReport:
    """Compute a report (idempotent: re-running reuses every cached generation and judgement).
    ``on_progress(done, total)`` is called after every chunk (the command draws a progress bar).

    Transient backend trouble propagates as TransientBackendError, the report left running: the
    task records that it waits and retries (``transforms.tasks``), the command fails it. Any other
    ShiftlabError marks the report failed with its message.
    """
    report = JudgeReport.objects.select_related("dataset").get(pk=report_id)
    report.status, report.started_at, report.error = JudgeReport.Status.RUNNING, timezone.now(), ""
    report.done = 0
    report.save(update_fields=["status", "started_at", "error", "done"])
    try:
        result = _EXECUTORS[report.kind](report, ReportProgress(report.pk, on_progress))
    except TransientBackendError:
        raise
    except ShiftlabError as exc:
        JudgeReport.objects.filter(pk=report_id).update(
            status=JudgeReport.Status.FAILED, error=str(exc), finished_at=timezone.now(), waiting=None
        )
        report.refresh_from_db()
        return report
    JudgeReport.objects.filter(pk=report_id).update(
        status=JudgeReport.Status.SUCCEEDED, result=result, done=F("total"), finished_at=timezone.now(), waiting=None
    )
    report.refresh_from_db()
    return report


def judge_report_execute_here(*, report_id: int, on_progress: Callable[[int, int], None] | None = None) -> JudgeReport:
    """``judge_report_execute`` where no task retries (the command): a backend that does not answer
    fails the report, and its error goes on to the caller (judgements made so far are cached:
    rerunning resumes)."""
    try:
        return judge_report_execute(report_id=report_id, on_progress=on_progress)
    except TransientBackendError as exc:
        judge_report_fail(report_id=report_id, reason=str(exc))
        raise


def _execute_evaluation(report: JudgeReport, progress: ReportProgress) -> dict:
    items = report.dataset.items.filter(kind="example").order_by("position")
    if report.options.get("split"):
        items = items.filter(split=report.options["split"])
    limit = report.options.get("limit")
    items = list(items[:limit] if limit else items)
    if not items:
        raise ShiftlabError(f"{report.dataset.name} has no items to judge")
    progress.set_total(len(items))
    pairs = [(i.payload["sentence1"], i.payload["sentence2"]) for i in items]
    scores = judge_with_progress(report, progress, kind=JudgeKind.SIMILARITY, judge=report.judges[0], pairs=pairs)
    result = evaluate_judge(
        [float(i.gold) for i in items], scores, [max(word_count(a), word_count(b)) for a, b in pairs]
    )
    return {
        "judge": report.judges[0],
        "model": get_backend(report.judges[0]).model_id,
        "dataset": report.dataset.name,
        **asdict(result),
        "degenerate_judges": degenerate_judges({(report.judges[0], JudgeKind.SIMILARITY.value): scores}),
        "score_counts": score_counts({(report.judges[0], JudgeKind.SIMILARITY.value): scores}),
    }


def _execute_run(report: JudgeReport, progress: ReportProgress) -> dict:
    (run,) = report.runs.all()
    texts = run_texts(run)
    progress.set_total(len(texts) * len(report.judges) * len(RUN_KINDS))
    pairs = [(t.source_text, t.output_text) if t.ok else None for t in texts]
    ok = [i for i, t in enumerate(texts) if t.ok]
    languages = [texts[i].target_language for i in ok]
    summaries, judged = [], {}
    for judge in report.judges:
        scores = {
            kind.value: judge_with_progress(report, progress, kind=kind, judge=judge, pairs=pairs) for kind in RUN_KINDS
        }
        judged |= {(judge, kind): [values[i] for i in ok] for kind, values in scores.items()}
        summary = summarize_run(
            judge=judge,
            scores={k: [v[i] for i in ok] for k, v in scores.items()},
            languages=languages,
            seed=report.options["seed"],
            n_resamples=report.options["n_resamples"],
        )
        summaries.append({"model": get_backend(judge).model_id, **asdict(summary)})
    return {
        "run": run.pk,
        "transformation": run.transformation,
        "dataset": run.dataset.name,
        "n_texts": len(texts),
        "n_ok": len(ok),
        "judges": summaries,
        "degenerate_judges": degenerate_judges(judged),
        "score_counts": score_counts(judged),
    }


_EXECUTORS = {
    JudgeReport.Kind.EVALUATION: _execute_evaluation,
    JudgeReport.Kind.RUN: _execute_run,
    JudgeReport.Kind.SELECTION: execute_selection,
}
