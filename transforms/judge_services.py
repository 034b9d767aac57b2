"""The LLM judge: cached judgements of text pairs, and stored reports that use them (evaluation
against gold STS scores, judged transformation runs, generator selection)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from core.errors import ShiftlabError
from core.hashing import sha256_json, sha256_text
from core.services import audit_record
from corpora.models import Dataset
from corpora.task_types import TaskType
from transforms import planning
from transforms.backends import get_backend
from transforms.backends.base import ChatFailure, ChatRequest
from transforms.errors import word_count
from transforms.judging import JUDGE_PROMPTS, SCALES, JudgeKind, evaluate_judge, parse_score, summarize_run
from transforms.models import Generation, Judgement, JudgeReport, TransformedItem, TransformRun
from transforms.prompts import prompt_hash
from transforms.registry import transformation_get
from transforms.selection import CandidateStats, SelectionReport, compare_kind
from transforms.selectors import transform_run_summary
from transforms.services import (
    GenerationParams,
    TransientBackendError,
    transform_run_create,
    transform_run_execute_inline,
)


@dataclass(frozen=True)
class JudgeParams(GenerationParams):
    """Generation parameters with the judge's defaults: greedy decoding and a short answer."""

    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 16


def judge_pairs(
    *,
    kind: JudgeKind | str,
    pairs: Sequence[tuple[str, str]],
    backend_alias: str = "default",
    seed: int = 0,
    params: JudgeParams | None = None,
) -> list[Judgement]:
    """Judge every (text_a, text_b) pair; return the kept judgement of each, in order.

    Cached judgements are reused (no LLM call); an answer without a number on the scale is retried
    with a new sampling seed up to ``max_attempts`` times, then kept as a parse failure
    (``score`` None), never replaced by a default.
    """
    kind = JudgeKind(kind)
    params = params or JudgeParams()
    backend = get_backend(backend_alias)
    system, user = JUDGE_PROMPTS[kind]
    template_hash = prompt_hash(system, user)
    low, high = SCALES[kind]
    kept: dict[int, Judgement] = {}
    pending = list(range(len(pairs)))
    for attempt in range(params.max_attempts):
        if not pending:
            break
        keys = {}
        for i in pending:
            a, b = pairs[i]
            keys[i] = sha256_json(
                {
                    "kind": kind.value,
                    "model": backend.model_id,
                    "prompt": template_hash,
                    "params": params.sampling_hash,
                    "a": sha256_text(a),
                    "b": sha256_text(b),
                    "seed": seed,
                    "attempt": attempt,
                }
            )
        cached = {j.key: j for j in Judgement.objects.filter(key__in=keys.values())}
        misses = [i for i in pending if keys[i] not in cached]
        if misses:
            requests = []
            for i in misses:
                a, b = pairs[i]
                text_hash = sha256_text(a + "\x00" + b)
                requests.append(
                    ChatRequest(
                        messages=[
                            {"role": "system", "content": system},
                            {"role": "user", "content": user.format(text_a=a, text_b=b)},
                        ],
                        seed=planning.sampling_seed(seed=seed, text_hash=text_hash, step=0, attempt=attempt),
                        temperature=params.temperature,
                        top_p=params.top_p,
                        max_tokens=params.max_tokens,
                    )
                )
            results = backend.generate(requests)
            rows = []
            for i, result in zip(misses, results, strict=True):
                if isinstance(result, ChatFailure) and result.transient:
                    continue
                a, b = pairs[i]
                common = dict(
                    key=keys[i],
                    kind=kind.value,
                    model=backend.model_id,
                    prompt_hash=template_hash,
                    params_hash=params.sampling_hash,
                    text_a_hash=sha256_text(a),
                    text_b_hash=sha256_text(b),
                    seed=seed,
                    attempt=attempt,
                )
                if isinstance(result, ChatFailure):
                    rows.append(Judgement(**common, failure=result.message[:2000]))
                else:
                    score = parse_score(result.text, low=low, high=high)
                    rows.append(Judgement(**common, output=result.text, score=score, latency_s=result.latency_s))
            Judgement.objects.bulk_create(rows, ignore_conflicts=True)
            if len(rows) < len(misses):
                failure = next(r for r in results if isinstance(r, ChatFailure) and r.transient)
                raise TransientBackendError.for_backend(
                    backend, n_failed=len(misses) - len(rows), message=failure.message
                )
            cached = {j.key: j for j in Judgement.objects.filter(key__in=keys.values())}
        still = []
        for i in pending:
            kept[i] = cached[keys[i]]
            if kept[i].score is None:
                still.append(i)
        pending = still
    return [kept[i] for i in range(len(pairs))]


