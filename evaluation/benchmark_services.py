"""Benchmark runs: create from a validated config or from datasets, execute units (one Celery task
each), finalise, resume. Results go to the database (one row per unit, unique) and to one
MTEB-style JSON file per unit under ``DATA_DIR/results/<run>/``."""

from __future__ import annotations

import json
import math
import os
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ImproperlyConfigured
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from annotation.config_export import Format, config_verify
from core.errors import ShiftlabError
from core.services import audit_record
from corpora.models import Dataset, DatasetItem
from corpora.task_types import TaskType, task_spec
from evaluation.benchmark_plan import (
    Plan,
    PlanError,
    TransformationSpec,
    Unit,
    plan_from_config,
    plan_from_datasets,
    spec_as_dict,
)
from evaluation.encoders import EncoderError, get_encoder, slug
from evaluation.models import BenchmarkResult, BenchmarkRun
from evaluation.services import DEFAULT_SEED, TRAIN_SPLIT, examples_evaluate
from transforms.models import TransformedItem, TransformRun
from transforms.registry import TRANSFORMATIONS
from transforms.services import (
    GenerationParams,
    TransientBackendError,
    transform_run_create,
    transform_run_execute_inline,
)

MAX_ERROR_LINES = 20


# --- creation ---------------------------------------------------------------------------------


def benchmark_run_create_from_config(
    *,
    text: str,
    fmt: Format,
    models: Sequence[str],
    datasets: Sequence[str] | None = None,
    seeds: Sequence[int] | None = None,
    transformations: Sequence[str] | None = None,
    limit: int | None = None,
    split: str = "test",
    name: str = "",
    created_by: AbstractBaseUser | None = None,
    dispatch: bool = True,
) -> BenchmarkRun:
    """A run over a validated config file's approved transformations (and the original data).
    The file must verify (hash and canonical form) or nothing is created."""
    check = config_verify(text, fmt)
    if not check.ok:
        raise ShiftlabError(
            "the benchmark config does not verify, so it is not used: "
            + "; ".join(check.problems)
            + ". Use the file exactly as `python manage.py benchmark_config export` wrote it."
        )
    try:
        plan = plan_from_config(check.document, datasets=datasets, seeds=seeds, transformations=transformations)
    except PlanError as exc:
        raise ShiftlabError(f"cannot plan a benchmark from this config: {exc}") from None
    return _benchmark_run_create(
        plan=plan,
        source=BenchmarkRun.Source.CONFIG,
        config_hash=check.declared_hash or "",
        config_document=check.document,
        models=models,
        limit=limit,
        split=split,
        name=name,
        created_by=created_by,
        dispatch=dispatch,
    )


def benchmark_run_create_from_datasets(
    *,
    datasets: Sequence[str],
    models: Sequence[str],
    limit: int | None = None,
    split: str = "test",
    name: str = "",
    created_by: AbstractBaseUser | None = None,
    dispatch: bool = True,
) -> BenchmarkRun:
    """A run on original data only: models x datasets."""
    try:
        plan = plan_from_datasets(datasets)
    except PlanError as exc:
        raise ShiftlabError(str(exc)) from None
    return _benchmark_run_create(
        plan=plan,
        source=BenchmarkRun.Source.DATASETS,
        config_hash="",
        config_document=None,
        models=models,
        limit=limit,
        split=split,
        name=name,
        created_by=created_by,
        dispatch=dispatch,
    )


