"""Services of human-validation studies, first steps: declare a study (draft), change its design
or revise it as a new version, and lock it (design frozen; items and controls drawn). Every step
is audited. Publishing and syncing follow in ``argilla_services``.
"""

from __future__ import annotations

import logging
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from django.contrib.auth.base_user import AbstractBaseUser
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.db.models import Count
from django.utils import timezone

from annotation.kinds import ItemKind
from annotation.models import STUDY_NAME_PATTERN, STUDY_NAME_RULE, Study, StudyItem
from annotation.science.control_check import expected_value
from annotation.science.controls import PairCandidate
from annotation.science.controls import n_controls as controls_needed
from annotation.science.design import (
    DesignContext,
    DesignProblem,
    StudyDesign,
    design_implications,
    design_problems,
)
from annotation.science.detectability import MIN_PER_CLASS
from annotation.science.sampling import Candidate, draw_real_items, sample_summary, seeded_rng
from annotation.studies.control_services import (
    detectability_by_transformation,
    items_detectability,
    source_language,
    study_controls_draw,
)
from core.errors import ConflictError, InvalidError, NotFoundError, ShiftlabError
from core.models import AuditEvent, Project
from core.projects import project_for_new, project_require_same, project_require_write, scoped
from core.rosters import project_annotators
from core.services import audit_record
from transforms.backends import get_backend
from transforms.models import TransformedItem, TransformRun

logger = logging.getLogger(__name__)

# The most outputs of one transformation the judges of a prediction-powered study score (their ids are
# kept in sample_info, which every adaptive check reads and writes).
MAX_JUDGED_OUTPUTS = 100_000


def study_design(study: Study) -> StudyDesign:
    return StudyDesign.from_dict(study.design)


def _check_runs(runs: Sequence[TransformRun]) -> list[TransformRun]:
    runs = list(dict.fromkeys(runs))
    if not runs:
        raise ShiftlabError("a study needs at least one transformation run: pass the ids of succeeded runs")
    unfinished = [f"{r.pk} ({r.status})" for r in runs if r.status != TransformRun.Status.SUCCEEDED]
    if unfinished:
        raise ShiftlabError(f"only succeeded runs can be validated; not succeeded: {', '.join(unfinished)}")
    return runs


class DesignRefused(ShiftlabError):
    """A design that cannot work with the study's runs (``annotation.science.design.design_problems``);
    ``problems`` names the field to change for each reason, for forms to show next to it."""

    code = "design_refused"

    def __init__(self, problems: Sequence[DesignProblem]):
        self.problems = tuple(problems)
        super().__init__("; ".join(f"design.{p.field}: {p.message}" for p in self.problems))


def design_context(*, runs: Sequence[TransformRun], annotators: int | None = None) -> DesignContext:
    """What a design over ``runs`` is checked against: the successfully transformed texts of each
    transformation (the texts ``study_lock`` draws from) and, when given, the annotator count."""
    counts = (
        TransformedItem.objects.filter(run__in=list(runs), ok=True)
        .exclude(output_text="")
        .order_by()
        .values_list("run__transformation")
        .annotate(n=Count("pk"))
    )
    available = {name: 0 for name in {r.transformation for r in runs}}
    available.update(dict(counts))
    return DesignContext(available=available, annotators=annotators)


def study_design_check(*, design: StudyDesign, runs: Sequence[TransformRun], project: Project) -> None:
    """Refuse (``DesignRefused``) a design that cannot work over ``runs`` with ``project``'s
    annotators; every interface that declares or changes a design goes through here."""
    problems = design_problems(design, _context(project, runs))
    if problems:
        raise DesignRefused(problems)


def _check_judges(design: StudyDesign) -> None:
    for alias in design.llm_judges:
        try:
            get_backend(alias)
        except ImproperlyConfigured as exc:
            raise ShiftlabError(f"design.llm_judges: {exc}", field="llm_judges") from exc


