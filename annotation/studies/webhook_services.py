"""Live responses: the Argilla webhook of this deployment and what its deliveries do.

Publishing a study registers (or repairs) one webhook in Argilla for the response events, pointing
at ``SHIFTLAB_PUBLIC_URL`` + the receiver's path; its id and secret are kept in ``ArgillaWebhook``.
A verified delivery about a study's dataset queues that study's sync (``annotation.sync_study``,
idempotent). The sync of the study page, the API and ``manage.py study sync`` stays the fallback:
without a public URL, when registration fails or a delivery is lost, the next sync brings the
responses all the same.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal
from uuid import UUID

import httpx
from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.core.cache import cache
from django.db import transaction
from django.urls import reverse

from annotation.argilla import ArgillaError
from annotation.argilla import client as argilla
from annotation.models import Annotator, ArgillaWebhook, Study
from annotation.studies.webhooks import TOLERANCE_SECONDS, Refusal, webhook_event, webhook_verify
from core.services import audit_record
from core.task_policy import task_named

logger = logging.getLogger(__name__)

RESPONSE_EVENTS = ("response.created", "response.updated", "response.deleted")
DESCRIPTION = "Shiftlab: live responses of validation studies"
# Deliveries about one study within this many seconds share one sync, queued to start after them.
SYNC_DELAY_SECONDS = 3
_SEEN = "argilla-webhook:seen:"
_QUEUED = "argilla-webhook:sync-queued:"
_IGNORED = "argilla-webhook:ignored"
SYNC_DETAIL = {
    "ran": "study {study} synced",
    "queued": "sync of study {study} queued",
    "pending": "a sync of study {study} is queued already and will see this event",
}


def webhook_receiver_url() -> str | None:
    """The URL Argilla is to call, or None when ``SHIFTLAB_PUBLIC_URL`` is not set."""
    if not settings.SHIFTLAB_PUBLIC_URL:
        return None
    return settings.SHIFTLAB_PUBLIC_URL + reverse("annotation:argilla-webhook")


@dataclass(frozen=True)
class LiveResponses:
    """Whether Argilla sends this deployment response events, in words for the publish audit."""

    state: Literal["on", "off", "failed"]
    detail: str
    url: str = ""


def argilla_webhook_ensure(*, client: httpx.Client, actor: AbstractBaseUser | None = None) -> LiveResponses:
    """Make Argilla hold exactly one enabled webhook for this deployment's receiver, sending the
    response events, and keep its id and secret (idempotent; called by every publish).

    Reuses the stored webhook, or one Argilla already has for the same URL (a publish interrupted
    before it stored it), re-enables it and restores its events if they were changed; removes
    duplicates for the URL and the webhooks this deployment registered for an earlier public URL.
    Never raises for Argilla's refusals: a failure is logged and audited
    (``argilla.webhook.failed``), and the sync stays the way responses arrive.
    """
    url = webhook_receiver_url()
    if url is None:
        logger.info("No Argilla webhook: SHIFTLAB_PUBLIC_URL is not set; responses arrive with each sync.")
        return LiveResponses("off", "off: SHIFTLAB_PUBLIC_URL is not set, so responses arrive with each sync")
    try:
        _webhook_ensure(url, client=client, actor=actor)
    except ArgillaError as exc:
        logger.warning("Could not register the Argilla webhook to %s (%s); responses arrive with each sync.", url, exc)
        audit_record(actor=actor, verb="argilla.webhook.failed", payload={"url": url, "error": str(exc)[:1000]})
        return LiveResponses("failed", f"failed: {exc}; responses arrive with each sync", url)
    return LiveResponses("on", f"on: Argilla sends response events to {url}", url)


def _webhook_ensure(url: str, *, client: httpx.Client, actor: AbstractBaseUser | None) -> ArgillaWebhook:
    found = argilla.webhooks_list(client=client)
    stored = ArgillaWebhook.objects.filter(url=url).first()
    same_url = [w for w in found if w.url == url]
    keep = next((w for w in found if stored is not None and w.id == stored.argilla_id), None)
    keep = keep or (same_url[0] if same_url else None)
    change = "adopted" if keep is not None and (stored is None or stored.argilla_id != keep.id) else ""
    if keep is None:
        keep, change = argilla.webhook_create(url, RESPONSE_EVENTS, description=DESCRIPTION, client=client), "created"
    elif not keep.enabled or set(keep.events) != set(RESPONSE_EVENTS) or keep.url != url:
        keep = argilla.webhook_update(keep.id, url=url, events=RESPONSE_EVENTS, enabled=True, client=client)
        change = change or "repaired"
    duplicates = [w.id for w in same_url if w.id != keep.id]
    earlier = list(ArgillaWebhook.objects.exclude(url=url))
    for webhook_id in [*duplicates, *(row.argilla_id for row in earlier)]:
        argilla.webhook_delete(webhook_id, client=client)
    with transaction.atomic():
        ArgillaWebhook.objects.filter(pk__in=[row.pk for row in earlier]).delete()
        row, _ = ArgillaWebhook.objects.update_or_create(
            url=url, defaults={"argilla_id": keep.id, "secret": keep.secret, "events": list(keep.events)}
        )
        if change or duplicates or earlier:
            payload = {
                "url": url,
                "argilla_id": str(keep.id),
                "change": change or "unchanged",
                "duplicates_removed": len(duplicates),
                "earlier_urls_removed": [r.url for r in earlier],
            }
            audit_record(actor=actor, verb="argilla.webhook.register", obj=row, payload=payload)
    return row


@dataclass(frozen=True)
class Receipt:
    """The receiver's answer to a delivery: an HTTP status and a short message."""

    status: int
    detail: str


