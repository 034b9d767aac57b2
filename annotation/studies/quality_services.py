"""Annotator quality of a study, computed on request from the database (``annotation.science.annotator_quality``
and ``annotation.science.rater_model`` do the science), and the declared annotator-level flag rules
applied by ``study_validate``."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, replace

from django.db.models import Min

from annotation.kinds import ItemKind
from annotation.models import Annotator, Flag, Rating, Study, StudyItem
from annotation.science import plots
from annotation.science.annotator_quality import (
    CAREFULNESS_FLAG_HELP,
    AnnotatorQuality,
    RatingRecord,
    annotator_flag_hits,
    annotator_quality,
    carefulness,
    carefulness_flag_floor,
)
from annotation.science.design import StudyDesign
from annotation.science.rater_model import RaterEstimate, RaterModelFit, fit_rater_model
from annotation.science.sampling import seeded_rng
from annotation.science.validation import ANNOTATOR_RULES
from annotation.studies.design_services import study_design

N_BOOT = 1000


@dataclass(frozen=True)
class AnnotatorQualityRow:
    annotator: Annotator
    quality: AnnotatorQuality | None  # None: no active rating yet
    competence: RaterEstimate | None  # None: no rating of an item someone else rated too
    carefulness_floor: float | None = None  # below it the low-carefulness rule flags (None: off)

    @property
    def carefulness(self) -> float | None:
        """``annotation.science.annotator_quality.carefulness``: agreement, offset, controls and time in one score."""
        return carefulness(self.quality, self.competence) if self.quality and self.competence else None

    @property
    def carefulness_flagged(self) -> bool | None:
        """Whether the low-carefulness rule flags this annotator (None: rule off, carefulness
        unknown or annotator rejected)."""
        score = self.carefulness
        if self.carefulness_floor is None or score is None or self.annotator.status == Annotator.Status.REJECTED:
            return None
        return score < self.carefulness_floor

    @property
    def username(self) -> str:
        return self.annotator.user.get_username()


@dataclass(frozen=True)
class StudyQuality:
    rows: list[AnnotatorQualityRow]
    model: RaterModelFit | None
    scale: tuple[int, int]
    min_seconds: float
    low_carefulness: float = 0.0  # the design's flag_low_carefulness (0: off)
    carefulness_floor: float | None = None  # what that fraction gives on this study (None: off)

    @property
    def carefulness_flag_help(self) -> str:
        """What the low-carefulness rule does at the suggested threshold, measured on simulations."""
        return CAREFULNESS_FLAG_HELP


def quality_records(study: Study) -> list[RatingRecord]:
    """The study's active ratings as plain records; the time of an item is the first submission
    of its response (later edits move ``submitted_at`` but are not time spent on first reading).
    Two queries, whatever the number of annotators: the ratings as plain values, and each of the
    study's items once (not once per rating). In item order, then rating order: the order decides
    the rater model's order of raters, and so which bootstrap draws each rater gets (the grouped
    query has no order of its own)."""
    items = {
        pk: (kind, expected, llm_estimates)
        for pk, kind, expected, llm_estimates in StudyItem.objects.filter(study=study).values_list(
            "pk", "kind", "expected", "llm_estimates"
        )
    }
    ratings = (
        Rating.objects.filter(study_item__study=study, active=True)
        .annotate(first_seen=Min("revisions__argilla_updated_at"))
        .order_by("study_item_id", "id")
        .values_list("annotator_id", "study_item_id", "question", "value", "submitted_at", "first_seen")
    )
    records = []
    for annotator, item, question, value, submitted_at, first_seen in ratings:
        kind, expected, llm_estimates = items[item]
        at = min(filter(None, (first_seen, submitted_at)))
        records.append(
            RatingRecord(
                annotator=annotator,
                item=item,
                question=question,
                value=value,
                submitted_at=at.timestamp(),
                kind=kind,
                expected=expected.get(question) if kind != ItemKind.REAL else None,
                estimate=(llm_estimates.get(question) or {}).get("estimate"),
            )
        )
    return records


def study_rater_model(study: Study, *, records: list[RatingRecord] | None = None, n_boot: int = N_BOOT, rejected=None):
    """The ordinal rater model fitted to every active rating (real items and controls; each item's
    question is a unit), on the scale of the questions that hold most ratings; seeded by the design.
    Rejected annotators get estimates but count in no one's consensus nor in the model's latent
    categories; competence is measured on real items only."""
    design = study_design(study)
    records = quality_records(study) if records is None else records
    scales = {q.name: (q.low, q.high) for q in design.questions}
    by_scale = defaultdict(list)
    for r in records:
        if r.question in scales:
            by_scale[scales[r.question]].append(((r.item, r.question), r.annotator, r.value))
    if not by_scale:
        question = design.questions[0]
        return None, (question.low, question.high)
    scale, triples = max(by_scale.items(), key=lambda kv: len(kv[1]))
    if rejected is None:
        rejected = set(study.annotators.filter(status=Annotator.Status.REJECTED).values_list("pk", flat=True))
    fit = fit_rater_model(
        triples,
        scale=scale,
        rng=seeded_rng(design.seed, "rater-model"),
        n_boot=n_boot,
        exclude=rejected,
        competence_units={(r.item, r.question) for r in records if r.kind == ItemKind.REAL},
    )
    return fit, scale


def study_annotator_quality(*, study: Study) -> StudyQuality:
    """Per annotator: time per item, straight-lining, control pass rate, deviation from peers and
    the LLM, and the rater model's competence with its interval."""
    design = study_design(study)
    records = quality_records(study)
    annotators = list(study.annotators.select_related("user"))
    rejected = {a.pk for a in annotators if a.status == Annotator.Status.REJECTED}
    figures = _figures(records, design, rejected)
    fit, scale = study_rater_model(study, records=records, rejected=rejected)
    rows = [
        AnnotatorQualityRow(
            annotator=a,
            quality=figures.get(a.pk),
            competence=next((e for e in fit.raters if e.rater == a.pk), None) if fit else None,
        )
        for a in annotators
    ]
    floor = carefulness_flag_floor(
        [r.carefulness for r in rows if r.annotator.status != Annotator.Status.REJECTED], design.flag_low_carefulness
    )
    rows = [replace(r, carefulness_floor=floor) for r in rows]
    return StudyQuality(
        rows=rows,
        model=fit,
        scale=tuple(scale),
        min_seconds=design.min_seconds_per_item,
        low_carefulness=design.flag_low_carefulness,
        carefulness_floor=floor,
    )