def _project_for_study(actor: AbstractBaseUser | None, slug: str | None, *runs: TransformRun) -> Project:
    """``project_for_new``: an unknown project (404) or an ambiguous one (400) is refused on the
    ``project`` input; one the caller may only read with a ``ProjectAccessError`` (403)."""
    return project_for_new(actor, slug or None, *runs)


def _runs_of(actor: AbstractBaseUser | None, runs: Sequence[TransformRun | int]) -> list[TransformRun]:
    """The runs named (objects or ids) among those ``actor`` may read, in the order given."""
    ids = list(dict.fromkeys(r.pk if isinstance(r, TransformRun) else int(r) for r in runs))
    found = {r.pk: r for r in scoped(TransformRun.objects.select_related("project"), actor).filter(pk__in=ids)}
    if missing := set(ids) - set(found):
        raise NotFoundError(f"no transformation runs {sorted(missing)}", field="runs")
    return [found[pk] for pk in ids]


@dataclass(frozen=True)
class StudyCreateRequest:
    """A new study as the page, the API and the command ask for it; they only fill it in, and
    ``study_create`` checks every rule. ``runs``: transformation runs (objects or ids); ``design``:
    the design fields given, laid over the defaults (``StudyDesign.overlaid``), or a whole design;
    ``project``: the slug named (None: the runs' project, ``core.projects.project_for_new``)."""

    name: str
    runs: Sequence[TransformRun | int]
    design: Mapping[str, Any] | StudyDesign = field(default_factory=dict)
    project: str | None = None


@dataclass(frozen=True)
class StudyReviseRequest:
    """A new version of a study (``study_revise``), or a draft's design changed in place
    (``study_update_design``): ``design`` holds the fields that change, laid over the study's own
    design, or a whole design; ``runs`` (objects or ids), when given, replace the study's runs."""

    study: Study | int
    design: Mapping[str, Any] | StudyDesign = field(default_factory=dict)
    runs: Sequence[TransformRun | int] | None = None


def _design_over(base: StudyDesign, design: Mapping[str, Any] | StudyDesign) -> StudyDesign:
    return design if isinstance(design, StudyDesign) else base.overlaid(design)


def _check_name(name: str) -> None:
    if not re.fullmatch(STUDY_NAME_PATTERN, name or ""):
        raise InvalidError(f"invalid study name {name!r}: {STUDY_NAME_RULE}", field="name", code="study_name")


def _context(project: Project, runs: Sequence[TransformRun]) -> DesignContext:
    """The context every design of ``project`` over ``runs`` is checked in, whichever interface
    asks: the runs' transformed texts and the annotators on the project's roster."""
    return design_context(runs=runs, annotators=project_annotators(project).count())


@dataclass(frozen=True)
class StudyDraft:
    """A new study's inputs resolved and checked, nothing written: its project, runs, design and
    the context its design is checked in (the runs' texts, the project's annotator count); the
    reasons the design cannot work (``problems``), else what it implies (``implications``)."""

    project: Project
    runs: list[TransformRun]
    design: StudyDesign
    context: DesignContext

    @property
    def problems(self) -> tuple[DesignProblem, ...]:
        return design_problems(self.design, self.context)

    @property
    def implications(self):
        return None if self.problems else design_implications(self.design, self.context)


def study_draft(*, actor: AbstractBaseUser | None, request: StudyCreateRequest) -> StudyDraft:
    """What ``study_create`` would create, checked but not written (the study builder's "Check the
    design" shows its implications). The project is the one named (checked first: its refusal says
    the most), else the runs' one (``core.projects.project_for_new``)."""
    named = _project_for_study(actor, request.project) if request.project else None
    runs = _check_runs(_runs_of(actor, request.runs))
    chosen = named or _project_for_study(actor, None, *runs)
    project_require_same(chosen, *runs, role="the study's runs")
    design = _design_over(StudyDesign(), request.design)
    return StudyDraft(chosen, runs, design, _context(chosen, runs))


