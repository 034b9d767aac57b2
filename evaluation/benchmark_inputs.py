"""What a benchmark run takes, checked: its datasets, the dtype of its encoders, the transformation
runs its config names (found in its project, or made there undispatched), and the refusal that
says what changed in the evidence behind its config."""

from __future__ import annotations

from collections.abc import Sequence

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction

from core.errors import NotFoundError, ShiftlabError
from core.models import Project
from core.projects import User
from corpora.models import Dataset
from corpora.selectors import dataset_get
from corpora.task_types import task_spec
from evaluation.benchmark_plan import TransformationSpec
from evaluation.services import TRAIN_SPLIT
from transforms.models import TransformRun
from transforms.params import GenerationParams
from transforms.presets import preset_get
from transforms.services import transform_run_create


def evidence_refusal(changes: Sequence[str]) -> str:
    return (
        "the evidence behind the config changed since it was exported: "
        + "; ".join(changes)
        + ". Decide on the current gate results and export the config again, or run it anyway (command: "
        "--run-anyway; API: run_anyway true; page: 'Run anyway'): the run then records these reasons."
    )


def encoder_dtype_for(preset: str, encoder_dtype: str | None) -> str | None:
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


def dataset_checked(
    name: str, content_hash: str | None, split: str, *, reader: User, project: Project | None
) -> Dataset:
    try:
        dataset = dataset_get(name=name, user=reader, project=project)
    except Dataset.DoesNotExist:
        raise NotFoundError(
            f"no dataset named {name!r}: import it first (python manage.py corpora list)", field="datasets"
        ) from None
    if content_hash and dataset.content_hash != content_hash:
        raise ShiftlabError(
            f"dataset {name} changed since the config was exported (content hash {dataset.content_hash[:12]}, "
            f"config {content_hash[:12]}): import the exported version or export the config again"
        )
    refusal = dataset_split_refusal(dataset, split)
    if refusal:
        raise ShiftlabError(refusal)
    return dataset


def dataset_split_refusal(dataset: Dataset, split: str) -> str:
    """Why ``dataset`` cannot be scored on ``split`` ("" when it can): the split is missing, or a
    classification dataset lacks the training split its classifier is fitted on."""
    name = dataset.name
    if split not in dataset.splits:
        return f"dataset {name} has no split {split!r}; its splits: {', '.join(dataset.splits)}"
    trains = task_spec(dataset.task_type).trains_on_train_split
    if trains and (split == TRAIN_SPLIT or TRAIN_SPLIT not in dataset.splits):
        return f"classification dataset {name} needs a {TRAIN_SPLIT!r} split and another split to score"
    return ""


def transform_run_for(
    *,
    dataset: Dataset,
    spec: TransformationSpec,
    seed: int,
    limit: int | None,
    created_by: AbstractBaseUser | None,
    project: Project,
    item_scope: str = "",
) -> TransformRun:
    """The transformation run of ``project`` with exactly the config's generator, prompts and
    languages: an existing one (succeeded first) or a new, undispatched one (its chunks run inside
    the units). ``item_scope`` asks for a run of the dataset's documents (the document side)."""
    languages = list(spec.languages)
    candidates = TransformRun.objects.filter(
        project=project,
        dataset=dataset,
        transformation=spec.transformation,
        seed=seed,
        item_limit=limit,
        item_scope=item_scope,
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
                item_scope=item_scope,
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
