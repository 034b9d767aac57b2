"""Starting benchmark runs: ``benchmark_run_start`` is the one entry of the page, the API and the
``benchmark run`` command; it takes a stored config, a config's text or datasets (original data
only), picks the project, applies the preset and checks every rule. A run is planned
(``evaluation.benchmark_plan``) over inputs checked by ``evaluation.benchmark_inputs``; running it
is ``evaluation.benchmark_execution``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TypedDict, Unpack

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.utils import timezone

from annotation.configs.config_export import Format
from annotation.export_services import ConfigCheck, benchmark_config_evidence_changes, benchmark_config_verify
from annotation.models import BenchmarkConfig
from core.errors import InvalidError, NotFoundError, ShiftlabError
from core.models import Project
from core.projects import User, project_for_new, project_require_same, scoped
from core.services import audit_record
from corpora.models import Dataset
from corpora.task_types import task_spec
from evaluation.benchmark_execution import benchmark_run_dispatch
from evaluation.benchmark_inputs import dataset_checked, encoder_dtype_for, evidence_refusal, transform_run_for
from evaluation.benchmark_plan import (
    BOTH,
    DOCUMENT,
    QUERY,
    Plan,
    PlanError,
    Unit,
    plan_from_config,
    plan_from_datasets,
    sides_checked,
    spec_as_dict,
    transform_run_key,
)
from evaluation.benchmark_sides import SIDED_TASK_TYPES, document_item_scope, sides_with_config
from evaluation.encoder_choices import model_problem
from evaluation.encoders import EncoderError, get_encoder
from evaluation.models import BenchmarkRun
from transforms.models import TransformRun
from transforms.presets import resolve_preset
from transforms.selectors import DOCUMENT_SCOPES, DOCUMENTS_RELEVANT

# The one wording of the choice between a run's sources, whichever interface asks.
CONFIG_SOURCE_BOTH = "give one benchmark config: a stored config or a config's text (a file), not both"
CONFIG_SOURCE_NONE = "without a config, choose at least one dataset (a run on original data only)"


@dataclass(frozen=True)
class BenchmarkRunStartRequest:
    """A benchmark run as the page, the API and the command ask for it (they only fill it in;
    ``benchmark_run_start`` checks every rule): see there for what each field means."""

    models: Sequence[str]
    project: str | None = None
    config_id: int | None = None
    config_text: str | None = None
    config_format: Format = "yaml"
    datasets: Sequence[str] | None = None
    transformations: Sequence[str] | None = None
    seeds: Sequence[int] | None = None
    preset: str = ""
    run_anyway: bool = False
    limit: int | None = None
    split: str = "test"
    name: str = ""
    sides: Sequence[str] | None = None
    document_scope: str | None = None


def benchmark_run_start(*, actor: User, request: BenchmarkRunStartRequest, dispatch: bool = True) -> BenchmarkRun:
    """Start a benchmark run as ``actor`` (None: the system), as the page, the API and the command ask
    (``dispatch=False``, for tests, leaves it pending).

    The run is of a stored config ``config_id`` (one ``actor`` may read), of a config's text
    (``config_text`` in ``config_format``) or, without a config, of ``datasets``' original data.
    With a config, ``datasets``, ``transformations`` and ``seeds`` narrow it (``seeds`` and
    ``transformations`` need one: transformations must be validated), and ``run_anyway`` runs it
    although the evidence behind it changed. ``preset`` (a paper's protocol) fixes the seeds
    (explicit ones must be among its own) and the encoders' dtype. The run goes into ``project``
    (a slug), else its inputs' project (``core.projects.project_for_new``). ``sides`` (query,
    document, both; default: the config's, else query) are what a config's transformations perturb
    on retrieval datasets, ``document_scope`` which documents the document side transforms
    (default: the config's, else relevant_documents); a config that fixes them is only narrowed
    (``evaluation.benchmark_sides.sides_with_config``).
    """
    r = request
    config_id, config_text, config_format, seeds = r.config_id, r.config_text, r.config_format, r.seeds
    options = RunOptions(
        limit=r.limit,
        split=r.split,
        name=r.name,
        created_by=actor,
        project=_project_named(actor, r.project),
        dispatch=dispatch,
        preset=r.preset,
        sides=_sides(r.sides) if r.sides else None,
        document_scope=r.document_scope or None,
    )
    if config_id is not None and config_text is not None:
        raise InvalidError(CONFIG_SOURCE_BOTH, field="config", code="config_source")
    if config_id is None and config_text is None:
        if not r.datasets:
            raise InvalidError(CONFIG_SOURCE_NONE, field="datasets", code="config_source")
        if seeds or r.transformations:
            raise ShiftlabError("seeds and transformations need a config: transformations must be validated")
        if options["sides"] not in (None, (QUERY,)):
            raise ShiftlabError("a document side needs a config: its transformations are what perturbs the documents")
        return benchmark_run_create_from_datasets(datasets=r.datasets, models=r.models, **options)
    if r.preset:
        seeds = _preset_seeds(r.preset, seeds)
    if config_id is not None:
        # The JSON rendering: YAML exported before anchors were refused may hold some.
        config_text, config_format = _config_readable_by(actor, config_id).json_text, "json"
    return benchmark_run_create_from_config(
        text=config_text,
        fmt=config_format,
        models=r.models,
        datasets=r.datasets or None,
        seeds=seeds,
        transformations=r.transformations or None,
        evidence_override=r.run_anyway,
        **options,
    )


def _project_named(actor: User, slug: str | None) -> Project | None:
    """The project the caller names, checked before anything else (None when none is named): one
    they cannot find is refused on the ``project`` input, one they may only read with a 403."""
    if not slug:
        return None
    return project_for_new(actor, slug)


def _sides(sides: Sequence[str] | None) -> tuple[str, ...]:
    try:
        return sides_checked(sides)
    except PlanError as exc:
        raise ShiftlabError(str(exc), field="sides") from None


def _preset_seeds(preset: str, seeds: Sequence[int] | None) -> list[int]:
    """The paper's transformation seeds; explicit seeds must be among them."""
    try:
        return list(resolve_preset(preset, seeds=seeds).seeds)
    except ValueError as exc:
        raise ShiftlabError(str(exc)) from None


def _config_readable_by(actor: User, config_id: int) -> BenchmarkConfig:
    config = scoped(BenchmarkConfig.objects.all(), actor).filter(pk=config_id).first()
    if config is None:
        raise NotFoundError("No BenchmarkConfig matches the given query.")
    return config


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
    sides: what the transformations perturb on retrieval datasets (query, document, both; default:
    the config's, else query); document_scope: which documents the document side transforms
    ("relevant_documents", those the evaluated queries judge relevant, the default unless the
    config fixes another, or "documents", the whole corpus).
    """

    limit: int | None
    split: str
    name: str
    created_by: AbstractBaseUser | None
    project: Project | None
    dispatch: bool
    preset: str
    encoder_dtype: str | None
    sides: tuple[str, ...] | None
    document_scope: str | None


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
    each approval that names a study of this deployment must still hold, whether the config is
    registered or not (``benchmark_config_evidence_changes``), unless
    ``evidence_override``: the researcher runs it anyway, and the run records what had changed."""
    check = benchmark_config_verify(text=text, fmt=fmt)
    if not check.accepted:
        raise ShiftlabError(f"the benchmark config is refused: {check.acceptance.reason}.")
    reader = options.get("created_by")
    _config_readable(check, reader=reader)
    options["project"] = options.get("project") or project_for_new(reader, None, check.known)
    _config_in_project(check, project=options["project"])
    requested = options.get("sides")
    options["sides"], options["document_scope"] = sides_with_config(
        check.verification.config.perturbation, _sides(requested) if requested else None, options.get("document_scope")
    )
    changes = benchmark_config_evidence_changes(check=check, project=options["project"])
    if changes and not evidence_override:
        raise ShiftlabError(evidence_refusal(changes))
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
    are always found or made in its project: ``evaluation.benchmark_inputs.transform_run_for``.)"""
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
    sides: tuple[str, ...] | None = None,
    document_scope: str | None = None,
) -> BenchmarkRun:
    encoder_dtype = encoder_dtype_for(preset, encoder_dtype)
    sides = _sides(sides)
    document_scope = document_scope or DOCUMENTS_RELEVANT
    models = _models_checked(models, encoder_dtype)
    if limit is not None and limit < 1:
        raise ShiftlabError("--limit must be at least 1", field="limit")
    datasets = {
        r.name: dataset_checked(r.name, r.content_hash, split, reader=created_by, project=project)
        for r in plan.datasets
    }
    project = project or project_for_new(created_by, None, *datasets.values())
    project_require_same(project, *datasets.values(), role="the datasets of a benchmark run")
    sided = document_sided(datasets, sides, document_scope)
    plan = replace(plan, sides=sides)
    units = plan.units(models, sided=sided)
    with transaction.atomic():
        newest_before = TransformRun.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
        transform_runs = _transform_runs_for(
            plan, units, datasets, limit=limit, created_by=created_by, project=project, document_scope=document_scope
        )
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
                **_plan_document(plan, datasets, units, transform_runs, newest_before),
                "preset": preset,
                "encoder_dtype": encoder_dtype,
                **({"sides": list(sides), "document_scope": document_scope} if sided else {}),
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
                **({"sides": list(sides), "document_scope": document_scope} if sided else {}),
            },
        )
        if dispatch:
            benchmark_run_dispatch(run.pk)
    return run


def _plan_document(
    plan: Plan, datasets: dict, units: Sequence, transform_runs: dict[str, int], newest_before: int
) -> dict:
    """The run's stored plan: its datasets (names are unique per project: the units find their
    dataset by id), transformations, transformation runs (and the ones this run made, which the
    page names and links; the others existed) and units."""
    return {
        "datasets": list(datasets),
        "dataset_ids": {name: dataset.pk for name, dataset in datasets.items()},
        "include_original": plan.include_original,
        "transformations": [spec_as_dict(spec) for spec in plan.transformations],
        "transform_runs": transform_runs,
        "transform_runs_created": sorted({pk for pk in transform_runs.values() if pk > newest_before}),
        "units": [u.as_dict() for u in units],
    }


def _transform_runs_for(
    plan: Plan,
    units: Sequence,
    datasets: dict,
    *,
    limit: int | None,
    created_by: AbstractBaseUser | None,
    project: Project,
    document_scope: str,
) -> dict[str, int]:
    """The transformation run of each (dataset, transformation, seed, side kind) the units need,
    made (or found) now, not in the unit tasks, so that the units of several models share one."""
    return {
        transform_run_key(name, spec.transformation, seed, documents=documents): transform_run_for(
            dataset=datasets[name],
            spec=spec,
            seed=seed,
            limit=limit,
            created_by=created_by,
            project=project,
            item_scope=document_item_scope(datasets[name], document_scope) if documents else "",
        ).pk
        for name in datasets
        for spec in plan.transformations
        for seed in spec.seeds
        for documents in _run_kinds(units, name)
    }


def document_sided(datasets: dict[str, Dataset], sides: Sequence[str], document_scope: str) -> set[str]:
    """The datasets whose documents the run perturbs: the retrieval ones (their corpus) and the
    reranking ones (their candidates), when a side other than the query is asked for (refused
    when there is none)."""
    if tuple(sides) == (QUERY,):
        return set()
    if document_scope not in DOCUMENT_SCOPES:
        raise ShiftlabError(
            f"unknown document scope {document_scope!r}: choose {' or '.join(DOCUMENT_SCOPES)}", field="document_scope"
        )
    sided = {name for name, dataset in datasets.items() if task_spec(dataset.task_type).documents}
    if not sided:
        kinds = sorted({dataset.task_type for dataset in datasets.values()})
        raise ShiftlabError(
            "the document and both sides perturb the documents of a retrieval corpus or the candidates of reranking "
            f"lists, and none of the run's datasets is a {' or '.join(SIDED_TASK_TYPES)} dataset (the run has "
            f"{', '.join(kinds)}); add one, or run the query side only",
            field="sides",
        )
    return sided


def _run_kinds(units: Sequence[Unit], dataset: str) -> list[bool]:
    """Whether the dataset's units need its run of examples (False) and its run of documents (True)."""
    sides = {u.side for u in units if u.dataset == dataset and not u.is_original}
    kinds = []
    if sides & {QUERY, BOTH}:
        kinds.append(False)
    if sides & {DOCUMENT, BOTH}:
        kinds.append(True)
    return kinds


def _models_checked(models: Sequence[str], encoder_dtype: str | None) -> list[str]:
    """The models named (once each, in order), each one an encoder this server can load."""
    models = list(dict.fromkeys(m.strip() for m in models if m.strip()))
    if not models:
        raise ShiftlabError("name at least one model: pick one of the models this server lists", field="models")
    for model in models:
        problem = model_problem(model)
        if problem:
            raise ShiftlabError(problem, field="models")
        try:
            get_encoder(model, encoder_dtype)
        except (ImproperlyConfigured, EncoderError) as exc:
            raise ShiftlabError(
                f"Model {model!r} is set up wrongly on this server; tell the administrator: {exc}", field="models"
            ) from None
    return models
