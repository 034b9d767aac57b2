"""Human (and LLM-as-annotator) baselines on embedding tasks: the data contract and the scoring.

A baseline study shows annotators *instances* of a task and collects their *answers*; the answers
are then scored with the same evaluator code that scores models on exactly the same instances.
This module is pure: it knows nothing of Argilla, the database or LLM backends. Each task type's
scoring is one definition, a ``BaselineScoring`` subclass keyed by ``TaskType`` in
``BASELINE_SCORINGS`` (``evaluation.baseline_predictions.MODEL_SCORINGS`` holds the model's side).

Instances by task type (``texts`` is what annotators see; ``gold`` never reaches them):

========================  =====================  =====================  ==================  ================
task_type                 texts                  group                  gold                answer value
========================  =====================  =====================  ==================  ================
``sts``                   (sentence1, sentence2) ""                     float score         float 0-5
``classification``        (text,)                ""                     label (str)         label (str)
``clustering``            (text,)                batch id               label (str)         cluster id (str)
``reranking``             (query, candidate)     query id               1 relevant / 0 not  1 / 0
========================  =====================  =====================  ==================  ================

Clustering instances of one batch are shown together and a cluster id only means something within
its batch; reranking candidates of one query form one ranking.

Scoring (``score_answers`` for raters, ``evaluation.baseline_predictions`` for a model; both end
in ``score_predictions``, which calls the evaluators' own scoring functions):

- **sts**: a rater's ratings (a model's cosine similarities) correlated with gold, Spearman
  (``correlation_scores``, as STSEvaluator); pooled humans: the mean rating per pair against gold;
  interval: Fisher z, n = pairs.
- **classification**: accuracy (``classification_scores``, as ClassificationEvaluator's
  experiments); pooled: the majority label per text; interval: Wilson, n = texts.
- **clustering**: V-measure per batch (``clustering_v_measure``, as ClusteringEvaluator), mean over
  batches; pooled: the mean of the raters' scores; interval: the annotator range (min-max).
- **reranking**: MAP@1000 over queries with the answers as candidate scores (``reranking_result``,
  as RerankingEvaluator); pooled: the mean relevance per candidate as its score; interval: the
  annotator range.

Units of observation: a sentence pair (sts), a text (classification), a batch (clustering), a
query (reranking). A rater's clustering batch or reranking query counts only when they answered
all of its instances; a batch whose gold holds a single label is not scored (V-measure needs two).

Ties: a classification majority tie goes to the label that sorts first (as text), so it is
deterministic and never looks at the gold; tied reranking scores rank the less relevant candidate
first (``reranking_result``), so a human's binary relevance is scored as the worst order of
its ties, a lower bound.

Intervals: Wilson's for accuracy (a model's accuracy averaged over the classification protocol's
experiments enters as a fractional count); Fisher's z for Spearman, with Bonett and Wright's
standard error sqrt((1 + rho²/2) / (n − 3)) (``core.stats.fisher_z_interval``); for clustering and
reranking, where the unit is a batch or query and there are few, the pooled score carries the
range of the individual raters' scores instead of a sampling interval. A rater's own score
carries Wilson or Fisher z where defined, no interval for clustering and reranking.

Agreement between raters: Fleiss' kappa (classification; reranking relevance), mean pairwise
Spearman and Kendall tau-b (sts), mean pairwise Kendall tau-b (reranking, over the candidates both
judged) and mean pairwise adjusted Rand index within batches (clustering).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import ClassVar

import numpy as np
from sklearn.metrics import adjusted_rand_score

from annotation.science.agreement import fleiss_kappa, pairwise_agreement
from core.stats import fisher_z_interval, kendall_tau, spearman_rho, wilson_interval
from corpora.task_types import TaskType
from evaluation.evaluators.classification import classification_scores
from evaluation.evaluators.clustering import clustering_v_measure
from evaluation.evaluators.ranking import reranking_result
from evaluation.evaluators.sts import correlation_scores

POOLED = "humans (pooled)"


@dataclass(frozen=True)
class Instance:
    """One unit an annotator answers; ``key`` is stable and unique within a study."""

    key: str
    task_type: str
    texts: tuple[str, ...]
    gold: float | int | str
    group: str = ""

    def __post_init__(self) -> None:
        if self.task_type not in TASK_TYPES:
            raise ValueError(f"task_type must be one of {TASK_TYPES}, got {self.task_type!r}")


@dataclass(frozen=True)
class Answer:
    """One annotator's (or one LLM's) answer to one instance."""

    annotator: str
    key: str
    value: float | int | str


@dataclass(frozen=True)
class RaterScore:
    """One rater's (a model's, or the pooled humans') main score on the instances it answered.

    ``score`` is None when the metric is undefined (e.g. constant ratings); ``ci_low``/``ci_high``
    form the interval named by ``ci_method`` ("wilson", "fisher_z", "annotator_range") or are
    None; ``n_units`` counts the units of observation scored (pairs, texts, batches, queries).
    """

    rater: str
    metric: str
    score: float | None
    n_instances: int
    n_units: int
    ci_low: float | None = None
    ci_high: float | None = None
    ci_method: str | None = None
    metrics: Mapping[str, float | int | None] = field(default_factory=dict)


@dataclass(frozen=True)
class Agreement:
    """An inter-rater agreement coefficient; ``n_pairs`` rater pairs (times batches for ARI) stand
    behind a mean of pairwise values, ``n_items`` instances answered by two raters or more."""

    measure: str
    value: float | None
    n_items: int
    n_pairs: int = 0


@dataclass(frozen=True)
class BaselineScore:
    task_type: str
    metric: str
    n_instances: int
    n_answers: int
    pooled: RaterScore | None
    raters: tuple[RaterScore, ...]
    agreement: tuple[Agreement, ...]

    def to_dict(self) -> dict:
        return asdict(self)


def interval_position(score: float | None, low: float | None, high: float | None) -> str | None:
    """Where ``score`` falls against the interval [low, high]: "above", "below" or "inside"."""
    if score is None or low is None or high is None:
        return None
    if score > high:
        return "above"
    if score < low:
        return "below"
    return "inside"


class BaselineScoring:
    """How a baseline of one task type is scored, as mteb's abstract tasks: one subclass per
    baseline task type (``BASELINE_SCORINGS``), with its main metric, unit of observation and
    interval, how an answer reads, how predictions score, how answers pool and how the raters'
    agreement is measured (see the module docstring). ``by_rater`` maps a rater to their answers
    (instance key -> value)."""

    task_type: ClassVar[TaskType]
    metric: ClassVar[str]
    unit: ClassVar[str]
    interval: ClassVar[str]
    rater_interval: ClassVar[str] = ""  # what a single rater's (and a model's) interval is, if any
    ties: ClassVar[str] = ""  # how tied answers are scored, where it matters

    @property
    def rater_note(self) -> str:
        """The report's words on single raters' and models' intervals."""
        return self.rater_interval or (
            "Single raters and models have no interval: with so few units of observation "
            f"(each a {self.unit}) there is no sampling interval worth showing."
        )

    def answer_value(self, answer: Answer) -> float | int | str:
        """An answer as the value the task scores: a label (classification, clustering)."""
        value = answer.value
        if value is None or str(value) == "":
            raise ValueError(f"{answer.annotator}'s answer to {answer.key} is empty: drop it or record a label")
        return str(value)

    def score(
        self,
        instances: Sequence[Instance],
        predictions: Mapping[str, float | int | str],
        *,
        rater: str,
        confidence: float,
    ) -> RaterScore:
        raise NotImplementedError

    def pooled(
        self,
        instances: Sequence[Instance],
        by_rater: Mapping[str, Mapping[str, float | int | str]],
        raters: Sequence[RaterScore],
        *,
        confidence: float,
    ) -> RaterScore:
        raise NotImplementedError

    def agreement(
        self, instances: Sequence[Instance], by_rater: Mapping[str, Mapping[str, float | int | str]], shared: int
    ) -> tuple[Agreement, ...]:
        """The agreement coefficients; ``shared`` instances were answered by two raters or more."""
        raise NotImplementedError


