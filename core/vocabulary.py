"""One vocabulary for people (issue 42): the plain words a page shows for every code name the
code stores or records (pure module: no Django, no app imports).

Audit verbs, generation and report parameters, language plans, metric keys, transformation axes,
task types, perturbed sides and backend aliases each have one table here; the template filters
of ``core.templatetags.plain_words`` (``plain_verb``, ``plain_param``, ``plain_metric``...) and
any command that prints for people read them, never a table of their own. The code name stays
what scripts, the API and exported configs use: a page shows it only in a ``<code>`` hint where a
script user needs it. ``tests/test_vocabulary.py`` checks that every verb the code can record,
every registered parameter, axis, task type, side and metric key has an entry.

Each ``*_words`` lookup returns None for a code name it does not know, and each ``plain_*``
function falls back to the name without its underscores, so nothing stored is ever hidden.
"""

from __future__ import annotations

import re

# What each audit event says happened, as the "What" of a sentence whose subject is its actor:
# "anna — added an annotator to the roster — study pilot v1".
AUDIT_VERBS: dict[str, str] = {
    "annotator.argilla_password.set": "set their Argilla password",
    "annotator.invitation.accept": "accepted an invitation to annotate",
    "annotator.invitation.create": "invited an annotator",
    "annotator.invitation.revoke": "revoked an annotator's invitation",
    "annotator.publish": "gave an annotator their batch in Argilla",
    "annotator.reject": "rejected an annotator",
    "annotator.roster.add": "added an annotator to the roster",
    "annotator.roster.remove": "removed an annotator from the roster",
    "annotator.withdraw": "withdrew an annotator from a study",
    "argilla.webhook.failed": "could not register the Argilla webhook",
    "argilla.webhook.register": "registered the Argilla webhook",
    "auth.lockout": "locked an account after repeated failed sign-ins",
    "auth.tokens_revoke": "revoked API tokens",
    "baseline.close": "closed a human baseline",
    "baseline.create": "created a human baseline",
    "baseline.llm_annotate": "had LLMs answer a human baseline",
    "baseline.move": "moved a human baseline to per-annotator datasets",
    "baseline.publish": "published a human baseline",
    "baseline.publish.again": "published a human baseline again",
    "baseline.sync": "synced a human baseline's answers",
    "baseline.sync.invalid": "found invalid answers in a human baseline",
    "benchmark.run.create": "started a benchmark",
    "benchmark.run.resume": "resumed a benchmark",
    "benchmark_config.export": "exported a benchmark configuration",
    "dataset.control_trust": "trusted a dataset for control items",
    "dataset.control_trust.revoke": "stopped trusting a dataset for control items",
    "dataset.delete": "deleted a dataset",
    "dataset.import": "imported a dataset",
    "dataset.share": "shared a dataset with every project",
    "dataset.unshare": "stopped sharing a dataset",
    "job.sweep.resume": "resumed an interrupted job",
    "judge.report.create": "started an LLM judge report",
    "judge.report.resume": "resumed an LLM judge report",
    "project.create": "created a project",
    "project.member": "added a project member",
    "project.member_remove": "removed a project member",
    "prompt.activate": "activated a prompt version",
    "study.adaptive.settled": "settled a transformation early (adaptive stopping)",
    "study.adaptive.unsettled": "reopened a settled transformation (adaptive stopping)",
    "study.annotator.cut": "cut an annotator's Argilla access",
    "study.annotator.deactivate": "deactivated an annotator in Argilla",
    "study.annotator.deactivate.failed": "could not deactivate an annotator in Argilla",
    "study.annotator.reject": "rejected an annotator of a study",
    "study.annotator.replace": "replaced an annotator of a study",
    "study.argilla.texts_resend": "sent corrected texts to Argilla",
    "study.assign": "assigned items to annotators",
    "study.assign.join": "assigned items to a new annotator",
    "study.assignment.pull": "gave an annotator more items",
    "study.assignment.release": "released unrated items",
    "study.create": "created a study",
    "study.design.update": "changed a study's design",
    "study.flag.confirmed": "confirmed a flag",
    "study.flag.dismissed": "dismissed a flag",
    "study.gate": "evaluated a study's gate",
    "study.item.translate": "translated a study item for annotators",
    "study.judge_population.start": "had the LLM judges score every output",
    "study.lock": "locked a study",
    "study.publish": "published a study",
    "study.publish.again": "published a study again",
    "study.revise": "made a new version of a study",
    "study.sync": "synced a study's ratings",
    "study.sync.frozen": "ignored changes by frozen annotators",
    "study.sync.invalid": "found invalid ratings in a study",
    "study.transformation.approve": "approved a transformation",
    "study.transformation.reject": "rejected a transformation",
    "study.validate": "validated a study",
    "transform.run.create": "started a transformation run",
    "transform.run.resume": "resumed a transformation run",
}

