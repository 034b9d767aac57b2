"""The models of annotation, one module per part: ``studies`` (human-validation studies, their
items, annotators, ratings, flags, gate results, approvals, exported configs and the Argilla
webhook), ``judge_population`` (the LLM judges scoring every output of a study's runs), ``study_jobs``
(validating and publishing a study in the background) and
``baselines`` (human performance baselines). Django and the migrations name them by
app label (``annotation.Study``); this package gives every model (each module's ``__all__``)
under ``annotation.models``, and ``_opaque_id``, which migration 0001 names there.
"""

from annotation.models import baselines, judge_population, studies, study_jobs
from annotation.models.baselines import *  # noqa: F403
from annotation.models.judge_population import *  # noqa: F403
from annotation.models.studies import *  # noqa: F403
from annotation.models.study_jobs import *  # noqa: F403

__all__ = studies.__all__ + baselines.__all__ + judge_population.__all__ + study_jobs.__all__