# --- stored judge reports ---------------------------------------------------------------------

JUDGE_CHUNK_SIZE = 16  # judge calls between two progress updates
RUN_KINDS = (JudgeKind.QUALITY, JudgeKind.FLUENCY)


def _check_judges(judges: Sequence[str]) -> list[str]:
    judges = list(dict.fromkeys(judges))
    if not judges:
        raise ShiftlabError("name at least one judge (a backend alias in TRANSFORM_BACKENDS)")
    for alias in judges:
        get_backend(alias)  # raises ImproperlyConfigured naming the configured aliases
    return judges


def _report_options(*, seed: int, params: JudgeParams, n_resamples: int, **extra) -> dict:
    if n_resamples < 100:
        raise ShiftlabError(f"use at least 100 bootstrap resamples (got {n_resamples})")
    return {"seed": seed, "judge_params": asdict(params), "n_resamples": n_resamples, **extra}


def _report_start(report: JudgeReport, *, dispatch: bool) -> None:
    if dispatch:
        from transforms.tasks import execute_judge_report

        transaction.on_commit(lambda: execute_judge_report.delay(report.pk))


def judge_report_create_evaluation(
    *,
    dataset: Dataset,
    judge: str = "default",
    limit: int | None = None,
    split: str | None = None,
    seed: int = 0,
    params: JudgeParams | None = None,
    created_by: AbstractBaseUser | None = None,
    dispatch: bool = True,
) -> JudgeReport:
    """Declare (and by default queue) the judge's evaluation against an STS dataset's gold scores."""
    if dataset.task_type not in (TaskType.STS, TaskType.STR):
        raise ShiftlabError(f"judge evaluation needs an sts or str dataset; {dataset.name} is {dataset.task_type}")
    if limit is not None and limit < 3:
        raise ShiftlabError("--limit must be at least 3 (a correlation needs three pairs)")
    options = _report_options(seed=seed, params=params or JudgeParams(), n_resamples=1000, limit=limit, split=split)
    with transaction.atomic():
        report = JudgeReport.objects.create(
            kind=JudgeReport.Kind.EVALUATION,
            dataset=dataset,
            judges=_check_judges([judge]),
            options=options,
            created_by=created_by,
        )
        audit_record(actor=created_by, verb="judge.report.create", obj=report, payload=options)
        _report_start(report, dispatch=dispatch)
    return report


def judge_report_create_run(
    *,
    run: TransformRun,
    judges: Sequence[str] = ("default",),
    seed: int = 0,
    params: JudgeParams | None = None,
    n_resamples: int = 1000,
    created_by: AbstractBaseUser | None = None,
    dispatch: bool = True,
) -> JudgeReport:
    """Declare (and by default queue) quality and fluency judgements of a finished run's outputs."""
    if run.status != TransformRun.Status.SUCCEEDED:
        raise ShiftlabError(f"run {run.pk} is {run.status}: judge it once it has succeeded (resume it if it failed)")
    options = _report_options(seed=seed, params=params or JudgeParams(), n_resamples=n_resamples)
    with transaction.atomic():
        report = JudgeReport.objects.create(
            kind=JudgeReport.Kind.RUN,
            dataset=run.dataset,
            judges=_check_judges(judges),
            options=options,
            created_by=created_by,
        )
        report.runs.set([run])
        audit_record(actor=created_by, verb="judge.report.create", obj=report, payload={"run": run.pk, **options})
        _report_start(report, dispatch=dispatch)
    return report