def _benchmark_run_create(
    *,
    plan: Plan,
    source: str,
    config_hash: str,
    config_document: dict | None,
    models: Sequence[str],
    limit: int | None,
    split: str,
    name: str,
    created_by: AbstractBaseUser | None,
    dispatch: bool,
) -> BenchmarkRun:
    models = list(dict.fromkeys(m.strip() for m in models if m.strip()))
    if not models:
        raise ShiftlabError("name at least one model (an alias in EVALUATION_ENCODERS or a model name)")
    for model in models:
        try:
            get_encoder(model)
        except (ImproperlyConfigured, EncoderError) as exc:
            raise ShiftlabError(f"model {model!r} cannot be used: {exc}") from None
    if limit is not None and limit < 1:
        raise ShiftlabError("--limit must be at least 1")
    datasets = {ref.name: _dataset_checked(ref.name, ref.content_hash, split) for ref in plan.datasets}
    units = plan.units(models)
    with transaction.atomic():
        # Transformation runs are made (or found) now, not in the unit tasks, so that the units of
        # several models share one run per (dataset, transformation, seed).
        transform_runs = {
            _transform_key(name, spec.transformation, seed): _transform_run_for(
                dataset=datasets[name], spec=spec, seed=seed, limit=limit, created_by=created_by
            ).pk
            for name in datasets
            for spec in plan.transformations
            for seed in spec.seeds
        }
        run = BenchmarkRun.objects.create(
            name=name,
            source=source,
            config_hash=config_hash,
            config_document=config_document,
            model_names=models,
            split=split,
            item_limit=limit,
            total=len(units),
            created_by=created_by,
            plan={
                "datasets": list(datasets),
                "include_original": plan.include_original,
                "transformations": [spec_as_dict(spec) for spec in plan.transformations],
                "transform_runs": transform_runs,
                "units": [u.as_dict() for u in units],
            },
        )
        audit_record(
            actor=created_by,
            verb="benchmark.run.create",
            obj=run,
            payload={"config_hash": config_hash, "models": models, "units": len(units)},
        )
        if dispatch:
            transaction.on_commit(lambda: _dispatch(run.pk))
    return run


def _dispatch(run_id: int) -> None:
    from evaluation.tasks import start_benchmark_run

    start_benchmark_run.delay(run_id)


def _dataset_checked(name: str, content_hash: str | None, split: str) -> Dataset:
    dataset = Dataset.objects.filter(name=name).first()
    if dataset is None:
        raise ShiftlabError(f"no dataset named {name!r}: import it first (python manage.py corpora list)")
    if content_hash and dataset.content_hash != content_hash:
        raise ShiftlabError(
            f"dataset {name} changed since the config was exported (content hash {dataset.content_hash[:12]}, "
            f"config {content_hash[:12]}): import the exported version or export the config again"
        )
    if split not in dataset.splits:
        raise ShiftlabError(f"dataset {name} has no split {split!r}; its splits: {', '.join(dataset.splits)}")
    if TaskType(dataset.task_type) is TaskType.CLASSIFICATION and (
        split == TRAIN_SPLIT or TRAIN_SPLIT not in dataset.splits
    ):
        raise ShiftlabError(f"classification dataset {name} needs a {TRAIN_SPLIT!r} split and another split to score")
    return dataset


def _transform_key(dataset: str, transformation: str, seed: int) -> str:
    return f"{dataset}|{transformation}|{seed}"


def _transform_run_for(
    *, dataset: Dataset, spec: TransformationSpec, seed: int, limit: int | None, created_by: AbstractBaseUser | None
) -> TransformRun:
    """The transformation run with exactly the config's generator, prompts and languages: an
    existing one (succeeded first) or a new, undispatched one (its chunks run inside the units)."""
    languages = list(spec.languages)
    candidates = TransformRun.objects.filter(
        dataset=dataset,
        transformation=spec.transformation,
        seed=seed,
        item_limit=limit,
        generator__content_hash=spec.generator_hash,
    ).order_by("-id")
    matching = [
        r
        for r in candidates
        if r.prompt_hashes == dict(spec.prompt_hashes) and (not languages or r.languages == languages)
    ]
    matching.sort(key=lambda r: r.status != TransformRun.Status.SUCCEEDED)
    if matching:
        return matching[0]
    try:
        with transaction.atomic():
            run = transform_run_create(
                dataset=dataset,
                transformation=spec.transformation,
                seed=seed,
                backend_alias=spec.backend_alias,
                params=GenerationParams(**spec.generator_params),
                languages=languages or None,
                limit=limit,
                created_by=created_by,
                dispatch=False,
            )
            if run.generator.content_hash != spec.generator_hash:
                raise ShiftlabError(
                    f"{spec.transformation}: backend {spec.backend_alias!r} now serves {run.generator.model!r}, "
                    f"but the config was validated with {spec.generator_model!r}; point the backend at that model"
                )
            if run.prompt_hashes != dict(spec.prompt_hashes):
                changed = sorted(k for k in spec.prompt_hashes if run.prompt_hashes.get(k) != spec.prompt_hashes[k])
                raise ShiftlabError(
                    f"{spec.transformation}: the active prompt versions of {', '.join(changed)} differ from the "
                    "validated ones in the config; activate the config's prompt versions (Admin > Prompt templates)"
                )
    except ImproperlyConfigured as exc:
        raise ShiftlabError(f"{spec.transformation}: {exc}") from None
    return run