def _figures(records, design: StudyDesign, rejected) -> dict[int, AnnotatorQuality]:
    return annotator_quality(
        records,
        min_seconds=design.min_seconds_per_item,
        control_margin=design.control_margin,
        exclude_from_consensus=rejected,
    )


def annotator_flags_apply(*, study: Study) -> tuple[int, int]:
    """Apply the declared annotator-level rules (too fast, straight-lining, low competence, low
    carefulness): a rater who breaks one gets one flag per rule on their latest rating, which
    joins the review queue and counts towards ``max_confirmed_flags`` once confirmed. An open flag
    whose rule no longer fires is removed; a reviewed one stays. Rejected raters are flagged no
    more and count in no one's consensus. Returns (created, removed). Call it inside the
    validation's transaction."""
    design = study_design(study)
    existing = defaultdict(dict)
    flags = Flag.objects.filter(rating__study_item__study=study, rule__in=ANNOTATOR_RULES).select_related("rating")
    for flag in flags:
        existing[flag.rating.annotator_id][flag.rule] = flag
    model_needed = design.flag_low_competence or design.flag_low_carefulness
    declared = design.flag_too_fast_share or design.flag_straight_line_run or model_needed
    if not declared and not existing:
        return 0, 0
    records = quality_records(study) if declared else []
    annotators = {a.pk: a for a in study.annotators.all()}
    rejected = {pk for pk, a in annotators.items() if a.status == Annotator.Status.REJECTED}
    figures = _figures(records, design, rejected)
    fit = study_rater_model(study, records=records, rejected=rejected)[0] if model_needed else None
    estimates = {e.rater: e for e in fit.raters} if fit else {}
    scores = {pk: carefulness(q, estimates.get(pk)) for pk, q in figures.items() if pk not in rejected}
    floor = carefulness_flag_floor(scores.values(), design.flag_low_carefulness)
    created = removed = 0
    for pk, annotator in annotators.items():
        hits = {}
        if annotator.status != Annotator.Status.REJECTED and pk in figures:
            estimate = estimates.get(pk)
            hits = {
                h.rule: h
                for h in annotator_flag_hits(
                    figures[pk],
                    competence_high=estimate.ci_high if estimate else None,
                    too_fast_share=design.flag_too_fast_share,
                    straight_line_run=design.flag_straight_line_run,
                    low_competence=design.flag_low_competence,
                    carefulness=scores.get(pk),
                    low_carefulness=floor or 0.0,
                )
            }
        for rule, hit in hits.items():
            flag = existing[pk].get(rule)
            if flag is None:
                latest = _latest_rating(annotator)
                Flag.objects.create(rating=latest, rule=rule, value=latest.value, deviation=hit.figure)
                created += 1
            elif flag.status == Flag.Status.OPEN and flag.deviation != hit.figure:
                flag.deviation = hit.figure
                flag.save(update_fields=["deviation"])
        for rule, flag in existing[pk].items():
            if rule not in hits and flag.status == Flag.Status.OPEN:
                flag.delete()
                removed += 1
    return created, removed


