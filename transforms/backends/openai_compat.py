"""Any OpenAI-compatible chat-completions server: vLLM (`vllm serve`), llama.cpp's server, Ollama.

Requests go out concurrently over one HTTP connection pool, as many at once as the server decodes
together: the ``max_concurrency`` option when set, else the parallel slots llama.cpp's
``llama-server`` reports (``GET /props``: ``total_slots``), else ``DEFAULT_IN_FLIGHT``;
transient failures (timeouts, connection errors, HTTP 408/409/425/429/5xx, a reply whose body is not
JSON) are retried with exponential backoff and jitter; anything else fails the request at once.
"""

from __future__ import annotations

import asyncio
import logging
import os
import queue
import random
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from core.hashing import sha256_json
from transforms.backends.base import (
    TICK_S,
    BackendError,
    ChatFailure,
    ChatRequest,
    ChatResult,
    LLMBackend,
    current_tick,
)
from transforms.backends.slot_sharing import PrefixShare, SlotActionsUnsupported, share_prefix, shared_prefix
from transforms.embedded import EmbeddedModelError, get_model
from transforms.model_hashes import file_sha256

logger = logging.getLogger(__name__)

TRANSIENT_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
# Fields of a /v1/models entry that describe the served weights: vLLM's root, parent and context
# length, llama.cpp's "meta" (parameter count, file size, vocabulary). "created" is left out: vLLM
# sets it to the time of the request.
_IDENTITY_FIELDS = ("root", "parent", "max_model_len", "meta")
# In flight for a server that does not report its slots (vLLM batches whatever arrives; llama-cpp-python's
# server queues them and answers one at a time, so more in flight costs it nothing).
DEFAULT_IN_FLIGHT = 8
# How long the slots a server reported are trusted (a long-lived worker outlives server restarts).
SLOTS_TTL_S = 60.0


