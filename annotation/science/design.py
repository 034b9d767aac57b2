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

from annotation.science.assignment import controls_needed
from annotation.science.sequential import Settled, settle_questions
from annotation.science.study_kinds import kind_mismatch
from core.errors import ShiftlabError
from core.hashing import sha256_json


class StudyKind(StrEnum):
    REWRITE = "rewrite"  # quality 1-5 and fluency 1-5 of original vs transformed
    SIMILARITY = "similarity"  # semantic similarity 0-5 of the two texts
    # The inverse question (issue 30): did the meaning change from the first text to the second?
    # For meaning-changing rewrites (the sensitivity axis); the gate passes on "changed".
    SENSITIVITY = "sensitivity"


class GateDirection(StrEnum):
    """What a passed gate says of a transformation's outputs."""

    MEANING_KEPT = "meaning_kept"  # raters found the meaning kept (rewrite and similarity studies)
    MEANING_CHANGED = "meaning_changed"  # raters found the meaning changed (sensitivity studies)


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
    # The inverse question: the top of the scale says the meaning *changed*, so a meaning-preserving
    # control expects the bottom and an unrelated text the top (annotation.science.controls).
    inverse: bool = False

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
    StudyKind.SENSITIVITY: (
        Question(
            "changed",
            "Did the second text change the meaning of the first?",
            1,
            5,
            "1 = no, it means the same; 3 = unsure; 5 = yes, it clearly says something different.",
            meaning=True,
            inverse=True,
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
}

# Which LLM judge kind estimates each question (transforms.judging scales).
JUDGE_KIND_OF_QUESTION = {"quality": "quality", "fluency": "fluency", "similarity": "similarity"}


ASSIGNMENT_MODES = ("fixed", "pull")
DEFAULT_DETECTABILITY_LIMIT = 0.75
# Fields added after designs were first hashed: left out of ``to_dict`` (and so of the hash) while
# they hold their default, so designs written before them keep their hash.
_LATER_DEFAULTS = {
    "detectability_limit": DEFAULT_DETECTABILITY_LIMIT,
    "detectability_override": "",
    "single_rater_pilot": False,
    "min_ac2_lower": None,
    "flag_low_carefulness": 0.0,
    "adaptive_gate_raters": 0,
    "adaptive_overlap_share": 0.0,
    "adaptive_min_raters": 0,
    "adaptive_sequence": "plugin",
    "gate_estimator": "human",
}

_GATE_OPTIONS = ("adaptive_overlap_share", "adaptive_min_raters", "adaptive_sequence", "gate_estimator")
# The confidence sequences the sequential gate can use (annotation.science.sequential and
# annotation.science.variance_sequences): "plugin" is the betting sequence with the predictable
# plug-in bet (the default since issue 19), "agrapa" the betting sequence with the variance-adaptive
# aGRAPA bet, "asymptotic" the asymptotic confidence sequence (valid as the number of items grows).
GATE_SEQUENCES = ("plugin", "agrapa", "asymptotic")
# What the gate estimates the mean from: the human ratings alone, or the LLM judges' scores of every
# output corrected by the human ratings (prediction-powered inference, PPI++).
GATE_ESTIMATORS = ("human", "prediction_powered")
# With one rating per item, the most items one annotator may hold at once (batch_size × batches_released):
# runs of one rater's items bias the gate's first items. benchmarks/rater_runs.py (rater bias sd 0.3,
# annotators rating one after another): runs of 10 kept the betting sequences at 4.0% wrong decisions
# at the threshold (α 5%) but the asymptotic one at 6.0%; runs of 5 kept it at 4.8%.
ONE_RATER_RUN = 10
ONE_RATER_RUN_ASYMPTOTIC = 5
# Distinct raters behind any decision of a one-rating-per-item gate unless the design says otherwise.
DEFAULT_MIN_RATERS_SINGLE = 3


class DesignError(ShiftlabError, ValueError):
    """A design parameter is out of range; the message names it and the allowed values, ``field``
    the parameter (a field of the design, as the study forms name it)."""

    code = "invalid_design"


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
    # Flag a rater whose carefulness (annotation.science.annotator_quality.carefulness) is below
    # this fraction of the study's upper-quartile carefulness; 0 = off. Suggested:
    # annotation.science.annotator_quality.CAREFULNESS_FLAG_FRACTION, from simulated studies.
    flag_low_carefulness: float = 0.0
    acceptance_threshold: float = 3.0
    seed: int = 0
    adaptive: bool = False
    adaptive_alpha: float = 0.05
    adaptive_min_items: int = 10
    batches_released: int = 0  # unfinished batches each annotator's Argilla queue holds; 0 = all
    # "fixed": every annotator's queue is drawn at publish (equal loads); "pull": an annotator who
    # finished their released batches draws the next one from the items closest to completion, so
    # work follows the annotators who rate (loads may differ; needs batches_released >= 1).
    assignment: str = "fixed"
    guidelines: str = ""
    # Locking is refused when a transformation's easy positives can be told from its real items
    # with a cross-validated AUC above this (annotation.science.detectability), or are too few
    # (or its real items too few) to estimate that AUC, unless
    # ``detectability_override`` gives the reason to lock anyway (recorded in the audit log and
    # in the exported config).
    detectability_limit: float = DEFAULT_DETECTABILITY_LIMIT
    detectability_override: str = ""
    # The gate passes only when every item has at least 2 counted raters, unless the study
    # declares itself a single-rater pilot (marked in the gate's evidence and the exported config).
    single_rater_pilot: bool = False
    # An optional minimum agreement: every question's AC2 lower confidence bound must reach it for
    # the gate to pass. None = off (the default, and the paper's protocol).
    min_ac2_lower: float | None = None
    # Adaptive pull designs: the sequential gate observes each item's first this many counted
    # raters, and an item gets its further raters only when they disagree
    # (annotation.science.assignment.raters_needed). 0 = off: every item gets raters_per_item.
    adaptive_gate_raters: int = 0
    # With adaptive_gate_raters = 1 (one rating per item for the gate): the share of each
    # transformation's items, drawn by the seed before any rating, that get all raters_per_item
    # raters anyway (agreement, the rater model). Must be above 0 then.
    adaptive_overlap_share: float = 0.0
    # No sequential decision before this many distinct raters are behind the observed items (one
    # person never decides a gate). 0 = the default: 3 with one rating per item (adaptive_gate_raters
    # 1), else 2 (1 for a design of one rater per item, which its gate already treats as a pilot).
    adaptive_min_raters: int = 0
    adaptive_sequence: str = "plugin"  # one of GATE_SEQUENCES
    gate_estimator: str = "human"  # one of GATE_ESTIMATORS

    @property
    def gate_raters(self) -> int:
        """Raters the sequential gate observes per item (``adaptive_gate_raters``, else all)."""
        return self.adaptive_gate_raters or self.raters_per_item

    @property
    def min_raters(self) -> int:
        """Distinct raters behind any sequential decision (``adaptive_min_raters`` or its default)."""
        if self.adaptive_min_raters:
            return self.adaptive_min_raters
        if self.adaptive_gate_raters == 1:
            return DEFAULT_MIN_RATERS_SINGLE
        # Every observed item already has gate_raters raters: no constraint a design had before.
        return min(2, self.gate_raters)

    @property
    def prediction_powered(self) -> bool:
        return self.gate_estimator == "prediction_powered"

    @property
    def classic_gate(self) -> bool:
        """Whether the sequential gate uses none of the options of issue 40 (one rating per item, another
        sequence or estimator, a declared minimum of raters): its evidence then keeps its old shape."""
        return (
            all(getattr(self, name) == _LATER_DEFAULTS[name] for name in _GATE_OPTIONS)
            and self.adaptive_gate_raters != 1
        )

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
            ("flag_low_carefulness", self.flag_low_carefulness, 0, 1),
            ("acceptance_threshold", self.acceptance_threshold, 0, 5),
            ("batches_released", self.batches_released, 0, 10_000),
            ("detectability_limit", self.detectability_limit, 0.5, 1),
        )
        for name, value, low, high in checks:
            if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
                raise DesignError(f"design.{name} must be a number between {low} and {high}, got {value!r}", field=name)
        if self.assignment not in ASSIGNMENT_MODES:
            modes = ", ".join(ASSIGNMENT_MODES)
            raise DesignError(f"design.assignment must be one of {modes}, got {self.assignment!r}", field="assignment")
        if self.assignment == "pull" and self.batches_released < 1:
            raise DesignError(
                "design.assignment 'pull' hands out batches as annotators finish them: set batches_released "
                "to at least 1 (how many unfinished batches an annotator holds at once)",
                field="assignment",
            )
        if not isinstance(self.detectability_override, str):
            raise DesignError(
                f"design.detectability_override must be text (the reason to lock with detectable controls), "
                f"got {self.detectability_override!r}",
                field="detectability_override",
            )
        object.__setattr__(self, "detectability_override", self.detectability_override.strip())
        if self.detectability_override and len(self.detectability_override) < 10:
            raise DesignError(
                "design.detectability_override must say why controls that can be told apart are acceptable "
                "(at least 10 characters); leave it empty to have such a lock refused",
                field="detectability_override",
            )
        if self.min_control_ratings > 0 and self.controls_per_batch == 0:
            raise DesignError(
                "design.min_control_ratings > 0 needs controls: set controls_per_batch to at least 1",
                field="min_control_ratings",
            )
        if not isinstance(self.single_rater_pilot, bool):
            raise DesignError(
                f"design.single_rater_pilot must be true or false, got {self.single_rater_pilot!r}",
                field="single_rater_pilot",
            )
        if self.min_ac2_lower is not None and (
            isinstance(self.min_ac2_lower, bool)
            or not isinstance(self.min_ac2_lower, int | float)
            or not -1 <= self.min_ac2_lower <= 1
        ):
            raise DesignError(
                "design.min_ac2_lower must be empty (off) or a number between -1 and 1 (the lowest AC2 lower "
                f"confidence bound the gate accepts), got {self.min_ac2_lower!r}",
                field="min_ac2_lower",
            )
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise DesignError(f"design.seed must be a non-negative integer, got {self.seed!r}", field="seed")
        if not isinstance(self.adaptive, bool):
            raise DesignError(f"design.adaptive must be true or false, got {self.adaptive!r}", field="adaptive")
        if (
            isinstance(self.adaptive_alpha, bool)
            or not isinstance(self.adaptive_alpha, int | float)
            or not (0 < self.adaptive_alpha <= 0.5)
        ):
            raise DesignError(
                f"design.adaptive_alpha must be a number in (0, 0.5], got {self.adaptive_alpha!r}",
                field="adaptive_alpha",
            )
        if (
            isinstance(self.adaptive_min_items, bool)
            or not isinstance(self.adaptive_min_items, int)
            or not 1 <= self.adaptive_min_items <= 100_000
        ):
            raise DesignError(
                f"design.adaptive_min_items must be a whole number from 1 to 100000, got {self.adaptive_min_items!r}",
                field="adaptive_min_items",
            )

        _check_gate_raters(self)

    @property
    def questions(self) -> tuple[Question, ...]:
        return QUESTIONS[self.kind]

    @property
    def passes_on(self) -> GateDirection:
        """What the gate of this study passes on: a sensitivity study's on "meaning changed"."""
        if self.kind == StudyKind.SENSITIVITY:
            return GateDirection.MEANING_CHANGED
        return GateDirection.MEANING_KEPT

    def question(self, name: str) -> Question:
        for question in self.questions:
            if question.name == name:
                return question
        raise DesignError(f"a {self.kind} study has no question {name!r}")

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["kind"] = self.kind.value
        data["llm_judges"] = list(self.llm_judges)
        for name, default in _LATER_DEFAULTS.items():
            if data[name] == default:
                del data[name]
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

    def overlaid(self, changes: Mapping[str, Any]) -> StudyDesign:
        """This design with the fields ``changes`` names laid over it (a partial design, as the page,
        the API and the command give one): the one place a partial design meets its base, the
        defaults of a new study or the design a revision starts from. Unknown fields and values out
        of range are refused (``DesignError``)."""
        return StudyDesign.from_dict({**self.to_dict(), **changes})