def judge_report_create_selection(
    *,
    dataset: Dataset | None = None,
    transformation: str = "paraphrase",
    candidates: Sequence[str] = (),
    runs: Sequence[TransformRun] = (),
    judges: Sequence[str] | None = None,
    limit: int | None = None,
    seed: int = 0,
    generation_params: GenerationParams | None = None,
    params: JudgeParams | None = None,
    n_resamples: int = 1000,
    alpha: float = 0.05,
    created_by: AbstractBaseUser | None = None,
    dispatch: bool = True,
) -> JudgeReport:
    """Declare (and by default queue) a generator selection report.

    Candidates are backend aliases (a run of ``transformation`` on ``dataset`` is created for each;
    the report executes it, reusing the generation cache) and/or existing runs of one dataset and
    transformation. The judges default to the candidates' own backends: the crossover design.
    """
    if not 0 < alpha < 1:
        raise ShiftlabError(f"alpha must lie in (0, 1), got {alpha}")
    runs = list(runs)
    if not transformation_get(runs[0].transformation if runs else transformation).uses_llm:
        raise ShiftlabError(
            f"{runs[0].transformation if runs else transformation} uses no generator model: there is nothing to select"
        )
    with transaction.atomic():  # candidate runs and the report are created together or not at all
        if candidates:
            if dataset is None:
                raise ShiftlabError("candidate generators need a dataset to transform")
            for alias in dict.fromkeys(candidates):
                runs.append(
                    transform_run_create(
                        dataset=dataset,
                        transformation=transformation,
                        seed=seed,
                        backend_alias=alias,
                        params=generation_params,
                        limit=limit,
                        created_by=created_by,
                        dispatch=False,
                    )
                )
        if len(runs) < 2:
            raise ShiftlabError("a selection compares at least two candidates (generators or runs)")
        if len({(r.dataset_id, r.transformation, r.item_limit) for r in runs}) != 1:
            raise ShiftlabError(
                "candidate runs must share one dataset, transformation and item limit to be compared on the same texts"
            )
        if judges is None:
            judges = [r.generator.backend_alias for r in runs]
        options = _report_options(
            seed=seed,
            params=params or JudgeParams(),
            n_resamples=n_resamples,
            alpha=alpha,
            transformation=runs[0].transformation,
        )
        report = JudgeReport.objects.create(
            kind=JudgeReport.Kind.SELECTION,
            dataset=runs[0].dataset,
            judges=_check_judges(judges),
            options=options,
            created_by=created_by,
        )
        report.runs.set(runs)
        audit_record(
            actor=created_by, verb="judge.report.create", obj=report, payload={"runs": [r.pk for r in runs], **options}
        )
        _report_start(report, dispatch=dispatch)
    return report


def judge_report_create(
    *,
    kind: str,
    created_by: AbstractBaseUser | None = None,
    dispatch: bool = True,
    dataset: str | None = None,
    run: int | None = None,
    runs: Sequence[int] = (),
    candidates: Sequence[str] = (),
    judges: Sequence[str] | None = None,
    transformation: str = "paraphrase",
    limit: int | None = None,
    split: str | None = None,
    seed: int = 0,
    temperature: float = JudgeParams.temperature,
    max_attempts: int = JudgeParams.max_attempts,
    resamples: int = 1000,
    alpha: float = 0.05,
) -> JudgeReport:
    """Any kind of report from plain values (names and ids), as the API and the page receive them."""
    try:
        found = Dataset.objects.get(name=dataset) if dataset else None
    except Dataset.DoesNotExist:
        raise ShiftlabError(f"no dataset named {dataset!r}") from None
    params = JudgeParams(temperature=temperature, max_attempts=max_attempts)
    if kind == JudgeReport.Kind.EVALUATION:
        if found is None:
            raise ShiftlabError("an evaluation report needs a dataset")
        return judge_report_create_evaluation(
            dataset=found,
            judge=(judges or ["default"])[0],
            limit=limit,
            split=split,
            seed=seed,
            params=params,
            created_by=created_by,
            dispatch=dispatch,
        )
    if kind == JudgeReport.Kind.RUN:
        judged = TransformRun.objects.filter(pk=run).first() if run is not None else None
        if judged is None:
            raise ShiftlabError(f"no transformation run {run}")
        return judge_report_create_run(
            run=judged,
            judges=judges or ["default"],
            seed=seed,
            params=params,
            n_resamples=resamples,
            created_by=created_by,
            dispatch=dispatch,
        )
    if kind != JudgeReport.Kind.SELECTION:
        raise ShiftlabError(f"unknown report kind {kind!r}: use evaluation, run or selection")
    found_runs = list(TransformRun.objects.filter(pk__in=runs).select_related("generator", "dataset"))
    missing = set(runs) - {r.pk for r in found_runs}
    if missing:
        raise ShiftlabError(f"no transformation run(s) {sorted(missing)}")
    return judge_report_create_selection(
        dataset=found,
        transformation=transformation,
        candidates=candidates,
        runs=found_runs,
        judges=judges,
        limit=limit,
        seed=seed,
        params=params,
        n_resamples=resamples,
        alpha=alpha,
        created_by=created_by,
        dispatch=dispatch,
    )


