"""Syncing the submitted responses of a validation study's Argilla datasets into ``Rating`` rows
(idempotent; see ``study_sync`` and docs/annotation.md)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from django.utils import timezone

from annotation.argilla import client as argilla
from annotation.argilla.client import argilla_connection
from annotation.models import Rating, RatingComment, RatingRevision, Study
from annotation.studies.answer_store import (
    STUDY_SYNC_LOCK,
    AnswerStore,
    Collected,
    Responses,
    invalid_entry,
    seen_at,
    sync_invalid_audit,
    sync_lock,
)
from annotation.studies.design_services import study_design
from annotation.studies.sync_diff import Response, SyncCounts, latest_responses, without_nul
from core.errors import ShiftlabError

COMMENT = "comment"  # the optional free-text question of every study dataset


def study_argilla_datasets(study: Study) -> list[UUID]:
    """The Argilla datasets holding the study's records: one per annotator (their own batch; not
    a frozen annotator's, deleted when their access was cut), and the single shared dataset of a
    study published before per-annotator batches existed."""
    own = study.annotators.exclude(argilla_dataset_id=None).exclude(argilla_deactivated=True)  # cut: deleted
    ids = [a.argilla_dataset_id for a in own.order_by("pk")]
    if study.argilla_dataset_id is not None:
        ids.append(study.argilla_dataset_id)
    return ids


@dataclass(frozen=True)
class SyncResult(SyncCounts):
    invalid: int = 0  # answers off their question's scale, or to questions the study lacks
    nul_stripped: int = 0  # comments stored without the NUL characters they held
    ignored_users: int = 0
    ignored_records: int = 0
    frozen_ignored: int = 0  # changes by withdrawn or rejected annotators after their cut


def _some(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _part(counts: Mapping[str, int], key: str, what: str) -> str:
    """``N <what>`` of records, with the ratings they hold when there are any."""
    ratings = counts.get(key, 0)
    held = f" ({_some(ratings, 'rating', 'ratings')})" if ratings else ""
    return f"{counts.get('records_' + key, 0)} {what}{held}"


def sync_summary(counts: Mapping[str, int]) -> str:
    """A sync's counts (``SyncResult`` as a dict, as ``Study.last_sync`` holds them) in words."""
    if "records_created" in counts:  # counted in records since issue 31: one record holds a rating per question
        parts = [
            _part(counts, "created", "records newly submitted"),
            _part(counts, "updated", "edited"),
            _part(counts, "withdrawn", "withdrawn"),
        ]
        text = f"{', '.join(parts)}; {_some(counts.get('unchanged', 0), 'rating', 'ratings')} unchanged"
    else:  # a sync stored before: it counted ratings only
        text = (
            f"{counts.get('created', 0)} new, {counts.get('updated', 0)} edited, "
            f"{counts.get('withdrawn', 0)} withdrawn ({counts.get('unchanged', 0)} unchanged)"
        )
    notes = []
    if counts.get("invalid"):
        what = _some(counts["invalid"], "answer", "answers")
        notes.append(f"{what} outside the question's scale ignored (stored ratings kept; see the audit log)")
    if counts.get("stale"):
        notes.append(f"{_some(counts['stale'], 'answer', 'answers')} older than the stored rating skipped")
    if counts.get("frozen_ignored"):
        notes.append(
            f"{_some(counts['frozen_ignored'], 'change', 'changes')} by frozen annotators ignored "
            "(made after they were withdrawn or rejected; their ratings kept as at the cut; see the audit log)"
        )
    if counts.get("nul_stripped"):
        notes.append(f"NUL characters removed from {_some(counts['nul_stripped'], 'comment', 'comments')}")
    ignored = [
        f"{counts[key]} {what}"
        for key, what in (
            ("ignored_users", "responses of users not in the study"),
            ("ignored_records", "responses to records not in the study"),
        )
        if counts.get(key)
    ]
    if ignored:
        notes.append(f"ignored {' and '.join(ignored)}")
    return "; ".join([text, *notes])


def _on_scale(value: Any, values: tuple[int, ...]) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value in values


