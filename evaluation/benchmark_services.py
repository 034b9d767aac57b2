"""Benchmark runs: create from a validated config or from datasets, execute units (one Celery task
each), finalise, resume. Results go to the database (one row per unit, unique); scoring a unit
and writing its MTEB-style result file is ``evaluation.benchmark_scoring``."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any, TypedDict, Unpack

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ImproperlyConfigured
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from annotation.configs.config_export import Format, config_render
from annotation.configs.export_services import ConfigCheck, benchmark_config_evidence_changes, benchmark_config_verify
from annotation.models import BenchmarkConfig
from core.errors import ShiftlabError
from core.job_services import JobWait, job_fail
from core.models import Project
from core.projects import User, project_for_new, project_require_same, scoped
from core.services import audit_record
from core.task_policy import dispatch_on_commit
from corpora.models import Dataset
from corpora.selectors import dataset_get
from corpora.task_types import TaskType
from evaluation.benchmark_plan import (
    Plan,
    PlanError,
    TransformationSpec,
    Unit,
    plan_from_config,
    plan_from_datasets,
    spec_as_dict,
    transform_run_key,
)
from evaluation.benchmark_scoring import benchmark_unit_score
from evaluation.encoders import EncoderError, get_encoder
from evaluation.models import BenchmarkResult, BenchmarkRun
from evaluation.services import TRAIN_SPLIT
from transforms.backends.base import TransientBackendError
from transforms.models import TransformRun
from transforms.params import GenerationParams
from transforms.presets import preset_get
from transforms.services import transform_run_create

MAX_ERROR_LINES = 20


# --- creation ---------------------------------------------------------------------------------


class RunOptions(TypedDict, total=False):
    """What both ways of creating a run accept besides the plan and the models.

    limit: score only the first ``limit`` examples of each dataset (default all);
    split: the evaluated split (default "test"); name: shown in lists (default "");
    created_by: the user, audited, whose read access decides which datasets and configs exist
    (default None: the system, which reads everything); project: the project the run (and any
    transformation run made for it) belongs to, which its datasets (unless shared), config and
    transformation runs must belong to too (default: its inputs' project, see
    ``core.projects.project_for_new``); dispatch: queue the
    run's tasks once the transaction commits (default True; False leaves it pending); preset: a paper's protocol
    (``transforms.presets``), whose encoder dtype the run uses; encoder_dtype: load every model
    in this dtype (default: each model's configured one). Both are stored in the run's plan.
    """

    limit: int | None
    split: str
    name: str
    created_by: AbstractBaseUser | None
    project: Project | None
    dispatch: bool
    preset: str
    encoder_dtype: str | None


def benchmark_run_create_from_config(
    *,
    text: str,
    fmt: Format,
    models: Sequence[str],
    datasets: Sequence[str] | None = None,
    seeds: Sequence[int] | None = None,
    transformations: Sequence[str] | None = None,
    evidence_override: bool = False,
    **options: Unpack[RunOptions],
) -> BenchmarkRun:
    """A run over a validated config file's approved transformations (and the original data).
    The file must verify (safe parsing, shape, hash, canonical form) and be either one of this
    deployment's exports or signed with its key; otherwise nothing is created. The evidence behind
    each approval must still hold (``benchmark_config_evidence_changes``), unless
    ``evidence_override``: the researcher runs it anyway, and the run records what had changed."""
    check = benchmark_config_verify(text=text, fmt=fmt)
    if not check.accepted:
        raise ShiftlabError(f"the benchmark config is refused: {check.acceptance.reason}.")
    reader = options.get("created_by")
    _config_readable(check, reader=reader)
    options["project"] = options.get("project") or project_for_new(reader, None, check.known)
    _config_in_project(check, project=options["project"])
    changes = benchmark_config_evidence_changes(check=check)
    if changes and not evidence_override:
        raise ShiftlabError(_evidence_refusal(changes))
    try:
        plan = plan_from_config(
            check.verification.config, datasets=datasets, seeds=seeds, transformations=transformations
        )
    except PlanError as exc:
        raise ShiftlabError(f"cannot plan a benchmark from this config: {exc}") from None
    override = None
    if changes:
        by = reader.get_username() if reader is not None else ""
        override = {"reasons": changes, "by": by, "at": timezone.now().isoformat()}
    return _benchmark_run_create(
        plan=plan,
        source=BenchmarkRun.Source.CONFIG,
        config_hash=check.verification.declared_hash or "",
        config_document=check.verification.document,
        evidence_override=override,
        models=models,
        **options,
    )


def _evidence_refusal(changes: Sequence[str]) -> str:
    return (
        "the evidence behind the config changed since it was exported: "
        + "; ".join(changes)
        + ". Decide on the current gate results and export the config again, or run it anyway (command: "
        "--run-anyway; API: run_anyway true; page: 'Run anyway'): the run then records these reasons."
    )


def benchmark_run_evidence_recheck(*, run_id: int) -> bool:
    """Before a run's units start (and on resume): whether the evidence behind its config still
    holds, apart from the changes the researcher already ran anyway. A run whose evidence changed
    since it was created fails, saying what changed."""
    run = BenchmarkRun.objects.get(pk=run_id)
    if run.source != BenchmarkRun.Source.CONFIG or not run.config_document:
        return True
    text = config_render(run.config_document, "json")
    changes = benchmark_config_evidence_changes(check=benchmark_config_verify(text=text, fmt="json"))
    accepted = set((run.evidence_override or {}).get("reasons", []))
    new = [change for change in changes if change not in accepted]
    if new:
        job_fail(model=BenchmarkRun, job_id=run_id, message=_evidence_refusal(new))
        return False
    return True


def benchmark_run_create_from_datasets(
    *, datasets: Sequence[str], models: Sequence[str], **options: Unpack[RunOptions]
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
        **options,
    )


def _config_readable(check: ConfigCheck, *, reader: User) -> None:
    """A config exported here must be one the caller may read (before its project is taken as the
    run's, so a stranger hears why rather than a bare 403)."""
    config = check.known
    if config is not None and not scoped(BenchmarkConfig.objects.filter(pk=config.pk), reader).exists():
        raise ShiftlabError(
            "the benchmark config was exported in a project you do not belong to: a run needs a config "
            "exported in one of your projects."
        )


def _config_in_project(check: ConfigCheck, *, project: Project) -> None:
    """A config exported here must be of the run's project, and so must the transformation runs it
    names. (A config signed by another deployment names that one's runs; the runs a benchmark uses
    are always found or made in its project: ``_transform_run_for``.)"""
    config = check.known
    if config is None:
        return
    project_require_same(project, config, role="the config of a benchmark run")
    named = {run.run_id for entry in check.verification.config.approved for run in entry.runs}
    foreign = sorted(TransformRun.objects.filter(pk__in=named).exclude(project=project).values_list("pk", flat=True))
    if foreign:
        raise ShiftlabError(
            f"the config names transformation runs of another project ({', '.join(map(str, foreign))}), not of "
            f"{project.slug!r}: export a config of this project's runs."
        )


def _encoder_dtype(preset: str, encoder_dtype: str | None) -> str | None:
    """The dtype a run loads its encoders in: the one given, else the preset's (None: each model's
    configured dtype). A given dtype that differs from the preset's is refused."""
    if not preset:
        return encoder_dtype
    try:
        wanted = preset_get(preset).encoder_dtype
    except ValueError as exc:
        raise ShiftlabError(str(exc)) from None
    if encoder_dtype and wanted and encoder_dtype != wanted:
        raise ShiftlabError(f"preset {preset} loads encoders in {wanted}, but encoder_dtype {encoder_dtype} was given")
    return encoder_dtype or wanted or None


def _benchmark_run_create(
    *,
    plan: Plan,
    source: str,
    config_hash: str,
    config_document: dict | None,
    models: Sequence[str],
    evidence_override: dict | None = None,
    limit: int | None = None,
    split: str = "test",
    name: str = "",
    created_by: AbstractBaseUser | None = None,
    project: Project | None = None,
    dispatch: bool = True,
    preset: str = "",
    encoder_dtype: str | None = None,
) -> BenchmarkRun:
    models = list(dict.fromkeys(m.strip() for m in models if m.strip()))
    if not models:
        raise ShiftlabError("name at least one model (an alias in EVALUATION_ENCODERS or a model name)")
    encoder_dtype = _encoder_dtype(preset, encoder_dtype)
    for model in models:
        try:
            get_encoder(model, encoder_dtype)
        except (ImproperlyConfigured, EncoderError) as exc:
            raise ShiftlabError(f"model {model!r} cannot be used: {exc}") from None
    if limit is not None and limit < 1:
        raise ShiftlabError("--limit must be at least 1")
    datasets = {
        ref.name: _dataset_checked(ref.name, ref.content_hash, split, reader=created_by, project=project)
        for ref in plan.datasets
    }
    project = project or project_for_new(created_by, None, *datasets.values())
    project_require_same(project, *datasets.values(), role="the datasets of a benchmark run")
    units = plan.units(models)
    with transaction.atomic():
        # Transformation runs are made (or found) now, not in the unit tasks, so that the units of
        # several models share one run per (dataset, transformation, seed).
        transform_runs = {
            transform_run_key(name, spec.transformation, seed): _transform_run_for(
                dataset=datasets[name], spec=spec, seed=seed, limit=limit, created_by=created_by, project=project
            ).pk
            for name in datasets
            for spec in plan.transformations
            for seed in spec.seeds
        }
        run = BenchmarkRun.objects.create(
            name=name,
            project=project,
            source=source,
            config_hash=config_hash,
            config_document=config_document,
            evidence_override=evidence_override,
            model_names=models,
            split=split,
            item_limit=limit,
            total=len(units),
            created_by=created_by,
            plan={
                "datasets": list(datasets),
                # Names are unique per project: the units find their dataset by this id.
                "dataset_ids": {name: dataset.pk for name, dataset in datasets.items()},
                "include_original": plan.include_original,
                "transformations": [spec_as_dict(spec) for spec in plan.transformations],
                "transform_runs": transform_runs,
                "units": [u.as_dict() for u in units],
                "preset": preset,
                "encoder_dtype": encoder_dtype,
            },
        )
        audit_record(
            actor=created_by,
            verb="benchmark.run.create",
            obj=run,
            payload={
                "config_hash": config_hash,
                "models": models,
                "units": len(units),
                "evidence_override": evidence_override,
            },
        )
        if dispatch:
            _dispatch(run.pk)
    return run


def _dispatch(run_id: int) -> None:
    """Queue the run's start task after commit; any task of the run failing for good fails the run."""
    from evaluation.tasks import benchmark_run_failed, start_benchmark_run  # the tasks module imports this one

    dispatch_on_commit(
        lambda: start_benchmark_run.apply_async((run_id,), link_error=benchmark_run_failed.s(run_id)),
        on_broker_down=lambda message: benchmark_run_fail(run_id=run_id, reason=message),
    )


def benchmark_run_fail(*, run_id: int, reason: str) -> None:
    """Fail an unfinished run with ``reason`` and say how to go on (task failures, broker outages, the sweeper)."""
    job_fail(
        model=BenchmarkRun,
        job_id=run_id,
        message=(
            f"{reason}. Results stored so far are kept: fix the cause, then resume the run "
            f"(python manage.py benchmark resume {run_id}, or POST /api/benchmark-runs/{run_id}/resume/)."
        ),
    )


def benchmark_run_waiting(*, run_id: int) -> JobWait:
    """How the run's unit tasks record that they wait on an LLM backend (generating a unit's
    transformations), and fail the run when they give up."""
    return JobWait(model=BenchmarkRun, job_id=run_id, fail=partial(benchmark_run_fail, run_id=run_id))


def _dataset_checked(
    name: str, content_hash: str | None, split: str, *, reader: User, project: Project | None
) -> Dataset:
    try:
        dataset = dataset_get(name=name, user=reader, project=project)
    except Dataset.DoesNotExist:
        raise ShiftlabError(f"no dataset named {name!r}: import it first (python manage.py corpora list)") from None
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


def _transform_run_for(
    *,
    dataset: Dataset,
    spec: TransformationSpec,
    seed: int,
    limit: int | None,
    created_by: AbstractBaseUser | None,
    project: Project,
) -> TransformRun:
    """The transformation run of ``project`` with exactly the config's generator, prompts and
    languages: an existing one (succeeded first) or a new, undispatched one (its chunks run inside
    the units)."""
    languages = list(spec.languages)
    candidates = TransformRun.objects.filter(
        project=project,
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
        params = GenerationParams(**spec.generator_params)
    except TypeError as exc:
        raise ShiftlabError(
            f"{spec.transformation}: the config's generator parameters {dict(spec.generator_params)} are not ones "
            f"this server knows ({exc})"
        ) from None
    try:
        with transaction.atomic():
            run = transform_run_create(
                dataset=dataset,
                transformation=spec.transformation,
                seed=seed,
                backend_alias=spec.backend_alias,
                params=params,
                languages=languages or None,
                limit=limit,
                created_by=created_by,
                project=project,
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
    calls). Transient LLM errors propagate (the task records that the run waits, and retries);
    any other error is recorded on the run and the unit stays without result until the run is
    resumed. A stored result ends the run's wait.
    """
    u = Unit.from_dict(unit)
    run = BenchmarkRun.objects.get(pk=run_id)
    key = {"run": run, "model": u.model, "dataset__name": u.dataset, "transformation": u.transformation, "seed": u.seed}
    if BenchmarkResult.objects.filter(**key).exists():
        return False
    try:
        row = benchmark_unit_score(run=run, unit=u)
    except TransientBackendError:
        raise
    except (ShiftlabError, ImproperlyConfigured, ValueError) as exc:
        _record_failure(run_id, u, exc)
        return False
    stored = False
    try:
        with transaction.atomic():
            BenchmarkResult.objects.create(**row)
            BenchmarkRun.objects.filter(pk=run_id).update(done=F("done") + 1, waiting=None)
            stored = True
    except IntegrityError:  # stored meanwhile by another delivery of this unit
        pass
    _finalize_when_complete(run_id)
    return stored


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
        _dispatch(run_id)
    run.refresh_from_db()
    return run