def study_create(*, actor: AbstractBaseUser | None, request: StudyCreateRequest) -> Study:
    """The one entry that creates a study (page, API and command call it): a draft (version 1)
    over succeeded runs, in the project named, else the runs' one (``study_draft``), published to
    the Argilla workspace named after the project. Its design can change until it is locked. A
    design that cannot work over the runs and with the project's annotators is refused with
    ``DesignRefused``; a name off the pattern (``STUDY_NAME_PATTERN``) on the ``name`` input."""
    _check_name(request.name)
    draft = study_draft(actor=actor, request=request)
    project, runs, design, name = draft.project, draft.runs, draft.design, request.name
    _check_judges(design)
    if problems := draft.problems:
        raise DesignRefused(problems)
    if Study.objects.filter(project=project, name=name).exists():
        raise ShiftlabError(
            f"a study named {name!r} exists in project {project.slug}: revise it (new version) or choose another name"
        )
    study = Study(
        name=name,
        project=project,
        workspace=project.slug,
        design=design.to_dict(),
        design_hash=design.content_hash,
        created_by=actor,
    )
    try:
        study.full_clean(exclude=["runs"])
    except Exception as exc:  # ValidationError: report which field is wrong
        raise ShiftlabError(f"invalid study: {exc}") from exc
    with transaction.atomic():
        study.save()
        study.runs.set(runs)
        audit_record(
            actor=actor,
            verb="study.create",
            obj=study,
            payload={"runs": [r.pk for r in runs], "design": design.to_dict()},
        )
    return study


def _study_of(actor: AbstractBaseUser | None, study: Study | int) -> Study:
    """The study a revision starts from, which ``actor`` must be able to change (403)."""
    found = study if isinstance(study, Study) else Study.objects.select_related("project").get(pk=study)
    project_require_write(actor, found.project)
    return found


def study_update_design(*, actor: AbstractBaseUser | None = None, request: StudyReviseRequest) -> Study:
    """Change the design of a draft study; a locked study refuses (revise it instead)."""
    study = _study_of(actor, request.study)
    design = _design_over(study_design(study), request.design)
    _check_judges(design)
    with transaction.atomic():
        study = Study.objects.select_for_update().get(pk=study.pk)
        if study.is_locked:
            raise ConflictError(f"{study} is locked: its design cannot change. Revise it to make a new version.")
        study_design_check(design=design, runs=list(study.runs.all()), project=study.project)
        study.design, study.design_hash = design.to_dict(), design.content_hash
        study.save(update_fields=["design", "design_hash"])
        audit_record(actor=actor, verb="study.design.update", obj=study, payload=design.to_dict())
    return study


def study_revise(*, actor: AbstractBaseUser | None = None, request: StudyReviseRequest) -> Study:
    """A new draft version of a study with a changed design and/or runs; the old one is untouched.
    The new version stays in the study's project and Argilla workspace."""
    study = _study_of(actor, request.study)
    design = _design_over(study_design(study), request.design)
    given = request.runs
    runs = _check_runs(list(study.runs.all()) if given is None else _runs_of(actor, given))
    project_require_same(study.project, *runs, role="the study's runs")
    _check_judges(design)
    study_design_check(design=design, runs=runs, project=study.project)
    with transaction.atomic():
        latest = Study.objects.filter(project=study.project, name=study.name).order_by("-version").first()
        revised = Study.objects.create(
            name=study.name,
            version=latest.version + 1,
            previous=study,
            project=study.project,
            workspace=study.workspace,
            design=design.to_dict(),
            design_hash=design.content_hash,
            created_by=actor,
        )
        revised.runs.set(runs)
        audit_record(
            actor=actor,
            verb="study.revise",
            obj=revised,
            payload={"previous": study.pk, "design": design.to_dict(), "runs": [r.pk for r in runs]},
        )
    return revised


def _stratum(out: TransformedItem) -> str:
    return f"{out.run.dataset.name}|{out.item.language}>{out.target_language}"


def _sample_key(out: TransformedItem) -> tuple:
    """What identifies an output for sampling whatever the database: its dataset's content, item
    and field (a row id would make the same seed draw differently on another database); the run's
    id only tells apart two runs of one transformation, seed and dataset."""
    return (out.run.dataset.content_hash, out.item.split, out.item.position, out.side, out.run.seed, out.run_id)


