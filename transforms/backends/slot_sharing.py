"""One evaluation of a batch's shared prompt prefix for all of llama-server's slots.

llama-server keeps each slot's last prompt and reuses the longest prefix a new request shares with
it. A run's requests share a long prefix (the system prompt and the instruction before the text),
but a slot that has not served that prompt yet evaluates all of it: a fresh server with N slots
evaluated the prefix N times, which cost more than the slots gained on a 2-core CPU
(docs/performance.md). So before a batch the backend

1. evaluates the shared prefix once, in the first idle slot (a request of one token);
2. saves that slot's state (``POST /slots/{id}?action=save``; the server needs ``--slot-save-path``,
   which ``LlamaServer`` gives it with a private directory of its own, on a loopback address only);
3. restores it into every other idle slot (``action=restore``), a copy of the prefix's cache cells that
   takes about a millisecond a slot.

The answers stay those of the same model: the copied cells are computed from the same tokens, in a
batch of another size, so their last bits may differ as with batching itself. Everything here is an
optimisation: a server without these endpoints (vLLM, llama-cpp-python, a llama-server started
without ``--slot-save-path``) or any failure leaves the batch to run as before.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass

import httpx

from core.hashing import sha256_json
from transforms.backends.base import ChatRequest

logger = logging.getLogger(__name__)

#: A shorter shared prefix is not worth the round trips (a few tokens of prompt).
MIN_PREFIX_CHARS = 64
PRIME_TIMEOUT_S = 120.0  # evaluating a long prefix on one CPU thread
ACTION_TIMEOUT_S = 10.0
# A restore into a slot that another client's request took meanwhile waits for that request to end:
# give up on the rest after this long rather than hold the batch back (the server still restores it).
RESTORE_TIMEOUT_S = 2.0


class SlotActionsUnsupported(Exception):
    """The server has no slot save/restore (HTTP 501, or no ``/slots``)."""


@dataclass(frozen=True)
class PrefixShare:
    """What one sharing did: the slot that evaluated the prefix, the slots that received it, seconds."""

    source: int
    restored: tuple[int, ...]
    seconds: float


def shared_prefix(requests: list[ChatRequest]) -> list[dict[str, str]] | None:
    """The messages every request of the batch begins with: the messages before the last, which must
    be equal in all, and the last message cut to the longest text all its versions begin with (up to
    its last whitespace, so that the prefix ends where the tokenizer would split anyway). None when the
    batch has fewer than 2 requests, its requests differ before their last message, or the shared text
    is shorter than ``MIN_PREFIX_CHARS``."""
    if len(requests) < 2:
        return None
    first = requests[0].messages
    if not first or any(len(r.messages) != len(first) or r.messages[:-1] != first[:-1] for r in requests):
        return None
    lasts = [r.messages[-1] for r in requests]
    if any(m.get("role") != first[-1].get("role") for m in lasts):
        return None
    common = os.path.commonprefix([str(m.get("content") or "") for m in lasts])
    if len(set(map(str, (m.get("content") for m in lasts)))) > 1:
        common = common.rstrip()  # the texts begin after it: keep no half-shared trailing space
    before = sum(len(str(m.get("content") or "")) for m in first[:-1])
    if before + len(common) < MIN_PREFIX_CHARS:
        return None
    return [*first[:-1], {**first[-1], "content": common}]


def prefix_file_name(model: str, messages: list[dict[str, str]]) -> str:
    """The save file's name: one per model and prefix, so a later batch of the same prompt overwrites
    its own file with the same bytes rather than adding another."""
    return f"shiftlab-prefix-{sha256_json({'model': model, 'messages': messages})[:24]}.bin"


async def share_prefix(
    client: httpx.AsyncClient, *, root: str, model: str, messages: list[dict[str, str]]
) -> PrefixShare | None:
    """Evaluate ``messages`` once in the first idle slot of the llama-server at ``root`` and copy the
    result into its other idle slots. None when fewer than 2 slots are idle. Raises
    ``SlotActionsUnsupported`` where the server cannot save slots and ``httpx.HTTPError`` on a failed
    call; the caller goes on without sharing either way."""
    started = time.perf_counter()
    listing = await client.get(f"{root}/slots", timeout=ACTION_TIMEOUT_S)
    if listing.status_code in (404, 501):
        raise SlotActionsUnsupported(f"GET /slots: HTTP {listing.status_code}")
    listing.raise_for_status()
    idle = sorted(s["id"] for s in listing.json() if isinstance(s, dict) and not s.get("is_processing"))
    if len(idle) < 2:
        return None
    source, targets = idle[0], idle[1:]
    body = {"model": model, "messages": messages, "max_tokens": 1, "temperature": 0.0, "id_slot": source}
    (await client.post(f"{root}/v1/chat/completions", json=body, timeout=PRIME_TIMEOUT_S)).raise_for_status()
    name = {"filename": prefix_file_name(model, messages)}
    saved = await client.post(f"{root}/slots/{source}", params={"action": "save"}, json=name, timeout=ACTION_TIMEOUT_S)
    if saved.status_code == 501:
        raise SlotActionsUnsupported(f"slot save: {saved.text[:200]}")
    saved.raise_for_status()
    for target in targets:
        restored = await client.post(
            f"{root}/slots/{target}", params={"action": "restore"}, json=name, timeout=RESTORE_TIMEOUT_S
        )
        restored.raise_for_status()
    share = PrefixShare(source, tuple(targets), time.perf_counter() - started)
    logger.info("shared prompt prefix from slot %d to %d slots in %.2f s", source, len(targets), share.seconds)
    return share
