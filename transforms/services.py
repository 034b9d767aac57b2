"""Transformation runs: prompt templates, creation, resumption, finalisation, export.

The execution of a run's chunks (the generation cache and LLM calls) is in :mod:`transforms.chunk_services`.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models import Count, Max, Q, QuerySet
from django.utils import timezone

from core.errors import ShiftlabError
from core.hashing import sha256_json
from core.job_services import JobWait, job_fail
from core.models import Project
from core.projects import default_project, project_for_new, project_require_same
from core.services import audit_record
from core.task_policy import dispatch_on_commit
from core.waiting import BackendUnavailable
from corpora.models import Dataset, DatasetItem
from corpora.task_types import PAIR_TASKS, TaskType, task_spec
from transforms import planning
from transforms.attempts import side_language
from transforms.backends import get_backend
from transforms.languages import language_name, normalise_code, primary_language, unchecked_languages
from transforms.models import GeneratorConfig, PromptTemplate, TransformedItem, TransformRun
from transforms.presets import resolve_preset
from transforms.prompts import DEFAULT_PROMPTS, default_prompt, prompt_hash, validate_template
from transforms.registry import DEFAULT_LANGUAGES, LanguagePlan, Transformation, transformation_get


class TransientBackendError(BackendUnavailable):
    """The LLM backend could not answer for now (after its own retries); the chunk is retried."""

    @classmethod
    def for_backend(cls, backend, *, n_failed: int, message: str) -> TransientBackendError:
        return cls(
            f"{n_failed} requests to LLM backend {backend.alias!r} ({backend.model_id}) failed: {message}. "
            "Is its server running? (the embedded one: python manage.py llm_server). Work done so far is "
            "kept: resume once it answers",
            backend=f"the LLM backend {backend.alias!r}",
            reason=message,
        )


# Upper bounds of the generation parameters: one LLM answer is a rewritten text, not a book, and
# every attempt is another LLM call per text.
MAX_TOKENS_LIMIT = 8192
MAX_ATTEMPTS_LIMIT = 10


@dataclass(frozen=True)
class GenerationParams:
    """Sampling parameters of a run or a judge; every interface (API, commands, benchmarks) builds
    one, so the checks here are the only ones."""

    temperature: float = 0.7
    top_p: float = 0.95
    max_tokens: int = 512
    max_attempts: int = 3

    def __post_init__(self):
        if not 0 <= self.temperature <= 2:
            raise ShiftlabError(f"temperature must be between 0 and 2, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ShiftlabError(f"top_p must be in (0, 1], got {self.top_p}")
        if not 1 <= self.max_tokens <= MAX_TOKENS_LIMIT:
            raise ShiftlabError(f"max_tokens must be between 1 and {MAX_TOKENS_LIMIT}, got {self.max_tokens}")
        if not 1 <= self.max_attempts <= MAX_ATTEMPTS_LIMIT:
            raise ShiftlabError(f"max_attempts must be between 1 and {MAX_ATTEMPTS_LIMIT}, got {self.max_attempts}")

    @property
    def sampling_hash(self) -> str:
        """What changes an LLM output; max_attempts only decides how often we try."""
        return sha256_json({"temperature": self.temperature, "top_p": self.top_p, "max_tokens": self.max_tokens})


# --- prompt templates -------------------------------------------------------------------------


def prompt_templates_ensure_defaults(*, project: Project | None = None) -> None:
    """Create version 1 of every shipped default prompt whose key has no version yet in ``project``
    (default: the default project), so a project that never made its own uses the default wording
    (idempotent)."""
    project = project or default_project()
    present = set(PromptTemplate.objects.filter(project=project).values_list("key", flat=True))
    for key in DEFAULT_PROMPTS:
        if key in present:
            continue
        prompt = default_prompt(key)
        try:
            with transaction.atomic():
                PromptTemplate.objects.create(
                    project=project,
                    key=key,
                    version=1,
                    system=prompt.system,
                    user=prompt.user,
                    content_hash=prompt.content_hash,
                    is_active=True,
                    note="Shiftlab default",
                )
        except IntegrityError:  # created concurrently by another process
            pass


def prompt_templates_ensure_defaults_of(projects: QuerySet[Project]) -> None:
    """:func:`prompt_templates_ensure_defaults` for each of ``projects`` that lacks a default key:
    one query when none does (the prompt list asks on every read)."""
    complete = (
        PromptTemplate.objects.filter(project__in=projects, key__in=DEFAULT_PROMPTS)
        .values("project_id")
        .annotate(keys=Count("key", distinct=True))
        .filter(keys=len(DEFAULT_PROMPTS))
        .values("project_id")
    )
    for project in projects.exclude(pk__in=complete):
        prompt_templates_ensure_defaults(project=project)


def prompt_template_create_version(
    *,
    key: str,
    system: str,
    user: str,
    note: str = "",
    created_by: AbstractBaseUser | None = None,
    project: Project | None = None,
) -> PromptTemplate:
    """Make (system, user) the active prompt for ``key`` in ``project`` (default: the default
    project): a new version, numbered per project and key, or the project's existing version with
    the same content. Runs of the project created later use it; earlier runs and other projects
    keep theirs."""
    if key not in DEFAULT_PROMPTS:
        raise ShiftlabError(f"unknown prompt key {key!r}: choose one of {', '.join(DEFAULT_PROMPTS)}")
    try:
        validate_template(system, user)
    except ValueError as exc:
        raise ShiftlabError(f"Prompt {key!r} rejected: {exc}") from None
    project = project or default_project()
    prompt_templates_ensure_defaults(project=project)
    content_hash = prompt_hash(system, user)
    versions = PromptTemplate.objects.filter(project=project, key=key)
    with transaction.atomic():
        versions.select_for_update().update(is_active=False)
        template = versions.filter(content_hash=content_hash).first()
        if template is None:
            version = (versions.aggregate(v=Max("version"))["v"] or 0) + 1
            template = PromptTemplate.objects.create(
                project=project,
                key=key,
                version=version,
                system=system,
                user=user,
                content_hash=content_hash,
                note=note,
                created_by=created_by,
            )
        template.is_active = True
        template.save(update_fields=["is_active"])
        audit_record(actor=created_by, verb="prompt.activate", obj=template, payload={"content_hash": content_hash})
    return template


def prompt_template_activate(*, template: PromptTemplate, actor: AbstractBaseUser | None = None) -> PromptTemplate:
    """Make an existing version the active one of its key in its own project (other projects keep
    theirs). Runs of the project created later use it."""
    with transaction.atomic():
        PromptTemplate.objects.select_for_update().filter(project_id=template.project_id, key=template.key).exclude(
            pk=template.pk
        ).update(is_active=False)
        PromptTemplate.objects.filter(pk=template.pk).update(is_active=True)
        audit_record(actor=actor, verb="prompt.activate", obj=template, payload={"content_hash": template.content_hash})
    template.refresh_from_db()
    return template


def prompt_template_active(key: str, *, project: Project | None = None) -> PromptTemplate:
    """The version of ``key`` that new runs of ``project`` (default: the default project) use."""
    project = project or default_project()
    prompt_templates_ensure_defaults(project=project)
    return PromptTemplate.objects.get(project=project, key=key, is_active=True)


# --- runs -------------------------------------------------------------------------------------


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
) -> TransformRun:
    """Declare a run and (by default) queue it. Outputs already in the cache are reused.

    The run belongs to ``project`` (default: the dataset's, or the default project for a shared
    dataset), which must be the dataset's own unless the dataset is shared; it uses the prompt
    versions active in that project.

    ``preset`` names the paper protocol the run follows: its settings fill ``params`` when none are
    given, and settings that differ from it are refused. A run whose outputs' language the
    identifier cannot check is refused unless ``language_check`` is False (the check is then skipped
    for the whole run, and the run records it)."""
    try:
        spec = transformation_get(transformation)
    except ValueError as exc:
        raise ShiftlabError(str(exc)) from None
    project = project or project_for_new(None, None, dataset)
    project_require_same(project, dataset, role="the run's dataset")
    if params is None:
        params = transform_run_settings(preset=preset, seed=seed).params
    if preset:
        _check_preset(preset, seed=seed, params=params, languages=languages)
    languages = _run_languages(spec, dataset, languages)
    _check_named(spec, dataset)
    if limit is not None and limit < 1:
        raise ShiftlabError("--limit must be at least 1")
    fields = task_spec(dataset.task_type).transformable_fields
    n_items = dataset.items.filter(kind="example").count()
    n_items = min(n_items, limit) if limit else n_items
    if n_items == 0:
        raise ShiftlabError(f"dataset {dataset.name} has no items to transform")
    run_language = ""
    if spec.language_plan is LanguagePlan.PER_RUN:
        # Exclude every language of the dataset so no text is "translated" into its own language.
        sources = {_primary_or_none(code) for code in _source_languages(dataset)}
        remaining = [code for code in languages if _primary_or_none(code) not in sources]
        if not remaining:
            raise ShiftlabError(f"no target language left after removing the dataset's {dataset.languages}")
        run_language = planning.draw_run_language(seed=seed, languages=remaining, source_language="")
    unchecked = _unchecked_output_languages(spec, dataset, languages, run_language)
    if unchecked and language_check:
        named = ", ".join(f"{code} ({language_name(code, default='unknown')})" for code in unchecked)
        raise ShiftlabError(
            f"the language identifier cannot check outputs in {named}, so wrong-language outputs would go "
            "unnoticed. Choose other languages, or run without the language check (--no-language-check; "
            'API: "language_check": false): the run then records that the check was skipped'
        )
    backend = get_backend(backend_alias) if spec.uses_llm else None
    model_id = backend.model_id if backend else "none"
    model_identity = backend.model_identity() if backend else ""
    generator = _generator_config(backend_alias, model_id, params)
    prompts = [prompt_template_active(key, project=project) for key in spec.prompt_keys]
    prompt_hashes = {p.key: p.content_hash for p in prompts}
    defining = {
        "dataset": dataset.content_hash,
        "transformation": spec.name,
        "generator": generator.content_hash,
        "prompts": prompt_hashes,
        "seed": seed,
        "languages": languages,
        "limit": limit,
    }
    # Added only when they differ from what runs made before they existed had: old hashes stay valid.
    if model_identity:
        defining["model_identity"] = model_identity
    if not language_check:
        defining["language_check"] = False
    run_hash = sha256_json(defining)
    with transaction.atomic():
        run = TransformRun.objects.create(
            project=project,
            dataset=dataset,
            transformation=spec.name,
            generator=generator,
            prompt_hashes=prompt_hashes,
            seed=seed,
            languages=languages,
            run_language=run_language,
            item_limit=limit,
            preset=preset,
            model_identity=model_identity,
            language_check=language_check,
            unchecked_languages=unchecked if not language_check else [],
            run_hash=run_hash,
            total=n_items * len(fields),
            created_by=created_by,
        )
        run.prompts.set(prompts)
        audit_record(actor=created_by, verb="transform.run.create", obj=run, payload={"run_hash": run_hash})
        if dispatch:
            _dispatch_start(run.pk)
    return run


@dataclass(frozen=True)
class RunSettings:
    """What a run request resolves to once a preset has filled the unset settings: one run per seed."""

    params: GenerationParams
    seeds: tuple[int, ...]
    languages: list[str] | None
    preset: str


DEFAULT_SEED = 1337


def transform_run_settings(
    *,
    preset: str = "",
    seed: int | None = None,
    temperature: float | None = None,
    top_p: float | None = None,
    max_tokens: int | None = None,
    max_attempts: int | None = None,
    languages: Sequence[str] | None = None,
) -> RunSettings:
    """Resolve a run request: ``None`` means unset, filled from ``preset`` and then from the defaults.
    Without a seed, a preset runs each of its seeds; without either, the one default seed."""
    try:
        resolved = resolve_preset(
            preset or None,
            seeds=None if seed is None else [seed],
            temperature=temperature,
            top_p=top_p,
            languages=languages,
        )
    except ValueError as exc:  # an unknown preset, or a PresetConflict naming the field
        raise ShiftlabError(str(exc)) from None
    defaults = GenerationParams()
    params = GenerationParams(
        temperature=defaults.temperature if resolved.temperature is None else resolved.temperature,
        top_p=defaults.top_p if resolved.top_p is None else resolved.top_p,
        max_tokens=defaults.max_tokens if max_tokens is None else max_tokens,
        max_attempts=defaults.max_attempts if max_attempts is None else max_attempts,
    )
    seeds = resolved.seeds or (DEFAULT_SEED,)
    languages = list(resolved.languages) if resolved.languages is not None else None
    return RunSettings(params=params, seeds=tuple(seeds), languages=languages, preset=resolved.preset)


def transform_runs_create(
    *,
    dataset: Dataset,
    transformation: str,
    settings: RunSettings,
    backend_alias: str = "default",
    limit: int | None = None,
    language_check: bool = True,
    created_by: AbstractBaseUser | None = None,
    project: Project | None = None,
) -> list[TransformRun]:
    """One run per seed of ``settings`` (``transform_run_settings``): what the API, the command and
    the page start for a request, so that a preset without a seed gives one run per paper seed.
    Every run belongs to ``project`` (see :func:`transform_run_create`)."""
    return [
        transform_run_create(
            dataset=dataset,
            transformation=transformation,
            seed=seed,
            backend_alias=backend_alias,
            params=settings.params,
            languages=settings.languages,
            limit=limit,
            preset=settings.preset,
            language_check=language_check,
            created_by=created_by,
            project=project,
        )
        for seed in settings.seeds
    ]


def _check_preset(preset: str, *, seed: int, params: GenerationParams, languages: Sequence[str] | None) -> None:
    try:
        resolve_preset(preset, seeds=[seed], temperature=params.temperature, top_p=params.top_p, languages=languages)
    except ValueError as exc:
        raise ShiftlabError(str(exc)) from None


def _run_languages(spec: Transformation, dataset: Dataset, languages: Sequence[str] | None) -> list[str]:
    """The run's target/pivot languages, normalised ("eng" -> "en"). By default, a backtranslation
    of non-English texts may also pivot through English."""
    try:
        codes = [normalise_code(code) for code in languages] if languages else list(DEFAULT_LANGUAGES)
    except ValueError as exc:
        raise ShiftlabError(f"--languages: {exc}") from None
    if (
        not languages
        and spec.language_plan is LanguagePlan.PIVOT_PER_TEXT
        and "en" not in codes
        and any(_primary_or_none(code) not in {"en", None} for code in _source_languages(dataset))
    ):
        codes.append("en")
    return list(dict.fromkeys(codes))


def _primary_or_none(code: str) -> str | None:
    try:
        return primary_language(code)
    except ValueError:
        return None


def _source_languages(dataset: Dataset) -> list[str]:
    """The languages the dataset's transformable texts are written in (both sides of "en-de" pairs),
    normalised where known ("swa" -> "sw")."""
    fields = task_spec(dataset.task_type).transformable_fields
    sides = (side_language(lang, side, dataset.task_type) for lang in dataset.languages for side in fields)
    return list(dict.fromkeys(normalise_code(code, default=code) for code in sides))


def _check_named(spec: Transformation, dataset: Dataset) -> None:
    """The prompts name the texts' language: refuse a dataset whose language code is unknown."""
    if not spec.uses_llm:
        return
    unknown = [code for code in _source_languages(dataset) if _primary_or_none(code) is None]
    if unknown:
        raise ShiftlabError(
            f"dataset {dataset.name} has texts in {', '.join(map(repr, unknown))}, which is not a language code "
            "Shiftlab knows, so the prompts cannot name it: re-import it with an ISO 639-1/639-3 code or a BCP-47 "
            "tag (e.g. 'sw', 'amh', 'zh-Hant')"
        )


