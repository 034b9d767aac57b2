"""What a benchmark run evaluates, read from a validated config or from datasets (pure module).

A plan is models x datasets x (original + approved transformations) x seeds. Everything here is
plain data: the services turn a plan into transformation runs and Celery tasks. The shape of the
exported config, typed by ``annotation/configs/config_schema.py``, is read in one place, ``plan_from_config``.
"""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from annotation.configs.config_schema import BenchmarkConfigDocument, TransformationEntry
from core.errors import ShiftlabError
from transforms.registry import TRANSFORMATIONS, Axis

ORIGINAL = "original"
ORIGINAL_SEED = 0
BENCHMARK_AXES: tuple[str, ...] = (Axis.LEXICAL.value, Axis.LENGTH.value, Axis.LANGUAGE.value)
QUERY, DOCUMENT, BOTH = "query", "document", "both"
SIDES: tuple[str, ...] = (QUERY, DOCUMENT, BOTH)
"""What a ranking unit perturbs: its queries (every other task type's only side), its corpus
documents, or both at once."""


class PlanError(ShiftlabError, ValueError):
    """A config or a choice of corpora/models that cannot be planned; the message says why."""


@dataclass(frozen=True)
class TransformationSpec:
    """An approved transformation as the config fixes it: generator, prompts, languages, seeds."""

    transformation: str
    axis: str
    seeds: tuple[int, ...]
    backend_alias: str
    generator_model: str
    generator_params: Mapping[str, Any]
    generator_hash: str
    prompt_hashes: Mapping[str, str]
    languages: tuple[str, ...]


@dataclass(frozen=True)
class DatasetRef:
    name: str
    content_hash: str | None = None  # checked against the database when the config names one


@dataclass(frozen=True)
class Plan:
    datasets: tuple[DatasetRef, ...]
    transformations: tuple[TransformationSpec, ...]
    include_original: bool = True
    sides: tuple[str, ...] = (QUERY,)

    def units(self, models: Sequence[str], *, sided: Container[str] = ()) -> list[Unit]:
        """Every unit, grouped by model then dataset, so that one worker tends to reuse one
        encoder and one transformation run. Datasets in ``sided`` (those with a document corpus)
        get one transformed unit per side; the others only the query side."""
        out = []
        for model in models:
            for dataset in self.datasets:
                if self.include_original:
                    out.append(Unit(model, dataset.name, ORIGINAL, ORIGINAL_SEED))
                sides = self.sides if dataset.name in sided else (QUERY,)
                for spec in self.transformations:
                    out.extend(
                        Unit(model, dataset.name, spec.transformation, seed, side)
                        for seed in spec.seeds
                        for side in sides
                    )
        return out


@dataclass(frozen=True)
class Unit:
    model: str
    dataset: str
    transformation: str
    seed: int
    side: str = QUERY

    @property
    def is_original(self) -> bool:
        return self.transformation == ORIGINAL

    @property
    def perturbs_queries(self) -> bool:
        return self.side in (QUERY, BOTH)

    @property
    def perturbs_documents(self) -> bool:
        return self.side in (DOCUMENT, BOTH)

    def key(self) -> tuple[str, str, str, int, str]:
        return (self.model, self.dataset, self.transformation, self.seed, self.side)

    def as_dict(self) -> dict[str, Any]:
        # The query side is left out, so that plans read the same as before sides existed.
        data: dict[str, Any] = {
            "model": self.model,
            "dataset": self.dataset,
            "transformation": self.transformation,
            "seed": self.seed,
        }
        if self.side != QUERY:
            data["side"] = self.side
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Unit:
        return cls(
            str(data["model"]),
            str(data["dataset"]),
            str(data["transformation"]),
            int(data["seed"]),
            str(data.get("side", QUERY)),
        )


def transform_run_key(dataset: str, transformation: str, seed: int, *, documents: bool = False) -> str:
    """The key of a run plan's ``transform_runs``: the units of every model share the
    transformation run of their (dataset, transformation, seed); document-side units share a
    second run, of the dataset's documents."""
    key = f"{dataset}|{transformation}|{seed}"
    return f"{key}|documents" if documents else key


