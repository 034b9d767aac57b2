"""Checking a webhook delivery signed as Standard Webhooks says (https://www.standardwebhooks.com),
which Argilla 2.8 follows, and reading the event it carries. Pure: no Django, no I/O.

A delivery has three headers: ``webhook-id`` (unique per delivery attempt in Argilla), ``webhook-timestamp``
(Unix seconds) and ``webhook-signature``, a space-separated list of ``v1,<base64>`` entries. The
signature is HMAC-SHA256, keyed with the base64-decoded secret (an optional ``whsec_`` prefix is
dropped first), over ``{id}.{timestamp}.{body}``. A delivery is accepted when one ``v1`` entry
matches (compared in constant time) and its timestamp is within ``TOLERANCE_SECONDS`` of now.
Refusing a webhook-id seen before (a replay within the tolerance) needs memory, so it is the
caller's job.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

TOLERANCE_SECONDS = 300
SECRET_PREFIX = "whsec_"
MAX_MESSAGE_ID_CHARS = 256


class Refusal(StrEnum):
    """Why a delivery was refused: ``MISSING`` and ``MALFORMED`` are bad requests; ``STALE`` and
    ``SIGNATURE`` mean the sender could not prove it holds the secret now."""

    MISSING = "missing"
    MALFORMED = "malformed"
    STALE = "stale"
    SIGNATURE = "signature"


@dataclass(frozen=True)
class Verification:
    """The outcome of ``webhook_verify``: ``refusal`` is None for an authentic delivery."""

    message_id: str
    refusal: Refusal | None = None
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.refusal is None


@dataclass(frozen=True)
class WebhookEvent:
    """An Argilla event: its type (``response.created``, ``ping`` ...) and, for response events,
    the id of the dataset whose record was answered."""

    type: str
    dataset_id: str | None = None


def secret_key(secret: str) -> bytes:
    """The HMAC key of a Standard Webhooks secret (base64, ``whsec_`` prefix optional).

    Raises ``ValueError`` for a secret that is not base64 or is empty.
    """
    encoded = secret.removeprefix(SECRET_PREFIX).rstrip("=")
    try:
        # Unpadded base64 is accepted, as the reference libraries accept it.
        key = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
    except binascii.Error as exc:
        raise ValueError(f"webhook secret is not base64: {exc}") from None
    if not key:
        raise ValueError("webhook secret is empty")
    return key


def webhook_sign(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    """The ``v1,<base64>`` signature of a delivery."""
    signed = b".".join([message_id.encode(), str(timestamp).encode(), body])
    digest = hmac.new(secret_key(secret), signed, hashlib.sha256).digest()
    return f"v1,{base64.b64encode(digest).decode()}"


def _signatures(header: str) -> list[bytes]:
    """The decoded ``v1`` entries of a ``webhook-signature`` header (other versions and undecodable
    entries are skipped)."""
    found = []
    for entry in header.split():
        version, _, encoded = entry.partition(",")
        if version != "v1":
            continue
        try:
            found.append(base64.b64decode(encoded, validate=True))
        except binascii.Error:
            continue
    return found


def webhook_verify(
    body: bytes,
    headers: Mapping[str, str],
    *,
    secrets: Sequence[str],
    now: float,
    tolerance: int = TOLERANCE_SECONDS,
) -> Verification:
    """Check a delivery's signature and timestamp against each of ``secrets`` (those of the
    webhooks the receiver knows). ``headers`` may use any case; ``now`` is Unix seconds."""
    lower = {key.lower(): value for key, value in headers.items()}
    message_id = lower.get("webhook-id", "")
    raw_timestamp = lower.get("webhook-timestamp", "")
    header = lower.get("webhook-signature", "")
    if not (message_id and raw_timestamp and header):
        missing = [h for h in ("webhook-id", "webhook-timestamp", "webhook-signature") if not lower.get(h)]
        return Verification(message_id, Refusal.MISSING, f"missing header {', '.join(missing)}")
    if len(message_id) > MAX_MESSAGE_ID_CHARS:
        return Verification("", Refusal.MALFORMED, f"webhook-id longer than {MAX_MESSAGE_ID_CHARS} characters")
    if not raw_timestamp.isascii() or not raw_timestamp.isdigit():
        return Verification(message_id, Refusal.MALFORMED, "webhook-timestamp is not whole Unix seconds")
    timestamp = int(raw_timestamp)
    if timestamp < now - tolerance:
        return Verification(message_id, Refusal.STALE, f"webhook-timestamp more than {tolerance} s old")
    if timestamp > now + tolerance:
        return Verification(message_id, Refusal.STALE, f"webhook-timestamp more than {tolerance} s ahead")
    given = _signatures(header)
    for secret in secrets:
        expected = base64.b64decode(webhook_sign(secret, message_id, timestamp, body).partition(",")[2])
        # Every entry is compared, in constant time, even after a match.
        if sum(hmac.compare_digest(expected, signature) for signature in given):
            return Verification(message_id)
    return Verification(message_id, Refusal.SIGNATURE, "no valid signature")


def webhook_event(body: bytes) -> WebhookEvent:
    """The type of an Argilla event and, for response events, the answered record's dataset id.

    Raises ``ValueError`` for a body that is not an event (not JSON, no ``type``).
    """
    try:
        event = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"the body is not JSON: {exc}") from None
    if not isinstance(event, dict) or not isinstance(event.get("type"), str):
        raise ValueError("the body is not an event: it has no 'type'")
    dataset_id = None
    if event["type"].startswith("response."):
        try:
            dataset_id = str(event["data"]["record"]["dataset"]["id"])
        except (KeyError, TypeError):
            raise ValueError(f"a {event['type']} event without data.record.dataset.id") from None
    return WebhookEvent(type=event["type"], dataset_id=dataset_id)