def _unchecked_output_languages(
    spec: Transformation, dataset: Dataset, languages: list[str], run_language: str
) -> list[str]:
    """The languages the run's outputs are written in that the identifier cannot check."""
    if spec.language_plan is LanguagePlan.PER_RUN:
        written = [run_language]
    elif spec.language_plan is LanguagePlan.PER_TEXT:
        written = languages
    else:  # the source language: rewrites, and backtranslations once back from the pivot
        written = _source_languages(dataset)
    return unchecked_languages(written)


def _generator_config(alias: str, model: str, params: GenerationParams) -> GeneratorConfig:
    content_hash = sha256_json({"backend": alias, "model": model, "params": asdict(params)})
    generator, _ = GeneratorConfig.objects.get_or_create(
        content_hash=content_hash, defaults={"backend_alias": alias, "model": model, "params": asdict(params)}
    )
    return generator


def transform_run_resume(*, run_id: int, actor: AbstractBaseUser | None = None) -> TransformRun:
    """Queue the texts of a run that have no outcome yet (after a crash, a lost final task or a
    permanent chunk failure). Finished texts and cached generations are reused."""
    run = TransformRun.objects.get(pk=run_id)
    with transaction.atomic():
        TransformRun.objects.filter(pk=run_id).update(status=TransformRun.Status.PENDING, error="", finished_at=None)
        audit_record(actor=actor, verb="transform.run.resume", obj=run, payload={"done": run.done, "total": run.total})
        _dispatch_start(run_id)
    run.refresh_from_db()
    return run