# Parameters of runs, judges and benchmarks as a page names them (the values keep their own form).
# The robustness report's options have their words beside their choices
# (``evaluation.robustness_options.OPTION_LABELS``).
PARAMETERS: dict[str, str] = {
    "temperature": "temperature",
    "top_p": "top-p",
    "max_tokens": "maximum tokens",
    "max_attempts": "attempts per text",
    "seed": "seed",
    "seeds": "seeds",
    "preset": "preset",
    "languages": "languages",
    "severities": "severity levels",
    "language_plan": "target language",
    "n_llm_steps": "LLM calls per text",
    "transformation": "transformation",
    "split": "split",
    "limit": "item limit",
    "n_resamples": "bootstrap resamples",
    "alpha": "significance level α",
    "judge_params": "judge parameters",
    "document_scope": "documents rewritten",
    "sides": "perturbed sides",
}

# Values of a parameter that are themselves code names (a run's language plan).
PARAMETER_VALUES: dict[str, str] = {
    "same": "the source language",
    "per_run": "one target language for the whole run",
    "per_text": "a target language drawn for each text",
    "pivot_per_text": "a pivot language per text, then back to the source",
}

AXES: dict[str, str] = {
    "lexical": "Lexical/stylistic",
    "length": "Length",
    "language": "Language",
    "extra": "Extra (keywords)",
    "sensitivity": "Meaning change",
    "noise": "Character and word noise",
}

TASK_TYPES: dict[str, str] = {
    "sts": "semantic textual similarity (STS)",
    "str": "semantic textual relatedness (STR)",
    "summarization": "summarization",
    "pair_classification": "pair classification",
    "classification": "classification",
    "clustering": "clustering",
    "reranking": "reranking",
    "retrieval": "retrieval",
}

# What a transformed text was (a TransformedItem's side), or what a ranking unit perturbs.
SIDES: dict[str, str] = {
    "query": "query",
    "document": "documents",
    "both": "query and documents",
    "sentence1": "first sentence",
    "sentence2": "second sentence",
    "text": "text",
    "_id": "document id",
    "positive": "relevant candidate",
    "negative": "other candidate",
    "candidate": "candidate",
}

# Metric keys of the evaluators and the human baseline; ranking measures at a cutoff ("ndcg_at_10")
# and pair-classification scores per similarity function ("cosine_f1") are composed below.
METRICS: dict[str, str] = {
    "spearman": "Spearman correlation",
    "pearson": "Pearson correlation",
    "accuracy": "accuracy",
    "accuracy_threshold": "accuracy threshold",
    "f1": "F1",
    "f1_threshold": "F1 threshold",
    "f1_weighted": "weighted F1",
    "precision": "precision",
    "precision_weighted": "weighted precision",
    "recall": "recall",
    "recall_weighted": "weighted recall",
    "ap": "average precision",
    "ap_weighted": "weighted average precision",
    "v_measure": "V-measure",
    "v_measure_std": "V-measure SD",
    "ami": "adjusted mutual information",
    "ami_std": "adjusted mutual information SD",
    "nmi": "normalized mutual information",
    "ari": "adjusted Rand index",
    "cluster_accuracy": "cluster accuracy",
    "n_queries": "queries",
    "n_pairs": "pairs",
    "n_experiments": "experiments",
    "n_documents": "documents",
    "n_texts": "texts",
    "n_skipped": "skipped texts",
    "main_score": "main score",
    "original_main_score": "score on the original data",
    "delta": "change from the original",
}
RANKING_MEASURES: dict[str, str] = {
    "ndcg": "nDCG",
    "map": "MAP",
    "recall": "recall",
    "precision": "precision",
    "mrr": "MRR",
    "hit_rate": "hit rate",
}
SIMILARITY_FUNCTIONS: dict[str, str] = {
    "cosine": "cosine",
    "dot": "dot product",
    "euclidean": "Euclidean",
    "manhattan": "Manhattan",
}
_BEST = "max_"  # pair classification: the best score over the similarity functions

_AT_K = re.compile(r"^(?P<measure>[a-z_]+)_at_(?P<k>\d+)$")

# Backend aliases (LLMs and judges) and the raters stored for them: "llm:<alias>".
LLM_RATER_PREFIX = "llm:"
DEFAULT_ALIAS = "default"


# Why a rating was flagged (annotation.kinds.FlagRule) and why an annotator was rejected.
FLAG_RULES: dict[str, str] = {
    "llm_deviation": "far from the LLM judges' rating",
    "low_rating": "very low rating",
    "too_fast": "too fast",
    "straight_lining": "same answer every time",
    "low_competence": "low competence on controls",
    "low_carefulness": "low carefulness",
}
REJECTION_REASONS: dict[str, str] = {
    "failed_controls": "failed the control items",
    "confirmed_deviant": "repeatedly flagged as deviant",
    "manual": "rejected by a researcher",
}