class OpenAICompatBackend(LLMBackend):
    def __init__(
        self,
        *,
        alias: str,
        model: str,
        base_url: str,
        api_key: str = "not-needed",
        max_concurrency: int | None = None,
        timeout: float = 300.0,
        max_retries: int = 4,
        backoff_seconds: float = 0.5,
        identity: str = "",
        model_file: str = "",
        **options,
    ):
        super().__init__(alias=alias, model=model, **options)
        self.identity = identity
        self.model_file = model_file
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.max_concurrency = int(max_concurrency) if max_concurrency else None
        self._slots: tuple[float, int | None] | None = None  # (when asked, what /props said)
        self._slot_sharing = True  # until the server says it cannot save slots
        self.last_share: PrefixShare | None = None
        self.timeout = float(timeout)
        self.max_retries = int(max_retries)
        self.backoff_seconds = float(backoff_seconds)

    def _generate(
        self, requests: list[ChatRequest], on_result: Callable[[int, ChatResult | ChatFailure], None] | None
    ) -> list[ChatResult | ChatFailure]:
        """Send all requests. With ``on_result`` or a tick (``base.ticking``), the requests go out
        from an event loop in a helper thread, and this thread hears each answer as it arrives
        (``on_result``, which may use the database) and ticks every ``TICK_S`` in between."""
        tick = current_tick()
        if on_result is None and tick is None:
            return asyncio.run(self._generate_all(requests, None))
        answers: queue.SimpleQueue = queue.SimpleQueue()
        outcome: dict[str, object] = {}

        def send() -> None:
            try:
                outcome["results"] = asyncio.run(self._generate_all(requests, lambda i, r: answers.put((i, r))))
            except BaseException as exc:  # handed to the calling thread, which raises it
                outcome["error"] = exc
            finally:
                answers.put(None)

        sender = threading.Thread(target=send, name=f"llm-{self.alias}", daemon=True)
        sender.start()
        ticked = time.monotonic()
        while True:
            try:
                answer = answers.get(timeout=TICK_S)
            except queue.Empty:
                answer = ()
            if answer is None:
                break
            if answer and on_result is not None:
                on_result(*answer)
            if tick is not None and time.monotonic() - ticked >= TICK_S:
                ticked = time.monotonic()
                _safe_tick(tick)
        sender.join()
        if "error" in outcome:
            raise outcome["error"]
        return outcome["results"]

    def in_flight(self) -> int:
        """How many requests to keep in flight: ``max_concurrency`` when set, else the server's slots
        (``reported_slots``), else ``DEFAULT_IN_FLIGHT``."""
        if self.max_concurrency:
            return self.max_concurrency
        return self.reported_slots() or DEFAULT_IN_FLIGHT

    def reported_slots(self) -> int | None:
        """``server_slots``, asked at most every ``SLOTS_TTL_S``."""
        now = time.monotonic()
        if self._slots is None or now - self._slots[0] > SLOTS_TTL_S:
            self._slots = (now, self.server_slots())
        return self._slots[1]

    def server_slots(self) -> int | None:
        """llama-server's ``total_slots`` (its ``GET /props``, beside ``/v1``); None when the server
        has no such answer (vLLM, llama-cpp-python, Ollama) or does not answer."""
        root = self.base_url.removesuffix("/v1")
        try:
            response = httpx.get(f"{root}/props", headers=self._headers(), timeout=5)
            response.raise_for_status()
            slots = response.json().get("total_slots")
        except (httpx.HTTPError, ValueError, AttributeError):
            return None
        return slots if isinstance(slots, int) and slots > 0 else None

    def model_identity(self) -> str:
        """What identifies the served weights, first found of: the ``identity`` option (set by whoever
        deploys the server); the SHA-256 of the ``model_file`` option (the GGUF file served); the pinned
        SHA-256 of the embedded model of that name (``llm_server`` serves only files verified against
        it, with llama-server or llama-cpp-python's server alike, so the cache holds across the two);
        what the server's ``/models`` says of the model (vLLM, llama.cpp's own server). "" when none
        applies or the server does not answer."""
        if self.identity:
            return self.identity
        if self.model_file:
            return f"sha256:{file_sha256(Path(self.model_file))}"
        try:
            return f"sha256:{get_model(self.model).sha256}"
        except EmbeddedModelError:
            return self._reported_identity()

    def _reported_identity(self) -> str:
        try:
            response = httpx.get(f"{self.base_url}/models", headers=self._headers(), timeout=5)
            response.raise_for_status()
            entries = response.json().get("data", [])
        except (httpx.HTTPError, ValueError, AttributeError):
            return ""
        entry = next((e for e in entries if isinstance(e, dict) and e.get("id") == self.model), None)
        described = {name: entry[name] for name in _IDENTITY_FIELDS if entry and entry.get(name) is not None}
        return f"server:{sha256_json(described)}" if described else ""

    def ping(self) -> str:
        try:
            response = httpx.get(f"{self.base_url}/models", headers=self._headers(), timeout=5)
            response.raise_for_status()
        except httpx.HTTPError as exc:
            raise BackendError(f"{self.base_url} is not answering: {exc}") from exc
        served = [m.get("id") for m in response.json().get("data", [])]
        return f"{self.base_url} serves {', '.join(map(str, served)) or 'no models'}"

    async def _generate_all(self, requests, on_result):
        in_flight = self.in_flight()
        semaphore = asyncio.Semaphore(in_flight)
        limits = httpx.Limits(max_connections=in_flight, max_keepalive_connections=in_flight)
        async with httpx.AsyncClient(timeout=self.timeout, limits=limits, headers=self._headers()) as client:
            if in_flight > 1 and (self.reported_slots() or 0) > 1:
                await self._share_prefix(client, requests)

            async def one(index: int, request: ChatRequest):
                async with semaphore:
                    result = await self._with_retries(client, request)
                if on_result is not None:
                    on_result(index, result)
                return result

            return await asyncio.gather(*(one(i, r) for i, r in enumerate(requests)))

    async def _share_prefix(self, client: httpx.AsyncClient, requests: list[ChatRequest]) -> None:
        """On llama-server with several slots: the batch's shared prompt prefix evaluated once and
        copied into the idle slots (``slot_sharing``); skipped where it does not apply or fails."""
        messages = shared_prefix(requests) if self._slot_sharing else None
        if messages is None:
            return
        try:
            self.last_share = await share_prefix(
                client, root=self.base_url.removesuffix("/v1"), model=self.model, messages=messages
            )
        except SlotActionsUnsupported as exc:
            self._slot_sharing = False
            logger.info("%s: no prompt-prefix sharing across slots (%s)", self.base_url, exc)
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
            logger.warning("%s: prompt-prefix sharing skipped: %s", self.base_url, exc)

    async def _with_retries(self, client: httpx.AsyncClient, request: ChatRequest) -> ChatResult | ChatFailure:
        body = {
            "model": self.model,
            "messages": request.messages,
            "temperature": request.temperature,
            "top_p": request.top_p,
            "max_tokens": request.max_tokens,
            "seed": request.seed,
        }
        last_error = ""
        for attempt in range(self.max_retries + 1):
            if attempt:
                delay = self.backoff_seconds * 2 ** (attempt - 1)
                await asyncio.sleep(delay * (0.5 + random.random()))  # jitter spreads retries apart
            started = time.perf_counter()
            try:
                response = await client.post(f"{self.base_url}/chat/completions", json=body)
            except (httpx.TimeoutException, httpx.TransportError) as exc:
                last_error = transport_error_text(exc)
                continue
            if response.status_code in TRANSIENT_STATUS:
                last_error = f"HTTP {response.status_code}: {response.text[:200]}"
                continue
            if response.status_code >= 400:
                return ChatFailure(f"HTTP {response.status_code}: {response.text[:300]}", transient=False)
            try:
                payload = response.json()
            except ValueError:
                # A proxy's error page or a reply cut off mid-body: the server may answer properly next time.
                last_error = f"HTTP {response.status_code} with a body that is not JSON: {response.text[:200]!r}"
                continue
            return _parse(payload, time.perf_counter() - started)
        tries = self.max_retries + 1
        return ChatFailure(f"gave up after {tries} {'try' if tries == 1 else 'tries'}: {last_error}", transient=True)

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}


def _safe_tick(tick: Callable[[], None]) -> None:
    """A caller's tick that fails is logged: progress must not break generation."""
    try:
        tick()
    except Exception:
        logger.exception("LLM batch progress tick failed")


def transport_error_text(exc: BaseException) -> str:
    """httpx's error with the operating system's reason under it, e.g. "ConnectError: connection
    refused" (httpx itself only says "All connection attempts failed")."""
    text = f"{exc.__class__.__name__}: {exc}"
    cause, seen = exc, set()
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, OSError) and cause.errno is not None:
            return f"{exc.__class__.__name__}: {os.strerror(cause.errno).lower()}"
        cause = cause.__cause__ or cause.__context__
    return text


def _parse(payload: dict, latency: float) -> ChatResult | ChatFailure:
    try:
        choice = payload["choices"][0]
        text = choice["message"].get("content") or ""
    except (KeyError, IndexError, TypeError, AttributeError):
        return ChatFailure(f"unexpected response shape: {str(payload)[:300]}")
    usage = payload.get("usage") or {}
    return ChatResult(
        text=text,
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or 0),
        latency_s=latency,
        finish_reason=str(choice.get("finish_reason") or ""),
    )