def _dispatch_start(run_id: int) -> None:
    """Queue the run's start task after commit; any task of the run failing for good fails the run."""
    from transforms.tasks import run_failed, start_run  # here, not at the top: transforms.tasks imports this module

    dispatch_on_commit(
        lambda: start_run.apply_async((run_id,), link_error=run_failed.s(run_id)),
        on_broker_down=lambda message: transform_run_fail(run_id=run_id, reason=message),
    )


def transform_run_fail(*, run_id: int, reason: str) -> None:
    """Fail an unfinished run with ``reason`` and say how to go on (task failures, broker outages, the sweeper)."""
    job_fail(
        model=TransformRun,
        job_id=run_id,
        message=(
            f"{reason}. Texts done so far are kept: fix the cause, then resume the run "
            f"(python manage.py transform --run {run_id} --resume, or POST /api/transform-runs/{run_id}/resume/)."
        ),
    )


def transform_run_waiting(*, run_id: int) -> JobWait:
    """How the run's chunk tasks record that they wait on its backend, and fail it when they give up."""
    return JobWait(model=TransformRun, job_id=run_id, fail=partial(transform_run_fail, run_id=run_id))


def transform_run_pending_chunks(*, run_id: int, chunk_size: int | None = None) -> list[list[int]]:
    """Item ids still lacking an output for some field, in chunks. Used to start and to resume."""
    chunk_size = chunk_size or settings.TRANSFORM_CHUNK_SIZE
    run = TransformRun.objects.select_related("dataset").get(pk=run_id)
    n_fields = len(task_spec(run.dataset.task_type).transformable_fields)
    items = (
        _run_items(run)
        .annotate(n_out=Count("transformations", filter=Q(transformations__run=run)))
        .filter(n_out__lt=n_fields)
    )
    ids = list(items.values_list("pk", flat=True))
    return [ids[i : i + chunk_size] for i in range(0, len(ids), chunk_size)]