def sided(name: str, side: str) -> str:
    """How reports name a transformation or an axis on a side: as it is on the query side (so
    every earlier report reads the same), "name [document]" or "name [both]" otherwise. Sided axes
    are not benchmark axes, so they stay out of the total."""
    return name if side == QUERY or not name else f"{name} [{side}]"


def sides_checked(sides: Sequence[str] | None) -> tuple[str, ...]:
    """The sides asked for, once each in the order of ``SIDES`` (default: the query side)."""
    chosen = [str(side).strip() for side in (sides or ()) if str(side).strip()]
    unknown = sorted(set(chosen) - set(SIDES))
    if unknown:
        raise PlanError(f"unknown side {', '.join(unknown)}: choose among {', '.join(SIDES)}", field="sides")
    return tuple(side for side in SIDES if side in chosen) or (QUERY,)


def plan_from_datasets(names: Sequence[str]) -> Plan:
    """Original data only: one unit per model and dataset."""
    if not names:
        raise PlanError("name at least one dataset", field="datasets")
    return Plan(datasets=tuple(DatasetRef(name) for name in dict.fromkeys(names)), transformations=())


def plan_from_config(
    config: BenchmarkConfigDocument,
    *,
    datasets: Sequence[str] | None = None,
    seeds: Sequence[int] | None = None,
    transformations: Sequence[str] | None = None,
) -> Plan:
    """The plan of a verified, typed config (``annotation.configs.config_schema``): its approved
    transformations (only those), each with the generator, prompts and languages of its runs and
    the union of their seeds, applied to the config's datasets. ``datasets``, ``seeds`` and
    ``transformations`` narrow or replace them."""
    specs = [_transformation_spec(entry, seeds) for entry in config.approved]
    if transformations:
        unknown = set(transformations) - {s.transformation for s in specs}
        if unknown:
            raise PlanError(
                f"not approved in this config: {', '.join(sorted(unknown))}; "
                f"approved: {', '.join(s.transformation for s in specs) or 'none'}"
            )
        specs = [s for s in specs if s.transformation in transformations]
    if not specs:
        raise PlanError("the config approves no transformation: approve one and export the config again")
    listed = {d.name: DatasetRef(d.name, d.content_hash or None) for d in config.datasets}
    if datasets:
        refs = tuple(listed.get(name, DatasetRef(name)) for name in dict.fromkeys(datasets))
    else:
        refs = tuple(listed.values())
    if not refs:
        raise PlanError("the config lists no dataset: pass the datasets to benchmark")
    return Plan(datasets=refs, transformations=tuple(specs))


def _transformation_spec(entry: TransformationEntry, seeds: Sequence[int] | None) -> TransformationSpec:
    name = entry.transformation
    if name not in TRANSFORMATIONS:
        raise PlanError(f"the config names an unknown transformation {name!r}")
    first = entry.runs[0]  # the typed config has at least one run per transformation
    generator = first.generator
    for run in entry.runs[1:]:
        if run.generator.hash != generator.hash or run.prompt_hashes != first.prompt_hashes:
            raise PlanError(
                f"the approved runs of {name} differ in generator or prompts: export one setting per transformation"
            )
    chosen = tuple(dict.fromkeys(int(s) for s in seeds)) if seeds else tuple(sorted({r.seed for r in entry.runs}))
    return TransformationSpec(
        transformation=name,
        axis=TRANSFORMATIONS[name].axis.value,
        seeds=chosen,
        backend_alias=generator.backend_alias,
        generator_model=generator.model,
        generator_params=dict(generator.params),
        generator_hash=generator.hash,
        prompt_hashes=first.prompt_hashes,
        languages=first.target_languages,
    )


def spec_as_dict(spec: TransformationSpec) -> dict[str, Any]:
    return {
        "transformation": spec.transformation,
        "axis": spec.axis,
        "seeds": list(spec.seeds),
        "backend_alias": spec.backend_alias,
        "generator_model": spec.generator_model,
        "generator_params": dict(spec.generator_params),
        "generator_hash": spec.generator_hash,
        "prompt_hashes": dict(spec.prompt_hashes),
        "languages": list(spec.languages),
    }