class STSScoring(BaselineScoring):
    task_type = TaskType.STS
    metric = "spearman"
    unit = "sentence pair"
    interval = "95% Fisher z interval of Spearman's rho (Bonett-Wright standard error), n = sentence pairs"
    rater_interval = "Each rater's (and model's) interval is the same Fisher z interval over the pairs it scored."

    def answer_value(self, answer):
        value = answer.value
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise ValueError(f"{answer.annotator}'s answer to {answer.key} must be a number (0-5), got {value!r}")
        return float(value)

    def score(self, instances, predictions, *, rater, confidence):
        answered = [i for i in instances if i.key in predictions]
        if len({predictions[i.key] for i in answered}) < 2 or len({i.gold for i in answered}) < 2:
            # A constant side leaves the correlation undefined (scipy would warn and return NaN).
            return RaterScore(rater, self.metric, None, len(answered), len(answered))
        result = correlation_scores([float(predictions[i.key]) for i in answered], [float(i.gold) for i in answered])
        ci = fisher_z_interval(result.spearman, len(answered), confidence=confidence, method="spearman")
        return RaterScore(
            rater,
            self.metric,
            result.spearman,
            len(answered),
            len(answered),
            *_interval(ci, "fisher_z"),
            metrics={"spearman": result.spearman, "pearson": result.pearson},
        )

    def pooled(self, instances, by_rater, raters, *, confidence):
        return self.score(instances, _mean_answers(by_rater), rater=POOLED, confidence=confidence)

    def agreement(self, instances, by_rater, shared):
        rhos = pairwise_agreement(by_rater, spearman_rho, min_common=3)
        taus = pairwise_agreement(by_rater, kendall_tau)
        return (
            Agreement("mean_pairwise_spearman", _mean(rhos), shared, len(rhos)),
            Agreement("mean_pairwise_kendall_tau", _mean(taus), shared, len(taus)),
        )


