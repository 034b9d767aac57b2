"""Transformation runs: the front door that starts them, their creation, resumption and
finalisation.

Prompt versions are in :mod:`transforms.prompt_services`, the export in
:mod:`transforms.export_services`, the execution of a run's chunks (the generation cache and LLM
calls) in :mod:`transforms.chunk_services`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Unpack

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone

from core.errors import NotFoundError, ShiftlabError
from core.hashing import sha256_json
from core.job_services import JobWait
from core.models import Project
from core.projects import User, project_for_new, project_require_same, project_require_write
from core.services import audit_record
from corpora.models import Dataset
from corpora.selectors import dataset_get
from corpora.task_types import task_spec
from transforms.backends import backend_chosen
from transforms.jobs import RUNS
from transforms.llm_activity import job_note_busy
from transforms.models import GeneratorConfig, TransformedItem, TransformRun
from transforms.params import DEFAULT_SEED, GenerationParams, RunOptions, RunSettings
from transforms.presets import resolve_preset
from transforms.prompt_services import prompt_template_active
from transforms.registry import noise_transformations, transformation_get
from transforms.run_languages import run_output_languages, run_target_languages
from transforms.selectors import (
    CANDIDATES,
    ITEM_SCOPES,
    pending_candidate_items,
    scoped_total,
    transform_run_fields,
    transform_run_items,
)


@dataclass(frozen=True)
class TransformRunsStartRequest:
    """Transformation runs as the page, the API and ``manage.py transform`` ask for them (they only
    fill it in; ``transform_runs_start`` checks every rule). The settings after ``language_check``
    are the raw ``RunOptions``: None (or "" for ``preset``) is unset."""

    dataset: str
    transformation: str
    project: str | None = None
    backend: str = "default"
    limit: int | None = None
    language_check: bool = True
    preset: str = ""
    seed: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    max_attempts: int | None = None
    languages: Sequence[str] | None = None
    severities: Sequence[int] | None = None

    def options(self) -> RunOptions:
        names = ("preset", "seed", "temperature", "top_p", "max_tokens", "max_attempts", "languages", "severities")
        return RunOptions(**{name: getattr(self, name) for name in names})


def transform_runs_start(*, actor: User, request: TransformRunsStartRequest) -> list[TransformRun]:
    """THE entry of the page, the API and ``manage.py transform``: start the runs of a request.

    ``dataset`` is looked up as ``actor`` may read it (in project ``project`` when named); the runs
    go into the project :func:`core.projects.project_for_new` picks. Unset settings (``None``) come
    from ``preset``, then the defaults; a preset without a seed gives one run per paper seed. A noise
    kind (``typos``) gives one run per severity of ``severities`` (default: every level)."""
    dataset, transformation, project = request.dataset, request.transformation, request.project
    backend, limit, language_check, options = request.backend, request.limit, request.language_check, request.options()
    try:
        found = dataset_get(name=dataset, user=actor, project=project or None)
    except Dataset.DoesNotExist:
        raise NotFoundError(
            f"No dataset named {dataset!r}. See: python manage.py corpora list", field="dataset"
        ) from None
    target = project_for_new(actor, project, found)
    names = noise_transformations(transformation, options.pop("severities", None))
    run_settings = transform_run_settings(**options)
    return [
        transform_run_create(
            dataset=found,
            transformation=name,
            seed=run_seed,
            backend_alias=backend,
            params=run_settings.params,
            languages=run_settings.languages,
            limit=limit,
            preset=run_settings.preset,
            language_check=language_check,
            created_by=actor,
            project=target,
        )
        for name in names
        for run_seed in run_settings.seeds
    ]


def transform_run_settings(**options: Unpack[RunOptions]) -> RunSettings:
    """Resolve a run request: ``None`` means unset, filled from ``preset`` and then from the defaults.
    Without a seed, a preset runs each of its seeds; without either, the one default seed."""
    seed = options.get("seed")
    resolved = resolve_preset(
        options.get("preset") or None,
        seeds=None if seed is None else [seed],
        temperature=options.get("temperature"),
        top_p=options.get("top_p"),
        languages=options.get("languages"),
    )
    defaults = GenerationParams()
    max_tokens, max_attempts = options.get("max_tokens"), options.get("max_attempts")
    params = GenerationParams(
        temperature=defaults.temperature if resolved.temperature is None else resolved.temperature,
        top_p=defaults.top_p if resolved.top_p is None else resolved.top_p,
        max_tokens=defaults.max_tokens if max_tokens is None else max_tokens,
        max_attempts=defaults.max_attempts if max_attempts is None else max_attempts,
    )
    seeds = resolved.seeds or (DEFAULT_SEED,)
    languages = list(resolved.languages) if resolved.languages is not None else None
    return RunSettings(params=params, seeds=tuple(seeds), languages=languages, preset=resolved.preset)


def transform_run_create(
    *,
    dataset: Dataset,
    transformation: str,
    seed: int,
    backend_alias: str = "default",
    params: GenerationParams | None = None,
    languages: Sequence[str] | None = None,
    limit: int | None = None,
    preset: str = "",
    language_check: bool = True,
    created_by: AbstractBaseUser | None = None,
    dispatch: bool = True,
    project: Project | None = None,
    item_scope: str = "",
) -> TransformRun:
    """Declare one run and (by default) queue it. Outputs already in the cache are reused.

    ``item_scope`` (retrieval datasets) makes it a run of corpus documents instead of examples:
    "relevant_documents" (those the examples in range judge relevant) or "documents" (the whole
    corpus); a document's text is rewritten, its title kept. On a reranking dataset, "candidates"
    makes it a run of the distinct candidate texts of the examples in range, each rewritten once.

    The run belongs to ``project`` (default: the dataset's, or the default project for a shared
    dataset), which must be the dataset's own unless the dataset is shared; it uses the prompt
    versions active in that project.

    ``preset`` names the paper protocol the run follows: its settings fill ``params`` when none are
    given, and settings that differ from it are refused. A run whose outputs' language the
    identifier cannot check is refused unless ``language_check`` is False (the check is then skipped
    for the whole run, and the run records it)."""
    spec = transformation_get(transformation)
    project = project or project_for_new(None, None, dataset)
    project_require_same(project, dataset, role="the run's dataset")
    if params is None:
        params = transform_run_settings(preset=preset, seed=seed).params
    if preset:
        resolve_preset(preset, seeds=[seed], temperature=params.temperature, top_p=params.top_p, languages=languages)
    languages = run_target_languages(spec, dataset, languages)
    if limit is not None and limit < 1:
        raise ShiftlabError("--limit must be at least 1", field="limit")
    _scope_checked(dataset, item_scope)
    total = scoped_total(dataset=dataset, limit=limit, scope=item_scope)
    if total == 0:
        raise ShiftlabError(f"dataset {dataset.name} has no items to transform", field="dataset")
    outputs = run_output_languages(spec, dataset, languages, seed=seed, language_check=language_check)
    backend = backend_chosen(backend_alias) if spec.uses_llm else None
    generator = _generator_config(backend_alias, backend.model_id if backend else "none", params)
    model_identity = backend.model_identity() if backend else ""
    prompts = [prompt_template_active(key, project=project) for key in spec.prompt_keys]
    run = TransformRun(
        project=project,
        dataset=dataset,
        transformation=spec.name,
        generator=generator,
        prompt_hashes={p.key: p.content_hash for p in prompts},
        seed=seed,
        languages=languages,
        run_language=outputs.run_language,
        item_limit=limit,
        item_scope=item_scope,
        preset=preset,
        model_identity=model_identity,
        language_check=language_check,
        unchecked_languages=outputs.unchecked if not language_check else [],
        total=total,
        created_by=created_by,
    )
    run.run_hash = _run_hash(run)
    with transaction.atomic():
        run.save()
        run.prompts.set(prompts)
        audit_record(actor=created_by, verb="transform.run.create", obj=run, payload={"run_hash": run.run_hash})
        if dispatch:
            RUNS.dispatch(run.pk)
    return run


def _run_hash(run: TransformRun) -> str:
    """What defines a run's outputs: runs with the same hash give the same texts."""
    defining = {
        "dataset": run.dataset.content_hash,
        "transformation": run.transformation,
        "generator": run.generator.content_hash,
        "prompts": run.prompt_hashes,
        "seed": run.seed,
        "languages": run.languages,
        "limit": run.item_limit,
    }
    # Added only when they differ from what runs made before they existed had: old hashes stay valid.
    if run.model_identity:
        defining["model_identity"] = run.model_identity
    if not run.language_check:
        defining["language_check"] = False
    if run.item_scope:
        defining["items"] = run.item_scope
    return sha256_json(defining)


