"""Syncing the submitted responses of a validation study's Argilla datasets into ``Rating`` rows
(idempotent; see ``study_sync`` and docs/annotation.md)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from django.db import connection, transaction
from django.db.models import Max, Model
from django.utils import timezone

from annotation.argilla import client as argilla
from annotation.argilla.client import argilla_connection
from annotation.models import Rating, RatingComment, RatingRevision, Study
from annotation.publishing.sync_diff import Response, SyncCounts, latest_responses, sync_diff, without_nul
from annotation.studies.design_services import study_design
from core.errors import ShiftlabError
from core.selectors import audit_event_list
from core.services import audit_record

COMMENT = "comment"  # the optional free-text question of every study dataset
# Keys of PostgreSQL advisory locks (namespace, object id): one sync per study at a time.
STUDY_SYNC_LOCK = 0x53594E43
BASELINE_SYNC_LOCK = 0x42534E43
INVALID_LISTED = 200  # invalid answers named in one audit event; the rest in the next sync's
RAW_VALUE_CHARS = 80


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


def sync_summary(counts: Mapping[str, int]) -> str:
    """A sync's counts (``SyncResult`` as a dict, as ``Study.last_sync`` holds them) in words."""
    text = (
        f"{counts.get('created', 0)} new, {counts.get('updated', 0)} edited, {counts.get('withdrawn', 0)} withdrawn "
        f"({counts.get('unchanged', 0)} unchanged)"
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


@contextmanager
def sync_lock(namespace: int, pk: int) -> Iterator[None]:
    """Serialise the syncs of one study, from the fetch to the last write.

    On PostgreSQL: a transaction-level advisory lock, held until the transaction it opens ends, so
    a second sync waits and then fetches what the first one left behind (an id colliding modulo
    2**31 only makes two syncs wait for each other). SQLite serialises writes by itself, and a
    write transaction held open through a fetch would block every other writer: there the syncs'
    fetches may overlap, and the staleness rule of ``sync_diff`` keeps an older answer from winning.
    """
    if connection.vendor != "postgresql":
        yield
        return
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s::integer, %s::integer)", [namespace, pk % 2**31])
        yield


def sync_invalid_audit(*, obj: Model, verb: str, found: list[dict[str, Any]], count: str = "invalid") -> None:
    """Audit the answers of one sync that it did not store (``found``: item, annotator, question,
    value, at; ``count`` names their number in the payload) that no earlier ``verb`` event of
    ``obj`` named, so that re-syncing reports each one once."""
    named = {
        (entry["item"], entry["annotator"], entry["question"], entry["at"])
        for payload in audit_event_list(object_type=obj._meta.label_lower, object_id=str(obj.pk))
        .filter(verb=verb)
        .values_list("payload", flat=True)
        for entry in payload.get("answers", ())
    }
    new = [e for e in found if (e["item"], e["annotator"], e["question"], e["at"]) not in named]
    if new:
        payload = {count: len(found), "answers": new[:INVALID_LISTED], "not_listed": len(new[INVALID_LISTED:])}
        audit_record(actor=None, verb=verb, obj=obj, payload=payload)


def invalid_entry(item: str, annotator: str, question: str, value: Any, at: Any) -> dict[str, Any]:
    """An invalid answer as the audit log keeps it: the raw value as ``repr``, shortened (which
    also escapes NUL characters, which PostgreSQL would refuse in the JSON payload)."""
    raw = repr(value)
    raw = raw if len(raw) <= RAW_VALUE_CHARS else raw[: RAW_VALUE_CHARS - 1] + "…"
    return {"item": item, "annotator": annotator, "question": question, "value": raw, "at": at.isoformat()}


def fetch_outdated(started: Any, synced_at: Any) -> bool:
    """Whether a fetch started before the one whose result is stored (``synced_at``): an
    overlapping sync that fetched later has written already, and everything this fetch saw is at
    best as new as that. Its sync writes nothing (its answers count as stale); the next one
    brings whatever changed since."""
    return synced_at is not None and started < synced_at


def seen_at(row: Any) -> Any:
    """The Argilla time of the newest state stored for a row annotated with ``last_revision_at``:
    its submission, or a later withdrawal."""
    times = [t for t in (row.submitted_at, row.last_revision_at) if t is not None]
    return max(times) if times else None


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
        return _study_store(study, scales, latest_responses(rows), started)


