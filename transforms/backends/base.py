from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from core.waiting import BackendUnavailable

#: Seconds between two calls of the tick a caller set with :func:`ticking`.
TICK_S = 0.25
_tick: ContextVar[Callable[[], None] | None] = ContextVar("llm_batch_tick", default=None)


@contextmanager
def ticking(tick: Callable[[], None]) -> Iterator[None]:
    """While inside, a backend that answers a batch request by request (the OpenAI-compatible one)
    calls ``tick()`` about every ``TICK_S`` seconds until the batch ends, in the thread that called
    ``generate``, between answers (it may use the database, and should be quick). Callers use it
    to write throttled progress and to notice that no answer has come yet. Backends that answer a
    whole batch at once never call it."""
    token = _tick.set(tick)
    try:
        yield
    finally:
        _tick.reset(token)


def current_tick() -> Callable[[], None] | None:
    """The tick set by :func:`ticking` in this context, if any."""
    return _tick.get()


@dataclass(frozen=True)
class ChatRequest:
    messages: list[dict[str, str]]
    seed: int
    temperature: float
    top_p: float
    max_tokens: int


@dataclass(frozen=True)
class ChatResult:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    finish_reason: str = ""


@dataclass(frozen=True)
class ChatFailure:
    """A request that failed after the backend's own retries; ``transient`` says whether trying
    again later may help (timeouts, overload) or not (bad request, unknown model)."""

    message: str
    transient: bool = False
    extra: dict = field(default_factory=dict)


class BackendError(Exception):
    """The backend cannot serve at all (unreachable, misconfigured)."""


class TransientBackendError(BackendUnavailable):
    """The LLM backend could not answer for now (after its own retries); the chunk is retried."""

    @classmethod
    def for_backend(cls, backend: LLMBackend, *, n_failed: int, message: str) -> TransientBackendError:
        return cls(
            f"{n_failed} requests to LLM backend {backend.alias!r} ({backend.model_id}) failed: {message}. "
            "Is its server running? (the embedded one: python manage.py llm_server). Work done so far is "
            "kept: resume once it answers",
            backend=f"the LLM backend {backend.alias!r}",
            reason=message,
        )


class LLMBackend:
    """One interface for every LLM backend.

    ``generate`` sends many chat requests and returns one result per request, in order; it keeps
    the backend busy (bounded concurrency) and calls ``on_result(index, result)`` as results
    arrive, in the calling thread, so callers can show progress and save work early.
    """

    def __init__(self, *, alias: str, model: str, **options):
        self.alias = alias
        self.model = model
        self.options = options

    @property
    def model_id(self) -> str:
        """What identifies the model in cache keys."""
        return self.model

    def model_identity(self) -> str:
        """What identifies the served weights beyond the model's name (a file hash, the server's
        metadata), for cache keys; "" when the backend cannot tell. Asked once per run."""
        return ""

    def generate(
        self,
        requests: Sequence[ChatRequest],
        *,
        on_result: Callable[[int, ChatResult | ChatFailure], None] | None = None,
    ) -> list[ChatResult | ChatFailure]:
        if not requests:
            return []
        return self._generate(list(requests), on_result)

    def _generate(
        self, requests: list[ChatRequest], on_result: Callable[[int, ChatResult | ChatFailure], None] | None
    ) -> list[ChatResult | ChatFailure]:
        """Answer a non-empty batch; what each backend implements."""
        raise NotImplementedError

    def ping(self) -> str:
        """Return a short description of the backend, or raise BackendError."""
        raise NotImplementedError