def judge_report_resume(*, report_id: int, actor: AbstractBaseUser | None = None) -> JudgeReport:
    """Queue a report again; judgements already made come from the cache."""
    with transaction.atomic():
        report = JudgeReport.objects.select_for_update().get(pk=report_id)
        report.status, report.error, report.finished_at = JudgeReport.Status.PENDING, "", None
        report.save(update_fields=["status", "error", "finished_at"])
        audit_record(actor=actor, verb="judge.report.resume", obj=report, payload={"done": report.done})
        _report_start(report, dispatch=True)
    return report


def judge_report_execute(*, report_id: int, on_progress: Callable[[int, int], None] | None = None) -> JudgeReport:
    """Compute a report (idempotent: re-running reuses every cached generation and judgement).
    ``on_progress(done, total)`` is called after every chunk (the command draws a progress bar).

    Transient backend trouble propagates as TransientBackendError (the task retries); any other
    ShiftlabError marks the report failed with its message.
    """
    report = JudgeReport.objects.select_related("dataset").get(pk=report_id)
    report.status, report.started_at, report.error = JudgeReport.Status.RUNNING, timezone.now(), ""
    report.done = 0
    report.save(update_fields=["status", "started_at", "error", "done"])
    try:
        result = _EXECUTORS[report.kind](report, _Progress(report.pk, on_progress))
    except TransientBackendError as exc:
        # Marked failed so the page says why; a Celery retry (or a resume) sets it running again.
        JudgeReport.objects.filter(pk=report_id).update(status=JudgeReport.Status.FAILED, error=str(exc))
        raise
    except ShiftlabError as exc:
        JudgeReport.objects.filter(pk=report_id).update(
            status=JudgeReport.Status.FAILED, error=str(exc), finished_at=timezone.now()
        )
        report.refresh_from_db()
        return report
    JudgeReport.objects.filter(pk=report_id).update(
        status=JudgeReport.Status.SUCCEEDED, result=result, done=F("total"), finished_at=timezone.now()
    )
    report.refresh_from_db()
    return report


def _params(report: JudgeReport) -> JudgeParams:
    return JudgeParams(**report.options["judge_params"])


@dataclass
class _Progress:
    """Progress of a report, kept on its row (for the page and API) and told to a callback."""

    report_id: int
    callback: Callable[[int, int], None] | None
    done: int = 0
    total: int = 0

    def set_total(self, total: int) -> None:
        self.total = total
        JudgeReport.objects.filter(pk=self.report_id).update(total=total)

    def advance(self, steps: int) -> None:
        self.done += steps
        JudgeReport.objects.filter(pk=self.report_id).update(done=F("done") + steps)
        if self.callback:
            self.callback(self.done, self.total)


def _judge_with_progress(
    report: JudgeReport, progress: _Progress, *, kind: JudgeKind, judge: str, pairs: list[tuple[str, str] | None]
) -> list[float | None]:
    """Judge the pairs (None: nothing to judge, e.g. a failed transformation) chunk by chunk,
    advancing the report's progress; returns the scores (None where nothing was judged)."""
    scores: list[float | None] = []
    for start in range(0, len(pairs), JUDGE_CHUNK_SIZE):
        chunk = pairs[start : start + JUDGE_CHUNK_SIZE]
        todo = [p for p in chunk if p is not None]
        judged = iter(
            judge_pairs(kind=kind, pairs=todo, backend_alias=judge, seed=report.options["seed"], params=_params(report))
            if todo
            else []
        )
        scores += [next(judged).score if p is not None else None for p in chunk]
        progress.advance(len(chunk))
    return scores


def _execute_evaluation(report: JudgeReport, progress: _Progress) -> dict:
    items = report.dataset.items.filter(kind="example").order_by("position")
    if report.options.get("split"):
        items = items.filter(split=report.options["split"])
    limit = report.options.get("limit")
    items = list(items[:limit] if limit else items)
    if not items:
        raise ShiftlabError(f"{report.dataset.name} has no items to judge")
    progress.set_total(len(items))
    pairs = [(i.payload["sentence1"], i.payload["sentence2"]) for i in items]
    scores = _judge_with_progress(report, progress, kind=JudgeKind.SIMILARITY, judge=report.judges[0], pairs=pairs)
    result = evaluate_judge(
        [float(i.gold) for i in items], scores, [max(word_count(a), word_count(b)) for a, b in pairs]
    )
    return {
        "judge": report.judges[0],
        "model": get_backend(report.judges[0]).model_id,
        "dataset": report.dataset.name,
        **asdict(result),
    }