def _source_key(out: TransformedItem) -> str:
    return " ".join(out.source_text.split()).lower()


def _over_limit(per_transformation, design: StudyDesign) -> dict[str, float]:
    """Transformation -> easy-positive AUC, for those above the design's detectability limit."""
    return {
        name: round(result.easy_positive.auc, 4)
        for name, result in per_transformation.items()
        if result.easy_positive.auc is not None and result.easy_positive.auc > design.detectability_limit
    }


def too_few_reason(score) -> str:
    """Why a transformation's easy positives have no detectability estimate, in the words the lock
    records (``score``: its ``DetectabilityScore``)."""
    if score.n_controls < MIN_PER_CLASS:
        return f"too few controls to estimate detectability ({score.n_controls} easy positives)"
    return f"too few real items to estimate detectability ({score.n_real} real items)"


def _too_few(per_transformation, n_controls: int) -> dict[str, str]:
    """Transformation -> why detectability could not be estimated, for those whose easy positives
    got no AUC. A study without controls (``controls_per_batch`` 0) has nothing to tell apart."""
    if not n_controls:
        return {}
    return {
        name: too_few_reason(result.easy_positive)
        for name, result in per_transformation.items()
        if result.easy_positive.auc is None
    }


def _detectable_message(
    study: Study, design: StudyDesign, per_transformation, over: dict[str, float], too_few: dict[str, str]
) -> str:
    parts = [
        f"{name}: easy-positive AUC {auc:.2f} over {per_transformation[name].easy_positive.n_controls} controls "
        f"and {per_transformation[name].easy_positive.n_real} real items"
        for name, auc in over.items()
    ]
    problems = []
    if parts:
        problems.append(
            "annotators could tell its controls from its real items: detectability above "
            f"design.detectability_limit {design.detectability_limit:.2f} (cross-validated AUC, 0.5 = "
            f"indistinguishable) for {'; '.join(parts)}"
        )
    if too_few:
        problems.append(
            "nobody can tell whether annotators could spot its controls: "
            + "; ".join(f"{name}: {reason}" for name, reason in too_few.items())
            + f" (the check needs at least {MIN_PER_CLASS} easy positives and {MIN_PER_CLASS} real items "
            "per transformation)"
        )
    return (
        f"cannot lock {study}: {'; and '.join(problems)}. Nothing was written. "
        "What to do: give the controls more pairs to choose from (import gold paraphrase pairs into the project, "
        "or sample more items so more held-back outputs remain), supply a control pool shaped like these "
        "transformations' outputs (--control-pool FILE), use a different layout (one transformation per "
        "study, other batch sizes, more items or controls per batch), or lock anyway by setting "
        "design.detectability_override to the reason "
        "(recorded in the design, the audit log and the exported config). See docs/annotation.md, "
        "'Sampling and control items'."
    )