# Keys of stored summaries (a dataset's metadata, an error count, an agreement measure).
DATA_KEYS: dict[str, str] = {
    "n_examples": "examples",
    "n_items": "items",
    "n_rows": "rows",
    "n_problems": "problems",
    "mean_pairwise_spearman": "mean Spearman correlation between two raters",
    "mean_pairwise_kendall_tau": "mean Kendall τ between two raters",
    "mean_pairwise_ari": "mean adjusted Rand index between two raters",
    "fleiss_kappa": "Fleiss' κ",
    "krippendorff_alpha": "Krippendorff's α",
}


def _loose(key: object) -> str:
    return str(key).replace("_", " ").strip()


def plain_key(key: object) -> str:
    """A stored data key in words: "n_examples" → "examples"; an unlisted ``n_<x>`` reads
    "number of <x>", any other key loses its underscores."""
    text = str(key)
    if text in DATA_KEYS:
        return DATA_KEYS[text]
    words = _loose(text)
    return f"number of {words[2:]}" if words.startswith("n ") else words


def verb_words(verb: str) -> str | None:
    return AUDIT_VERBS.get(verb)


def plain_verb(verb: object) -> str:
    """An audit verb as what happened: "annotator.roster.add" → "added an annotator to the roster"."""
    text = str(verb)
    return verb_words(text) or _loose(text.replace(".", " "))


def param_words(key: str) -> str | None:
    return PARAMETERS.get(key) or PARAMETER_VALUES.get(key)


def plain_param(key: object) -> str:
    """A parameter name, or a code-name value of one ("pivot_per_text"), in words."""
    return param_words(str(key)) or _loose(key)


def axis_words(axis: str) -> str | None:
    return AXES.get(axis)


def plain_axis(axis: object) -> str:
    return axis_words(str(axis)) or _loose(axis).capitalize()


def task_type_words(task_type: str) -> str | None:
    return TASK_TYPES.get(task_type)


def plain_task_type(task_type: object) -> str:
    """ "sts" → "semantic textual similarity (STS)"."""
    return task_type_words(str(task_type)) or _loose(task_type)


def side_words(side: str) -> str | None:
    return SIDES.get(side)


def plain_side(side: object) -> str:
    return side_words(str(side)) or _loose(side)


def metric_words(key: str) -> str | None:
    """A metric key in words, or None: a listed key, a ranking measure at a cutoff ("ndcg_at_10" →
    "nDCG@10"), or a pair-classification score of one similarity function or of the best one
    ("cosine_ap" → "average precision (cosine)", "max_ap" → "average precision (best
    similarity)")."""
    if key in METRICS:
        return METRICS[key]
    at_k = _AT_K.match(key)
    if at_k and at_k["measure"] in RANKING_MEASURES:
        return f"{RANKING_MEASURES[at_k['measure']]}@{at_k['k']}"
    if key.startswith(_BEST) and key[len(_BEST) :] in METRICS:
        return f"{METRICS[key[len(_BEST) :]]} (best similarity)"
    function, _, rest = key.partition("_")
    if function in SIMILARITY_FUNCTIONS and rest in METRICS:
        return f"{METRICS[rest]} ({SIMILARITY_FUNCTIONS[function]})"
    return None


def plain_metric(key: object) -> str:
    return metric_words(str(key)) or _loose(key)


def plain_rule(rule: object) -> str:
    """A flag rule ("llm_deviation") or a rejection reason ("failed_controls") in words."""
    text = str(rule)
    return FLAG_RULES.get(text) or REJECTION_REASONS.get(text) or _loose(text)


def alias_words(alias: str) -> str:
    """A backend alias as a person reads it: "default" → "the default LLM"."""
    return "the default LLM" if alias == DEFAULT_ALIAS else f"the LLM “{alias}”"


def plain_rater(rater: object) -> str:
    """A rater of a human baseline: a username as it is, ``llm:<alias>`` as its LLM."""
    text = str(rater)
    if text.startswith(LLM_RATER_PREFIX):
        return alias_words(text[len(LLM_RATER_PREFIX) :])
    return text


def plain_group(group: object, transformation_titles: dict[str, str] | None = None) -> str:
    """An agreement group: "overall", "axis:<axis>" or "transformation:<name>" (titled from
    ``transformation_titles`` when given)."""
    kind, _, name = str(group).partition(":")
    if kind == "axis":
        return f"{plain_axis(name)} axis"
    if kind == "transformation":
        return (transformation_titles or {}).get(name) or _loose(name)
    return _loose(group).capitalize()
