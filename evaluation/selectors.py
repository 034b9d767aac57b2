"""Read-only queries of benchmark runs and their aggregates, and of baseline studies to report on."""

from __future__ import annotations

from django.db.models import Count, Q, QuerySet

from annotation.models import BaselineStudy
from core.projects import User, scoped
from corpora.models import Dataset
from corpora.selectors import dataset_usable_list
from evaluation.aggregation import ModelAggregate, UnitScore, aggregate
from evaluation.benchmark_inputs import dataset_split_refusal
from evaluation.benchmark_plan import sided
from evaluation.encoder_choices import model_label
from evaluation.item_scores import ItemScores
from evaluation.models import BenchmarkResult, BenchmarkRun
from transforms.models import TransformRun


def benchmark_run_list(*, user: User) -> QuerySet[BenchmarkRun]:
    """The benchmark runs ``user`` may read (None: the system, every run), newest first."""
    runs = BenchmarkRun.objects.select_related("created_by", "project").order_by("-created_at", "-id")
    return scoped(runs, user)


def benchmark_result_list(*, run: BenchmarkRun, item_scores: bool = False) -> QuerySet[BenchmarkResult]:
    """The results of ``run``; their per-item scores (tens of KB each) are loaded only when
    ``item_scores`` is True (the robustness report's rank intervals need them, lists do not)."""
    results = (
        BenchmarkResult.objects.filter(run=run)
        .select_related("dataset")
        .order_by("model", "dataset__name", "transformation", "seed", "side")
    )
    return results if item_scores else results.defer("item_scores", "original_item_scores")


def unit_score(result: BenchmarkResult, *, item_scores: bool = False) -> UnitScore:
    """A stored result as the unit the aggregates and the robustness report take; with
    ``item_scores``, its per-item scores parsed (load them with the result list's flag)."""
    return UnitScore(
        model=result.model,
        dataset=result.dataset.name,
        transformation=sided(result.transformation, result.side),
        axis=sided(result.axis, result.side),
        seed=result.seed,
        score=result.main_score,
        original_score=result.original_main_score,
        item_scores=ItemScores.from_json(result.item_scores) if item_scores else None,
        n_items=result.n_items,
    )


def benchmark_run_aggregates(*, run: BenchmarkRun) -> dict[str, ModelAggregate]:
    """Per model: original, per transformation and per axis (mean ± SD over seeds), total."""
    found = aggregate(unit_score(r) for r in benchmark_result_list(run=run))
    return {model: found[model] for model in run.model_names if model in found}


def baseline_study_list(*, user: User) -> QuerySet[BaselineStudy]:
    """The baseline studies ``user`` may read (None: every one), newest first, with their drawn
    instances (``n_drawn``) and current answers (``n_answers``; withdrawn ones do not count) counted."""
    answers = Count("instances__answers", filter=Q(instances__answers__active=True))
    studies = (
        BaselineStudy.objects.select_related("dataset", "project")
        .annotate(n_drawn=Count("instances", distinct=True), n_answers=answers)
        .order_by("-created_at", "-id")
    )
    return scoped(studies, user)


def benchmark_run_transform_runs(*, run: BenchmarkRun) -> list[dict]:
    """The transformation runs a benchmark run uses, in its plan's order: ``{"run": TransformRun,
    "created": made by this benchmark run (else it existed and is reused)}``. Their ``done``/``total``
    is the progress of the generation the run's units wait for."""
    pks = list(dict.fromkeys((run.plan or {}).get("transform_runs", {}).values()))
    created = set((run.plan or {}).get("transform_runs_created", []))
    found = TransformRun.objects.select_related("dataset").in_bulk(pks)
    return [{"run": found[pk], "created": pk in created} for pk in pks if pk in found]


def benchmark_model_labels(*, run: BenchmarkRun) -> dict[str, str]:
    """Each model the run names, with the model behind an alias: "default (sentence-transformers/
    all-MiniLM-L6-v2)" from its results' model ids, else from this server's settings."""
    ids = dict(BenchmarkResult.objects.filter(run=run).values_list("model", "model_id").distinct())
    return {
        name: f"{name} ({ids[name]})" if ids.get(name) and ids[name] != name else model_label(name)
        for name in run.model_names
    }


def benchmark_dataset_choices(*, user: User, project: str | None = None, split: str = "test") -> QuerySet[Dataset]:
    """The datasets a benchmark run of ``user`` in ``project`` (a slug, or None) accepts on
    ``split``: the usable ones (``corpora.selectors.dataset_usable_list``) that have the split (a
    classification one also a training split), by the check ``benchmark_run_start`` makes."""
    usable = dataset_usable_list(user=user, project=project).order_by("name")
    return usable.filter(pk__in=[d.pk for d in usable if not dataset_split_refusal(d, split)])