# --- execution --------------------------------------------------------------------------------


def benchmark_run_mark_started(*, run_id: int) -> None:
    BenchmarkRun.objects.filter(pk=run_id).exclude(status=BenchmarkRun.Status.SUCCEEDED).update(
        status=BenchmarkRun.Status.RUNNING, started_at=timezone.now()
    )


def benchmark_run_pending_units(*, run_id: int) -> list[dict[str, Any]]:
    """Units of the run that have no result yet (all of them at the start; the rest on resume)."""
    run = BenchmarkRun.objects.get(pk=run_id)
    done = set(BenchmarkResult.objects.filter(run=run).values_list("model", "dataset__name", "transformation", "seed"))
    return [u for u in run.plan["units"] if (u["model"], u["dataset"], u["transformation"], u["seed"]) not in done]


def benchmark_unit_execute(*, run_id: int, unit: dict[str, Any]) -> bool:
    """Score one unit and store its result; return whether this call stored it.

    Idempotent: a unit that already has a result is skipped, and the unique constraint on the
    unit key keeps a unit delivered twice (e.g. after its worker was killed) from counting twice.
    Missing transformation outputs are generated here first (idempotent chunks, cached LLM
    calls). Transient LLM errors propagate (the task retries them); any other error is recorded on
    the run and the unit stays without result until the run is resumed.
    """
    u = Unit.from_dict(unit)
    run = BenchmarkRun.objects.get(pk=run_id)
    key = {"run": run, "model": u.model, "dataset__name": u.dataset, "transformation": u.transformation, "seed": u.seed}
    if BenchmarkResult.objects.filter(**key).exists():
        return False
    try:
        row = _score_unit(run, u)
    except TransientBackendError:
        raise
    except (ShiftlabError, ImproperlyConfigured, ValueError) as exc:
        _record_failure(run_id, u, exc)
        return False
    stored = False
    try:
        with transaction.atomic():
            BenchmarkResult.objects.create(**row)
            BenchmarkRun.objects.filter(pk=run_id).update(done=F("done") + 1)
            stored = True
    except IntegrityError:  # stored meanwhile by another delivery of this unit
        pass
    _finalize_when_complete(run_id)
    return stored


