"""Benchmark units as mteb results (pure module: builds mteb objects, writes nothing).

mteb keeps one ``TaskResult`` JSON per (model, revision, task) in a results folder laid out as
``results/<model name as path>/<revision>/<task>.json`` next to a ``model_meta.json``; variants of
a model (other keyword arguments) live in ``.../<revision>/experiments/<experiment name>/``, the
name derived by mteb from the meta's ``experiment_kwargs``. A Shiftlab unit on the original data
is the model's plain result; a transformed unit is an experiment whose kwargs name the
transformation, seed and config hash, so ``mteb.ResultCache(folder).load_results()`` returns each
unit as its own model result. Every score entry also carries the unit under ``"shiftlab"``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from mteb import get_model_meta
from mteb.models import ModelMeta
from mteb.results import TaskResult

ORIGINAL = "original"
QUERY = "query"  # the side of every unit but a ranking one perturbed elsewhere (evaluation.benchmark_plan.SIDES)
EXPERIMENTS = "experiments"  # mteb's folder name for a model's experiments


@dataclass(frozen=True)
class MtebUnit:
    """What the export needs of one benchmark result, as plain values.

    ``task_name``/``dataset_revision``/``hf_subset``/``languages`` are the MTEB task's when the
    dataset was imported from MTEB, else the dataset's name, content hash, "default" and languages.
    """

    model_id: str
    model_revision: str
    task_name: str
    dataset_revision: str
    hf_subset: str
    languages: list[str]
    split: str
    main_score: float
    metrics: Mapping[str, Any]
    evaluation_time_s: float
    transformation: str
    seed: int
    config_hash: str
    shiftlab: Mapping[str, Any] = field(default_factory=dict)
    side: str = QUERY
    """What a ranking unit perturbed; a side other than the query is a model variant of its own."""

    @property
    def experiment_kwargs(self) -> dict[str, Any] | None:
        """None for a unit on the original data (the model's plain result)."""
        if self.transformation == ORIGINAL:
            return None
        return {
            "shiftlab_transformation": self.transformation,
            "shiftlab_seed": self.seed,
            "shiftlab_config_hash": self.config_hash or "none",
            **({} if self.side == QUERY else {"shiftlab_side": self.side}),
        }


def mteb_task_result(units: Sequence[MtebUnit]) -> TaskResult:
    """The scores of ``units`` (one model variant, one task; several subsets or splits) as an mteb
    ``TaskResult``. ``mteb_version`` is None: Shiftlab's evaluators computed the scores, not mteb."""
    if not units:
        raise ValueError("no units to write")
    first = units[0]
    seen: set[tuple[str, str]] = set()
    scores: dict[str, list[dict[str, Any]]] = {}
    for unit in units:
        if (unit.task_name, unit.dataset_revision) != (first.task_name, first.dataset_revision):
            raise ValueError(f"units of different tasks in one result: {first.task_name}, {unit.task_name}")
        if (unit.split, unit.hf_subset) in seen:
            raise ValueError(
                f"two units score {unit.task_name} ({unit.hf_subset}, {unit.split}) for the same model variant: "
                "mteb keeps one score per subset and split"
            )
        seen.add((unit.split, unit.hf_subset))
        scores.setdefault(unit.split, []).append(_score_entry(unit))
    return TaskResult(
        dataset_revision=first.dataset_revision,
        task_name=first.task_name,
        mteb_version=None,
        scores=scores,
        evaluation_time=sum(unit.evaluation_time_s for unit in units),
    )


def _score_entry(unit: MtebUnit) -> dict[str, Any]:
    return {
        **{k: v for k, v in unit.metrics.items() if k not in ("main_score", "hf_subset", "languages")},
        "main_score": unit.main_score,
        "hf_subset": unit.hf_subset,
        "languages": list(unit.languages),
        "shiftlab": {
            **unit.shiftlab,
            "transformation": unit.transformation,
            "seed": unit.seed,
            "config_hash": unit.config_hash,
        },
    }


def mteb_model_meta(unit: MtebUnit) -> ModelMeta:
    """The model's mteb metadata at Shiftlab's revision (a hash of its files), with the unit's
    experiment kwargs. A model mteb does not know gets a meta with its name only."""
    update = {"revision": unit.model_revision, "experiment_kwargs": unit.experiment_kwargs}
    try:
        known = get_model_meta(unit.model_id)
    except (KeyError, ValueError):
        known = None
    if known is not None and known.name == unit.model_id:
        return known.model_copy(update=update)
    return ModelMeta.model_construct(name=unit.model_id, **update)


def mteb_model_meta_document(meta: ModelMeta) -> dict[str, Any]:
    """``model_meta.json`` as mteb writes it (``ModelMeta.to_dict``); the bare fields for a model
    mteb does not know (its loader only needs name, revision and experiment kwargs)."""
    if "loader" in meta.model_fields_set:
        return meta.to_dict()
    return {"name": meta.name, "revision": meta.revision, "experiment_kwargs": meta.experiment_kwargs}


def mteb_result_path(meta: ModelMeta, task_name: str) -> PurePosixPath:
    """Where mteb's result cache keeps this result, relative to the cache folder."""
    folder = PurePosixPath("results", meta.model_name_as_path(), meta.revision or "no_revision_available")
    if meta.experiment_name:
        folder = folder / EXPERIMENTS / meta.experiment_name
    return folder / f"{task_name}.json"
