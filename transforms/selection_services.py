"""Generator selection: judge the runs of candidate generators on the same texts and compare them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict

from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction

from core.errors import ShiftlabError
from core.models import Project
from core.projects import project_for_new, project_require_same
from corpora.models import Dataset
from transforms.backends import get_backend
from transforms.chunk_services import transform_run_execute_inline
from transforms.judgement_services import (
    JudgeParams,
    ReportProgress,
    judge_with_progress,
    report_declare,
    report_options,
    run_texts,
)
from transforms.judging import JudgeKind, degenerate_judges, score_counts
from transforms.models import Generation, JudgeReport, TransformedItem, TransformRun
from transforms.params import GenerationParams
from transforms.registry import transformation_get
from transforms.selection import (
    DEFAULT_CRITERIA,
    CandidateStats,
    SelectionReport,
    compare_kind,
    pool_transformations,
    selection_criteria,
    text_scores,
)
from transforms.selectors import transform_run_summary
from transforms.services import transform_run_create


def judge_report_create_selection(
    *,
    dataset: Dataset | None = None,
    transformation: str = "paraphrase",
    transformations: Sequence[str] = (),
    candidates: Sequence[str] = (),
    runs: Sequence[TransformRun] = (),
    judges: Sequence[str] | None = None,
    limit: int | None = None,
    seed: int = 0,
    generation_params: GenerationParams | None = None,
    params: JudgeParams | None = None,
    n_resamples: int = 1000,
    alpha: float = 0.05,
    criteria: Sequence[str] | None = None,
    top_k: int = 3,
    preset: str = "",
    created_by: AbstractBaseUser | None = None,
    dispatch: bool = True,
    project: Project | None = None,
) -> JudgeReport:
    """Declare (and by default queue) a generator selection report.

    Candidates are backend aliases (a run of each of ``transformations`` (default:
    ``transformation``) on ``dataset`` is created for each; the report executes it, reusing the
    generation cache) and/or existing runs of one dataset. The judges default to the candidates' own
    backends: the crossover design. ``criteria`` are the judged dimensions (default quality and
    fluency; similarity for paraphrase-like transformations only). Over several transformations
    the report also pools them, with the top ``top_k`` crossover.

    The report and the candidates' new runs belong to ``project`` (default: that of the existing
    runs or the dataset); existing runs and the dataset must be of that project (or the dataset
    shared).
    """
    runs = list(runs)
    project = project or project_for_new(None, None, *runs, dataset)
    project_require_same(project, *runs, role="the candidates' runs")
    if dataset is not None:
        project_require_same(project, dataset, role="the dataset the candidates transform")
    wanted = list(dict.fromkeys(transformations or ([] if runs and not candidates else [transformation])))
    chosen = _check_selection([r.transformation for r in runs] + wanted, criteria, alpha=alpha, top_k=top_k)
    with transaction.atomic():  # candidate runs and the report are created together or not at all
        if candidates:
            if dataset is None:
                raise ShiftlabError("candidate generators need a dataset to transform")
            runs += [
                transform_run_create(
                    dataset=dataset,
                    transformation=name,
                    seed=seed,
                    backend_alias=alias,
                    params=generation_params,
                    limit=limit,
                    preset=preset,
                    created_by=created_by,
                    dispatch=False,
                    project=project,
                )
                for name in wanted
                for alias in dict.fromkeys(candidates)
            ]
        _check_candidate_runs(runs)
        judges = list(dict.fromkeys(r.generator.backend_alias for r in runs)) if judges is None else judges
        options = _selection_options(
            runs, chosen, seed=seed, params=params, n_resamples=n_resamples, alpha=alpha, top_k=top_k, preset=preset
        )
        return report_declare(
            kind=JudgeReport.Kind.SELECTION,
            project=project,
            dataset=runs[0].dataset,
            judges=judges,
            options=options,
            runs=runs,
            audited={"runs": [r.pk for r in runs]},
            created_by=created_by,
            dispatch=dispatch,
        )


def _check_selection(
    transformations: Sequence[str], criteria: Sequence[str] | None, *, alpha: float, top_k: int
) -> tuple[str, ...]:
    """Check a selection's options; return its judged dimensions over ``transformations``, each of
    which must use a generator."""
    if not 0 < alpha < 1:
        raise ShiftlabError(f"alpha must lie in (0, 1), got {alpha}", field="alpha")
    if top_k < 1:
        raise ShiftlabError(f"top_k must be at least 1, got {top_k}", field="top_k")
    names = list(dict.fromkeys(transformations))
    no_llm = [name for name in names if not transformation_get(name).uses_llm]
    if no_llm:
        raise ShiftlabError(f"{', '.join(no_llm)} uses no generator model: there is nothing to select")
    return selection_criteria(names, criteria)


def _selection_options(
    runs: Sequence[TransformRun],
    chosen: Sequence[str],
    *,
    seed: int,
    params: JudgeParams | None,
    n_resamples: int,
    alpha: float,
    top_k: int,
    preset: str,
) -> dict:
    """The report's options; those a single-transformation, default-criteria report never had
    are left out, so its options stay as they were."""
    names = list(dict.fromkeys(r.transformation for r in runs))
    extra = {"transformations": names, "top_k": top_k} if len(names) > 1 else {}
    if tuple(chosen) != DEFAULT_CRITERIA:
        extra["criteria"] = list(chosen)
    return report_options(
        seed=seed,
        params=params or JudgeParams(),
        n_resamples=n_resamples,
        alpha=alpha,
        transformation=runs[0].transformation,
        **extra,
        **({"preset": preset} if preset else {}),
    )


def _check_candidate_runs(runs: Sequence[TransformRun]) -> None:
    """Candidates are compared on the same texts: one dataset and item limit; over several
    transformations, the same candidates (generator backends) on each."""
    by_transformation: dict[str, list[str]] = {}
    for run in runs:
        by_transformation.setdefault(run.transformation, []).append(run.generator.backend_alias)
    if any(len(aliases) < 2 for aliases in by_transformation.values()):
        raise ShiftlabError("a selection compares at least two candidates (generators or runs)")
    if len({(r.dataset_id, r.item_limit) for r in runs}) != 1:
        raise ShiftlabError("candidate runs must share one dataset and item limit to be compared on the same texts")
    if len(by_transformation) > 1 and len({frozenset(a) for a in by_transformation.values()}) != 1:
        listed = "; ".join(f"{t}: {', '.join(sorted(a))}" for t, a in by_transformation.items())
        raise ShiftlabError(
            f"a selection pooled over transformations needs the same candidate backends on each ({listed})"
        )


def _candidate_names(runs: Sequence[TransformRun]) -> dict[int, str]:
    """A candidate is named by its backend alias (with the run id when one transformation has
    several runs of the same alias); the same alias names it on every transformation."""
    aliases = [(r.transformation, r.generator.backend_alias) for r in runs]
    return {
        r.pk: r.generator.backend_alias
        if aliases.count((r.transformation, r.generator.backend_alias)) == 1
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
    kinds = [JudgeKind(k) for k in report.options.get("criteria", DEFAULT_CRITERIA)]
    n_texts = sum(r.total for r in runs)
    progress.set_total(n_texts + n_texts * len(report.judges) * len(kinds))
    # The candidates' runs were created undispatched: the report executes them itself.
    runs = [transform_run_execute_inline(run_id=run.pk, on_texts=progress.advance) for run in runs]
    candidates, scores = [], {}
    for run in runs:
        texts = run_texts(run)
        candidates.append(_candidate_stats(run, names[run.pk], texts))
        pairs = [(t.source_text, t.output_text) if t.ok else None for t in texts]
        for judge in report.judges:
            for kind in kinds:
                judged = judge_with_progress(report, progress, kind=kind, judge=judge, pairs=pairs)
                scores[(run.transformation, kind, judge, names[run.pk])] = {
                    (t.item_id, t.side): s for t, s, p in zip(texts, judged, pairs, strict=True) if p is not None
                }
    seed, n_resamples, alpha = report.options["seed"], report.options["n_resamples"], report.options["alpha"]
    transformations = list(dict.fromkeys(c.transformation for c in candidates))
    by_transformation, per_text = _compare_candidates(report, candidates, scores, kinds)
    selection = SelectionReport(
        candidates=candidates,
        judges=list(report.judges),
        kinds=by_transformation[transformations[0]],
        alpha=alpha,
        n_resamples=n_resamples,
        seed=seed,
    )
    pooled = _pooled(report, candidates, per_text) if len(transformations) > 1 else {}
    # A judge is degenerate when it gives (nearly) one score to every candidate's texts together.
    by_judge: dict[tuple[str, str], list[float | None]] = {}
    for (_, kind, judge, _), judged in scores.items():
        by_judge.setdefault((judge, kind.value), []).extend(judged.values())
    return {
        "dataset": report.dataset.name,
        "transformation": report.options["transformation"],
        "judge_models": {j: get_backend(j).model_id for j in report.judges},
        **asdict(selection),
        **(
            {
                "transformations": transformations,
                "by_transformation": {
                    name: {kind: asdict(c) for kind, c in comparisons.items()}
                    for name, comparisons in by_transformation.items()
                },
                "pooled": pooled,
            }
            if pooled
            else {}
        ),
        "degenerate_judges": degenerate_judges(by_judge),
        "score_counts": score_counts(by_judge),
    }


def _candidate_stats(run: TransformRun, name: str, texts: Sequence[TransformedItem]) -> CandidateStats:
    summary = transform_run_summary(run=run)
    return CandidateStats(
        name=name,
        model=run.generator.model,
        run_id=run.pk,
        n_texts=len(texts),
        error_rate=summary.error_rate,
        error_rates=summary.error_rates,
        mean_edit_distance=summary.mean_edit_distance,
        seconds_per_text=_seconds_per_text(texts),
        transformation=run.transformation,
    )


def _compare_candidates(
    report: JudgeReport, candidates: Sequence[CandidateStats], scores: dict, kinds: Sequence[JudgeKind]
) -> tuple[dict, dict]:
    """Per transformation and judged kind, the candidates' comparison; and per kind and
    transformation, the per-text scores that pooling reads."""
    options = report.options
    by_transformation, per_text = {}, {}
    for name in dict.fromkeys(c.transformation for c in candidates):
        names_here = [c.name for c in candidates if c.transformation == name]
        by_transformation[name] = {}
        for kind in kinds:
            kind_scores = {(j, c): s for (t, k, j, c), s in scores.items() if t == name and k == kind}
            by_transformation[name][kind.value] = compare_kind(
                kind=kind.value,
                candidates=names_here,
                judges=report.judges,
                scores=kind_scores,
                seed=options["seed"],
                n_resamples=options["n_resamples"],
                alpha=options["alpha"],
            )
            per_text.setdefault(kind.value, {})[name] = text_scores(
                candidates=names_here, judges=report.judges, scores=kind_scores
            )
    return by_transformation, per_text


def _pooled(report: JudgeReport, candidates: Sequence[CandidateStats], per_text: dict) -> dict:
    """Per judged kind, the candidates pooled over the transformations, with the top-k crossover."""
    everyone = list(dict.fromkeys(c.name for c in candidates))
    return {
        kind: asdict(
            pool_transformations(
                kind=kind,
                candidates=everyone,
                per_text=texts_by_transformation,
                k=report.options.get("top_k", 3),
                seed=report.options["seed"],
                n_resamples=report.options["n_resamples"],
            )
        )
        for kind, texts_by_transformation in per_text.items()
    }