def transform_run_mark_started(*, run_id: int) -> None:
    TransformRun.objects.filter(pk=run_id).exclude(status=TransformRun.Status.SUCCEEDED).update(
        status=TransformRun.Status.RUNNING, started_at=timezone.now()
    )


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


def _run_items(run: TransformRun):
    items = DatasetItem.objects.filter(dataset=run.dataset, kind="example").order_by("position")
    if run.item_limit:
        limit_ids = list(items.values_list("pk", flat=True)[: run.item_limit])
        items = items.filter(pk__in=limit_ids)
    return items


def transform_run_refresh_counts(*, run_id: int) -> None:
    """Recount the run's outcomes (done, failed) from its stored texts."""
    counts = TransformedItem.objects.filter(run_id=run_id).aggregate(
        done=Count("id"), failed=Count("id", filter=Q(ok=False))
    )
    TransformRun.objects.filter(pk=run_id).update(done=counts["done"], n_failed=counts["failed"])


# --- export -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExportResult:
    path: Path
    n_items: int
    n_skipped: int


def transform_run_export(*, run: TransformRun, path: Path | str) -> ExportResult:
    """Write the transformed dataset in a format the importer reads. Items with a failed field are
    left out (a failed text is never replaced by its original); the count is returned."""
    path = Path(path)
    task = TaskType(run.dataset.task_type)
    fields = task_spec(task).transformable_fields
    outputs: dict[int, dict[str, TransformedItem]] = {}
    for out in TransformedItem.objects.filter(run=run).select_related("item"):
        outputs.setdefault(out.item_id, {})[out.side] = out
    rows, skipped = [], 0
    for item in _run_items(run):
        sides = outputs.get(item.pk, {})
        if len(sides) < len(fields) or not all(o.ok for o in sides.values()):
            skipped += 1
            continue
        payload = dict(item.payload) | {side: o.output_text for side, o in sides.items()}
        language = next(iter(sides.values())).target_language or item.language
        rows.append((item, payload, language))
    if task is TaskType.RETRIEVAL:
        _export_beir(run, rows, path)
    elif task in PAIR_TASKS:
        gold_name = "label" if task is TaskType.PAIR_CLASSIFICATION else "score"
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(["id", "split", "language", "sentence1", "sentence2", gold_name])
            for item, payload, language in rows:
                writer.writerow(
                    [item.item_id, item.split, language, payload["sentence1"], payload["sentence2"], item.gold]
                )
    else:
        gold_name = {TaskType.SUMMARIZATION: "relevance", TaskType.RERANKING: None}.get(task, "label")
        _write_jsonl(
            path,
            (
                {"id": item.item_id, "split": item.split, "language": language, **payload}
                | ({gold_name: item.gold} if gold_name else {})
                for item, payload, language in rows
            ),
        )
    return ExportResult(path, len(rows), skipped)


def _export_beir(run: TransformRun, rows, folder: Path) -> None:
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    documents = DatasetItem.objects.filter(dataset=run.dataset, kind="document").order_by("position")
    _write_jsonl(folder / "corpus.jsonl", ({"_id": d.item_id, **d.payload} for d in documents))
    _write_jsonl(folder / "queries.jsonl", ({"_id": item.item_id, "text": p["text"]} for item, p, _ in rows))
    by_split: dict[str, list] = {}
    for item, _, _ in rows:
        by_split.setdefault(item.split, []).append(item)
    for split, items in by_split.items():
        with (folder / "qrels" / f"{split}.tsv").open("w", encoding="utf-8") as handle:
            handle.write("query-id\tcorpus-id\tscore\n")
            for item in items:
                for doc_id, score in item.gold.items():
                    handle.write(f"{item.item_id}\t{doc_id}\t{int(score) if float(score).is_integer() else score}\n")


def _write_jsonl(path: Path, rows: Iterable[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
