"""What a sync of Argilla responses changes in the stored rows (pure).

Study syncs (``Rating``) and baseline syncs (``BaselineAnswer``) share one skeleton: each resolves
the submitted answers of its Argilla dataset to its own row keys, then this diff says which rows
to create, which to update, how many stayed the same and which stored rows lost their submitted
answer (discarded, back to draft, deleted) and are withdrawn. Each sync applies it to its model.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Generic, TypeVar

K = TypeVar("K")  # a row's key, e.g. (item id, annotator id, question)
V = TypeVar("V")  # an answer's value
R = TypeVar("R")  # a stored row


@dataclass(frozen=True)
class SyncCounts:
    """What one sync did; the results of study and baseline syncs add what they ignored."""

    created: int = 0
    updated: int = 0
    withdrawn: int = 0
    unchanged: int = 0

    @property
    def changed(self) -> int:
        return self.created + self.updated + self.withdrawn

    def audit_payload(self) -> dict[str, int]:
        """The counts that are not zero, as the audit log records them."""
        return {name: n for name, n in asdict(self).items() if n}


@dataclass(frozen=True)
class SyncDiff(Generic[K, V, R]):
    create: tuple[tuple[K, V, Any], ...]  # (key, value, submitted at) of answers without a row
    update: tuple[tuple[R, V, Any], ...]  # (row, new value, submitted at) of changed answers
    withdraw: tuple[tuple[K, R], ...]  # rows whose answer is no longer submitted
    unchanged: int

    def counts(self) -> dict[str, int]:
        return {
            "created": len(self.create),
            "updated": len(self.update),
            "withdrawn": len(self.withdraw),
            "unchanged": self.unchanged,
        }


def sync_diff(
    submitted: Mapping[K, tuple[V, Any]],
    stored: Mapping[K, R],
    *,
    is_current: Callable[[R, V], bool],
    is_live: Callable[[R], bool] = lambda row: True,
) -> SyncDiff[K, V, R]:
    """Diff the submitted answers (key -> (value, submitted at)) against the stored rows.

    A key without a row is created; a row for which ``is_current(row, value)`` is False is
    updated; a stored row whose key is not submitted any more is withdrawn if ``is_live(row)``
    (a row already withdrawn stays as it is). Orders follow ``submitted`` and ``stored``.
    """
    create, update, unchanged = [], [], 0
    for key, (value, at) in submitted.items():
        row = stored.get(key)
        if row is None:
            create.append((key, value, at))
        elif is_current(row, value):
            unchanged += 1
        else:
            update.append((row, value, at))
    withdraw = tuple((key, row) for key, row in stored.items() if key not in submitted and is_live(row))
    return SyncDiff(create=tuple(create), update=tuple(update), withdraw=withdraw, unchanged=unchanged)