class ClassificationScoring(BaselineScoring):
    task_type = TaskType.CLASSIFICATION
    metric = "accuracy"
    unit = "text"
    interval = "95% Wilson interval of the accuracy, n = texts"
    rater_interval = (
        "Each rater's interval is a Wilson interval over the texts it answered; a model's accuracy is the mean "
        "over the protocol's 10 logistic-regression experiments (fitted on the train split)."
    )

    def score(self, instances, predictions, *, rater, confidence):
        answered = [i for i in instances if i.key in predictions]
        if not answered:
            return RaterScore(rater, self.metric, None, 0, 0)
        scores = classification_scores([str(i.gold) for i in answered], [str(predictions[i.key]) for i in answered])
        ci = wilson_interval(scores.accuracy * len(answered), len(answered), confidence=confidence)
        return RaterScore(
            rater,
            self.metric,
            scores.accuracy,
            len(answered),
            len(answered),
            *_interval(ci, "wilson"),
            metrics=asdict(scores),
        )

    def pooled(self, instances, by_rater, raters, *, confidence):
        majority = {key: _majority(values) for key, values in _answers_of(by_rater).items()}
        return self.score(instances, majority, rater=POOLED, confidence=confidence)

    def agreement(self, instances, by_rater, shared):
        return (_kappa(instances, by_rater, shared),)


class ClusteringScoring(BaselineScoring):
    task_type = TaskType.CLUSTERING
    metric = "v_measure"
    unit = "batch of texts"
    interval = "annotator range: lowest to highest individual rater's V-measure"

    def score(self, instances, predictions, *, rater, confidence):
        groups = [g for g in instance_groups(instances).values() if all(i.key in predictions for i in g)]
        groups = [g for g in groups if len({str(i.gold) for i in g}) >= 2]
        values = [clustering_v_measure([str(i.gold) for i in g], [str(predictions[i.key]) for i in g]) for g in groups]
        score = float(np.mean(values)) if values else None
        return RaterScore(
            rater,
            self.metric,
            score,
            sum(map(len, groups)),
            len(groups),
            metrics={
                "v_measure": score,
                "v_measure_min": min(values, default=None),
                "v_measure_max": max(values, default=None),
            },
        )

    def pooled(self, instances, by_rater, raters, *, confidence):
        defined = [r for r in raters if r.score is not None]
        score = float(np.mean([r.score for r in defined])) if defined else None
        # The batches some rater's score stands on: complete, with two gold labels or more.
        scored = [
            g
            for g in instance_groups(instances).values()
            if len({str(i.gold) for i in g}) >= 2 and any(all(i.key in by_rater[r.rater] for i in g) for r in defined)
        ]
        return RaterScore(
            POOLED,
            self.metric,
            score,
            sum(map(len, scored)),
            len(scored),
            *_annotator_range(raters),
            metrics={"v_measure": score, "n_raters": len(defined)},
        )

    def agreement(self, instances, by_rater, shared):
        aris = []
        for group in instance_groups(instances).values():
            keys = {i.key for i in group}
            within = {name: {k: v for k, v in ratings.items() if k in keys} for name, ratings in by_rater.items()}
            aris += pairwise_agreement(within, lambda a, b: float(adjusted_rand_score(a, b)))
        return (Agreement("mean_pairwise_ari", _mean(aris), shared, len(aris)),)


