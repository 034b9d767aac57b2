"""The one skeleton that stores a sync's fetched Argilla responses: validation studies' ``Rating``
rows (``sync_services``) and human baselines' ``BaselineAnswer`` rows
(``baselines.baseline_sync_services``) go through ``AnswerStore.store``.

In one transaction, with the synced row locked: a fetch older than the stored one writes nothing
(its answers count as stale); else the subclass resolves the responses to its own row keys
(``collect``), ``sync_diff`` says what changes, and the skeleton creates, updates, touches and
withdraws the rows, each change with its revision, then records the sync on the row and audits
it (its changes, and the invalid answers it left alone).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar

from django.db import connection, transaction
from django.db.models import Max, Model

from annotation.studies.sync_diff import Response, SyncCounts, sync_diff
from core.selectors import audit_event_list
from core.services import audit_record

Responses = Mapping[tuple[str, Any], Response]
# Keys of PostgreSQL advisory locks (namespace, object id): one sync per study at a time.
STUDY_SYNC_LOCK = 0x53594E43
BASELINE_SYNC_LOCK = 0x42534E43
INVALID_LISTED = 200  # invalid answers named in one audit event; the rest in the next sync's
RAW_VALUE_CHARS = 80


@dataclass
class Collected:
    """The responses of one sync resolved to row keys: ``submitted`` (key -> (value, at)),
    ``held`` (stored rows the sync must leave as they are), ``response_of`` (the response a row
    key came from, for the time and status of a withdrawal), the ``invalid`` answers for the audit
    log, and extra ``counts`` of the sync's result."""

    submitted: dict[Hashable, tuple[Any, Any]] = field(default_factory=dict)
    held: set[Hashable] = field(default_factory=set)
    response_of: Callable[[Hashable], Response | None] = lambda key: None
    invalid: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    audit_extra: dict[str, Any] = field(default_factory=dict)


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


def seen_at(row: Any) -> Any:
    """The Argilla time of the newest state stored for a row annotated with ``last_revision_at``:
    its submission, or a later withdrawal."""
    times = [t for t in (row.submitted_at, row.last_revision_at) if t is not None]
    return max(times) if times else None


def fetch_outdated(started: Any, synced_at: Any) -> bool:
    """Whether a fetch started before the one whose result is stored (``synced_at``): an
    overlapping sync that fetched later has written already, and everything this fetch saw is at
    best as new as that. Its sync writes nothing (its answers count as stale); the next one
    brings whatever changed since."""
    return synced_at is not None and started < synced_at


class AnswerStore:
    """What one kind of sync stores: its synced row (``model``), its answer rows and their
    revisions. Subclasses say how responses become row keys and what else a sync records."""

    model: ClassVar[type[Model]]  # the synced row: a study, a baseline study
    revision_model: ClassVar[type[Model]]
    revision_of: ClassVar[str]  # the revision's foreign key to its answer
    result_type: ClassVar[type[SyncCounts]]
    verb: ClassVar[str]  # of the audit event of a sync that changed something

    def store(self, obj: Model, responses: Responses, started: datetime) -> SyncCounts:
        with transaction.atomic():
            obj = self.model.objects.select_for_update().get(pk=obj.pk)
            self.refuse(obj)
            if fetch_outdated(started, obj.synced_at):
                return self.result_type(stale=self.stale(responses))
            existing = {
                self.key_of(row): row
                for row in self.answers(obj).annotate(last_revision_at=Max("revisions__argilla_updated_at"))
            }
            collected = self.collect(obj, responses, existing)

            def withdrawn_at(key: Hashable) -> Any:
                response = collected.response_of(key)
                return response.at if response is not None else started

            diff = sync_diff(
                collected.submitted,
                existing,
                is_current=lambda row, value: row.active and row.value == value,
                is_live=lambda row: row.active,
                seen_at=seen_at,
                withdrawn_at=withdrawn_at,
                held=collected.held,
            )
            self._apply(diff, collected)
            counts = diff.counts(key_of=self.key_of, record_of=self.record_of)
            result = self.result_type(**counts, invalid=len(collected.invalid), **collected.counts)
            self.record(obj, result, started)
            if result.changed:
                payload = {**result.audit_payload(), **collected.audit_extra}
                audit_record(actor=None, verb=self.verb, obj=obj, payload=payload)
            self.audit_left_alone(obj, collected)
        return result

    def _apply(self, diff: Any, collected: Collected) -> None:
        for key, value, at in diff.create:
            row = self.create(key, value, at)
            self._revise(row, value, "submitted", at)
        for row, value, at in diff.update:
            row.value, row.active, row.submitted_at = value, True, at
            row.save(update_fields=["value", "active", "submitted_at", *self.edited(row), "updated_at"])
            self._revise(row, value, "submitted", at)
        for row, at in diff.touch:
            row.submitted_at = at
            row.save(update_fields=["submitted_at", "updated_at"])
        for key, row, at in diff.withdraw:
            response = collected.response_of(key)
            row.active = False
            row.save(update_fields=["active", "updated_at"])
            # A missing response's revision keeps the time its fetch started: the response was gone
            # by then, and an older sync must not bring the row back.
            self._revise(row, None, response.status if response is not None else "missing", at)

    def _revise(self, row: Model, value: Any, status: str, at: Any) -> None:
        self.revision_model.objects.create(**{self.revision_of: row}, value=value, status=status, argilla_updated_at=at)

    # --- what each kind of sync says ---

    def refuse(self, obj: Model) -> None:
        """Raise if ``obj`` (locked) takes no sync now."""

    def stale(self, responses: Responses) -> int:
        """How many answers an outdated fetch brought."""
        raise NotImplementedError

    def answers(self, obj: Model) -> Any:
        """The stored answer rows of ``obj`` (a queryset)."""
        raise NotImplementedError

    def key_of(self, row: Model) -> Hashable:
        raise NotImplementedError

    def record_of(self, key: Hashable) -> Hashable:
        """The Argilla record (one annotator's answer to one item) an answer row's key belongs to."""
        return key

    def collect(self, obj: Model, responses: Responses, existing: Mapping[Hashable, Model]) -> Collected:
        raise NotImplementedError

    def create(self, key: Hashable, value: Any, at: Any) -> Model:
        raise NotImplementedError

    def edited(self, row: Model) -> list[str]:
        """Fields besides value, active and time that an update changes (it may change them here)."""
        return []

    def record(self, obj: Model, result: SyncCounts, started: datetime) -> None:
        """Record the sync on ``obj``: at least the start of its fetch."""
        obj.synced_at = started
        obj.save(update_fields=["synced_at"])

    def audit_left_alone(self, obj: Model, collected: Collected) -> None:
        """Audit the answers the sync did not store."""
        raise NotImplementedError
