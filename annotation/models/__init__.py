"""The models of annotation, one module per part: ``studies`` (human-validation studies, their
items, annotators, ratings, flags, gate results, approvals, exported configs and the Argilla
webhook) and ``baselines`` (human performance baselines). Django and the migrations name them by
app label (``annotation.Study``); this package gives every model under ``annotation.models``.
"""

from annotation.models.baselines import (
    BASELINE_TASK_TYPES,
    BaselineAnnotator,
    BaselineAnswer,
    BaselineAnswerRevision,
    BaselineInstance,
    BaselineStudy,
)
from annotation.models.studies import (
    Annotator,
    Approval,
    ArgillaWebhook,
    Assignment,
    BenchmarkConfig,
    Flag,
    GateResult,
    RaterDecision,
    Rating,
    RatingComment,
    RatingRevision,
    Study,
    StudyItem,
    _opaque_id,  # named by migration 0001 (annotation.models._opaque_id)
    study_name_validator,
)

__all__ = [
    "BASELINE_TASK_TYPES",
    "Annotator",
    "Approval",
    "ArgillaWebhook",
    "Assignment",
    "BaselineAnnotator",
    "BaselineAnswer",
    "BaselineAnswerRevision",
    "BaselineInstance",
    "BaselineStudy",
    "BenchmarkConfig",
    "Flag",
    "GateResult",
    "RaterDecision",
    "Rating",
    "RatingComment",
    "RatingRevision",
    "Study",
    "StudyItem",
    "_opaque_id",
    "study_name_validator",
]
