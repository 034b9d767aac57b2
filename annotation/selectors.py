"""Read-only queries of studies for pages, the API and commands."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models import Count, Q, QuerySet

from annotation.kinds import ItemKind
from annotation.models import (
    Annotator,
    Assignment,
    BaselineAnswer,
    BaselineStudy,
    BenchmarkConfig,
    Flag,
    GateResult,
    Rating,
    Study,
)
from annotation.science.gating import gate_state_of
from annotation.studies.design_services import study_design
from annotation.studies.selectors import control_checks, counted_ratings, study_agreement
from core.errors import ShiftlabError
from core.models import Project
from core.projects import scoped
from core.rosters import project_annotators, roster_refusal


def roster_annotators(project: Project, usernames: Iterable[str]) -> list:
    """The annotators on ``project``'s roster named ``usernames``; an unknown name and another
    project's annotator are refused alike (``core.rosters.roster_refusal``), before anything is
    written. What the API and the command publish to, or hand work over to."""
    names = set(usernames)
    users = list(project_annotators(project).filter(username__in=names))
    if outside := names - {u.username for u in users}:
        raise ShiftlabError(roster_refusal(project, outside))
    return users


def study_list() -> QuerySet[Study]:
    return (
        Study.objects.select_related("created_by", "project").prefetch_related("runs").annotate(n_items=Count("items"))
    )


def study_stages(studies: Iterable[Study]) -> dict[int, list[str]]:
    """Where each study stands past its status, as the Studies list says it: each
    transformation's current gate result and the decision on it ("paraphrase: passed,
    approved"), else whether ratings arrived yet (a published study). Two queries in all."""
    studies = list(studies)
    ids = [s.pk for s in studies]
    current: dict[tuple[int, str], GateResult] = {}
    for result in GateResult.objects.filter(study_id__in=ids).select_related("approval").order_by("created_at", "id"):
        current[(result.study_id, result.transformation)] = result  # the newest wins
    rated = set(
        Rating.objects.filter(study_item__study_id__in=ids, active=True)
        .values_list("study_item__study_id", flat=True)
        .distinct()
    )
    stages: dict[int, list[str]] = defaultdict(list)
    for (study_id, name), result in sorted(current.items()):
        approval = getattr(result, "approval", None)
        decided = f", {approval.decision}d" if approval else ""
        stages[study_id].append(f"{name}: {gate_state_of(result.evidence).label}{decided}")
    for study in studies:
        if study.pk not in stages and study.status == Study.Status.PUBLISHED:
            stages[study.pk].append("rated, not gated yet" if study.pk in rated else "awaiting ratings")
    return dict(stages)


def flag_list(*, study: Study | None = None, status: str | None = Flag.Status.OPEN) -> QuerySet[Flag]:
    flags = Flag.objects.select_related("rating__study_item", "rating__annotator__user", "reviewed_by")
    if study is not None:
        flags = flags.filter(rating__study_item__study=study)
    if status:
        flags = flags.filter(status=status)
    return flags.order_by("rating__study_item__position", "id")


def gate_result_list(*, study: Study | None = None) -> QuerySet[GateResult]:
    results = GateResult.objects.select_related("study", "approval__decided_by", "created_by")
    return results.filter(study=study) if study is not None else results


def benchmark_config_list() -> QuerySet[BenchmarkConfig]:
    return BenchmarkConfig.objects.select_related("created_by", "project")


def export_studies(user, *, project: Project | None = None) -> QuerySet[Study]:
    """The studies whose approvals an export by ``user`` takes (``None``: the system): those of
    ``project``, or of every project the user may change (the export refuses more than one)."""
    studies = scoped(Study.objects.all(), user, write=True)
    return studies.filter(project=project) if project is not None else studies


@dataclass(frozen=True)
class AnnotatorProgress:
    annotator: Annotator
    assigned: int  # records in their batch now (real items and controls)
    controls_assigned: int
    items_rated: int
    real_rated: int
    controls_rated: int
    control_status: str
    control_pass_rate: float | None
    open_flags: int
    confirmed_flags: int
    edits: int


@dataclass(frozen=True)
class StudyProgress:
    n_real: int
    n_controls: int
    n_complete: int  # real items with at least raters_per_item counted raters (any status)
    annotators: list[AnnotatorProgress]
    agreement: dict[str, dict]