def study_sync(*, study: Study, client=None) -> SyncResult:
    """Bring the submitted responses of the study's Argilla datasets into ``Rating`` rows.

    Idempotent: a rating exists once per (item, annotator, question); re-syncing unchanged
    responses writes nothing. Only submitted responses count: a response that is a draft or
    discarded, or was deleted, makes the matching ratings inactive. A changed value updates the
    rating, increments ``edits`` and adds a ``RatingRevision``. Nothing older than what is stored
    replaces it (``sync_diff``); values off the question's scale are counted and audited, never
    stored, and leave the stored rating as it was. Syncs of one study run one at a time
    (``sync_lock``). Withdrawn and rejected annotators are frozen: any change they make after
    ``frozen_at`` is ignored and audited (``_frozen_changes``), and once their access was cut
    their deleted dataset is not read; with every annotator cut, there is nothing to read.
    """
    study = Study.objects.get(pk=study.pk)
    datasets = study_argilla_datasets(study)
    cut_only = not datasets and study.annotators.filter(argilla_deactivated=True).exists()
    if study.published_at is None or not (datasets or cut_only):
        raise ShiftlabError(f"{study} is not published yet: publish it before syncing responses")
    scales = {q.name: q.values for q in study_design(study).questions}
    with sync_lock(STUDY_SYNC_LOCK, study.pk):
        started = timezone.now()  # a response missing from this fetch was gone by then
        with argilla_connection(client) as conn:
            rows = [row for dataset_id in datasets for row in argilla.responses_fetch(dataset_id, client=conn)]
        return _StudyStore(scales).store(study, latest_responses(rows), started)


class _StudyStore(AnswerStore):
    """A study's ratings: one per (item, annotator, question), with the annotator's comment kept
    beside them; frozen annotators' changes after their cut are left alone (``_frozen_changes``)."""

    model = Study
    revision_model = RatingRevision
    revision_of = "rating"
    result_type = SyncResult
    verb = "study.sync"

    def __init__(self, scales: Mapping[str, tuple[int, ...]]):
        self.scales = scales
        self.frozen_changes: list[dict[str, Any]] = []

    def stale(self, responses: Responses) -> int:
        return len([q for r in responses.values() if r.status == "submitted" for q in r.values if q != COMMENT])

    def answers(self, obj: Study):
        return Rating.objects.filter(study_item__study=obj)

    def key_of(self, row: Rating) -> tuple[int, int, str]:
        return (row.study_item_id, row.annotator_id, row.question)

    def record_of(self, key: tuple[int, int, str]) -> tuple[int, int]:
        return key[:2]  # each annotator answers an item in a record of their own dataset

    def collect(self, obj: Study, responses: Responses, existing: Mapping) -> Collected:
        items = {i.external_id: i for i in obj.items.all()}
        annotators = {a.argilla_user_id: a for a in obj.annotators.select_related("user")}
        pair_seen: dict[tuple[int, int], Any] = {}  # newest stored time of each item x annotator
        for (item_id, annotator_id, _), rating in existing.items():
            times = [t for t in (pair_seen.get((item_id, annotator_id)), seen_at(rating)) if t is not None]
            pair_seen[(item_id, annotator_id)] = max(times, default=None)
        comments = {(c.study_item_id, c.annotator_id): c for c in RatingComment.objects.filter(study_item__study=obj)}
        by_pair: dict[tuple[int, int], Response] = {}
        late: dict[tuple[int, int], Response] = {}  # responses of frozen annotators changed after their cut
        found = Collected(response_of=lambda key: by_pair.get(key[:2]))
        for (external_id, user_id), response in responses.items():
            item, annotator = items.get(external_id), annotators.get(user_id)
            if item is None:
                found.counts["ignored_records"] += 1
                continue
            if annotator is None:
                found.counts["ignored_users"] += 1
                continue
            pair = (item.pk, annotator.pk)
            if annotator.frozen_at is not None and response.at > annotator.frozen_at:
                late[pair] = response
                continue
            by_pair[pair] = response
            if response.status != "submitted":
                continue  # its ratings, if any, are withdrawn
            for question, value in response.values.items():
                if question == COMMENT:
                    text = str(value or "")
                    found.counts["nul_stripped"] += without_nul(text) != text
                    seen = pair_seen.get(pair)
                    if seen is None or response.at >= seen:  # an older response's comment is stale
                        _comment_store(comments, pair, without_nul(text))
                elif question in self.scales and _on_scale(value, self.scales[question]):
                    found.submitted[(*pair, question)] = (value, response.at)
                else:
                    found.held.add((*pair, question))
                    username = annotator.user.get_username()
                    found.invalid.append(invalid_entry(external_id, username, question, value, response.at))
        frozen = _frozen_changes(
            [a for a in annotators.values() if a.frozen_at is not None],
            items={i.pk: i.external_id for i in items.values()},
            scales=self.scales,
            existing=existing,
            comments=comments,
            late=late,
            answered=by_pair.keys(),
        )
        found.held |= frozen.held
        found.counts["frozen_ignored"] = len(frozen.changes)
        self.frozen_changes = frozen.changes
        return found

    def create(self, key: tuple[int, int, str], value: Any, at: Any) -> Rating:
        item_id, annotator_id, question = key
        return Rating.objects.create(
            study_item_id=item_id, annotator_id=annotator_id, question=question, value=value, submitted_at=at
        )

    def edited(self, row: Rating) -> list[str]:
        row.edits += 1
        return ["edits"]

    def record(self, obj: Study, result: SyncCounts, started: datetime) -> None:
        obj.synced_at, obj.last_sync = started, asdict(result)
        fields = ["synced_at", "last_sync"]
        if result.changed:
            obj.ratings_changed_at = timezone.now()
            fields.append("ratings_changed_at")
        obj.save(update_fields=fields)

    def audit_left_alone(self, obj: Study, collected: Collected) -> None:
        if collected.invalid:
            sync_invalid_audit(obj=obj, verb="study.sync.invalid", found=collected.invalid)
        if self.frozen_changes:
            sync_invalid_audit(obj=obj, verb="study.sync.frozen", found=self.frozen_changes, count="frozen_ignored")


