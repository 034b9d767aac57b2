"""Export services: the validated benchmark config of the approved transformations (prompts,
generator, seeds, languages, datasets and the evidence behind each approval, signed with the
deployment's key and sealed with its own hash), the verification of a config file, and the check
a benchmark run makes before it uses one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from annotation.configs import config_export
from annotation.configs.config_schema import (
    MAX_CONFIG_BYTES,
    PERTURBATION_DOCUMENT_SCOPES,
    PERTURBATION_KEY,
    TransformationEntry,
    perturbation_read,
)
from annotation.models import Approval, BenchmarkConfig, GateResult, RaterDecision, Study
from annotation.selectors import export_studies
from annotation.studies.gate_services import gate_result_current
from core.errors import NotFoundError, ShiftlabError
from core.models import Project
from core.projects import project_require_write, project_resolve, scoped
from core.services import audit_record
from transforms.models import PromptTemplate, TransformRun
from transforms.registry import TRANSFORMATIONS


def approved_gate_results(studies: Sequence[Study] | None = None) -> list[GateResult]:
    """The current gate result of each (study, transformation) when it carries an approval."""
    candidates = GateResult.objects.select_related("study__project", "approval").order_by(
        "study_id", "transformation", "-created_at", "-id"
    )
    if studies is not None:
        candidates = candidates.filter(study__in=studies)
    current: dict[tuple[int, str], GateResult] = {}
    for result in candidates:
        current.setdefault((result.study_id, result.transformation), result)
    return [r for r in current.values() if hasattr(r, "approval") and r.approval.decision == Approval.Decision.APPROVE]


def config_run_entry(run: TransformRun) -> dict:
    prompts = []
    for key, digest in sorted(run.prompt_hashes.items()):
        # The run's own project's version first: the same wording may be a different version elsewhere.
        same = PromptTemplate.objects.filter(key=key, content_hash=digest)
        template = same.filter(project_id=run.project_id).first() or same.first()
        if template is None:
            raise ShiftlabError(f"run {run.pk}: prompt {key} with hash {digest[:12]} is missing; cannot export it")
        prompts.append(
            {"key": key, "version": template.version, "hash": digest, "system": template.system, "user": template.user}
        )
    generator = run.generator
    return {
        "run_id": run.pk,
        "run_hash": run.run_hash,
        "seed": run.seed,
        "dataset": {
            "name": run.dataset.name,
            "content_hash": run.dataset.content_hash,
            "task_type": run.dataset.task_type,
            "languages": run.dataset.languages,
        },
        "generator": {
            "backend_alias": generator.backend_alias,
            "model": generator.model,
            "params": generator.params,
            "hash": generator.content_hash,
        },
        "prompts": prompts,
        "target_languages": run.languages,
        "run_language": run.run_language,
        "item_limit": run.item_limit,
    }


def _study_entry(study: Study) -> dict:
    """A study in the config; one locked with detectable controls says so (the reason and the AUCs
    over the limit, as recorded at lock)."""
    entry = {
        "name": study.name,
        "version": study.version,
        "design_hash": study.design_hash,
        "design": study.design,
    }
    if override := study.sample_info.get("detectability_override"):
        entry["detectability_override"] = override
    return entry


def _export_scope(
    actor: AbstractBaseUser | None, *, project: str | None, studies: Sequence[Study | int] | None
) -> list[Study] | QuerySet[Study]:
    """The studies whose approvals an export takes: ``studies`` (Study rows or ids) that ``actor``
    may read, each in a project they may change; else those of ``project`` (a slug); else those
    of every project ``actor`` may change."""
    if studies:
        ids = [getattr(study, "pk", study) for study in studies]
        found = list(scoped(Study.objects.select_related("project"), actor).filter(pk__in=ids))
        if missing := set(ids) - {study.pk for study in found}:
            raise NotFoundError(f"no studies {sorted(missing)}")
        for study in found:
            project_require_write(actor, study.project)
        return found
    if not project:
        return export_studies(actor)
    return export_studies(actor, project=project_resolve(actor, project))


def _transformation_entry(result: GateResult) -> tuple[dict, list[dict]]:
    """An approved transformation as the config holds it, and its runs."""
    runs = [
        config_run_entry(run)
        for run in result.study.runs.filter(transformation=result.transformation)
        .select_related("dataset", "generator")
        .order_by("pk")
    ]
    approval = result.approval
    entry = {
        "transformation": result.transformation,
        "axis": TRANSFORMATIONS[result.transformation].axis.value,
        "study": _study_entry(result.study),
        "runs": runs,
        "approval": {
            "decision": approval.decision,
            "by": approval.decided_by.get_username(),
            "at": approval.decided_at.isoformat(),
            "comment": approval.comment,
        },
        "gate": {
            "id": result.pk,
            "passed": result.passed,
            "evidence_hash": result.evidence_hash,
            "evidence": result.evidence,
            # A gate that passed only as a declared single-rater pilot says so in the config.
            **({"single_rater_pilot": True} if result.evidence.get("single_rater_pilot") else {}),
            # A sensitivity study's gate passed on "the meaning changed" (the inverse question).
            **({"passes_on": passes_on} if (passes_on := result.evidence.get("passes_on")) else {}),
            # What the gate's decision rests on (designs with the gate options of issue 40), e.g. "judge
            # default on 1,379 outputs, corrected by 38 human-rated items from 9 raters".
            **({"basis": basis} if (basis := result.evidence.get("gate_basis")) else {}),
        },
    }
    return entry, runs


@dataclass(frozen=True)
class BenchmarkConfigExportRequest:
    """A benchmark config export (or its preview) as the page, the API and ``benchmark_config
    export`` ask for it; they only fill it in, ``benchmark_config_export`` checks every rule."""

    project: str | None = None
    studies: Sequence[Study | int] | None = None
    name: str = ""
    sides: Sequence[str] | None = None
    document_scope: str | None = None


def benchmark_config_export(
    *, actor: AbstractBaseUser | None = None, request: BenchmarkConfigExportRequest
) -> BenchmarkConfig:
    """Write the validated benchmark config of every approved transformation of the studies chosen
    (``_export_scope``: ``studies``, else those of ``project``, else every study ``actor`` may
    change): prompts with hashes, generator, seeds, languages, datasets with content hashes and the
    evidence behind each approval; it is signed with ``CONFIG_SIGNING_KEY`` and carries its own
    hash, which is registered as a ``BenchmarkConfig`` row in the project of its studies.
    Approvals from studies of several projects are refused: export one project at a time.
    ``sides`` (query, document, both) and ``document_scope`` (default relevant_documents), when
    given, are written as the config's ``perturbation`` block: what its runs perturb on retrieval
    datasets (without them the config has no such block and its bytes are as before). The one
    entry of page, API and command."""
    r, name = request, request.name
    perturbation = _perturbation_block(r.sides, r.document_scope)
    document, owner = _config_draft(actor, project=r.project, studies=r.studies, name=name)
    document = config_export.config_seal({**document, **perturbation}, key=settings.CONFIG_SIGNING_KEY)
    return _config_register(document, name=name, project=owner, actor=actor)


def benchmark_config_preview(
    *, actor: AbstractBaseUser | None = None, request: BenchmarkConfigExportRequest
) -> tuple[dict, Project]:
    """What ``benchmark_config_export`` would write with the same inputs (its ``perturbation``
    block included), and its project, without writing or signing anything (the export page shows
    it before the researcher exports); the same refusals (its ``name`` is left out)."""
    r = request
    perturbation = _perturbation_block(r.sides, r.document_scope)
    document, owner = _config_draft(actor, project=r.project, studies=r.studies, name="")
    return {**document, **perturbation}, owner


def _config_draft(
    actor: AbstractBaseUser | None, *, project: str | None, studies: Sequence[Study | int] | None, name: str
) -> tuple[dict, Project]:
    """The unsigned config of the approved transformations in scope, and the project they belong to."""
    approved = approved_gate_results(_export_scope(actor, project=project, studies=studies))
    if not approved:
        raise ShiftlabError("no approved transformation to export: gate a study and approve a transformation first")
    owner = _one_project(approved)
    transformations = []
    datasets = {}
    for result in sorted(approved, key=lambda r: (r.transformation, r.study.name, r.study.version)):
        entry, runs = _transformation_entry(result)
        for run in runs:
            datasets[run["dataset"]["name"]] = run["dataset"]
        transformations.append(entry)
    document = {
        "name": name,
        "exported_at": timezone.now().isoformat(),
        "exported_by": actor.get_username() if actor is not None else "",
        "transformations": transformations,
        "datasets": [datasets[k] for k in sorted(datasets)],
    }
    return document, owner


def _perturbation_block(sides: Sequence[str] | None, document_scope: str | None) -> dict:
    """The config's ``perturbation`` block asked for ({} when no sides are given), checked as a
    run will read it."""
    if not sides:
        if document_scope:
            raise ShiftlabError("a document scope needs sides: name the sides the config's runs perturb")
        return {}
    block = {"sides": list(sides), "document_scope": document_scope or PERTURBATION_DOCUMENT_SCOPES[0]}
    perturbation_read(block)
    return {PERTURBATION_KEY: block}


def _config_register(document: dict, *, name: str, project: Project, actor: AbstractBaseUser | None) -> BenchmarkConfig:
    """Store a sealed config with its JSON and YAML renderings (refused when larger than a run reads)."""
    texts = {fmt: config_export.config_render(document, fmt) for fmt in ("json", "yaml")}
    largest = max(len(text.encode("utf-8")) for text in texts.values())
    if largest > MAX_CONFIG_BYTES:
        raise ShiftlabError(
            f"the config would have {largest} bytes, more than the {MAX_CONFIG_BYTES} a benchmark run reads: "
            "export fewer studies at a time (--study)"
        )
    with transaction.atomic():
        config = BenchmarkConfig.objects.create(
            name=name,
            project=project,
            document=document,
            config_hash=document[config_export.HASH_KEY],
            json_text=texts["json"],
            yaml_text=texts["yaml"],
            created_by=actor,
        )
        audit_record(
            actor=actor,
            verb="benchmark_config.export",
            obj=config,
            payload={
                "config_hash": config.config_hash,
                "transformations": [
                    (t["transformation"], t["study"]["name"], t["study"]["version"])
                    for t in document["transformations"]
                ],
            },
        )
    return config


def _one_project(approved: Sequence[GateResult]) -> Project:
    projects = {result.study.project for result in approved}
    if len(projects) > 1:
        raise ShiftlabError(
            "the approved transformations belong to studies of several projects "
            f"({', '.join(sorted(p.slug for p in projects))}): a config holds one project's studies, "
            "so export one project at a time (choose the project, or name its studies)"
        )
    return projects.pop()


@dataclass(frozen=True)
class ConfigCheck:
    """A config file checked against this deployment: what its text proves (content hash and
    canonical form, signature under this server's key), whether it is one of this deployment's
    exports, and whether a benchmark run may use it."""

    verification: config_export.Verification
    known: BenchmarkConfig | None  # the exported row with this hash, if this deployment made it
    acceptance: config_export.Acceptance

    @property
    def ok(self) -> bool:
        """The content verifies (safe parsing, shape, hash and canonical form)."""
        return self.verification.ok

    @property
    def registered(self) -> bool:
        return self.known is not None

    @property
    def accepted(self) -> bool:
        return self.acceptance.accepted

    def facts(self) -> dict:
        """The three facts and the decision, for the command, the API and pages; registration and
        signature are not checked (None) when the content does not verify. ``development_key``:
        signed with Shiftlab's public development key, so not validated whatever else holds."""
        checked = self.ok
        return {
            "content_ok": self.ok,
            "registered": self.registered if checked else None,
            "signature": self.verification.signature.value if checked else None,
            "signature_problem": self.verification.signature_problem,
            "development_key": self.verification.development_key if checked else None,
            "accepted": self.accepted,
        }


def benchmark_config_verify(*, text: str, fmt: config_export.Format) -> ConfigCheck:
    """Verify a config file (safe parsing, shape, hash, canonical form, signature under
    ``CONFIG_SIGNING_KEY`` or the public development key), look it up among this deployment's
    exports, and decide whether a benchmark run may use it (production refuses the development key)."""
    verification = config_export.config_verify(
        text, fmt, key=settings.CONFIG_SIGNING_KEY, development_key=settings.DEV_CONFIG_SIGNING_KEY
    )
    known = None
    if verification.ok:
        known = BenchmarkConfig.objects.filter(config_hash=verification.declared_hash).first()
    acceptance = config_export.config_acceptance(
        verification, registered=known is not None, development_allowed=settings.DEVELOPMENT_SECRETS_ALLOWED
    )
    return ConfigCheck(verification=verification, known=known, acceptance=acceptance)


def benchmark_config_evidence_changes(*, check: ConfigCheck, project: Project | None = None) -> list[str]:
    """What changed, since the config was exported, in the evidence behind each of its approved
    transformations that names a study of this deployment: the gate result it names is no longer
    the current one (gated again: passed or failed), its approval was withdrawn or replaced, a newer
    version of the study was locked, annotators were rejected or ratings changed after the gate.

    The check runs for every config that names studies kept here, registered or not, whoever
    signed it (renaming a config and signing it again, even with the public development key,
    voids nothing). A registered config's studies are those of its project; another config's are
    looked up by the gate result and the study (name, version, design hash) it names, in
    ``project`` (the run's) when given. An entry naming a study of another project is refused
    without saying anything about that study. Entries naming no study of this deployment (a config
    exported elsewhere: its evidence lives on that deployment, which signed it) add nothing."""
    if check.verification.config is None:
        return []
    changes = []
    for entry in check.verification.config.approved:
        where = f"{entry.transformation} ({entry.study.name} v{entry.study.version})"
        if check.known is not None:
            found = _evidence_changes(entry, project=check.known.project)
        else:
            found = _unregistered_evidence_changes(entry, project=project)
        changes += [f"{where}: {what}" for what in found]
    return changes


def _unregistered_evidence_changes(entry: TransformationEntry, *, project: Project | None) -> list[str]:
    """The evidence changes of an entry of a config this deployment has no export of: checked as
    for an export when the entry names a study kept here: a gate result of the run's project (by
    its id, whatever the study is called in the config), or a study of the same design anywhere."""
    if project is not None and GateResult.objects.filter(pk=entry.gate.id, study__project=project).exists():
        return _evidence_changes(entry, project=project)
    # The design hash is only known to those who hold the design: a refusal tells a stranger nothing.
    owners = {
        study.project for study in Study.objects.select_related("project").filter(design_hash=entry.study.design_hash)
    }
    if not owners:
        return []  # not a study of this deployment
    if project is None:
        gate = GateResult.objects.select_related("study__project").filter(pk=entry.gate.id).first()
        if gate is not None and gate.study.project in owners:
            return _evidence_changes(entry, project=gate.study.project)
        return _evidence_changes(entry, project=owners.pop())
    if project not in owners:
        return [
            f"it names a study of another project of this deployment, not of {project.slug!r}: export the config "
            "again in the project of the run"
        ]
    return _evidence_changes(entry, project=project)


def _evidence_changes(entry: TransformationEntry, *, project: Project) -> list[str]:
    gate = (
        GateResult.objects.select_related("study", "approval__decided_by")
        .filter(pk=entry.gate.id, study__project=project, transformation=entry.transformation)
        .first()
    )
    if gate is None or gate.evidence_hash != entry.gate.evidence_hash:
        return [f"its gate result {entry.gate.id} is no longer the one the config names: export the config again"]
    changes = []
    current = gate_result_current(study=gate.study, transformation=gate.transformation)
    if current.pk != gate.pk:
        outcome = "failed: " + "; ".join(current.evidence.get("reasons", [])) if not current.passed else "passed"
        changes.append(
            f"a later gate (result {current.pk}, {current.created_at:%Y-%m-%d %H:%M}) {outcome}".rstrip(": ")
        )
    approval = getattr(gate, "approval", None)
    if approval is None or approval.decision != Approval.Decision.APPROVE:
        changes.append("its approval was withdrawn")
    elif (
        approval.decided_at.isoformat() != entry.approval.at or approval.decided_by.get_username() != entry.approval.by
    ):
        changes.append(f"its approval was replaced (now by {approval.decided_by.get_username()})")
    # A draft revision is a proposal: the study's design changes once a newer version is locked.
    newer = (
        Study.objects.filter(project=project, name=gate.study.name, version__gt=gate.study.version)
        .exclude(status=Study.Status.DRAFT)
        .order_by("-version")
        .first()
    )
    if newer is not None:
        changes.append(f"the study was revised: {newer.name} v{newer.version} replaces v{gate.study.version}")
    rejected = sorted(
        RaterDecision.objects.filter(
            annotator__study=gate.study, decision="reject", decided_at__gt=gate.created_at
        ).values_list("annotator__user__username", flat=True)
    )
    if rejected:
        changes.append(
            f"annotators rejected since the gate ({', '.join(rejected)}): their ratings no longer count; gate the "
            "study again"
        )
    changed_at = gate.study.ratings_changed_at
    if changed_at is not None and changed_at > gate.created_at:
        changes.append(
            f"ratings changed since the gate (last on {changed_at:%Y-%m-%d %H:%M}): validate and gate the study again"
        )
    changes += _judge_changes(gate)
    return changes


def _judge_changes(gate: GateResult) -> list[str]:
    """A prediction-powered gate rests on its judges' scores: a changed judge, model or prompt (another
    fingerprint of the same outputs' scores) voids it."""
    judge = (gate.evidence.get("sequential") or {}).get("judge") or {}
    if not judge.get("fingerprint"):
        return []
    from annotation.studies.judge_population_services import study_judge_population

    now = study_judge_population(study=gate.study, transformation=gate.transformation).fingerprint()
    if now == judge["fingerprint"]:
        return []
    return [
        f"the LLM judges behind its prediction-powered gate changed since ({judge.get('label') or 'judges'}: their "
        "model, prompt or settings): the gate's evidence no longer holds; revise the study and validate it again"
    ]


def benchmark_config_file_read(*, path: Path) -> str:
    """The text of a config file, refused before reading when it is larger than any config."""
    if not path.is_file():
        raise ShiftlabError(f"no config file {path}")
    size = path.stat().st_size
    if size > MAX_CONFIG_BYTES:
        raise ShiftlabError(f"{path} has {size} bytes, more than the {MAX_CONFIG_BYTES} a benchmark config may have")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ShiftlabError(
            f"{path} is not UTF-8 text: use the file as {config_export.EXPORT_COMMAND} wrote it"
        ) from None