def _latest_rating(annotator: Annotator) -> Rating:
    """The annotator's latest active rating, of a real item when there is one."""
    ratings = Rating.objects.filter(annotator=annotator, active=True).order_by("-submitted_at", "-id")
    return ratings.filter(study_item__kind=ItemKind.REAL).first() or ratings.first()


def quality_figures(report: StudyQuality) -> dict[str, str]:
    """Name -> inline SVG of the page's three figures (empty when no annotator has a rating)."""
    rows = [r for r in report.rows if r.quality is not None]
    if not rows:
        return {}
    names = [r.username for r in rows]
    controls = [r.quality.controls for r in rows]
    categories = list(range(report.scale[0], report.scale[1] + 1))
    shares = []
    for r in rows:
        counts = defaultdict(int)
        for per_value in r.quality.distribution.values():
            for value, n in per_value.items():
                counts[value] += n
        total = sum(counts.values()) or 1
        shares.append([counts[c] / total for c in categories])
    return {
        "time_vs_deviation": plots.time_vs_deviation(
            names,
            [r.quality.timing.median_seconds for r in rows],
            [r.quality.deviation.peer_mad for r in rows],
            min_seconds=report.min_seconds,
        ),
        "controls": plots.rates_with_intervals(
            names,
            [c.rate for c in controls],
            [c.ci_low for c in controls],
            [c.ci_high for c in controls],
            xlabel="control pass rate (Wilson 95% interval)",
        ),
        "distribution": plots.rating_distributions(names, shares, categories),
    }


def quality_report_data(report: StudyQuality) -> dict:
    """The report as JSON-ready data (API, command)."""
    model = report.model
    return {
        "scale": list(report.scale),
        "min_seconds_per_item": report.min_seconds,
        "flag_low_carefulness": report.low_carefulness,
        "carefulness_floor": report.carefulness_floor,
        "model": None
        if model is None
        else {
            "n_units": model.n_units,
            "n_ratings": model.n_ratings,
            "n_boot": model.n_boot,
            "confidence": model.confidence,
            "converged": model.converged,
            "prevalence": list(model.prevalence),
        },
        "annotators": [
            {
                "username": r.username,
                "status": r.annotator.status,
                **(
                    {k: v for k, v in asdict(r.quality).items() if k != "annotator"}
                    if r.quality
                    else {"n_items": 0, "n_ratings": 0}
                ),
                "carefulness": r.carefulness,
                "carefulness_flagged": r.carefulness_flagged,
                "competence": None
                if r.competence is None
                else {k: v for k, v in asdict(r.competence).items() if k not in ("rater", "n_ratings")},
            }
            for r in report.rows
        ],
    }
