"""The shape of a benchmark config: a safe reader of its text and its typed form (pure module).

Nothing reads a config before it went through here. ``config_load`` turns text into plain JSON data
and refuses what would let a small file cost a lot or hide what it says: more than
``MAX_CONFIG_BYTES``, YAML anchors and aliases (refused as parser events, before anything is
composed or expanded), YAML merge keys, duplicate keys (YAML and JSON), NaN/Infinity, values JSON
cannot hold (YAML dates, sets, binary, unpaired surrogates) and nesting deeper than
``MAX_DEPTH`` (counted before any recursive parser reads the text: ``core.nesting``).
``config_read`` turns that data into frozen dataclasses, or raises a ``ConfigError`` naming the
path of the first bad field, e.g. ``transformations[2].runs[0].seed: expected an integer, got a
string``. Free-form parts (a study's design, a generator's parameters, the gate evidence) stay
mappings of JSON data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from core.errors import ShiftlabError
from core.nesting import MAX_NESTING

SCHEMA = "shiftlab.benchmark-config/1"
# Far above a real export, and below DATA_UPLOAD_MAX_MEMORY_SIZE, so the API reaches this check;
# YAML of this size takes some seconds to read even with libyaml.
MAX_CONFIG_BYTES = 4 * 1024 * 1024
MAX_DEPTH = MAX_NESTING
SIGNATURE_ALGORITHM = "hmac-sha256"
# What a config may fix about the perturbed side of its retrieval datasets (evaluation.benchmark_plan
# SIDES, transforms.selectors DOCUMENT_SCOPES: a test keeps them equal; this module stays pure).
PERTURBATION_KEY = "perturbation"
PERTURBATION_SIDES = ("query", "document", "both")
PERTURBATION_DOCUMENT_SCOPES = ("relevant_documents", "documents")
Format = Literal["json", "yaml"]


class ConfigError(ShiftlabError, ValueError):
    """A config text or document that is not a well-formed benchmark config; ``path`` names the
    field ("" for the whole file)."""

    def __init__(self, path: str, problem: str):
        self.path = path
        self.problem = problem
        super().__init__(f"{path}: {problem}" if path else problem)


# --- typed form -------------------------------------------------------------------------------


@dataclass(frozen=True)
class DatasetEntry:
    name: str
    content_hash: str
    task_type: str
    languages: tuple[str, ...]


@dataclass(frozen=True)
class GeneratorEntry:
    backend_alias: str
    model: str
    params: Mapping[str, Any]
    hash: str


@dataclass(frozen=True)
class PromptEntry:
    key: str
    version: int
    hash: str
    system: str
    user: str


@dataclass(frozen=True)
class RunEntry:
    run_id: int
    run_hash: str
    seed: int
    dataset: DatasetEntry
    generator: GeneratorEntry
    prompts: tuple[PromptEntry, ...]
    target_languages: tuple[str, ...]
    run_language: str
    item_limit: int | None

    @property
    def prompt_hashes(self) -> dict[str, str]:
        return {p.key: p.hash for p in self.prompts}


@dataclass(frozen=True)
class StudyEntry:
    name: str
    version: int
    design_hash: str
    design: Mapping[str, Any]
    # Present when the study was locked although its controls were detectable: the reason, the
    # limit and each transformation's easy-positive AUC over it (annotation.studies.design_services).
    detectability_override: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class ApprovalEntry:
    decision: Literal["approve", "reject"]
    by: str
    at: str
    comment: str


@dataclass(frozen=True)
class GateEntry:
    id: int
    passed: bool
    evidence_hash: str
    evidence: Mapping[str, Any]
    # The gate passed on items with fewer than 2 counted raters because the study's design declared
    # a single-rater pilot (annotation.science.gating); absent (False) otherwise.
    single_rater_pilot: bool = False
    # What the gate passed on: "meaning_changed" for a sensitivity study's inverse question
    # (annotation.science.design.GateDirection); absent ("meaning_kept") otherwise.
    passes_on: str = "meaning_kept"
    # What the gate's decision rests on, for gates with the options of issue 40 (one rating per
    # item, another sequence, the prediction-powered estimate); absent ("") otherwise.
    basis: str = ""


@dataclass(frozen=True)
class TransformationEntry:
    transformation: str
    axis: str
    study: StudyEntry
    runs: tuple[RunEntry, ...]
    approval: ApprovalEntry
    gate: GateEntry

    @property
    def approved(self) -> bool:
        return self.approval.decision == "approve"


@dataclass(frozen=True)
class Signature:
    algorithm: str
    key_id: str
    value: str


@dataclass(frozen=True)
class PerturbationEntry:
    """The sides a run of the config perturbs on retrieval datasets, and which documents the
    document side rewrites (an optional block: a config without it leaves both to the run)."""

    sides: tuple[str, ...]
    document_scope: str


@dataclass(frozen=True)
class BenchmarkConfigDocument:
    schema: str
    name: str
    exported_at: str
    exported_by: str
    transformations: tuple[TransformationEntry, ...]
    datasets: tuple[DatasetEntry, ...]
    config_hash: str
    signature: Signature | None
    perturbation: PerturbationEntry | None = None

    @property
    def approved(self) -> tuple[TransformationEntry, ...]:
        return tuple(t for t in self.transformations if t.approved)


# --- reading data -----------------------------------------------------------------------------


def config_read(document: Mapping[str, Any]) -> BenchmarkConfigDocument:
    """The typed config of plain data (as ``config_load`` returns it), or a ``ConfigError`` naming
    the first bad field."""
    r = _Reader(document, "")
    schema = r.string("schema")
    if schema != SCHEMA:
        raise ConfigError("schema", f"{schema!r} is not a config format this server reads (it reads {SCHEMA!r})")
    signature = None
    if document.get("signature") is not None:
        s = r.mapping("signature")
        algorithm = s.string("algorithm")
        if algorithm != SIGNATURE_ALGORITHM:
            raise ConfigError(s.at("algorithm"), f"{algorithm!r} is not supported (only {SIGNATURE_ALGORITHM!r})")
        signature = Signature(algorithm=algorithm, key_id=s.string("key_id"), value=s.hex_digest("value"))
        s.done()
    config = BenchmarkConfigDocument(
        schema=schema,
        name=r.string("name"),
        exported_at=r.string("exported_at"),
        exported_by=r.string("exported_by"),
        transformations=r.items("transformations", _transformation, non_empty=True),
        datasets=r.items("datasets", _dataset),
        config_hash=r.hex_digest("config_hash"),
        signature=signature,
        perturbation=_perturbation(r.mapping(PERTURBATION_KEY)) if PERTURBATION_KEY in document else None,
    )
    r.done(optional=("signature", PERTURBATION_KEY))
    return config


def perturbation_read(data: Any) -> PerturbationEntry:
    """The typed ``perturbation`` block of plain data, or a ``ConfigError`` naming the bad field."""
    return _perturbation(_Reader(data, PERTURBATION_KEY))


def _perturbation(r: _Reader) -> PerturbationEntry:
    sides = r.strings("sides")
    if not sides:
        raise ConfigError(r.at("sides"), "must not be empty")
    for n, side in enumerate(sides):
        if side not in PERTURBATION_SIDES:
            raise ConfigError(
                f"{r.at('sides')}[{n}]", f"{side!r} is not a side: choose among {', '.join(PERTURBATION_SIDES)}"
            )
        if side in sides[:n]:
            raise ConfigError(f"{r.at('sides')}[{n}]", f"{side!r} is listed twice")
    scope = r.string("document_scope")
    if scope not in PERTURBATION_DOCUMENT_SCOPES:
        raise ConfigError(
            r.at("document_scope"), f"expected {' or '.join(map(repr, PERTURBATION_DOCUMENT_SCOPES))}, got {scope!r}"
        )
    r.done()
    return PerturbationEntry(sides=sides, document_scope=scope)


def _transformation(r: _Reader) -> TransformationEntry:
    study = r.mapping("study")
    approval = r.mapping("approval")
    gate = r.mapping("gate")
    decision = approval.string("decision")
    if decision not in ("approve", "reject"):
        raise ConfigError(approval.at("decision"), f"expected 'approve' or 'reject', got {decision!r}")
    entry = TransformationEntry(
        transformation=r.string("transformation"),
        axis=r.string("axis"),
        study=StudyEntry(
            name=study.string("name"),
            version=study.integer("version"),
            design_hash=study.string("design_hash"),
            design=study.mapping("design").data,
            detectability_override=_override(study),
        ),
        runs=r.items("runs", _run, non_empty=True),
        approval=ApprovalEntry(
            decision=decision, by=approval.string("by"), at=approval.string("at"), comment=approval.string("comment")
        ),
        gate=GateEntry(
            id=gate.integer("id"),
            passed=gate.boolean("passed"),
            evidence_hash=gate.string("evidence_hash"),
            evidence=gate.mapping("evidence").data,
            single_rater_pilot=_pilot(gate),
            passes_on=_passes_on(gate),
            basis=_basis(gate),
        ),
    )
    for part in (r, study, approval, gate):
        part.done(optional=("detectability_override",) if part is study else ())
    return entry


def _pilot(gate: _Reader) -> bool:
    """A gate's single-rater pilot mark, which must say what its evidence says."""
    marked = gate.boolean("single_rater_pilot") if "single_rater_pilot" in gate.data else False
    evidence = gate.data.get("evidence")
    recorded = isinstance(evidence, Mapping) and evidence.get("single_rater_pilot") is True
    if marked != recorded:
        raise ConfigError(
            gate.at("single_rater_pilot"),
            "must be true exactly when the gate's evidence records a single-rater pilot "
            f"(evidence says {str(recorded).lower()})",
        )
    return marked


