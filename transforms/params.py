"""Value types of a generation request: the sampling parameters of a run or a judge, their
limits, and what a run request resolves to. Pure: every interface and service imports them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypedDict

from core.errors import ShiftlabError
from core.hashing import sha256_json

# Upper bounds of the generation parameters: one LLM answer is a rewritten text, not a book, and
# every attempt is another LLM call per text.
MAX_TOKENS_LIMIT = 8192
MAX_ATTEMPTS_LIMIT = 10

DEFAULT_SEED = 1337


@dataclass(frozen=True)
class GenerationParams:
    """Sampling parameters of a run or a judge; every interface (API, commands, benchmarks) builds
    one, so the checks here are the only ones."""

    temperature: float = 0.7
    top_p: float = 0.95
    max_tokens: int = 512
    max_attempts: int = 3

    def __post_init__(self):
        if not 0 <= self.temperature <= 2:
            raise ShiftlabError(f"temperature must be between 0 and 2, got {self.temperature}", field="temperature")
        if not 0 < self.top_p <= 1:
            raise ShiftlabError(f"top_p must be in (0, 1], got {self.top_p}", field="top_p")
        if not 1 <= self.max_tokens <= MAX_TOKENS_LIMIT:
            raise ShiftlabError(
                f"max_tokens must be between 1 and {MAX_TOKENS_LIMIT}, got {self.max_tokens}", field="max_tokens"
            )
        if not 1 <= self.max_attempts <= MAX_ATTEMPTS_LIMIT:
            raise ShiftlabError(
                f"max_attempts must be between 1 and {MAX_ATTEMPTS_LIMIT}, got {self.max_attempts}",
                field="max_attempts",
            )

    @property
    def sampling_hash(self) -> str:
        """What changes an LLM output; max_attempts only decides how often we try."""
        return sha256_json({"temperature": self.temperature, "top_p": self.top_p, "max_tokens": self.max_tokens})


@dataclass(frozen=True)
class RunSettings:
    """What a run request resolves to once a preset has filled the unset settings: one run per seed."""

    params: GenerationParams
    seeds: tuple[int, ...]
    languages: list[str] | None
    preset: str


class RunOptions(TypedDict, total=False):
    """The raw settings of a run request, as the page, the API and the command take them: one left
    out (or None) is unset, filled from ``preset`` and then from the defaults."""

    preset: str
    seed: int | None
    temperature: float | None
    top_p: float | None
    max_tokens: int | None
    max_attempts: int | None
    languages: Sequence[str] | None
    # Noise kinds (``typos``...): the severity levels to run, one run per level and seed (None:
    # every level of ``transforms.noise.SEVERITIES``).
    severities: Sequence[int] | None


@dataclass(frozen=True)
class JudgeParams(GenerationParams):
    """Generation parameters with the judge's defaults: greedy decoding and a short answer."""

    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 16