def _score_unit(run: BenchmarkRun, u: Unit) -> dict[str, Any]:
    dataset = Dataset.objects.get(name=u.dataset)
    encoder = get_encoder(u.model)
    started = time.perf_counter()
    examples = _scoped_examples(dataset, run.split, run.item_limit)
    transform_run, original, left_out = None, None, 0
    if u.is_original:
        result = _evaluate(dataset, run.split, examples, encoder)
    else:
        transform_run_id = run.plan["transform_runs"][_transform_key(*_unit_run_key(u))]
        transform_run = transform_run_execute_inline(run_id=transform_run_id)  # what it still lacks, in this task
        kept_original, kept_transformed = _paired_examples(dataset, transform_run, examples)
        left_out = len(examples) - len(kept_original)
        if not kept_original:
            raise ShiftlabError(f"every {u.transformation} output of transformation run {transform_run.pk} failed")
        result = _evaluate(dataset, run.split, kept_transformed, encoder)
        original = _evaluate(dataset, run.split, kept_original, encoder)
    for scored in (result, original):
        if scored is not None and not math.isfinite(scored.main_score):
            raise ShiftlabError(
                f"{result.main_metric} is undefined on the {len(examples) - left_out} items left "
                f"({left_out} left out because their transformation failed): use more items"
            )
    row = {
        "run": run,
        "model": u.model,
        "model_id": encoder.model_id,
        "model_revision": encoder.revision,
        "dataset": dataset,
        "transformation": u.transformation,
        "seed": u.seed,
        "axis": "" if u.is_original else TRANSFORMATIONS[u.transformation].axis.value,
        "transform_run": transform_run,
        "main_metric": result.main_metric,
        "main_score": float(result.main_score),
        "metrics": _clean(result.metrics()),
        "n_items": len(examples) - left_out,
        "n_left_out": left_out,
        "original_main_score": None if original is None else float(original.main_score),
        "original_metrics": None if original is None else _clean(original.metrics()),
        "evaluation_time_s": time.perf_counter() - started,
    }
    row["result_path"] = str(_write_result_file(row, dataset=dataset, split=run.split))
    return row


def _evaluate(dataset: Dataset, split: str, examples, encoder):
    # Seeded protocols (classification, clustering) use MTEB's seed: the unit's seed is the
    # transformation's, so original and transformed scores differ only by the texts.
    return examples_evaluate(
        dataset=dataset, split=split, examples=[e[:3] for e in examples], encoder=encoder, seed=DEFAULT_SEED
    )


def _unit_run_key(u: Unit) -> tuple[str, str, int]:
    return u.dataset, u.transformation, u.seed


def _scoped_examples(dataset: Dataset, split: str, limit: int | None) -> list[tuple[str, dict, object, int]]:
    """(item_id, payload, gold, pk) of the evaluated split; with a limit, of the first ``limit``
    examples of the dataset (the items a transformation run with the same limit covers)."""
    items = DatasetItem.objects.filter(dataset=dataset, kind="example").order_by("position")
    if limit:
        items = items.filter(pk__in=list(items.values_list("pk", flat=True)[:limit]))
    rows = items.filter(split=split).values_list("item_id", "payload", "gold", "pk")
    examples = [(item_id, payload, gold, pk) for item_id, payload, gold, pk in rows]
    if not examples:
        raise ShiftlabError(f"dataset {dataset.name} has no {split!r} examples in the evaluated range")
    return examples


def _paired_examples(dataset: Dataset, transform_run: TransformRun, examples):
    """The examples whose every transformed field succeeded, as original and as transformed.
    A failed transformation leaves the item out of both, never replaced by its original text."""
    fields = task_spec(dataset.task_type).transformable_fields
    outputs = {
        (item_pk, side): (ok, text)
        for item_pk, side, ok, text in TransformedItem.objects.filter(run=transform_run).values_list(
            "item_id", "side", "ok", "output_text"
        )
    }
    kept_original, kept_transformed = [], []
    for item_id, payload, gold, pk in examples:
        outs = [outputs.get((pk, side)) for side in fields]
        if any(out is None or not out[0] for out in outs):
            continue
        kept_original.append((item_id, payload, gold, pk))
        transformed = {**payload, **{side: out[1] for side, out in zip(fields, outs, strict=True)}}
        kept_transformed.append((item_id, transformed, gold, pk))
    return kept_original, kept_transformed


def _clean(metrics: dict) -> dict:
    """JSON-safe metrics (NaN and infinities become null)."""
    return json.loads(json.dumps(metrics, default=float).replace("NaN", "null").replace("Infinity", "null"))


def result_directory(run_id: int) -> Path:
    return Path(settings.DATA_DIR) / "results" / str(run_id)


