"""Value types of the Argilla adapter: the fields, questions and metadata of a dataset, the records
sent and the responses and webhooks read back, as ``client`` sends and returns them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal
from uuid import UUID

MetadataKind = Literal["terms", "integer", "float"]


@dataclass(frozen=True)
class TextField:
    """A text shown to annotators (e.g. the original and the transformed sentence)."""

    name: str
    title: str


@dataclass(frozen=True)
class RatingQuestion:
    """A required rating on a fixed scale, e.g. quality 1-5."""

    name: str
    title: str
    values: tuple[int, ...]
    description: str = ""


@dataclass(frozen=True)
class LabelQuestion:
    """A required choice of exactly one label; ``labels`` are (value, text shown) pairs."""

    name: str
    title: str
    labels: tuple[tuple[str, str], ...]
    description: str = ""


@dataclass(frozen=True)
class TextQuestion:
    """A free-text answer (e.g. a group name, or an optional comment)."""

    name: str
    title: str
    description: str = ""
    required: bool = True


Question = RatingQuestion | LabelQuestion | TextQuestion


@dataclass(frozen=True)
class MetadataProperty:
    """Metadata kept on each record for Shiftlab (item kind, control status ...).

    Always hidden from annotators: gold/control status must never influence a rating.
    """

    name: str
    kind: MetadataKind = "terms"
    title: str = ""


@dataclass(frozen=True)
class RecordIn:
    """One item to rate: ``external_id`` is Shiftlab's id, it comes back with each response."""

    external_id: str
    fields: Mapping[str, str]
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ResponseRow:
    """One answer of one user to one question of one record.

    A response without values (typically a discarded one) yields a single row with ``question``
    and ``value`` set to ``None``, so that every response is reported with its status.
    """

    record_external_id: str
    user_id: UUID
    question: str | None
    value: Any
    status: str
    updated_at: datetime


@dataclass(frozen=True)
class Webhook:
    """A webhook of the Argilla server: it POSTs the listed ``events`` to ``url``, signed with ``secret``."""

    id: UUID
    url: str
    events: tuple[str, ...]
    enabled: bool
    secret: str = field(repr=False)
    description: str = ""