def _scope_checked(dataset: Dataset, item_scope: str) -> None:
    if item_scope not in ITEM_SCOPES:
        raise ShiftlabError(f"unknown item scope {item_scope!r}: choose one of {', '.join(ITEM_SCOPES[1:])}")
    documents = task_spec(dataset.task_type).documents
    if item_scope == CANDIDATES and documents != "candidates":
        raise ShiftlabError(
            f"only reranking datasets have candidate lists to transform; {dataset.name} is {dataset.task_type}"
        )
    if item_scope and item_scope != CANDIDATES and documents != "corpus":
        raise ShiftlabError(
            f"only retrieval datasets have a corpus of documents to transform; {dataset.name} is {dataset.task_type}"
        )


def _generator_config(alias: str, model: str, params: GenerationParams) -> GeneratorConfig:
    content_hash = sha256_json({"backend": alias, "model": model, "params": asdict(params)})
    generator, _ = GeneratorConfig.objects.get_or_create(
        content_hash=content_hash, defaults={"backend_alias": alias, "model": model, "params": asdict(params)}
    )
    return generator


@dataclass(frozen=True)
class TransformRunResumeRequest:
    """Resume a transformation run (``transform_run_resume``), as the page, the API, the command
    and the sweeper ask for it: the run's id."""

    run: int