class RerankingScoring(BaselineScoring):
    task_type = TaskType.RERANKING
    metric = "map_at_1000"
    unit = "query with its candidates"
    interval = "annotator range: lowest to highest individual rater's MAP"
    ties = "Tied relevance judgements are ranked least relevant first, so a human's MAP is a lower bound."

    def answer_value(self, answer):
        value = answer.value
        if isinstance(value, bool) or value not in (0, 1):
            raise ValueError(f"{answer.annotator}'s answer to {answer.key} must be 1 (relevant) or 0, got {value!r}")
        return int(value)

    def score(self, instances, predictions, *, rater, confidence):
        groups = [g for g in instance_groups(instances).values() if all(i.key in predictions for i in g)]
        if not groups:
            return RaterScore(rater, self.metric, None, 0, 0)
        result = reranking_result(
            [[float(predictions[i.key]) for i in g] for g in groups], [[float(i.gold) for i in g] for g in groups]
        )
        metrics = result.metrics()
        return RaterScore(
            rater,
            self.metric,
            result.main_score,
            sum(map(len, groups)),
            len(groups),
            metrics={name: metrics[name] for name in ("map_at_1000", "mrr_at_10", "ndcg_at_10")},
        )

    def pooled(self, instances, by_rater, raters, *, confidence):
        pooled = self.score(instances, _mean_answers(by_rater), rater=POOLED, confidence=confidence)
        return RaterScore(
            pooled.rater,
            pooled.metric,
            pooled.score,
            pooled.n_instances,
            pooled.n_units,
            *_annotator_range(raters),
            metrics=pooled.metrics,
        )

    def agreement(self, instances, by_rater, shared):
        taus = pairwise_agreement(by_rater, kendall_tau)
        return _kappa(instances, by_rater, shared), Agreement(
            "mean_pairwise_kendall_tau", _mean(taus), shared, len(taus)
        )


BASELINE_SCORINGS: dict[TaskType, BaselineScoring] = {
    scoring.task_type: scoring
    for scoring in (STSScoring(), ClassificationScoring(), ClusteringScoring(), RerankingScoring())
}
"""One definition per baseline task type (``annotation.baselines.baseline_tasks.BASELINE_TASKS`` asks
the same task types; ``evaluation/test_human_baseline.py`` checks)."""
TASK_TYPES = tuple(task.value for task in BASELINE_SCORINGS)


def baseline_scoring(task_type: str) -> BaselineScoring:
    """The scoring definition of a baseline task type (``Instance`` admits no other)."""
    return BASELINE_SCORINGS[TaskType(task_type)]


def score_predictions(
    instances: Sequence[Instance],
    predictions: Mapping[str, float | int | str],
    *,
    rater: str = "",
    confidence: float = 0.95,
) -> RaterScore:
    """Score one set of predictions (instance key -> predicted value) with the task's evaluator
    function: a rater's answers, the pooled answers, or a model's similarities and cluster ids.

    Instances without a prediction are left out; a clustering batch or reranking query is scored
    only when every one of its instances has a prediction.
    """
    scoring = baseline_scoring(task_type_of(instances))
    return scoring.score(instances, predictions, rater=rater, confidence=confidence)


