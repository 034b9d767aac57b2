"""Per-dataset protocol options: the evaluator settings a dataset may change (pure module).

MTEB fixes some protocol settings per task (a classification task's samples per label and number
of experiments; a clustering task's protocol, bootstrap size and share of documents embedded),
and a Shiftlab dataset can store the same choices under ``Dataset.metadata["evaluation"]``. Only
the task types with such settings (classification, clustering) accept options; the seed is never
one of them (it is given to each evaluation run).

``protocol_options`` validates a stored mapping (unknown names, wrong types and values the
evaluator refuses all raise ``ValueError`` naming the option); ``mteb_protocol_options`` reads
the settings of an ``mteb`` task object (by attribute, so this module does not import ``mteb``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from corpora.task_types import TaskType
from evaluation.evaluators.classification import ClassificationEvaluator
from evaluation.evaluators.clustering import ClusteringEvaluator

METADATA_KEY = "evaluation"

# Task type -> (evaluator, option -> accepted types). Floats accept ints (0.5 or 1).
PROTOCOL_OPTIONS: dict[TaskType, tuple[type, dict[str, tuple[type, ...]]]] = {
    TaskType.CLASSIFICATION: (
        ClassificationEvaluator,
        {"n_experiments": (int,), "samples_per_label": (int,), "max_iter": (int,)},
    ),
    TaskType.CLUSTERING: (
        ClusteringEvaluator,
        {
            "protocol": (str,),
            "n_bootstrap": (int,),
            "max_documents_per_cluster": (int,),
            "kmeans_batch_size": (int,),
            "max_fraction_of_documents_to_embed": (float, int, type(None)),
            "max_documents_to_embed": (int, type(None)),
            "single_batch_size": (int,),
        },
    ),
}


def protocol_options(task_type: str, options: Mapping[str, Any] | None) -> dict[str, Any]:
    """A validated copy of ``options`` for an evaluator of ``task_type`` (empty when none are set)."""
    if not options:
        return {}
    if not isinstance(options, Mapping):
        raise ValueError(f"protocol options must be a mapping of option names to values, got {type(options).__name__}")
    if task_type not in PROTOCOL_OPTIONS:
        with_options = ", ".join(PROTOCOL_OPTIONS)
        raise ValueError(
            f"{task_type} datasets have no protocol options (only {with_options} do); "
            f"remove {', '.join(sorted(options))}"
        )
    evaluator, accepted = PROTOCOL_OPTIONS[task_type]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise ValueError(
            f"unknown {task_type} protocol option(s) {', '.join(unknown)}: use {', '.join(sorted(accepted))}"
        )
    for name, value in options.items():
        if isinstance(value, bool) or not isinstance(value, accepted[name]):
            kinds = " or ".join("null" if kind is type(None) else kind.__name__ for kind in accepted[name])
            raise ValueError(f"{task_type} protocol option {name} must be {kinds}, got {value!r}")
    try:
        evaluator(**options)
    except ValueError as exc:
        raise ValueError(f"{task_type} protocol options {dict(options)} are not valid: {exc}") from None
    return dict(options)


def mteb_protocol_options(task: Any) -> dict[str, Any]:
    """The options an ``mteb`` task object sets, in Shiftlab's names (empty for other task types).

    Classification: ``samples_per_label``, ``n_experiments`` and the logistic regression's
    ``max_iter``. Clustering (``AbsTaskClustering``): the bootstrap protocol with ``n_clusters``
    (MTEB's name for the number of bootstrap draws), ``max_documents_per_cluster``,
    ``k_mean_batch_size`` and the share or number of documents embedded; the legacy
    ``AbsTaskClusteringLegacy`` tasks use the single protocol.
    """
    bases = {cls.__name__ for cls in type(task).__mro__}
    if "AbsTaskClassification" in bases:
        options = {"samples_per_label": task.samples_per_label, "n_experiments": task.n_experiments}
        parameters = task.evaluator_model.get_params() if hasattr(task, "evaluator_model") else {}
        if "max_iter" in parameters:
            options["max_iter"] = parameters["max_iter"]
        return protocol_options(TaskType.CLASSIFICATION, options)
    if "AbsTaskClusteringLegacy" in bases:
        return protocol_options(TaskType.CLUSTERING, {"protocol": "single"})
    if "AbsTaskClustering" in bases:
        return protocol_options(
            TaskType.CLUSTERING,
            {
                "protocol": "bootstrap",
                "n_bootstrap": task.n_clusters,
                "max_documents_per_cluster": task.max_documents_per_cluster,
                "kmeans_batch_size": task.k_mean_batch_size,
                "max_fraction_of_documents_to_embed": task.max_fraction_of_documents_to_embed,
                "max_documents_to_embed": task.max_document_to_embed,
            },
        )
    return {}