def study_lock(
    *,
    study: Study,
    actor: AbstractBaseUser | None = None,
    control_pool: Sequence[tuple[ItemKind, PairCandidate]] | None = None,
) -> Study:
    """Freeze the design and draw the study's items: a seeded stratified sample of successfully
    transformed texts per transformation (``annotation.science.sampling.draw_real_items``), plus
    control items, in a seeded shuffled order.

    Controls are drawn from ``control_pool`` (``annotation.studies.control_pool.control_pool_read``)
    first, then from the other sources ``annotation.studies.control_services`` lists; when too few exist
    the lock is refused with what is missing, and nothing is written. Locking a locked study
    changes nothing; a control pool for it is refused, since its controls are drawn already.
    """
    with transaction.atomic():
        study = Study.objects.select_for_update().get(pk=study.pk)
        if study.is_locked and control_pool is not None:
            raise ConflictError(
                f"{study} is locked: its controls are drawn; revise it to use a control pool (--control-pool)"
            )
        if study.is_locked:
            return study
        design = study_design(study)
        outputs = list(
            TransformedItem.objects.filter(run__in=study.runs.all(), ok=True)
            .exclude(output_text="")
            .select_related("run__dataset", "item")
            .order_by("pk")
        )
        chosen, sample_info = _real_items_draw(study, design, outputs)
        info_names = set(sample_info)  # one entry per transformation
        rows = [_real_row(study, o) for o in chosen]
        sampled = {o.pk for o in chosen}
        controls = study_controls_draw(
            study=study,
            design=design,
            real=[(r.text_a, r.text_b, r.language_a, r.language_b, r.transformation) for r in rows],
            held_back=[o for o in outputs if o.pk not in sampled],
            n=controls_needed(len(chosen), batch_size=design.batch_size, controls_per_batch=design.controls_per_batch),
            pool=control_pool or (),
        )
        control_rows = [_control_row(study, design, pair) for pair in controls]
        rows.extend(control_rows)
        imitates = {id(row): pair.imitates for row, pair in zip(control_rows, controls, strict=True)}
        order = seeded_rng(design.seed, "order").permutation(len(rows))
        for position, index in enumerate(order):
            rows[int(index)].position = position
        by_position = sorted(rows, key=lambda row: row.position)
        per_transformation = detectability_by_transformation(by_position, imitates, seed=design.seed)
        over = _over_limit(per_transformation, design)
        too_few = _too_few(per_transformation, len(controls))
        if (over or too_few) and not design.detectability_override:
            raise ShiftlabError(_detectable_message(study, design, per_transformation, over, too_few))
        StudyItem.objects.bulk_create(rows)
        sample_info.update(_controls_info(design, controls, by_position, per_transformation, over, too_few))
        study.sample_info = sample_info
        study.status, study.locked_at = Study.Status.LOCKED, timezone.now()
        study.save(update_fields=["sample_info", "status", "locked_at"])
        audited = {k: sample_summary(v) if k in info_names else v for k, v in sample_info.items()}
        audit_record(
            actor=actor, verb="study.lock", obj=study, payload={"design_hash": study.design_hash, "sample": audited}
        )
    if design.prediction_powered:
        _judges_start(study, actor)
    return study


def study_lock_message(*, study: Study, asked_at: datetime) -> str:
    """What a lock asked for at ``asked_at`` did to the locked ``study``, in words: the items and
    controls it drew, or, when the study had been locked before (a second lock from a stale tab,
    which changes nothing), when and by whom, from the audit log."""
    n_real = study.items.filter(kind=ItemKind.REAL).count()
    n_controls = study.items.exclude(kind=ItemKind.REAL).count()
    counts = f"{n_real} item{'' if n_real == 1 else 's'} and {n_controls} control{'' if n_controls == 1 else 's'}"
    if study.locked_at >= asked_at:
        return f"Locked: {counts} drawn; the design is frozen."
    event = (
        AuditEvent.objects.filter(verb="study.lock", object_type=Study._meta.label_lower, object_id=str(study.pk))
        .select_related("actor")
        .order_by("-at")
        .first()
    )
    by = event.actor.get_username() if event and event.actor else "the system"
    when = timezone.localtime(study.locked_at).strftime("%Y-%m-%d %H:%M")
    return f"Already locked on {when} by {by}: {counts}; nothing changed."


def _judges_start(study: Study, actor: AbstractBaseUser | None) -> None:
    """A prediction-powered gate needs the judges' score of every output: locking starts their jobs
    (on the ``llm`` queue). A refusal or a backend that is down never undoes the lock: the study
    page says so and offers to start them again."""
    from annotation.studies.judge_population_services import study_judge_population_start

    try:
        study_judge_population_start(study=study, actor=actor)
    except ShiftlabError as exc:
        logger.warning("%s: the judges could not start scoring every output: %s", study, exc)