def _check_gate_raters(design: StudyDesign) -> None:
    value = design.adaptive_gate_raters
    share = design.adaptive_overlap_share
    if isinstance(share, bool) or not isinstance(share, int | float) or not 0 <= share <= 1:
        raise DesignError(
            "design.adaptive_overlap_share must be a number from 0 to 1 (the share of items rated by all "
            f"raters_per_item raters when the gate observes one rating per item), got {share!r}",
            field="adaptive_overlap_share",
        )
    _check_gate_options(design)
    if value == 0 and not isinstance(value, bool):
        if share:
            raise DesignError(
                "design.adaptive_overlap_share is for a gate on one rating per item: set adaptive_gate_raters "
                "to 1, or the share to 0",
                field="adaptive_overlap_share",
            )
        return
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value < design.raters_per_item:
        raise DesignError(
            "design.adaptive_gate_raters must be 0 (off) or a whole number from 1 to raters_per_item - 1 "
            f"(the raters the sequential gate observes per item), got {value!r}",
            field="adaptive_gate_raters",
        )
    if not design.adaptive or design.assignment != "pull":
        raise DesignError(
            "design.adaptive_gate_raters needs adaptive stopping with pull assignment (further raters are "
            "asked only where the design needs them): set adaptive to true and assignment to 'pull'",
            field="adaptive_gate_raters",
        )
    if value == 1 and not share:
        raise DesignError(
            "design.adaptive_overlap_share must be above 0 when the gate observes one rating per item "
            "(adaptive_gate_raters 1): agreement (AC2) and the rater model need items rated by several people; "
            "0.2 rates one item in five by all raters_per_item raters",
            field="adaptive_overlap_share",
        )
    run = design.batch_size * design.batches_released
    limit = ONE_RATER_RUN_ASYMPTOTIC if design.adaptive_sequence == "asymptotic" else ONE_RATER_RUN
    if value == 1 and run > limit:
        raise DesignError(
            f"design.batch_size × batches_released is {run}, above {limit}: with one rating per item an annotator "
            "who rates a long run of items alone puts their own bias into the gate's first items, and the wrong-"
            f"decision rate rose above α in simulation (benchmarks/rater_runs.py); hand out at most {limit} items "
            "at a time (e.g. batch_size 5, batches_released 1)",
            field="batch_size",
        )
    if value > 1 and share:
        raise DesignError(
            "design.adaptive_overlap_share is for a gate on one rating per item: with adaptive_gate_raters "
            f"{value} every item already has {value} raters; set the share to 0",
            field="adaptive_overlap_share",
        )


