"""The kinds that the models and the pure modules of annotation share (pure: no Django), below both
(``.importlinter``): the models store them as choices, the pure modules compute with them."""

from enum import StrEnum


class ItemKind(StrEnum):
    """A study item: a real item, or a control with a known answer (``annotation.science.controls``)."""

    REAL = "real"
    EASY_POSITIVE = "easy_positive"
    EASY_NEGATIVE = "easy_negative"


class FlagRule(StrEnum):
    """The rules that flag a rating (``annotation.science.validation``)."""

    LLM_DEVIATION = "llm_deviation"
    LOW_RATING = "low_rating"
    # Annotator-level rules (annotation.science.annotator_quality), attached to the annotator's latest rating.
    TOO_FAST = "too_fast"
    STRAIGHT_LINING = "straight_lining"
    LOW_COMPETENCE = "low_competence"
    LOW_CAREFULNESS = "low_carefulness"


class RejectionReason(StrEnum):
    """Why an annotator was rejected (``annotation.science.validation``)."""

    FAILED_CONTROLS = "failed_controls"
    CONFIRMED_DEVIANT = "confirmed_deviant"
    MANUAL = "manual"
