"""What a sync of Argilla responses changes in the stored rows (pure).

Study syncs (``Rating``) and baseline syncs (``BaselineAnswer``) share one skeleton: each resolves
the submitted answers of its Argilla datasets to its own row keys, then this diff says which rows
to create, which to update, how many stayed the same and which stored rows lost their submitted
answer (discarded, back to draft, deleted) and are withdrawn. Each sync applies it to its model.

Time decides between two observations of one answer: a sync never replaces what it stored with
something Argilla said earlier (an overlapping sync that fetched before the last edit, say).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Generic, TypeVar

K = TypeVar("K")  # a row's key, e.g. (item id, annotator id, question)
V = TypeVar("V")  # an answer's value
R = TypeVar("R")  # a stored row

NUL = "\x00"


@dataclass(frozen=True)
class SyncCounts:
    """What one sync did; the results of study and baseline syncs add what they ignored."""

    created: int = 0
    updated: int = 0
    withdrawn: int = 0
    unchanged: int = 0
    stale: int = 0  # answers and withdrawals older than what is stored: skipped
    # The Argilla records behind those answers (a record holds one answer per question asked):
    # what a researcher counts, where the fields above count stored answers.
    records_created: int = 0
    records_updated: int = 0
    records_withdrawn: int = 0

    @property
    def changed(self) -> int:
        return self.created + self.updated + self.withdrawn

    def audit_payload(self) -> dict[str, int]:
        """The counts that are not zero, as the audit log records them."""
        return {name: n for name, n in asdict(self).items() if n}


@dataclass(frozen=True)
class Response:
    """One user's response to one record: its status, Argilla's ``updated_at`` and its values."""

    status: str
    at: Any
    values: dict[str, Any] = field(default_factory=dict)


def latest_responses(rows: Iterable[Any]) -> dict[tuple[str, Any], Response]:
    """Group fetched answer rows (``argilla.client.ResponseRow``) into one response per (record
    external id, user id). When one record appears in several datasets of a study, the newest
    response wins; rows of older ones are dropped."""
    found: dict[tuple[str, Any], Response] = {}
    for row in rows:
        key = (row.record_external_id, row.user_id)
        response = found.get(key)
        if response is None or row.updated_at > response.at:
            response = found[key] = Response(row.status, row.updated_at)
        elif row.updated_at < response.at:
            continue
        if row.question is not None:
            response.values[row.question] = row.value
    return found


def without_nul(text: str) -> str:
    """``text`` with its NUL characters removed: PostgreSQL refuses them in text and JSON, and
    nobody types one on purpose."""
    return text.replace(NUL, "")


@dataclass(frozen=True)
class SyncDiff(Generic[K, V, R]):
    create: tuple[tuple[K, V, Any], ...]  # (key, value, submitted at) of answers without a row
    update: tuple[tuple[R, V, Any], ...]  # (row, new value, submitted at) of changed answers
    withdraw: tuple[tuple[K, R, Any], ...]  # (key, row, withdrawn at) of rows no longer submitted
    unchanged: int
    # (row, submitted at) of unchanged answers that Argilla saw again later (re-submitted with the
    # same value, or another part of the response edited): the row's time moves on, nothing else.
    touch: tuple[tuple[R, Any], ...] = ()
    stale: int = 0

    def counts(self, key_of: Callable[[R], K] | None = None, record_of: Callable[[K], Any] | None = None):
        """The answers each part holds and, where ``record_of(key)`` names the record an answer
        belongs to (a row's key is ``key_of(row)``), the records; else each answer is a record."""
        answers = {"created": len(self.create), "updated": len(self.update), "withdrawn": len(self.withdraw)}
        if record_of is None or key_of is None:
            records = answers
        else:
            records = {
                "created": len({record_of(key) for key, _, _ in self.create}),
                "updated": len({record_of(key_of(row)) for row, _, _ in self.update}),
                "withdrawn": len({record_of(key) for key, _, _ in self.withdraw}),
            }
        return {
            **answers,
            "unchanged": self.unchanged,
            "stale": self.stale,
            **{f"records_{part}": n for part, n in records.items()},
        }


def _older(at: Any, than: Any) -> bool:
    return at is not None and than is not None and at < than


def sync_diff(
    submitted: Mapping[K, tuple[V, Any]],
    stored: Mapping[K, R],
    *,
    is_current: Callable[[R, V], bool],
    is_live: Callable[[R], bool] = lambda row: True,
    seen_at: Callable[[R], Any] = lambda row: None,
    withdrawn_at: Callable[[K], Any] = lambda key: None,
    held: Collection[K] = frozenset(),
) -> SyncDiff[K, V, R]:
    """Diff the submitted answers (key -> (value, submitted at)) against the stored rows.

    A key without a row is created; a row for which ``is_current(row, value)`` is False is
    updated; a stored row whose key is not submitted any more is withdrawn if ``is_live(row)``
    (a row already withdrawn stays as it is). Orders follow ``submitted`` and ``stored``.

    Staleness: ``seen_at(row)`` is the time of the newest state stored for the row (None:
    unknown). An answer submitted before it, or a withdrawal that happened before it
    (``withdrawn_at(key)``; for a response that is missing altogether, the time its fetch
    started), is older than what is stored: it is skipped and counted as ``stale``. Keys in
    ``held`` have an answer that could not be read (a value off the question's scale): their
    rows stay exactly as they are.
    """
    create, update, touch, unchanged, stale = [], [], [], 0, 0
    for key, (value, at) in submitted.items():
        row = stored.get(key)
        if row is None:
            create.append((key, value, at))
        elif is_current(row, value):
            unchanged += 1
            if _older(seen_at(row), at):
                touch.append((row, at))
        elif _older(at, seen_at(row)):
            stale += 1
        else:
            update.append((row, value, at))
    withdraw = []
    for key, row in stored.items():
        if key in submitted or key in held or not is_live(row):
            continue
        at = withdrawn_at(key)
        if _older(at, seen_at(row)):
            stale += 1
        else:
            withdraw.append((key, row, at))
    return SyncDiff(
        create=tuple(create),
        update=tuple(update),
        withdraw=tuple(withdraw),
        unchanged=unchanged,
        touch=tuple(touch),
        stale=stale,
    )