def _check_gate_options(design: StudyDesign) -> None:
    """The confidence sequence, the estimator and the minimum of distinct raters of the gate."""
    if design.adaptive_sequence not in GATE_SEQUENCES:
        raise DesignError(
            f"design.adaptive_sequence must be one of {', '.join(GATE_SEQUENCES)}, got {design.adaptive_sequence!r}",
            field="adaptive_sequence",
        )
    if design.gate_estimator not in GATE_ESTIMATORS:
        raise DesignError(
            f"design.gate_estimator must be one of {', '.join(GATE_ESTIMATORS)}, got {design.gate_estimator!r}",
            field="gate_estimator",
        )
    value = design.adaptive_min_raters
    if isinstance(value, bool) or not isinstance(value, int) or not (value == 0 or 2 <= value <= 1000):
        raise DesignError(
            "design.adaptive_min_raters must be 0 (the default: 3 with one rating per item, else 2) or a whole "
            f"number from 2 to 1000 (distinct raters behind any decision), got {value!r}",
            field="adaptive_min_raters",
        )
    if not design.adaptive and (
        design.adaptive_sequence != "plugin" or design.gate_estimator != "human" or design.adaptive_min_raters
    ):
        raise DesignError(
            "design.adaptive_sequence, gate_estimator and adaptive_min_raters choose how adaptive stopping "
            "decides: set adaptive to true, or leave them at their defaults",
            field="adaptive_sequence",
        )
    if design.prediction_powered and design.adaptive_sequence != "asymptotic":
        raise DesignError(
            "design.gate_estimator 'prediction_powered' needs adaptive_sequence 'asymptotic': a betting sequence "
            "must allow for any judge score, so its bounds widen and the judge costs more ratings than it saves "
            "(benchmarks/gate_savings.py: 5-11% more); set adaptive_sequence to 'asymptotic'",
            field="gate_estimator",
        )
    if design.prediction_powered and not design.llm_judges:
        raise DesignError(
            "design.gate_estimator 'prediction_powered' corrects the LLM judges' scores of every output with the "
            "human ratings: choose at least one LLM judge (llm_judges)",
            field="gate_estimator",
        )


