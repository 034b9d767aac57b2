"""Reads of the quality part: the control checks of a study's annotators, the ratings that count
for agreement and the gate, the gate's fixed order of observations, and agreement. Read-only:
the services that validate, gate and stop adaptively all ask here."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from annotation.kinds import ItemKind
from annotation.models import Annotator, Rating, Study
from annotation.science import agreement
from annotation.science.control_check import ControlRating, ControlStatus, control_check
from annotation.science.design import StudyDesign
from annotation.science.gate_sequence import GateOutcome, JudgeScores, gate_outcome
from annotation.science.observations import FixedSequence, ItemRating, fixed_sequence
from annotation.studies.design_services import study_design
from transforms.registry import transformation_get


def control_checks(study: Study) -> dict[int, Any]:
    """Annotator id -> ControlCheck over their active ratings of control items (pure rule). Two
    queries, whatever the number of annotators: the control ratings as plain values (their item's
    expected answers joined in), and the study's annotators."""
    design = study_design(study)
    per_annotator: dict[int, list[ControlRating]] = defaultdict(list)
    ratings = Rating.objects.filter(study_item__study=study, active=True).exclude(study_item__kind=ItemKind.REAL)
    for annotator_id, question, value, expected in ratings.values_list(
        "annotator_id", "question", "value", "study_item__expected"
    ):
        if expected.get(question) is not None:
            per_annotator[annotator_id].append(ControlRating(expected=expected[question], value=value))
    return {
        pk: control_check(
            per_annotator.get(pk, []), margin=design.control_margin, min_ratings=design.min_control_ratings
        )
        for pk in study.annotators.values_list("pk", flat=True)
    }


@dataclass(frozen=True)
class CountedRating:
    item_id: int
    annotator_id: int
    question: str
    value: int
    transformation: str
    submitted_at: datetime | None = None


def counted_ratings(study: Study, *, checks: dict[int, Any] | None = None) -> list[CountedRating]:
    """Ratings that enter agreement and the gate: active ratings of real items by annotators who
    are not rejected (a withdrawn annotator's submitted ratings still count) and whose control
    check passed (so unchecked raters do not count yet). ``checks``: ``control_checks(study)``
    when the caller has it already. Read as plain values, in one query past the checks."""
    checks = control_checks(study) if checks is None else checks
    ok = {
        pk
        for pk, status in study.annotators.values_list("pk", "status")
        if status != Annotator.Status.REJECTED and checks[pk].status == ControlStatus.PASSED
    }
    ratings = Rating.objects.filter(
        study_item__study=study, study_item__kind=ItemKind.REAL, active=True, annotator_id__in=ok
    ).order_by("study_item__position", "annotator_id", "question")
    return [
        CountedRating(*row)
        for row in ratings.values_list(
            "study_item_id", "annotator_id", "question", "value", "study_item__transformation", "submitted_at"
        )
    ]


def observation_order(study: Study, transformation: str) -> list[tuple[int, tuple[int, ...]]]:
    """The gate's fixed order of one transformation's items so far (``Study.sample_info
    ["adaptive_order"]``, written by ``adaptive_services.study_adaptive_check``)."""
    stored = study.sample_info.get("adaptive_order", {}).get(transformation, [])
    return [(int(item), tuple(int(r) for r in raters)) for item, raters in stored]


def sequential_observations(
    design: StudyDesign, ratings: Sequence[CountedRating], ledger: Sequence[tuple[int, Sequence[int]]] = ()
) -> FixedSequence:
    """Per-item means of the items with ``design.gate_raters`` counted raters, in the fixed order
    ``ledger`` extended by the items completed since (``annotation.science.observations.fixed_sequence``)."""
    return fixed_sequence(
        (ItemRating(r.item_id, r.annotator_id, r.question, r.value, r.submitted_at) for r in ratings),
        questions=[q.name for q in design.questions],
        raters_per_item=design.gate_raters,
        ledger=ledger,
    )


def gate_judge_scores(study: Study, transformation: str, population=None) -> tuple[JudgeScores | None, str]:
    """The judges' scores a prediction-powered gate uses (None until every output of the run has
    one) and, while incomplete, how far they are. Reads the judgement cache only, unless the caller
    read it already (``population``: its ``JudgePopulation``)."""
    from annotation.studies.judge_population_services import study_judge_population

    if population is None:
        population = study_judge_population(study=study, transformation=transformation)
    if not population.complete:
        done = population.scored + population.failed
        progress = f"{done:,} of {population.estimates:,} estimates of {population.total:,} outputs"
        return None, f"waiting for the LLM judges to score every output of the run ({progress})"
    return (
        JudgeScores(
            population=population.scores,
            items=population.item_scores,
            fingerprint=population.fingerprint(),
            label=f"LLM judge{'s' if len(population.judges) != 1 else ''} {', '.join(population.judges)}",
        ),
        "",
    )


def sequential_outcome(
    study: Study, design: StudyDesign, ratings: Sequence[CountedRating], transformation: str, population=None
) -> tuple[FixedSequence, GateOutcome]:
    """The sequential gate of one transformation (adaptive designs) from its counted ratings, seen
    in the fixed order (``sequential_observations``), with the sequence, estimator and minimum of
    raters the design declares (``annotation.science.gate_sequence``). ``population``: the judges'
    scores when the caller has read them already. Reads only; withdrawing is ``adaptive_services``'."""
    seen = sequential_observations(design, ratings, observation_order(study, transformation))
    # A sample that could not be drawn uniformly from its outputs (too few fresh originals) has no
    # population for the judges to correct: its gate uses the human ratings alone (sample_info says so).
    estimator = design.gate_estimator
    if design.prediction_powered and "population" not in study.sample_info.get(transformation, {}):
        estimator = "human"
    ppi = estimator == "prediction_powered"
    judge, waiting = gate_judge_scores(study, transformation, population) if ppi else (None, "")
    outcome = gate_outcome(
        seen,
        questions={q.name: (q.low, q.high) for q in design.questions},
        threshold=design.acceptance_threshold,
        alpha=design.adaptive_alpha,
        min_items=design.adaptive_min_items,
        min_raters=design.min_raters,
        sequence=design.adaptive_sequence,
        estimator=estimator,
        judge=judge,
        judge_waiting=waiting,
        judge_started_with=study.sample_info.get("adaptive_judge", {}).get(transformation, ""),
    )
    return seen, outcome


def study_agreement(study: Study, ratings: Sequence[CountedRating] | None = None) -> dict[str, dict]:
    """Agreement per transformation, per axis and overall, each per question."""
    design = study_design(study)
    ratings = counted_ratings(study) if ratings is None else ratings
    groups: dict[str, Callable[[CountedRating], bool]] = {"overall": lambda r: True}
    transformations = sorted({r.transformation for r in study.runs.all()})
    for name in sorted({transformation_get(t).axis.value for t in transformations}):
        groups[f"axis:{name}"] = lambda r, name=name: transformation_get(r.transformation).axis.value == name
    for name in transformations:
        groups[f"transformation:{name}"] = lambda r, name=name: r.transformation == name
    report = {}
    for group, keep in groups.items():
        report[group] = {}
        for question in design.questions:
            triples = [(r.item_id, r.annotator_id, r.value) for r in ratings if r.question == question.name and keep(r)]
            matrix, _, _ = agreement.ratings_matrix(triples)
            report[group][question.name] = {
                **agreement.agreement_summary(matrix, categories=question.values).to_dict(),
                "warnings": list(agreement.agreement_warnings(matrix, categories=question.values)),
            }
    return report
