"""Any OpenAI-compatible chat-completions server: vLLM (`vllm serve`), llama.cpp's server, Ollama.

Requests go out concurrently (bounded by ``max_concurrency``) over one HTTP connection pool;
transient failures (timeouts, connection errors, HTTP 408/409/425/429/5xx) are retried with
exponential backoff and jitter; anything else fails the request at once.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable

import httpx

from transforms.backends.base import BackendError, ChatFailure, ChatRequest, ChatResult, LLMBackend

TRANSIENT_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


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
        **options,
    ):
        super().__init__(alias=alias, model=model, **options)
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
                last_error = f"{exc.__class__.__name__}: {exc}"
                continue
            if response.status_code in TRANSIENT_STATUS:
                last_error = f"HTTP {response.status_code}: {response.text[:200]}"
                continue
            if response.status_code >= 400:
                return ChatFailure(f"HTTP {response.status_code}: {response.text[:300]}", transient=False)
            return _parse(response.json(), time.perf_counter() - started)
        return ChatFailure(f"gave up after {self.max_retries + 1} tries: {last_error}", transient=True)

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}


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
