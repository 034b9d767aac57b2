"""Assignment services: who rates what in a validation study, kept in Django (``Assignment``)
and published by ``argilla_services`` so that each annotator can open only their own batch.

- ``study_assign``: at the first publish, draw every annotator's queue (``annotation.science.assignment``);
  at a later publish with new annotators, move a fair share of the open work to each newcomer.
- ``annotator_release``: take the work of a rejected annotator (all their items: their ratings no
  longer count) or of a withdrawn one (open items only) and give it to others.
- ``study_pull``: designs with ``assignment = "pull"`` draw nothing ahead: each annotator holds at
  most ``batches_released`` unfinished batches, and one who finished gets the next batch of the
  items closest to completion (``assignment.pull_items``). Publishing, joining, releasing and every
  sync go through it.

Everything here writes Django rows only, in one transaction, with an audit record; the caller
pushes the result to Argilla (``argilla_services.study_argilla_reconcile``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from annotation.kinds import ItemKind
from annotation.models import Annotator, Assignment, Rating, Study, StudyItem
from annotation.science.assignment import (
    Slot,
    check_panel,
    draw_assignment,
    next_batch,
    overlap_items,
    pull_items,
    queue_extend,
    raters_needed,
    rebalance,
    receivers,
)
from annotation.science.design import StudyDesign
from annotation.science.sampling import seeded_rng
from annotation.studies.design_services import study_design
from annotation.studies.selectors import counted_ratings
from core.errors import ShiftlabError
from core.services import audit_record


def _controls(study: Study) -> tuple[list[int], list[int]]:
    items = StudyItem.objects.filter(study=study).exclude(kind=ItemKind.REAL).order_by("position")
    positives = [i.pk for i in items if i.kind == ItemKind.EASY_POSITIVE]
    negatives = [i.pk for i in items if i.kind == ItemKind.EASY_NEGATIVE]
    return positives, negatives


def text_key(text: str) -> str:
    """A text as compared when deciding whether an annotator saw it: case and spacing ignored."""
    return " ".join(text.split()).casefold()


def controls_met_elsewhere(annotator: Annotator) -> set[int]:
    """This study's controls the annotator's user must not get: a control with a text (text A or
    text B, compared by ``text_key``) they met in a control of another study, or saw as a real item
    (assigned to them in any study, rated or not; and any real item of this study). A control
    repeating a text the annotator rated for real tells them which item checks them, and what
    they answered then."""
    mine = Assignment.objects.filter(annotator__user_id=annotator.user_id)
    rows = mine.exclude(annotator__study_id=annotator.study_id).exclude(study_item__kind=ItemKind.REAL)
    seen = {text_key(t) for pair in rows.values_list("study_item__text_a", "study_item__text_b") for t in pair}
    real = mine.filter(study_item__kind=ItemKind.REAL).values_list("study_item__text_a", "study_item__text_b")
    seen.update(text_key(t) for pair in real for t in pair)
    here = StudyItem.objects.filter(study_id=annotator.study_id, kind=ItemKind.REAL).values_list("text_a", "text_b")
    seen.update(text_key(t) for pair in here for t in pair)
    controls = StudyItem.objects.filter(study_id=annotator.study_id).exclude(kind=ItemKind.REAL)
    return {
        pk for pk, a, b in controls.values_list("pk", "text_a", "text_b") if text_key(a) in seen or text_key(b) in seen
    }


def _fresh_controls(annotator: Annotator, positives: list[int], negatives: list[int]) -> tuple[list[int], list[int]]:
    met = controls_met_elsewhere(annotator)
    return [c for c in positives if c not in met], [c for c in negatives if c not in met]


def _queue(annotator: Annotator) -> list[Slot]:
    rows = annotator.assignments.filter(active=True).select_related("study_item").order_by("position")
    return [Slot(a.study_item_id, a.study_item.kind != ItemKind.REAL, a.batch) for a in rows]


def _append(annotator: Annotator, slots: Sequence[Slot]) -> None:
    last = annotator.assignments.order_by("-position").values_list("position", flat=True).first()
    start = 0 if last is None else last + 1
    Assignment.objects.bulk_create(
        Assignment(annotator=annotator, study_item_id=s.item, position=start + k, batch=s.batch)
        for k, s in enumerate(slots)
    )


def _give(annotator: Annotator, items: Sequence[int], *, design, label: str) -> None:
    """Append ``items`` to the annotator's queue: they fill its last batch, then new batches get
    controls the annotator has not had yet, here or in another study (``assignment.queue_extend``)."""
    all_positives, all_negatives = _controls(annotator.study)
    positives, negatives = _fresh_controls(annotator, all_positives, all_negatives)
    met = len(all_positives) + len(all_negatives) - len(positives) - len(negatives)
    try:
        slots = queue_extend(
            _queue(annotator),
            items,
            positives,
            negatives,
            batch_size=design.batch_size,
            controls_per_batch=design.controls_per_batch,
            rng=seeded_rng(design.seed, label),
        )
    except ValueError as exc:
        hint = (
            f" ({met} of the study's controls are kept from them: they met their texts in another study's "
            "control or as real items they rated; give the items to another annotator, or lock a revision with "
            "more controls)"
            if met
            else ""
        )
        raise ShiftlabError(f"cannot give {len(items)} more items to {annotator}: {exc}{hint}") from exc
    _append(annotator, slots)


def _end(rows: Iterable[Assignment], reason: str) -> int:
    ids = [a.pk for a in rows]
    Assignment.objects.filter(pk__in=ids).update(active=False, ended_at=timezone.now(), end_reason=reason[:200])
    return len(ids)


def submitted_items(annotator: Annotator) -> set[int]:
    """The items (real and controls) ``annotator`` has an active, i.e. submitted, rating of."""
    return set(
        Rating.objects.filter(annotator=annotator, active=True).values_list("study_item_id", flat=True).distinct()
    )


def open_items(annotator: Annotator) -> list[int]:
    """The real items assigned to ``annotator`` that they have not submitted (no active rating)."""
    done = submitted_items(annotator)
    assigned = annotator.assignments.filter(active=True, study_item__kind=ItemKind.REAL).order_by("position")
    return [item for item in assigned.values_list("study_item_id", flat=True) if item not in done]


def _unfinished_batches(annotator: Annotator) -> int:
    done = submitted_items(annotator)
    rows = annotator.assignments.filter(active=True).values_list("batch", "study_item_id")
    return len({batch for batch, item in rows if item not in done})


def _raters_needed(study: Study, design: StudyDesign, items: Sequence[int]) -> dict[int, int] | None:
    """Item -> raters it needs now when the design's gate observes fewer raters than
    ``raters_per_item`` (``design.adaptive_gate_raters``; None otherwise). With one rating per item,
    the overlap items (``overlap_items``) need every rater and the others one; with more, an item's
    first counted raters who answered every question decide (``assignment.raters_needed``)."""
    if not design.adaptive_gate_raters:
        return None
    if design.adaptive_gate_raters == 1:
        overlap = study_overlap_items(study, design)
        return {item: design.raters_per_item if item in overlap else 1 for item in items}
    answers: dict[int, dict[int, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    last: dict[tuple[int, int], object] = {}
    for r in counted_ratings(study):
        answers[r.item_id][r.annotator_id][r.question] = r.value
        key = (r.item_id, r.annotator_id)
        last[key] = max(last.get(key, r.submitted_at), r.submitted_at)
    scales = {q.name: (q.low, q.high) for q in design.questions}
    needed = {}
    for item in items:
        full = [(last[(item, a)], a, q) for a, q in answers.get(item, {}).items() if set(scales) <= set(q)]
        first = [q for _, _, q in sorted(full, key=lambda row: (row[0], row[1]))]
        needed[item] = raters_needed(
            first, scales, gate_raters=design.adaptive_gate_raters, raters_per_item=design.raters_per_item
        )
    return needed


def study_overlap_items(study: Study, design: StudyDesign) -> set[int]:
    """The real items rated by every ``raters_per_item`` rater in a one-rating-per-item design
    (``design.adaptive_overlap_share`` of each transformation's items, ``assignment.overlap_items``,
    drawn by the design's seed before any rating); empty for other designs."""
    if design.adaptive_gate_raters != 1:
        return set()
    by_transformation: dict[str, list[int]] = defaultdict(list)
    for pk, name in study.items.filter(kind=ItemKind.REAL).order_by("position").values_list("pk", "transformation"):
        by_transformation[name].append(pk)
    chosen: set[int] = set()
    for name, items in sorted(by_transformation.items()):
        chosen |= overlap_items(items, design.adaptive_overlap_share, seeded_rng(design.seed, f"overlap-{name}"))
    return chosen


def _pull(study: Study, design) -> dict[str, int]:
    """Pull mode: give each active annotator new batches until they hold ``batches_released``
    unfinished ones, one batch per annotator per round (so that an item's raters come in a group),
    while items need raters and the annotator has unused controls. Returns username -> items given.
    The caller holds the study's row lock."""
    real = list(study.items.filter(kind=ItemKind.REAL).order_by("position").values_list("pk", "transformation"))
    ids = [pk for pk, _ in real]
    order = [ids[int(k)] for k in seeded_rng(design.seed, "pull-order").permutation(len(ids))]
    settled = {
        name for name, d in study.sample_info.get("adaptive", {}).items() if d.get("state", "undecided") != "undecided"
    }
    closed = {pk for pk, transformation in real if transformation in settled}
    needed = _raters_needed(study, design, ids)
    raters: dict[int, set[int]] = defaultdict(set)  # item -> annotators holding it or counted on it
    for item, annotator in Assignment.objects.filter(
        annotator__study=study, active=True, study_item__kind=ItemKind.REAL
    ).values_list("study_item_id", "annotator_id"):
        raters[item].add(annotator)
    for item, annotator in (
        Rating.objects.filter(study_item__study=study, study_item__kind=ItemKind.REAL, active=True)
        .exclude(annotator__status=Annotator.Status.REJECTED)
        .values_list("study_item_id", "annotator_id")
    ):
        raters[item].add(annotator)
    positives, negatives = _controls(study)
    active = list(study.annotators.filter(status=Annotator.Status.ACTIVE).select_related("user").order_by("pk"))
    room = {a.pk: design.batches_released - _unfinished_batches(a) for a in active}
    # What each annotator saw before does not change during a pull (this study's real items count already).
    fresh = {a.pk: _fresh_controls(a, positives, negatives) for a in active if room[a.pk] > 0}
    given: dict[str, int] = {}
    while any(room[a.pk] > 0 for a in active):
        for annotator in active:
            if room[annotator.pk] <= 0:
                continue
            rows = list(annotator.assignments.select_related("study_item").order_by("position"))
            queue = [Slot(a.study_item_id, a.study_item.kind != ItemKind.REAL, a.batch) for a in rows]
            items = pull_items(
                order,
                {item: len(who) for item, who in raters.items()},
                {s.item for s in queue},
                raters_per_item=design.raters_per_item,
                batch_size=design.batch_size,
                closed=closed,
                needed=needed,
            )
            try:
                slots = next_batch(
                    queue,
                    items,
                    *fresh[annotator.pk],
                    controls_per_batch=design.controls_per_batch,
                    rng=seeded_rng(design.seed, f"pull-{annotator.pk}-{len(queue)}"),
                )
            except ValueError:
                slots = []  # out of unused controls: this annotator has done what the controls allow
            if not items or not slots:
                room[annotator.pk] = 0
                continue
            _append(annotator, slots)
            for item in items:
                raters[item].add(annotator.pk)
            room[annotator.pk] -= 1
            name = annotator.user.get_username()
            given[name] = given.get(name, 0) + len(items)
    return given


def study_pull(*, study: Study, actor: AbstractBaseUser | None = None) -> dict[str, int]:
    """Pull mode (``design.assignment == "pull"``): hand each active annotator who finished their
    released batches the next ones (see ``_pull``); audited when anything was given. Returns
    username -> items given now; {} for fixed designs or when nobody needs work."""
    design = study_design(study)
    if design.assignment != "pull":
        return {}
    with transaction.atomic():
        study = Study.objects.select_for_update().get(pk=study.pk)
        if not study.is_locked:
            return {}
        given = _pull(study, design)
        if given:
            audit_record(actor=actor, verb="study.assignment.pull", obj=study, payload={"given": given})
    return given


@dataclass(frozen=True)
class AssignResult:
    drawn: bool  # True: the first draw; False: newcomers joined an existing assignment
    queues: dict[str, int] = field(default_factory=dict)  # username -> active records in their batch
    moved: dict[str, int] = field(default_factory=dict)  # newcomer -> open items moved to them now


def _first_draw(study: Study, design: StudyDesign) -> None:
    """The whole assignment over the active annotators (``assignment.draw_assignment``)."""
    positives, negatives = _controls(study)
    active = list(study.annotators.filter(status=Annotator.Status.ACTIVE).select_related("user").order_by("pk"))
    real = list(study.items.filter(kind=ItemKind.REAL).order_by("position").values_list("pk", flat=True))
    try:
        queues = draw_assignment(
            real,
            positives,
            negatives,
            [a.pk for a in active],
            raters_per_item=design.raters_per_item,
            batch_size=design.batch_size,
            controls_per_batch=design.controls_per_batch,
            rng=seeded_rng(design.seed, "assignment"),
            met=(met := {a.pk: controls_met_elsewhere(a) for a in active}),
        )
    except ValueError as exc:
        who = ", ".join(a.user.get_username() for a in active if met.get(a.pk))
        hint = (
            f" ({who} met texts of some of its controls before, in another study's control or as real items "
            "they rated, and never gets those controls: lock a revision with more controls, e.g. a control "
            "pool or more controls per batch, or publish to other annotators)"
            if who
            else ""
        )
        raise ShiftlabError(f"cannot assign {study}: {exc}{hint}") from exc
    for annotator in active:
        _append(annotator, queues[annotator.pk])


def _newcomers_join(newcomers: list[Annotator], study: Study, design: StudyDesign) -> dict[str, int]:
    """Each newcomer takes open items from the most loaded annotators; username -> items moved."""
    moved: dict[str, int] = {}
    for newcomer in newcomers:
        others = study.annotators.filter(status=Annotator.Status.ACTIVE).exclude(pk=newcomer.pk)
        pending = {a.pk: open_items(a) for a in others.order_by("pk")}
        moves = rebalance(newcomer.pk, pending, rng=seeded_rng(design.seed, f"join-{newcomer.pk}"))
        by_source: dict[int, list[int]] = defaultdict(list)
        for item, source in moves:
            by_source[source].append(item)
        for source, items in by_source.items():
            _end(
                Assignment.objects.filter(annotator_id=source, study_item_id__in=items, active=True),
                f"moved to {newcomer.user.get_username()}, who joined later",
            )
        _give(newcomer, [item for item, _ in moves], design=design, label=f"join-queue-{newcomer.pk}")
        moved[newcomer.user.get_username()] = len(moves)
    return moved


def study_assign(*, study: Study, users: Sequence[AbstractBaseUser], actor: AbstractBaseUser | None) -> AssignResult:
    """Make sure each of ``users`` is an annotator of the (locked) study with a batch.

    The first call draws the whole assignment over every annotator; later calls add newcomers,
    each taking open items from the most loaded annotators until the work is fair (see
    ``assignment.rebalance``). Refuses, writing nothing, when fewer annotators than
    ``raters_per_item`` would rate, or when there are too few controls.
    """
    design = study_design(study)
    with transaction.atomic():
        study = Study.objects.select_for_update().get(pk=study.pk)
        if not study.is_locked:
            raise ShiftlabError(f"{study} is not locked: lock it before assigning annotators")
        known = {a.user_id: a for a in study.annotators.all()}
        for user in users:
            if user.pk not in known:
                known[user.pk] = Annotator.objects.create(study=study, user=user)
        newcomers = [known[u.pk] for u in users if not known[u.pk].assignments.exists()]
        first = not Assignment.objects.filter(annotator__study=study).exists()
        moved: dict[str, int] = {}
        if design.assignment == "pull":
            active = list(study.annotators.filter(status=Annotator.Status.ACTIVE).values_list("pk", flat=True))
            try:
                check_panel(active, design.raters_per_item, design.batch_size)
            except ValueError as exc:
                raise ShiftlabError(f"cannot assign {study}: {exc}") from exc
            _pull(study, design)  # newcomers simply start pulling: nothing needs to move
        elif first:
            _first_draw(study, design)
        else:
            moved = _newcomers_join(newcomers, study, design)
        queues = {
            a.user.get_username(): a.assignments.filter(active=True).count()
            for a in study.annotators.filter(status=Annotator.Status.ACTIVE).select_related("user")
        }
        if first or newcomers:
            audit_record(
                actor=actor,
                verb="study.assign" if first else "study.assign.join",
                obj=study,
                payload={"queues": queues, "moved": moved},
            )
    return AssignResult(drawn=first, queues=queues, moved=moved)


@dataclass(frozen=True)
class ReleaseResult:
    ended: int  # assignments taken from the annotator (controls included)
    given: dict[str, int]  # username -> items they received
    unplaced: int  # items nobody could take (every other annotator already holds them)

    def summary(self) -> str:
        given = ", ".join(f"{n} to {name}" for name, n in sorted(self.given.items())) or "none re-assigned"
        text = f"their items went to others: {given}"
        if self.unplaced:
            text += (
                f"; {self.unplaced} item{'s' if self.unplaced != 1 else ''} could not be re-assigned (add an annotator)"
            )
        return text


def annotator_release(
    *, annotator: Annotator, reason: str, actor: AbstractBaseUser | None, to: Annotator | None = None
) -> ReleaseResult:
    """Take the work of ``annotator`` (rejected: every real item, since their ratings no longer
    count; withdrawn: the items they have not submitted) and give it to ``to``, or else to the
    active annotators with the least open work who do not hold the item yet. Their assignments
    end with ``reason``; receivers get the items in new batches with their own controls."""
    study = annotator.study
    design = study_design(study)
    with transaction.atomic():
        Study.objects.select_for_update().get(pk=study.pk)
        annotator = Annotator.objects.select_related("user").get(pk=annotator.pk)
        if annotator.status == Annotator.Status.ACTIVE and to is None:
            raise ShiftlabError(f"{annotator} is still active: reject or withdraw them first")
        if annotator.status == Annotator.Status.REJECTED:
            items = list(
                annotator.assignments.filter(active=True, study_item__kind=ItemKind.REAL)
                .order_by("position")
                .values_list("study_item_id", flat=True)
            )
        else:
            items = open_items(annotator)
        ended = _end(annotator.assignments.filter(active=True), reason)
        if design.assignment == "pull":
            # The items go back to the pool; whoever has room (a replacement ``to`` included)
            # takes them now, the others when they finish their batches.
            study = Study.objects.get(pk=study.pk)
            counts = _pull(study, design)
            result = ReleaseResult(ended=ended, given=counts, unplaced=0)
            audit_record(
                actor=actor,
                verb="study.assignment.release",
                obj=annotator,
                payload={"reason": reason, "ended": ended, "given": counts, "unplaced": 0, "mode": "pull"},
            )
            return result
        active = study.annotators.filter(status=Annotator.Status.ACTIVE).exclude(pk=annotator.pk).order_by("pk")
        candidates = [to] if to is not None else list(active)
        holders: dict[int, set[int]] = defaultdict(set)
        # Anyone who ever held the item (an item moved away is not given back: one row per pair).
        for item, holder in Assignment.objects.filter(study_item_id__in=items).values_list(
            "study_item_id", "annotator_id"
        ):
            holders[item].add(holder)
        loads = {a.pk: len(open_items(a)) for a in candidates}
        given, unplaced = receivers(items, holders, loads, rng=seeded_rng(design.seed, f"release-{annotator.pk}"))
        counts: dict[str, int] = {}
        for receiver in candidates:
            mine = [item for item in items if given.get(item) == receiver.pk]
            if not mine:
                continue
            _give(receiver, mine, design=design, label=f"release-{annotator.pk}-{receiver.pk}")
            counts[receiver.user.get_username()] = len(mine)
        result = ReleaseResult(ended=ended, given=counts, unplaced=len(unplaced))
        audit_record(
            actor=actor,
            verb="study.assignment.release",
            obj=annotator,
            payload={"reason": reason, "ended": ended, "given": counts, "unplaced": len(unplaced)},
        )
    return result