def _choice(enum: type[StrEnum], value: Any, name: str) -> StrEnum:
    try:
        return enum(value)
    except ValueError:
        raise DesignError(
            f"design.{name} must be one of {', '.join(e.value for e in enum)}, got {value!r}", field=name
        ) from None


# --- What a design can do with what is there (pure checks; issue 20) ---------------------------


@dataclass(frozen=True)
class DesignContext:
    """What a design is checked against: the successfully transformed texts each transformation
    of the study has, and how many annotators could rate (None: not known yet, e.g. through the
    API, where annotators are chosen at publish)."""

    available: Mapping[str, int]
    annotators: int | None = None


@dataclass(frozen=True)
class DesignProblem:
    """Why a design cannot work, attached to the design field to change."""

    field: str
    message: str


@dataclass(frozen=True)
class DesignImplications:
    """What a design means in numbers, for the people who will do the work."""

    drawn: dict[str, int]  # real items drawn per transformation
    real_items: int
    annotators: int  # the annotator count the per-annotator figures assume
    items_per_annotator: tuple[int, int]  # (lightest, busiest) load of real items
    controls_per_annotator: tuple[int, int]
    ratings: int  # answers to real items: items x raters x questions
    control_ratings: int  # answers to controls, over every annotator
    adaptive_best_items: int | None  # with adaptive stopping: the fewest items per transformation it can stop at
    adaptive_floor_ratings: int  # ratings an adaptive study spends before it may stop
    min_control_ratings: int = 0  # what the control check needs of each annotator
    gate_rater_share: float = 1.0  # raters the gate observes / raters per item (adaptive_gate_raters)

    @property
    def control_check_short(self) -> bool:
        """With this many annotators, the lightest-loaded one meets too few controls for the check."""
        return self.controls_per_annotator[0] < self.min_control_ratings

    @property
    def adaptive_best_saving(self) -> float | None:
        """The largest share of real-item ratings adaptive stopping can save (every rating at the
        top of its scale), or None when it cannot stop before the last item."""
        if self.adaptive_best_items is None or not self.real_items:
            return None
        spent = sum(min(self.adaptive_best_items, n) for n in self.drawn.values())
        return 1 - spent * self.gate_rater_share / self.real_items