@dataclass(frozen=True)
class FrozenChanges:
    held: set[tuple[int, int, str]]  # stored ratings of frozen annotators: they stay as they are
    changes: list[dict[str, Any]]  # what they changed after their cut, as the audit log names it


def _frozen_changes(
    frozen: list[Any],
    *,
    items: Mapping[int, str],
    scales: Mapping[str, tuple[int, ...]],
    existing: Mapping[tuple[int, int, str], Rating],
    comments: Mapping[tuple[int, int], RatingComment],
    late: Mapping[tuple[int, int], Response],
    answered: Collection[tuple[int, int]],
) -> FrozenChanges:
    """What the sync must leave alone for frozen (withdrawn or rejected) annotators: their ratings
    keep the state they had at the cut. Their responses changed after ``frozen_at`` (``late``:
    edited, discarded, new) and their stored ratings whose response is gone (deleted by them; not
    once the cut deleted their responses) are changes to ignore; each
    differing answer (value, withdrawal or comment) is one entry for the audit log, timed by
    Argilla's ``updated_at`` (a deletion by the cut time), so that re-syncing names it once."""
    held: set[tuple[int, int, str]] = set()
    changes: list[dict[str, Any]] = []
    by_pk = {a.pk: a for a in frozen}
    questions = [*scales, COMMENT]
    for (item_id, annotator_id, question), rating in existing.items():
        annotator, pair = by_pk.get(annotator_id), (item_id, annotator_id)
        if annotator is None or pair in answered:  # answered before the cut: synced as usual
            continue
        held.add((item_id, annotator_id, question))
        fetched = not annotator.argilla_deactivated  # once cut, their responses are gone from Argilla
        if pair not in late and fetched and rating.active:
            entry = invalid_entry(items[item_id], annotator.user.get_username(), question, None, annotator.frozen_at)
            changes.append({**entry, "rating": rating.pk, "change": "deleted"})
    for (item_id, annotator_id), response in late.items():
        annotator = by_pk[annotator_id]
        values = response.values if response.status == "submitted" else {}
        for question in questions:
            new = values.get(question)
            if question == COMMENT:
                stored = comments.get((item_id, annotator_id))
                changed = str(new or "") != (stored.text if stored is not None else "")
                rating_id = None
            else:
                rating = existing.get((item_id, annotator_id, question))
                current = rating.value if rating is not None and rating.active else None
                changed, rating_id = new != current, (rating.pk if rating is not None else None)
            if changed:
                entry = invalid_entry(items[item_id], annotator.user.get_username(), question, new, response.at)
                changes.append({**entry, "rating": rating_id, "change": response.status})
    return FrozenChanges(held=held, changes=changes)


def _comment_store(comments: dict[tuple[int, int], RatingComment], pair: tuple[int, int], text: str) -> None:
    current = comments.get(pair)
    if current is None:
        comments[pair] = RatingComment.objects.create(study_item_id=pair[0], annotator_id=pair[1], text=text)
    elif current.text != text:
        current.text = text
        current.save(update_fields=["text", "updated_at"])