def study_progress(*, study: Study) -> StudyProgress:
    """Per-annotator counts, control pass rates and live agreement (after rejections). A fixed
    number of queries, whatever the number of annotators: ratings are read as plain values, the
    control checks once (agreement reuses them)."""
    design = study_design(study)
    checks = control_checks(study) if study.is_locked else {}
    active = Rating.objects.filter(study_item__study=study, active=True)
    per_annotator = defaultdict(lambda: {"items": set(), "real": set(), "controls": set(), "edits": 0})
    raters_per_item = defaultdict(set)
    for annotator_id, edits, kind, item_id in active.values_list(
        "annotator_id", "edits", "study_item__kind", "study_item_id"
    ):
        row = per_annotator[annotator_id]
        row["items"].add(item_id)
        row["edits"] += edits
        if kind == ItemKind.REAL:
            row["real"].add(item_id)
            raters_per_item[item_id].add(annotator_id)
        else:
            row["controls"].add(item_id)
    flags = (
        Flag.objects.filter(rating__study_item__study=study)
        .values("rating__annotator_id")
        .annotate(
            open=Count("id", filter=Q(status=Flag.Status.OPEN)),
            confirmed=Count("id", filter=Q(status=Flag.Status.CONFIRMED)),
        )
    )
    flag_counts = {f["rating__annotator_id"]: f for f in flags}
    batches = (
        Assignment.objects.filter(annotator__study=study, active=True)
        .values("annotator_id")
        .annotate(n=Count("id"), controls=Count("id", filter=~Q(study_item__kind=ItemKind.REAL)))
    )
    assigned = {b["annotator_id"]: b for b in batches}
    rows = []
    for annotator in study.annotators.select_related("user"):
        row, check = per_annotator[annotator.pk], checks.get(annotator.pk)
        counts = flag_counts.get(annotator.pk, {})
        rows.append(
            AnnotatorProgress(
                annotator=annotator,
                assigned=assigned.get(annotator.pk, {}).get("n", 0),
                controls_assigned=assigned.get(annotator.pk, {}).get("controls", 0),
                items_rated=len(row["items"]),
                real_rated=len(row["real"]),
                controls_rated=len(row["controls"]),
                control_status=check.status.value if check else "",
                control_pass_rate=check.pass_rate if check else None,
                open_flags=counts.get("open", 0),
                confirmed_flags=counts.get("confirmed", 0),
                edits=row["edits"],
            )
        )
    items = study.items.values("kind").annotate(n=Count("id"))
    by_kind = {i["kind"]: i["n"] for i in items}
    return StudyProgress(
        n_real=by_kind.get(ItemKind.REAL, 0),
        n_controls=sum(n for k, n in by_kind.items() if k != ItemKind.REAL),
        n_complete=sum(1 for raters in raters_per_item.values() if len(raters) >= design.raters_per_item),
        annotators=rows,
        agreement=study_agreement(study, counted_ratings(study, checks=checks)) if study.is_locked else {},
    )


# --- human baselines -------------------------------------------------------------------------


def baseline_get(ref: str, *, studies: QuerySet[BaselineStudy] | None = None) -> BaselineStudy:
    """A baseline study by id or name (among ``studies``, default all); ``BaselineStudy.DoesNotExist``
    when there is none, and a ``ShiftlabError`` when the name is used in several of those projects
    (names are unique per project)."""
    studies = BaselineStudy.objects.all() if studies is None else studies
    if ref.isdigit() and (study := studies.filter(pk=int(ref)).first()):
        return study
    found = list(studies.filter(name=ref).select_related("project")[:10])
    if len(found) > 1:
        raise ShiftlabError(
            f"baseline study {ref!r} is in several projects you can read "
            f"({', '.join(sorted(s.project.slug for s in found))}): give its id"
        )
    if not found:
        raise BaselineStudy.DoesNotExist(f"no baseline study {ref!r}")
    return found[0]


@dataclass(frozen=True)
class RaterCount:
    rater: str
    source: str
    answers: int
    invalid: int  # LLM replies that did not parse


def baseline_rater_counts(*, study: BaselineStudy) -> list[RaterCount]:
    """Current answers per rater (humans and LLMs) of one baseline study; withdrawn ones do not count."""
    rows = (
        BaselineAnswer.objects.filter(instance__study=study, active=True)
        .values("rater", "source")
        .annotate(answers=Count("id"), invalid=Count("id", filter=Q(valid=False)))
        .order_by("source", "rater")
    )
    return [RaterCount(**row) for row in rows]


def study_sync_due_list() -> list[int]:
    """Ids of the validation studies a periodic sync should visit: every published one."""
    return list(Study.objects.filter(status=Study.Status.PUBLISHED).order_by("pk").values_list("pk", flat=True))
