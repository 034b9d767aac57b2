"""The declared design of a human-validation study (SPEC §4), as a frozen value (pure module).

A design is written down and locked before any rating exists; every rule of the validation
pipeline (control check, flags, rejections, gate) reads its parameters from here and nowhere else.
Changing a locked design means a new study version, so the design carries its own content hash.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from enum import StrEnum
from typing import Any

from core.hashing import sha256_json


class StudyKind(StrEnum):
    REWRITE = "rewrite"  # quality 1-5 and fluency 1-5 of original vs transformed
    SIMILARITY = "similarity"  # semantic similarity 0-5 of the two texts


@dataclass(frozen=True)
class Question:
    """One rating question. ``meaning`` questions have a low expected end on easy negatives;
    fluency does not (an unrelated text can be perfectly fluent)."""

    name: str
    title: str
    low: int
    high: int
    description: str
    meaning: bool

    @property
    def values(self) -> tuple[int, ...]:
        return tuple(range(self.low, self.high + 1))


QUESTIONS: dict[StudyKind, tuple[Question, ...]] = {
    StudyKind.REWRITE: (
        Question(
            "quality",
            "How well does the second text keep the meaning of the first?",
            1,
            5,
            "1 = meaning lost or changed, 5 = meaning fully kept.",
            meaning=True,
        ),
        Question(
            "fluency",
            "How fluent and natural is the second text?",
            1,
            5,
            "1 = broken or unreadable, 5 = reads like careful human writing.",
            meaning=False,
        ),
    ),
    StudyKind.SIMILARITY: (
        Question(
            "similarity",
            "How similar in meaning are the two texts?",
            0,
            5,
            "0 = unrelated, 5 = completely equivalent.",
            meaning=True,
        ),
    ),
}

# Which LLM judge kind estimates each question (transforms.judging scales).
JUDGE_KIND_OF_QUESTION = {"quality": "quality", "fluency": "fluency", "similarity": "similarity"}


class DesignError(ValueError):
    """A design parameter is out of range; the message names it and the allowed values."""


@dataclass(frozen=True)
class StudyDesign:
    """Everything the study declares before its first rating.

    ``controls_per_batch`` control items (alternately easy positive and easy negative) are mixed
    into every ``batch_size`` real items, so an annotator working through a batch meets about that
    many controls. A rater's control check needs ``min_control_ratings`` rated controls; the rater
    passes when every control rating is within ``control_margin`` of its expected end of the scale.
    """

    kind: StudyKind = StudyKind.REWRITE
    items_per_transformation: int = 100
    raters_per_item: int = 3
    batch_size: int = 20
    controls_per_batch: int = 2
    min_control_ratings: int = 2
    control_margin: int = 1
    llm_judges: tuple[str, ...] = ("default",)
    llm_flag_deviation: float = 2.0
    low_rating_max: int = 2
    max_confirmed_flags: int = 3
    min_seconds_per_item: float = 3.0  # an item submitted faster than this is "too fast"
    flag_too_fast_share: float = 0.0  # flag a rater when more of their items are too fast; 0 = off
    flag_straight_line_run: int = 0  # flag a run of this many identical answers to a question; 0 = off
    flag_low_competence: float = 0.0  # flag when the competence interval lies below this; 0 = off
    acceptance_threshold: float = 3.0
    seed: int = 0
    adaptive: bool = False
    adaptive_alpha: float = 0.05
    adaptive_min_items: int = 10
    batches_released: int = 0  # unfinished batches each annotator's Argilla queue holds; 0 = all
    guidelines: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", _choice(StudyKind, self.kind, "kind"))
        object.__setattr__(self, "llm_judges", tuple(dict.fromkeys(self.llm_judges)))
        checks = (
            ("items_per_transformation", self.items_per_transformation, 1, 100_000),
            ("raters_per_item", self.raters_per_item, 1, 50),
            ("batch_size", self.batch_size, 1, 10_000),
            ("controls_per_batch", self.controls_per_batch, 0, 1_000),
            ("min_control_ratings", self.min_control_ratings, 0, 1_000),
            ("control_margin", self.control_margin, 0, 5),
            ("llm_flag_deviation", self.llm_flag_deviation, 0, 5),
            ("low_rating_max", self.low_rating_max, -1, 5),
            ("max_confirmed_flags", self.max_confirmed_flags, 1, 10_000),
            ("min_seconds_per_item", self.min_seconds_per_item, 0, 3_600),
            ("flag_too_fast_share", self.flag_too_fast_share, 0, 1),
            ("flag_straight_line_run", self.flag_straight_line_run, 0, 100_000),
            ("flag_low_competence", self.flag_low_competence, 0, 1),
            ("acceptance_threshold", self.acceptance_threshold, 0, 5),
            ("batches_released", self.batches_released, 0, 10_000),
        )
        for name, value, low, high in checks:
            if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
                raise DesignError(f"design.{name} must be a number between {low} and {high}, got {value!r}")
        if self.min_control_ratings > 0 and self.controls_per_batch == 0:
            raise DesignError("design.min_control_ratings > 0 needs controls: set controls_per_batch to at least 1")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise DesignError(f"design.seed must be a non-negative integer, got {self.seed!r}")
        if not isinstance(self.adaptive, bool):
            raise DesignError(f"design.adaptive must be true or false, got {self.adaptive!r}")
        if (
            isinstance(self.adaptive_alpha, bool)
            or not isinstance(self.adaptive_alpha, int | float)
            or not (0 < self.adaptive_alpha <= 0.5)
        ):
            raise DesignError(f"design.adaptive_alpha must be a number in (0, 0.5], got {self.adaptive_alpha!r}")
        if (
            isinstance(self.adaptive_min_items, bool)
            or not isinstance(self.adaptive_min_items, int)
            or not 1 <= self.adaptive_min_items <= 100_000
        ):
            raise DesignError(
                f"design.adaptive_min_items must be a whole number from 1 to 100000, got {self.adaptive_min_items!r}"
            )

    @property
    def questions(self) -> tuple[Question, ...]:
        return QUESTIONS[self.kind]

    def question(self, name: str) -> Question:
        for question in self.questions:
            if question.name == name:
                return question
        raise DesignError(f"a {self.kind} study has no question {name!r}")

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["kind"] = self.kind.value
        data["llm_judges"] = list(self.llm_judges)
        return data

    @property
    def content_hash(self) -> str:
        return sha256_json(self.to_dict())

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StudyDesign:
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise DesignError(f"unknown design field(s) {', '.join(sorted(unknown))}: use {', '.join(sorted(known))}")
        values = dict(data)
        if "llm_judges" in values:
            values["llm_judges"] = tuple(values["llm_judges"] or ())
        return cls(**values)

    def revised(self, **changes: Any) -> StudyDesign:
        return replace(self, **changes)


def _choice(enum: type[StrEnum], value: Any, name: str) -> StrEnum:
    try:
        return enum(value)
    except ValueError:
        raise DesignError(f"design.{name} must be one of {', '.join(e.value for e in enum)}, got {value!r}") from None