def _real_items_draw(
    study: Study, design: StudyDesign, outputs: Sequence[TransformedItem]
) -> tuple[list[TransformedItem], dict]:
    """The outputs drawn as real items, and ``sample_info`` per transformation."""
    by_transformation: dict[str, list[TransformedItem]] = {t: [] for t in {r.transformation for r in study.runs.all()}}
    for out in outputs:
        by_transformation[out.run.transformation].append(out)
    empty = sorted(t for t, found in by_transformation.items() if not found)
    if empty:
        raise ShiftlabError(
            f"no successfully transformed texts for {', '.join(empty)} in the study's runs: "
            "nothing to validate there; remove those runs (revise the study) or rerun them"
        )
    by_key = {_sample_key(o): o for o in outputs}
    # A prediction-powered gate corrects the judges' mean over the run's outputs with the human ratings
    # of a sample: that needs a simple random sample of those outputs (one stratum), and the list of
    # outputs it was drawn from (the judges score every one of them).
    uniform = design.prediction_powered
    pools = {
        name: [Candidate(_sample_key(o), "all" if uniform else _stratum(o), _source_key(o)) for o in found]
        for name, found in by_transformation.items()
    }
    draw = draw_real_items(pools, design.items_per_transformation, seed=design.seed, record_population=uniform)
    chosen = [by_key[key] for name in sorted(draw.keys) for key in draw.keys[name]]
    info = {name: draw.info[name] for name in sorted(draw.info)}
    too_many = {name: len(keys) for name, keys in draw.population.items() if len(keys) > MAX_JUDGED_OUTPUTS}
    if too_many:
        raise ShiftlabError(
            f"cannot lock {study}: a prediction-powered gate has the judges score every output, and "
            + ", ".join(f"{name} has {n:,}" for name, n in sorted(too_many.items()))
            + f" (at most {MAX_JUDGED_OUTPUTS:,}). Nothing was written. Limit the runs to fewer texts, or use "
            "gate_estimator 'human'"
        )
    for name in info if uniform else ():
        if name in draw.population:
            info[name]["population"] = sorted(by_key[key].pk for key in draw.population[name])
        else:
            info[name]["population_note"] = (
                "too few fresh originals for a simple random sample: the gate uses the human ratings alone"
            )
    return chosen, info


def _real_row(study: Study, out: TransformedItem) -> StudyItem:
    return StudyItem(
        study=study,
        position=0,
        kind=ItemKind.REAL,
        transformed_item=out,
        transformation=out.run.transformation,
        stratum=_stratum(out),
        text_a=out.source_text,
        text_b=out.output_text,
        language_a=source_language(out),
        language_b=out.target_language,
    )


def _control_row(study: Study, design: StudyDesign, pair) -> StudyItem:
    expected = {
        q.name: v
        for q in design.questions
        if (v := expected_value(pair.kind, q, keywords=pair.keywords, noise=pair.noise)) is not None
    }
    return StudyItem(
        study=study,
        position=0,
        kind=pair.kind,
        text_a=pair.text_a,
        text_b=pair.text_b,
        language_a=pair.language_a,
        language_b=pair.language_b,
        expected=expected,
    )


def _controls_info(
    design: StudyDesign, controls, by_position, per_transformation, over: dict[str, float], too_few: dict[str, str]
) -> dict:
    """What ``sample_info`` records of the controls: how many, from which sources, how detectable."""
    sources: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for pair in controls:
        sources[pair.kind.value][pair.origin] += 1
    info = {
        "controls": len(controls),
        "control_sources": {kind: dict(sorted(by.items())) for kind, by in sorted(sources.items())},
        "detectability": asdict(items_detectability(by_position, seed=design.seed)),
        "detectability_by_transformation": {name: asdict(result) for name, result in per_transformation.items()},
        "detectability_limit": design.detectability_limit,
    }
    partial = sum(1 for pair in controls if pair.dropped)
    if partial:  # keyword lists that could not keep every content word of their text
        info["keyword_positives_dropping_words"] = partial
    if over or too_few:
        info["detectability_override"] = {
            "reason": design.detectability_override,
            "limit": design.detectability_limit,
            "over_limit": over,
        }
        if too_few:  # no AUC to hold against the limit: locked on the same recorded override
            info["detectability_override"]["too_few"] = too_few
    return info