def _cache_key(prefix: str, value: str) -> str:
    # Hashed: a delivery's id is the sender's text, and cache keys must stay short and plain.
    return prefix + hashlib.sha256(value.encode()).hexdigest()


def argilla_webhook_receive(*, body: bytes, headers: Mapping[str, str], now: float | None = None) -> Receipt:
    """Handle one delivery of Argilla's webhook: check it, then queue the sync of the study whose
    dataset it is about.

    Refused, with nothing done: deliveries without the Standard Webhooks headers or with a body
    that is no event (400), with no valid signature by the stored secret or a timestamp more than
    5 minutes away (401), and a webhook-id received before (400: a replay; Argilla gives every
    attempt a new id). Events of other types and of datasets that belong to no study get 200 and
    are ignored, so that Argilla does not retry them.
    """
    secrets = list(ArgillaWebhook.objects.values_list("secret", flat=True))
    if not secrets:
        return Receipt(401, "no Argilla webhook is registered here")
    check = webhook_verify(body, headers, secrets=secrets, now=time.time() if now is None else now)
    if not check.ok:
        logger.warning("Argilla webhook delivery refused: %s.", check.reason)
        return Receipt(400 if check.refusal in (Refusal.MISSING, Refusal.MALFORMED) else 401, check.reason)
    try:
        event = webhook_event(body)
    except ValueError as exc:
        return Receipt(400, str(exc))
    # Remembered a little longer than a timestamp stays acceptable: later, the timestamp refuses it.
    if not cache.add(_cache_key(_SEEN, check.message_id), True, timeout=2 * TOLERANCE_SECONDS + 60):
        logger.warning("Argilla webhook delivery refused: webhook-id %.80s was received already.", check.message_id)
        return Receipt(400, "this webhook-id was received already")
    if event.type not in RESPONSE_EVENTS:
        return Receipt(200, f"ignored: {event.type} events are not used")
    study_id = _study_for_dataset(event.dataset_id)
    if study_id is None:
        cache.add(_IGNORED, 0, timeout=None)
        ignored = cache.incr(_IGNORED)
        logger.info(
            "Argilla webhook: %s for dataset %s, which is no study's, ignored (%d ignored by this process's cache).",
            event.type,
            event.dataset_id,
            ignored,
        )
        return Receipt(200, "ignored: the dataset belongs to no study")
    return Receipt(202, SYNC_DETAIL[_sync_enqueue(study_id)].format(study=study_id))


def _study_for_dataset(dataset_id: str | None) -> int | None:
    """The study one of whose annotators' datasets (or whose legacy shared dataset) this is."""
    try:
        wanted = UUID(dataset_id)
    except (TypeError, ValueError):
        return None
    found = Annotator.objects.filter(argilla_dataset_id=wanted).values_list("study_id", flat=True).first()
    return found or Study.objects.filter(argilla_dataset_id=wanted).values_list("pk", flat=True).first()


def sync_task():
    """The registered ``annotation.sync_study`` task, found by name (``annotation.tasks`` imports
    the services this module is among)."""
    return task_named("annotation.sync_study").type


def _sync_enqueue(study_id: int) -> Literal["ran", "queued", "pending"]:
    """Queue a sync of the study unless one is queued and not started yet.

    A queued sync starts no earlier than ``SYNC_DELAY_SECONDS`` + 1 after it was queued, and the
    key saying it is queued lives ``SYNC_DELAY_SECONDS``. A delivery that finds the key therefore
    arrived before that sync fetches, and Argilla sends a delivery after committing the response:
    the sync sees it. A delivery after the key expired queues the next sync. In eager mode (no
    broker) the sync runs here and now, so nothing waits and there is nothing to share.
    """
    sync_study = sync_task()
    if sync_study.app.conf.task_always_eager:
        sync_study.delay(study_id)
        return "ran"
    key = _cache_key(_QUEUED, str(study_id))
    if not cache.add(key, True, timeout=SYNC_DELAY_SECONDS):
        return "pending"

    def dispatch() -> None:
        try:
            sync_study.apply_async((study_id,), countdown=SYNC_DELAY_SECONDS + 1)
        except Exception:
            # Nothing was queued: the key must not hold back the next delivery's sync (the error
            # answers this delivery with 500, and Argilla retries it).
            cache.delete(key)
            raise

    transaction.on_commit(dispatch)
    return "queued"
