"""Generator selection: judge the runs of candidate generators on the same texts and compare them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict

from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction

from core.errors import ShiftlabError
from core.services import audit_record
from corpora.models import Dataset
from transforms.backends import get_backend
from transforms.chunk_services import transform_run_execute_inline
from transforms.judgement_services import (
    RUN_KINDS,
    JudgeParams,
    ReportProgress,
    check_judges,
    judge_with_progress,
    report_options,
    report_start,
    run_texts,
)
from transforms.judging import degenerate_judges
from transforms.models import Generation, JudgeReport, TransformedItem, TransformRun
from transforms.registry import transformation_get
from transforms.selection import CandidateStats, SelectionReport, compare_kind
from transforms.selectors import transform_run_summary
from transforms.services import GenerationParams, transform_run_create


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
        options = report_options(
            seed=seed,
            params=params or JudgeParams(),
            n_resamples=n_resamples,
            alpha=alpha,
            transformation=runs[0].transformation,
        )
        report = JudgeReport.objects.create(
            kind=JudgeReport.Kind.SELECTION,
            dataset=runs[0].dataset,
            judges=check_judges(judges),
            options=options,
            created_by=created_by,
        )
        report.runs.set(runs)
        audit_record(
            actor=created_by, verb="judge.report.create", obj=report, payload={"runs": [r.pk for r in runs], **options}
        )
        report_start(report, dispatch=dispatch)
    return report


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


def execute_selection(report: JudgeReport, progress: ReportProgress) -> dict:
    runs = list(report.runs.select_related("generator", "dataset").order_by("pk"))
    names = _candidate_names(runs)
    n_texts = sum(r.total for r in runs)
    progress.set_total(n_texts + n_texts * len(report.judges) * len(RUN_KINDS))
    # The candidates' runs were created undispatched: the report executes them itself.
    runs = [transform_run_execute_inline(run_id=run.pk, on_texts=progress.advance) for run in runs]
    candidates, scores = [], {}
    for run in runs:
        texts = run_texts(run)
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
                judged = judge_with_progress(report, progress, kind=kind, judge=judge, pairs=pairs)
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
    # A judge is degenerate when it gives (nearly) one score to every candidate's texts together.
    pooled: dict[tuple[str, str], list[float | None]] = {}
    for (kind, judge, _), judged in scores.items():
        pooled.setdefault((judge, kind.value), []).extend(judged.values())
    return {
        "dataset": report.dataset.name,
        "transformation": report.options["transformation"],
        "judge_models": {j: get_backend(j).model_id for j in report.judges},
        **asdict(selection),
        "degenerate_judges": degenerate_judges(pooled),
    }