def _write_result_file(row: dict[str, Any], *, dataset: Dataset, split: str) -> Path:
    """The unit's MTEB-style result file (task name, revision, scores per split), with Shiftlab's
    unit description alongside. Written atomically; a redelivered unit rewrites the same path."""
    run: BenchmarkRun = row["run"]
    name = row["transformation"] if row["axis"] == "" else f"{row['transformation']}-seed{row['seed']}"
    path = result_directory(run.pk) / slug(row["model"]) / slug(dataset.name) / f"{name}.json"
    document = {
        "dataset_revision": dataset.content_hash,
        "task_name": dataset.name,
        "mteb_version": None,
        "evaluation_time": row["evaluation_time_s"],
        "kg_co2_emissions": None,
        "scores": {
            split: [
                {
                    **row["metrics"],
                    "main_score": row["main_score"],
                    "hf_subset": "default",
                    "languages": list(dataset.languages),
                }
            ]
        },
        "shiftlab": {
            "benchmark_run": run.pk,
            "config_hash": run.config_hash,
            "model": row["model"],
            "model_id": row["model_id"],
            "model_revision": row["model_revision"],
            "task_type": dataset.task_type,
            "main_metric": row["main_metric"],
            "transformation": row["transformation"],
            "axis": row["axis"],
            "seed": row["seed"],
            "transform_run": row["transform_run"].pk if row["transform_run"] else None,
            "n_items": row["n_items"],
            "n_left_out": row["n_left_out"],
            "original_same_items": None
            if row["original_main_score"] is None
            else {"main_score": row["original_main_score"], "metrics": row["original_metrics"]},
        },
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        temporary.write_text(json.dumps(document, indent=2, sort_keys=True), encoding="utf-8")
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
    return path


def _record_failure(run_id: int, u: Unit, exc: Exception) -> None:
    line = f"{u.model} / {u.dataset} / {u.transformation} seed {u.seed}: {exc}"
    with transaction.atomic():
        run = BenchmarkRun.objects.select_for_update().get(pk=run_id)
        lines = [x for x in run.error.splitlines() if x][: MAX_ERROR_LINES - 1]
        run.error = "\n".join([*lines, line])
        run.n_failed = F("n_failed") + 1
        run.save(update_fields=["error", "n_failed"])
    _finalize_when_complete(run_id)


def _finalize_when_complete(run_id: int) -> None:
    # The chord's final task may wait behind other runs' tasks: finish as soon as every unit has
    # an outcome (finalising twice is harmless).
    if BenchmarkRun.objects.filter(pk=run_id, done__gte=F("total") - F("n_failed")).exists():
        benchmark_run_finalize(run_id=run_id)


def benchmark_run_finalize(*, run_id: int) -> BenchmarkRun:
    with transaction.atomic():
        run = BenchmarkRun.objects.select_for_update().get(pk=run_id)
        run.done = BenchmarkResult.objects.filter(run=run).count()
        if run.done >= run.total:
            run.status, run.error = BenchmarkRun.Status.SUCCEEDED, ""
        else:
            run.status = BenchmarkRun.Status.FAILED
            missing = f"{run.total - run.done} units have no result: fix the cause and resume the run"
            run.error = f"{run.error}\n{missing}".strip() if missing not in run.error else run.error
        if run.finished_at is None or run.status == BenchmarkRun.Status.SUCCEEDED:
            run.finished_at = timezone.now()
        run.save(update_fields=["done", "status", "error", "finished_at"])
    return run


def benchmark_run_resume(*, run_id: int, actor: AbstractBaseUser | None = None) -> BenchmarkRun:
    """Queue the units that have no result (after a crash, a lost task or a fixed failure)."""
    run = BenchmarkRun.objects.get(pk=run_id)
    with transaction.atomic():
        BenchmarkRun.objects.filter(pk=run_id).update(
            status=BenchmarkRun.Status.PENDING, error="", n_failed=0, finished_at=None
        )
        audit_record(actor=actor, verb="benchmark.run.resume", obj=run, payload={"done": run.done, "total": run.total})
        transaction.on_commit(lambda: _dispatch(run_id))
    run.refresh_from_db()
    return run