def transform_run_resume(*, request: TransformRunResumeRequest, actor: AbstractBaseUser | None = None) -> TransformRun:
    """Queue the texts of a run that have no outcome yet (after a crash, a lost final task or a
    permanent chunk failure). Finished texts and cached generations are reused. The one entry of
    page, API, command and the sweeper: ``actor`` (None: the system) must be able to change the
    run's project (403)."""
    run_id = request.run
    run = TransformRun.objects.select_related("project").get(pk=run_id)
    project_require_write(actor, run.project)
    with transaction.atomic():
        TransformRun.objects.filter(pk=run_id).update(status=TransformRun.Status.PENDING, error="", finished_at=None)
        audit_record(actor=actor, verb="transform.run.resume", obj=run, payload={"done": run.done, "total": run.total})
        RUNS.dispatch(run_id)
    run.refresh_from_db()
    return run


def transform_run_fail(*, run_id: int, reason: str) -> None:
    """Fail an unfinished run with ``reason`` and say how to go on (task failures, broker outages, the sweeper)."""
    RUNS.fail(run_id, reason=reason)


def transform_run_waiting(*, run_id: int) -> JobWait:
    """How the run's chunk tasks record that they wait on its backend, and fail it when they give up."""
    return RUNS.waiting(run_id)


def transform_run_pending_chunks(*, run_id: int, chunk_size: int | None = None) -> list[list[int]]:
    """Item ids still lacking an output for some field, in chunks. Used to start and to resume."""
    chunk_size = chunk_size or settings.TRANSFORM_CHUNK_SIZE
    run = TransformRun.objects.select_related("dataset").get(pk=run_id)
    if run.item_scope == CANDIDATES:
        ids = pending_candidate_items(run=run)
        return [ids[i : i + chunk_size] for i in range(0, len(ids), chunk_size)]
    n_fields = len(transform_run_fields(run=run))
    items = (
        transform_run_items(run=run)
        .annotate(n_out=Count("transformations", filter=Q(transformations__run=run)))
        .filter(n_out__lt=n_fields)
    )
    ids = list(items.values_list("pk", flat=True))
    return [ids[i : i + chunk_size] for i in range(0, len(ids), chunk_size)]


def transform_run_mark_started(*, run_id: int) -> None:
    TransformRun.objects.filter(pk=run_id).exclude(status=TransformRun.Status.SUCCEEDED).update(
        status=TransformRun.Status.RUNNING, started_at=timezone.now()
    )


def transform_run_note_queued(*, run_id: int) -> None:
    """Before a run's chunks are queued: when another job holds its LLM backend, the run says it
    waits behind that job ("busy with run #7") until its own first answer comes."""
    run = TransformRun.objects.select_related("generator").get(pk=run_id)
    if transformation_get(run.transformation).uses_llm:
        job_note_busy(model=TransformRun, job_id=run_id, alias=run.generator.backend_alias)


def transform_run_finalize(*, run_id: int) -> TransformRun:
    transform_run_refresh_counts(run_id=run_id)
    run = TransformRun.objects.get(pk=run_id)
    if run.status == TransformRun.Status.SUCCEEDED and run.done >= run.total:
        return run
    run.status = TransformRun.Status.SUCCEEDED if run.done >= run.total else TransformRun.Status.FAILED
    if run.status == TransformRun.Status.FAILED and not run.error:
        run.error = f"{run.total - run.done} texts have no outcome: resume the run"
    run.finished_at = timezone.now()
    run.save(update_fields=["status", "error", "finished_at"])
    return run


def transform_run_refresh_counts(*, run_id: int) -> None:
    """Recount the run's outcomes (done, failed) from its stored texts."""
    counts = TransformedItem.objects.filter(run_id=run_id).aggregate(
        done=Count("id"), failed=Count("id", filter=Q(ok=False))
    )
    TransformRun.objects.filter(pk=run_id).update(done=counts["done"], n_failed=counts["failed"])