def _loads(real_items: int, raters: int, annotators: int) -> tuple[int, int]:
    """Lightest and busiest annotator load when every item goes to ``raters`` of ``annotators``
    and loads differ by at most one (``annotation.science.assignment.draw_assignment``)."""
    total = real_items * raters
    return total // annotators, -(-total // annotators)


def _controls_seen(load: int, design: StudyDesign) -> int:
    return controls_needed(load, batch_size=design.batch_size, controls_per_batch=design.controls_per_batch)


def design_problems(design: StudyDesign, context: DesignContext) -> tuple[DesignProblem, ...]:
    """The reasons ``design`` cannot work with ``context`` (empty when it can).

    - more items per transformation than a transformation has successfully transformed texts;
    - more raters per item than annotators (when the annotator count is known);
    - a control check that can never be made: even with the fewest annotators possible
      (``raters_per_item``, each rating every item) an annotator meets fewer controls than the
      check needs (each control gives at least one checked answer). With more annotators each
      meets fewer; ``design_implications`` says so, since who is published is chosen later;
    - a study kind that does not fit its transformations (``study_kinds.kind_mismatch``).
    """
    problems = [DesignProblem("kind", wrong)] if (wrong := kind_mismatch(design.kind, context.available)) else []
    short = {name: n for name, n in sorted(context.available.items()) if n < design.items_per_transformation}
    if short:
        lowest = min(short.values())
        listed = ", ".join(f"{name} has {n}" for name, n in short.items())
        problems.append(
            DesignProblem(
                "items_per_transformation",
                f"{design.items_per_transformation} items per transformation asked for, but {listed} "
                f"successfully transformed text{'s' if lowest != 1 else ''}: ask for at most {lowest}, "
                "or transform more texts first",
            )
        )
    if context.annotators is not None and context.annotators < design.raters_per_item:
        problems.append(
            DesignProblem(
                "raters_per_item",
                f"each item needs {design.raters_per_item} different raters, but there "
                f"{'is' if context.annotators == 1 else 'are'} only {context.annotators} annotator "
                f"account{'s' if context.annotators != 1 else ''}: lower raters per item to "
                f"{max(context.annotators, 1)} or add annotators to the 'annotator' group first",
            )
        )
    real = sum(min(design.items_per_transformation, n) for n in context.available.values())
    lightest = real  # raters_per_item annotators: each rates every item
    seen = _controls_seen(lightest, design)
    if real and design.min_control_ratings > 0 and seen < design.min_control_ratings:
        batches = -(-lightest // design.batch_size) if lightest else 0
        problems.append(
            DesignProblem(
                "controls_per_batch",
                f"an annotator rating {lightest} item{'s' if lightest != 1 else ''} works through {batches} "
                f"batch{'es' if batches != 1 else ''} of up to {design.batch_size} and meets {seen} "
                f"control{'s' if seen != 1 else ''} ({design.controls_per_batch} per batch), but the control "
                f"check needs {design.min_control_ratings} control answers, so it could never pass: raise "
                "controls per batch, lower the batch size, or lower the control answers the check needs",
            )
        )
    return tuple(problems)


def design_implications(design: StudyDesign, context: DesignContext) -> DesignImplications:
    """Items drawn, annotator loads, ratings needed and (adaptive designs) what stopping early can
    save, for ``design`` with ``context``; the per-annotator figures assume every known annotator
    rates (or, when none is known, ``raters_per_item`` annotators)."""
    drawn = {name: min(design.items_per_transformation, n) for name, n in sorted(context.available.items())}
    real = sum(drawn.values())
    annotators = max(context.annotators or 0, design.raters_per_item)
    lightest, busiest = _loads(real, design.raters_per_item, annotators)
    controls = (_controls_seen(lightest, design), _controls_seen(busiest, design))
    total_load = real * design.raters_per_item
    control_ratings = sum(
        _controls_seen(total_load // annotators + (1 if k < total_load % annotators else 0), design)
        for k in range(annotators)
    ) * len(design.questions)
    best = _adaptive_best_items(design, max(drawn.values(), default=0)) if design.adaptive else None
    floor = sum(min(design.adaptive_min_items, n) for n in drawn.values()) * design.gate_raters * len(design.questions)
    return DesignImplications(
        drawn=drawn,
        real_items=real,
        annotators=annotators,
        items_per_annotator=(lightest, busiest),
        controls_per_annotator=controls,
        ratings=real * design.raters_per_item * len(design.questions),
        control_ratings=control_ratings,
        adaptive_best_items=best,
        adaptive_floor_ratings=floor if design.adaptive else 0,
        min_control_ratings=design.min_control_ratings,
        gate_rater_share=design.gate_raters / design.raters_per_item,
    )


def _adaptive_best_items(design: StudyDesign, items: int) -> int | None:
    """The fewest completed items after which the sequential gate can settle a transformation:
    every rating at the top of its scale (``annotation.science.sequential``), or None within ``items``."""
    if not items:
        return None
    decision = settle_questions(
        {q.name: [float(q.high)] * items for q in design.questions},
        threshold=design.acceptance_threshold,
        alpha=design.adaptive_alpha,
        scales={q.name: (float(q.low), float(q.high)) for q in design.questions},
        min_items=design.adaptive_min_items,
    )
    return decision.n if decision.state is Settled.PASS and decision.n < items else None