def _run_texts(run: TransformRun) -> list[TransformedItem]:
    return list(TransformedItem.objects.filter(run=run).order_by("item__position", "side"))


def _execute_run(report: JudgeReport, progress: _Progress) -> dict:
    (run,) = report.runs.all()
    texts = _run_texts(run)
    progress.set_total(len(texts) * len(report.judges) * len(RUN_KINDS))
    pairs = [(t.source_text, t.output_text) if t.ok else None for t in texts]
    ok = [i for i, t in enumerate(texts) if t.ok]
    languages = [texts[i].target_language for i in ok]
    summaries = []
    for judge in report.judges:
        scores = {
            kind.value: _judge_with_progress(report, progress, kind=kind, judge=judge, pairs=pairs)
            for kind in RUN_KINDS
        }
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
    }


def _candidate_names(runs: Sequence[TransformRun]) -> dict[int, str]:
    aliases = [r.generator.backend_alias for r in runs]
    return {
        r.pk: r.generator.backend_alias
        if aliases.count(r.generator.backend_alias) == 1
        else f"{r.generator.backend_alias}#{r.pk}"
        for r in runs
    }


def _seconds_per_text(texts: Sequence[TransformedItem]) -> float | None:
    """LLM seconds per text for the kept attempt's generations (cache hits keep the latency
    measured when the text was generated)."""
    keys = [key for t in texts for key in t.generation_keys]
    if not texts or not keys:
        return None
    latency = dict(Generation.objects.filter(key__in=keys).values_list("key", "latency_s"))
    return sum(latency.get(key, 0.0) for key in keys) / len(texts)


def _execute_selection(report: JudgeReport, progress: _Progress) -> dict:
    runs = list(report.runs.select_related("generator", "dataset").order_by("pk"))
    names = _candidate_names(runs)
    n_texts = sum(r.total for r in runs)
    progress.set_total(n_texts + n_texts * len(report.judges) * len(RUN_KINDS))
    # The candidates' runs were created undispatched: the report executes them itself.
    runs = [transform_run_execute_inline(run_id=run.pk, on_texts=progress.advance) for run in runs]
    candidates, scores = [], {}
    for run in runs:
        texts = _run_texts(run)
        summary = transform_run_summary(run=run)
        candidates.append(
            CandidateStats(
                name=names[run.pk],
                model=run.generator.model,
                run_id=run.pk,
                n_texts=len(texts),
                error_rate=summary.error_rate,
                error_rates=summary.error_rates,
                mean_edit_distance=summary.mean_edit_distance,
                seconds_per_text=_seconds_per_text(texts),
            )
        )
        pairs = [(t.source_text, t.output_text) if t.ok else None for t in texts]
        for judge in report.judges:
            for kind in RUN_KINDS:
                judged = _judge_with_progress(report, progress, kind=kind, judge=judge, pairs=pairs)
                scores[(kind, judge, names[run.pk])] = {
                    (t.item_id, t.side): s for t, s, p in zip(texts, judged, pairs, strict=True) if p is not None
                }
    seed, n_resamples, alpha = report.options["seed"], report.options["n_resamples"], report.options["alpha"]
    kinds = {
        kind.value: compare_kind(
            kind=kind.value,
            candidates=[c.name for c in candidates],
            judges=report.judges,
            scores={(j, c): s for (k, j, c), s in scores.items() if k == kind},
            seed=seed,
            n_resamples=n_resamples,
            alpha=alpha,
        )
        for kind in RUN_KINDS
    }
    selection = SelectionReport(
        candidates=candidates, judges=list(report.judges), kinds=kinds, alpha=alpha, n_resamples=n_resamples, seed=seed
    )
    return {
        "dataset": report.dataset.name,
        "transformation": report.options["transformation"],
        "judge_models": {j: get_backend(j).model_id for j in report.judges},
        **asdict(selection),
    }


_EXECUTORS = {
    JudgeReport.Kind.EVALUATION: _execute_evaluation,
    JudgeReport.Kind.RUN: _execute_run,
    JudgeReport.Kind.SELECTION: _execute_selection,
}