def _study_store(
    study: Study,
    scales: Mapping[str, tuple[int, ...]],
    responses: Mapping[tuple[str, Any], Response],
    started: datetime,
) -> SyncResult:
    counts: dict[str, int] = defaultdict(int)
    invalid: list[dict[str, Any]] = []
    with transaction.atomic():
        study = Study.objects.select_for_update().get(pk=study.pk)
        if fetch_outdated(started, study.synced_at):
            fetched = [q for r in responses.values() if r.status == "submitted" for q in r.values if q != COMMENT]
            return SyncResult(stale=len(fetched))
        items = {i.external_id: i for i in study.items.all()}
        annotators = {a.argilla_user_id: a for a in study.annotators.select_related("user")}
        existing = {
            (r.study_item_id, r.annotator_id, r.question): r
            for r in Rating.objects.filter(study_item__study=study).annotate(
                last_revision_at=Max("revisions__argilla_updated_at")
            )
        }
        pair_seen: dict[tuple[int, int], Any] = {}  # newest stored time of each item x annotator
        for (item_id, annotator_id, _), rating in existing.items():
            times = [t for t in (pair_seen.get((item_id, annotator_id)), seen_at(rating)) if t is not None]
            pair_seen[(item_id, annotator_id)] = max(times, default=None)
        comments = {(c.study_item_id, c.annotator_id): c for c in RatingComment.objects.filter(study_item__study=study)}
        by_pair: dict[tuple[int, int], Response] = {}
        late: dict[tuple[int, int], Response] = {}  # responses of frozen annotators changed after their cut
        submitted: dict[tuple[int, int, str], tuple[int, Any]] = {}
        held: set[tuple[int, int, str]] = set()
        for (external_id, user_id), response in responses.items():
            item, annotator = items.get(external_id), annotators.get(user_id)
            if item is None:
                counts["ignored_records"] += 1
                continue
            if annotator is None:
                counts["ignored_users"] += 1
                continue
            pair = (item.pk, annotator.pk)
            if annotator.frozen_at is not None and response.at > annotator.frozen_at:
                late[pair] = response
                continue
            by_pair[pair] = response
            if response.status != "submitted":
                continue  # its ratings, if any, are withdrawn below
            for question, value in response.values.items():
                if question == COMMENT:
                    text = str(value or "")
                    counts["nul_stripped"] += without_nul(text) != text
                    seen = pair_seen.get(pair)
                    if seen is None or response.at >= seen:  # an older response's comment is stale
                        _comment_store(comments, pair, without_nul(text))
                elif question in scales and _on_scale(value, scales[question]):
                    submitted[(*pair, question)] = (value, response.at)
                else:
                    held.add((*pair, question))
                    username = annotator.user.get_username()
                    invalid.append(invalid_entry(external_id, username, question, value, response.at))

        frozen = _frozen_changes(
            [a for a in annotators.values() if a.frozen_at is not None],
            items={i.pk: i.external_id for i in items.values()},
            scales=scales,
            existing=existing,
            comments=comments,
            late=late,
            answered=by_pair.keys(),
        )
        held |= frozen.held
        counts["frozen_ignored"] = len(frozen.changes)

        def withdrawn_at(key: tuple[int, int, str]) -> Any:
            response = by_pair.get(key[:2])
            return response.at if response is not None else started

        diff = sync_diff(
            submitted,
            existing,
            is_current=lambda rating, value: rating.active and rating.value == value,
            is_live=lambda rating: rating.active,
            seen_at=seen_at,
            withdrawn_at=withdrawn_at,
            held=held,
        )
        for (item_id, annotator_id, question), value, at in diff.create:
            rating = Rating.objects.create(
                study_item_id=item_id, annotator_id=annotator_id, question=question, value=value, submitted_at=at
            )
            RatingRevision.objects.create(rating=rating, value=value, status="submitted", argilla_updated_at=at)
        for rating, value, at in diff.update:
            rating.edits += 1
            rating.value, rating.active, rating.submitted_at = value, True, at
            rating.save(update_fields=["value", "active", "submitted_at", "edits", "updated_at"])
            RatingRevision.objects.create(rating=rating, value=value, status="submitted", argilla_updated_at=at)
        for rating, at in diff.touch:
            rating.submitted_at = at
            rating.save(update_fields=["submitted_at", "updated_at"])
        for key, rating, at in diff.withdraw:
            response = by_pair.get(key[:2])
            rating.active = False
            rating.save(update_fields=["active", "updated_at"])
            # A missing response's revision keeps the time its fetch started: the response was gone
            # by then, and an older sync must not bring the rating back.
            status = response.status if response is not None else "missing"
            RatingRevision.objects.create(rating=rating, value=None, status=status, argilla_updated_at=at)
        result = SyncResult(**diff.counts(), invalid=len(invalid), **counts)
        study.synced_at, study.last_sync = started, asdict(result)
        fields = ["synced_at", "last_sync"]
        if result.changed:
            study.ratings_changed_at = timezone.now()
            fields.append("ratings_changed_at")
        study.save(update_fields=fields)
        if result.changed:
            audit_record(actor=None, verb="study.sync", obj=study, payload=result.audit_payload())
        if invalid:
            sync_invalid_audit(obj=study, verb="study.sync.invalid", found=invalid)
        if frozen.changes:
            sync_invalid_audit(obj=study, verb="study.sync.frozen", found=frozen.changes, count="frozen_ignored")
    return result


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
