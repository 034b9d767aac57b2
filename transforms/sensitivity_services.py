"""The prompt-sensitivity report of existing runs: the same transformation of the same texts with
the same generator and seed, under different prompt versions (read-only; the statistics are in
:mod:`transforms.prompt_sensitivity`).

Benchmark Δ comes from the evaluation app, which sits downstream of this one, so this module never
imports it: ``settings.TRANSFORMS_BENCHMARK_DELTA_SOURCES`` names its source by dotted path (the
project package wires the apps) and :func:`benchmark_delta_sources` loads it on first use. Without a
source the report has no Δ column.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from django.conf import settings
from django.utils.module_loading import import_string

from core.errors import NotFoundError, ShiftlabError
from core.projects import User, scoped
from transforms.cache_keys import judgement_key
from transforms.judgement_services import RUN_KINDS, report_params, run_texts
from transforms.judging import JUDGE_PROMPTS
from transforms.models import Judgement, JudgeReport, TransformRun
from transforms.prompt_sensitivity import SensitivityReport, VersionInput, prompt_sensitivity
from transforms.prompts import prompt_hash
from transforms.registry import transformation_get

# run ids -> {run id: {(model, dataset, seed): transformed minus original main score}}
BenchmarkDeltaSource = Callable[[Sequence[int]], Mapping[int, Mapping[tuple, float]]]


def benchmark_delta_sources() -> tuple[BenchmarkDeltaSource, ...]:
    """The sources of benchmark Δ per transformation run that ``settings.TRANSFORMS_BENCHMARK_DELTA_SOURCES``
    names (a downstream app's functions), in its order."""
    return tuple(import_string(path) for path in settings.TRANSFORMS_BENCHMARK_DELTA_SOURCES)


@dataclass(frozen=True)
class PromptSensitivity:
    """The report and what it was computed from, for the page, the API and the command."""

    project: str
    transformation: str
    dataset: str
    seed: int
    generator: str
    runs: list[int]
    judge_reports: dict[int, int | None]  # run id -> the judge report whose scores are used
    judge_models: dict[int, list[str]]
    judge_note: str  # why judge scores are left out, if they are
    report: SensitivityReport


def prompt_sensitivity_runs(*, run_ids: Sequence[int], user: User = None) -> list[TransformRun]:
    """The runs, in the order given, as ``user`` may read them (None: the system, which reads
    everything); ShiftlabError naming what is missing (or unreadable) or cannot be compared."""
    run_ids = list(dict.fromkeys(run_ids))
    invalid = [pk for pk in run_ids if not 0 < pk < 2**63]
    if invalid:
        raise ShiftlabError(f"{invalid} are not run ids (positive whole numbers)")
    if len(run_ids) < 2:
        raise ShiftlabError("name at least two runs of one transformation made under different prompt versions")
    found = {
        r.pk: r
        for r in scoped(TransformRun.objects, user)
        .filter(pk__in=run_ids)
        .select_related("dataset", "generator", "project")
        .prefetch_related("prompts")
    }
    missing = [pk for pk in run_ids if pk not in found]
    if missing:
        raise NotFoundError(f"no transformation run(s) {missing}", field="runs")
    runs = [found[pk] for pk in run_ids]
    _check_comparable(runs)
    return runs


def _check_comparable(runs: Sequence[TransformRun]) -> None:
    first = runs[0]
    if not transformation_get(first.transformation).uses_llm:
        raise ShiftlabError(f"{first.transformation} uses no prompt: there are no prompt versions to compare")
    unfinished = [f"#{r.pk} ({r.status})" for r in runs if r.status != TransformRun.Status.SUCCEEDED]
    if unfinished:
        raise ShiftlabError(f"runs {', '.join(unfinished)} have not succeeded: resume them or leave them out")
    checks = (
        ("project (so the prompt versions)", lambda r: r.project_id),
        ("transformation", lambda r: r.transformation),
        ("dataset (so the texts)", lambda r: r.dataset_id),
        ("item limit (so the texts)", lambda r: r.item_limit),
        ("seed", lambda r: r.seed),
        ("languages", lambda r: r.languages),
        ("generator (backend, model and parameters)", lambda r: r.generator.content_hash),
    )
    for what, value in checks:
        differing = [r.pk for r in runs if value(r) != value(first)]
        if differing:
            raise ShiftlabError(
                f"runs {differing} differ from run {first.pk} in their {what}: a prompt-sensitivity report compares "
                "runs that differ only in their prompt versions (same texts, seed, generator and languages)"
            )
    seen: dict[str, int] = {}
    for run in runs:
        key = repr(sorted(run.prompt_hashes.items()))
        if key in seen:
            raise ShiftlabError(f"runs {seen[key]} and {run.pk} used the same prompt versions: leave one out")
        seen[key] = run.pk


def prompt_version_label(run: TransformRun) -> str:
    """The prompt versions of a run, e.g. ``paraphrase v2`` (``translate v1 + ...`` for several keys)."""
    versions = sorted(run.prompts.all(), key=lambda p: p.key)
    return " + ".join(f"{p.key} v{p.version}" for p in versions) or "no prompt"


def _latest_judge_report(run: TransformRun) -> JudgeReport | None:
    return (
        JudgeReport.objects.filter(kind=JudgeReport.Kind.RUN, runs=run, status=JudgeReport.Status.SUCCEEDED)
        .order_by("-finished_at", "-pk")
        .first()
    )


def _judge_scores(report: JudgeReport, run: TransformRun) -> dict[str, dict[tuple, float]]:
    """Per-text scores of a stored run report, read from the judgement cache (no judge is called):
    for each kind, each successful text's score averaged over the report's judges, leaving out
    answers without a score (as the report did)."""
    params, seed = report_params(report), report.options["seed"]
    models = [j["model"] for j in report.result["judges"]]
    texts = [t for t in run_texts(run) if t.ok]
    scores: dict[str, dict[tuple, float]] = {}
    for kind in RUN_KINDS:
        system, user = JUDGE_PROMPTS[kind]
        template = prompt_hash(system, user)
        keys = {
            (t.pk, model, attempt): judgement_key(
                kind=kind.value,
                model=model,
                prompt_hash=template,
                params_hash=params.sampling_hash,
                text_a=t.source_text,
                text_b=t.output_text,
                seed=seed,
                attempt=attempt,
            )
            for t in texts
            for model in models
            for attempt in range(params.max_attempts)
        }
        found = dict(Judgement.objects.filter(key__in=keys.values()).values_list("key", "score"))
        by_text: dict[tuple, float] = {}
        for t in texts:
            kept = [score for model in models if (score := _kept_score(found, keys, t.pk, model, params)) is not None]
            if kept:
                by_text[(t.item_id, t.side)] = sum(kept) / len(kept)
        scores[kind.value] = by_text
    return scores


def _kept_score(found: dict, keys: dict, text_pk: int, model: str, params) -> float | None:
    """The kept judgement is the first attempt with a score, as in ``judge_pairs``."""
    for attempt in range(params.max_attempts):
        score = found.get(keys[(text_pk, model, attempt)])
        if score is not None:
            return score
    return None


def prompt_sensitivity_report(
    *, run_ids: Sequence[int], seed: int = 0, n_resamples: int = 1000, confidence: float = 0.95, user: User = None
) -> PromptSensitivity:
    """Compare the prompt versions of comparable runs (see :func:`prompt_sensitivity_runs`).

    Judge scores come from the latest succeeded judge report of each run (kind "run"); they are
    compared only when every run has one with the same judge models. Benchmark Δ comes from the
    registered sources (one value per model × dataset × seed that scored the run). Only runs
    ``user`` may read are found (None: the system)."""
    if not 0 < confidence < 1:
        raise ShiftlabError(f"confidence must lie in (0, 1), got {confidence}")
    if n_resamples < 100:
        raise ShiftlabError(f"use at least 100 resamples (got {n_resamples})")
    runs = prompt_sensitivity_runs(run_ids=run_ids, user=user)
    ids = [r.pk for r in runs]
    deltas: dict[int, dict[tuple, float]] = {pk: {} for pk in ids}
    for source in benchmark_delta_sources():
        for pk, values in source(ids).items():
            deltas.setdefault(pk, {}).update(values)
    reports = {r.pk: _latest_judge_report(r) for r in runs}
    judge_models = {pk: sorted(j["model"] for j in rep.result["judges"]) if rep else [] for pk, rep in reports.items()}
    same_judges = len({tuple(m) for m in judge_models.values()}) == 1 and all(judge_models.values())
    unjudged = [pk for pk, models in judge_models.items() if not models]
    if unjudged:
        judge_note = f"no judge scores: run(s) {unjudged} have no succeeded judge report (judge run --run N)"
    elif not same_judges:
        judge_note = "no judge scores: the runs' latest judge reports used different judge models"
    else:
        judge_note = ""
    versions = []
    for run in runs:
        texts = run_texts(run)
        versions.append(
            VersionInput(
                label=prompt_version_label(run),
                run_id=run.pk,
                outcomes={(t.item_id, t.side): t.ok for t in texts},
                edit_distances={
                    (t.item_id, t.side): t.edit_distance for t in texts if t.ok and t.edit_distance is not None
                },
                judge_scores=_judge_scores(reports[run.pk], run) if same_judges else {},
                benchmark_deltas=deltas.get(run.pk, {}),
            )
        )
    if same_judges and not any(scores for v in versions for scores in v.judge_scores.values()):
        judge_note = "no judge scores: the judges' answers held no score on their scale for these texts"
    try:
        report = prompt_sensitivity(versions, seed=seed, n_resamples=n_resamples, confidence=confidence)
    except ValueError as exc:
        raise ShiftlabError(str(exc)) from None
    first = runs[0]
    return PromptSensitivity(
        project=first.project.slug,
        transformation=first.transformation,
        dataset=first.dataset.name,
        seed=first.seed,
        generator=str(first.generator),
        runs=ids,
        judge_reports={pk: rep.pk if rep and same_judges else None for pk, rep in reports.items()},
        judge_models=judge_models,
        judge_note=judge_note,
        report=report,
    )
