"""Any OpenAI-compatible chat-completions server: vLLM (`vllm serve`), llama.cpp's server, Ollama.

Requests go out concurrently (bounded by ``max_concurrency``) over one HTTP connection pool;
transient failures (timeouts, connection errors, HTTP 408/409/425/429/5xx, a reply whose body is not
JSON) are retried with exponential backoff and jitter; anything else fails the request at once.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from core.hashing import sha256_json
from transforms.backends.base import BackendError, ChatFailure, ChatRequest, ChatResult, LLMBackend
from transforms.embedded import EmbeddedModelError, file_sha256, get_model

TRANSIENT_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
# Fields of a /v1/models entry that describe the served weights: vLLM's root, parent and context
# length, llama.cpp's "meta" (parameter count, file size, vocabulary). "created" is left out: vLLM
# sets it to the time of the request.
_IDENTITY_FIELDS = ("root", "parent", "max_model_len", "meta")


class OpenAICompatBackend(LLMBackend):
    def __init__(
        self,
        *,
        alias: str,
        model: str,
        base_url: str,
        api_key: str = "not-needed",
        max_concurrency: int = 8,
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
        self.max_concurrency = int(max_concurrency)
        self.timeout = float(timeout)
        self.max_retries = int(max_retries)
        self.backoff_seconds = float(backoff_seconds)

    def _generate(
        self, requests: list[ChatRequest], on_result: Callable[[int, ChatResult | ChatFailure], None] | None
    ) -> list[ChatResult | ChatFailure]:
        """Send all requests; ``on_result`` runs inside the event loop and must not block."""
        return asyncio.run(self._generate_all(requests, on_result))

    def model_identity(self) -> str:
        """What identifies the served weights, first found of: the ``identity`` option (set by whoever
        deploys the server); the SHA-256 of the ``model_file`` option (the GGUF file served); what the
        server's ``/models`` says of the model (vLLM, llama.cpp's own server); the pinned SHA-256 of
        the embedded model of that name (``llm_server`` serves only files verified against it).
        "" when none applies or the server does not answer."""
        if self.identity:
            return self.identity
        if self.model_file:
            return f"sha256:{file_sha256(Path(self.model_file))}"
        reported = self._reported_identity()
        if reported:
            return reported
        try:
            return f"sha256:{get_model(self.model).sha256}"
        except EmbeddedModelError:
            return ""

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
        semaphore = asyncio.Semaphore(self.max_concurrency)
        limits = httpx.Limits(max_connections=self.max_concurrency, max_keepalive_connections=self.max_concurrency)
        async with httpx.AsyncClient(timeout=self.timeout, limits=limits, headers=self._headers()) as client:

            async def one(index: int, request: ChatRequest):
                async with semaphore:
                    result = await self._with_retries(client, request)
                if on_result is not None:
                    on_result(index, result)
                return result

            return await asyncio.gather(*(one(i, r) for i, r in enumerate(requests)))

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