def score_answers(
    instances: Sequence[Instance], answers: Iterable[Answer], *, confidence: float = 0.95
) -> BaselineScore:
    """Score every rater's answers and the pooled answers on ``instances``, with intervals and the
    agreement between raters (see the module docstring for what each task computes).

    Raises ValueError for an answer to an unknown instance, two answers of one rater to one
    instance, or an answer value the task cannot use.
    """
    task = task_type_of(instances)
    scoring = baseline_scoring(task)
    by_key = {i.key: i for i in instances}
    by_rater: dict[str, dict[str, float | int | str]] = defaultdict(dict)
    n_answers = 0
    for answer in answers:
        if answer.key not in by_key:
            raise ValueError(f"{answer.annotator} answered {answer.key!r}, which is not an instance of this study")
        if answer.key in by_rater[answer.annotator]:
            raise ValueError(f"{answer.annotator} answered {answer.key!r} twice: keep only their current answer")
        by_rater[answer.annotator][answer.key] = scoring.answer_value(answer)
        n_answers += 1
    raters = tuple(
        scoring.score(instances, by_rater[name], rater=name, confidence=confidence) for name in sorted(by_rater)
    )
    pooled = scoring.pooled(instances, by_rater, raters, confidence=confidence) if by_rater else None
    shared = sum(1 for i in instances if sum(i.key in r for r in by_rater.values()) >= 2)
    return BaselineScore(
        task, scoring.metric, len(instances), n_answers, pooled, raters, scoring.agreement(instances, by_rater, shared)
    )


def _answers_of(by_rater: Mapping[str, Mapping[str, float | int | str]]) -> dict[str, list]:
    """Every rater's answer to each instance (instance key -> values)."""
    answers_of: dict[str, list] = defaultdict(list)
    for ratings in by_rater.values():
        for key, value in ratings.items():
            answers_of[key].append(value)
    return answers_of


def _mean_answers(by_rater: Mapping[str, Mapping[str, float | int | str]]) -> dict[str, float]:
    return {key: float(np.mean(values)) for key, values in _answers_of(by_rater).items()}


def _kappa(
    instances: Sequence[Instance], by_rater: Mapping[str, Mapping[str, float | int | str]], shared: int
) -> Agreement:
    categories = sorted({str(v) for ratings in by_rater.values() for v in ratings.values()})
    table = [[sum(str(r[i.key]) == c for r in by_rater.values() if i.key in r) for c in categories] for i in instances]
    return Agreement("fleiss_kappa", fleiss_kappa(table) if categories else None, shared)


def task_type_of(instances: Sequence[Instance]) -> str:
    if not instances:
        raise ValueError("no instances to score")
    kinds = {i.task_type for i in instances}
    if len(kinds) != 1:
        raise ValueError(f"instances of one study share one task type, got {sorted(kinds)}")
    keys = [i.key for i in instances]
    if len(set(keys)) != len(keys):
        duplicated = sorted(k for k, n in Counter(keys).items() if n > 1)
        raise ValueError(f"instance keys must be unique, repeated: {', '.join(duplicated[:5])}")
    return kinds.pop()


def instance_groups(instances: Sequence[Instance]) -> dict[str, list[Instance]]:
    """Instances by batch or query, in first-seen order."""
    groups: dict[str, list[Instance]] = {}
    for instance in instances:
        groups.setdefault(instance.group, []).append(instance)
    return groups


def _majority(labels: Sequence[str]) -> str:
    """The most frequent label; a tie goes to the label that sorts first."""
    counts = Counter(labels)
    return min(counts, key=lambda label: (-counts[label], label))


def _annotator_range(raters: Sequence[RaterScore]) -> tuple[float | None, float | None, str | None]:
    scores = [r.score for r in raters if r.score is not None]
    if len(scores) < 2:
        return None, None, None
    return min(scores), max(scores), "annotator_range"


def _interval(ci: tuple[float, float] | None, method: str) -> tuple[float | None, float | None, str | None]:
    return (ci[0], ci[1], method) if ci is not None else (None, None, None)


def _mean(values: Sequence[float]) -> float | None:
    return float(np.mean(values)) if values else None