def _passes_on(gate: _Reader) -> str:
    """What a gate passed on, which must say what its evidence says (absent: the meaning was kept)."""
    marked = gate.string("passes_on") if "passes_on" in gate.data else "meaning_kept"
    evidence = gate.data.get("evidence")
    recorded = (evidence.get("passes_on") if isinstance(evidence, Mapping) else None) or "meaning_kept"
    if marked not in ("meaning_kept", "meaning_changed") or marked != recorded:
        raise ConfigError(
            gate.at("passes_on"),
            f"must be what the gate's evidence records ({recorded!r}; absent means 'meaning_kept'), got {marked!r}",
        )
    return marked


def _basis(gate: _Reader) -> str:
    """What a gate's decision rests on, which must say what its evidence says (absent: it records none)."""
    marked = gate.string("basis") if "basis" in gate.data else ""
    evidence = gate.data.get("evidence")
    recorded = (evidence.get("gate_basis") if isinstance(evidence, Mapping) else None) or ""
    if marked != recorded:
        raise ConfigError(
            gate.at("basis"), f"must be what the gate's evidence records as gate_basis ({recorded!r}), got {marked!r}"
        )
    return marked


def _override(study: _Reader) -> Mapping[str, Any] | None:
    if "detectability_override" not in study.data:
        return None
    override = study.mapping("detectability_override")
    override.string("reason", non_empty=True)
    limit = override.get("limit")
    if isinstance(limit, bool) or not isinstance(limit, int | float):
        raise ConfigError(override.at("limit"), f"expected a number, got {kind_of(limit)}")
    over = override.mapping("over_limit")
    for name, auc in over.data.items():
        if isinstance(auc, bool) or not isinstance(auc, int | float):
            raise ConfigError(over.at(name), f"expected a number, got {kind_of(auc)}")
    if "too_few" in override.data:  # transformation -> why detectability could not be estimated
        too_few = override.mapping("too_few")
        for name in too_few.data:
            too_few.string(name, non_empty=True)
    override.done()
    return override.data


def _run(r: _Reader) -> RunEntry:
    generator = r.mapping("generator")
    run = RunEntry(
        run_id=r.integer("run_id"),
        run_hash=r.string("run_hash"),
        seed=r.integer("seed"),
        dataset=_dataset(r.mapping("dataset")),
        generator=GeneratorEntry(
            backend_alias=generator.string("backend_alias"),
            model=generator.string("model"),
            params=generator.mapping("params").data,
            hash=generator.string("hash"),
        ),
        prompts=r.items("prompts", _prompt),
        target_languages=r.strings("target_languages"),
        run_language=r.string("run_language"),
        item_limit=r.integer("item_limit", nullable=True),
    )
    r.done()
    generator.done()
    return run


def _prompt(r: _Reader) -> PromptEntry:
    prompt = PromptEntry(
        key=r.string("key"),
        version=r.integer("version"),
        hash=r.string("hash"),
        system=r.string("system"),
        user=r.string("user"),
    )
    r.done()
    return prompt


def _dataset(r: _Reader) -> DatasetEntry:
    entry = DatasetEntry(
        name=r.string("name", non_empty=True),
        content_hash=r.string("content_hash"),
        task_type=r.string("task_type"),
        languages=r.strings("languages"),
    )
    r.done()
    return entry


class _Reader:
    """Typed access to one mapping of the document, naming the path of any bad field."""

    def __init__(self, data: Any, path: str):
        if not isinstance(data, Mapping):
            raise ConfigError(path, f"expected a mapping, got {kind_of(data)}")
        self.data = data
        self.path = path
        self.read: set[str] = set()

    def at(self, key: str) -> str:
        return path_join(self.path, key)

    def get(self, key: str) -> Any:
        if key not in self.data:
            raise ConfigError(self.at(key), "missing")
        self.read.add(key)
        return self.data[key]

    def string(self, key: str, *, non_empty: bool = False) -> str:
        value = self.get(key)
        if not isinstance(value, str):
            raise ConfigError(self.at(key), f"expected a string, got {kind_of(value)}")
        if non_empty and not value:
            raise ConfigError(self.at(key), "must not be empty")
        return value

    def hex_digest(self, key: str) -> str:
        value = self.string(key)
        if len(value) != 64 or any(c not in "0123456789abcdef" for c in value):
            raise ConfigError(self.at(key), "expected a sha256 hex digest (64 lower-case hex digits)")
        return value

    def integer(self, key: str, *, nullable: bool = False) -> int | None:
        value = self.get(key)
        if value is None and nullable:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(
                self.at(key), f"expected an integer{' or null' if nullable else ''}, got {kind_of(value)}"
            )
        return value

    def boolean(self, key: str) -> bool:
        value = self.get(key)
        if not isinstance(value, bool):
            raise ConfigError(self.at(key), f"expected true or false, got {kind_of(value)}")
        return value

    def mapping(self, key: str) -> _Reader:
        return _Reader(self.get(key), self.at(key))

    def strings(self, key: str) -> tuple[str, ...]:
        values = self._list(key)
        for n, value in enumerate(values):
            if not isinstance(value, str):
                raise ConfigError(f"{self.at(key)}[{n}]", f"expected a string, got {kind_of(value)}")
        return tuple(values)

    def items(self, key: str, read, *, non_empty: bool = False) -> tuple:
        values = self._list(key)
        if non_empty and not values:
            raise ConfigError(self.at(key), "must not be empty")
        return tuple(read(_Reader(value, f"{self.at(key)}[{n}]")) for n, value in enumerate(values))

    def _list(self, key: str) -> list:
        value = self.get(key)
        if not isinstance(value, list):
            raise ConfigError(self.at(key), f"expected a list, got {kind_of(value)}")
        return value

    def done(self, *, optional: tuple[str, ...] = ()) -> None:
        """Refuse fields the format does not have (a typo, or a newer format under the old name)."""
        unknown = sorted(set(self.data) - self.read - set(optional))
        if unknown:
            raise ConfigError(self.at(unknown[0]), "not a field of this config format")


def path_join(path: str, key: str) -> str:
    """The path of ``key`` inside ``path``, as a ``ConfigError`` names it."""
    return f"{path}.{key}" if path else key


def kind_of(value: Any) -> str:
    """What ``value`` is, in words, for a ``ConfigError``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, Mapping):
        return "a mapping"
    return f"a {type(value).__name__}"
