"""Annotator quality figures from a study's ratings (pure module, no Django).

Per annotator, from their ratings as plain records:

- **time per item**: their items sorted by submission time; the gap between two consecutive
  submissions is the time spent on the later item (the first item's time is unknown). Gaps over
  ``max_gap_seconds`` are breaks and left out. Reported: the median seconds and the share of timed
  items faster than ``min_seconds``.
- **straight-lining**: on real items (controls have obvious answers and would break a run that a
  rater who gets controls right keeps up everywhere else), the longest run of identical answers
  to one question in submission order, and the Shannon entropy (bits) of the answer distribution
  per question, averaged over questions weighted by their number of answers.
- **controls**: the share of control ratings within the design's margin of the expected answer
  (``annotation.science.control_check.control_check``'s rule), with a Wilson 95% interval.
- **deviation from peers**: for each rating of a real item with at least one other rater, the
  mean of the *other* raters' answers (leave-one-out consensus); reported are the mean absolute
  difference and Spearman's rho between the annotator's answers and those means (None with fewer
  than ``min_shared`` pairs or no variation).
- **deviation from the LLM**: the mean absolute difference between the rating and the item's LLM
  estimate (on the question's scale), over the real items that have one.

:func:`carefulness` combines them with the rater model's figures into one score in [0, 1].
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Collection, Hashable, Iterable, Sequence
from dataclasses import dataclass
from statistics import median

from annotation.kinds import ItemKind
from annotation.science.control_check import ControlRating, control_check
from annotation.science.rater_model import MIN_PAIRS, RaterEstimate
from core.stats import spearman_rho, wilson_interval

MAX_GAP_SECONDS = 30 * 60  # a longer pause between two submissions is a break, not work
MIN_SHARED = 5
# The suggested design.flag_low_carefulness and what it did on simulated studies
# (benchmarks/rater_model_sim.py --grid, which prints these rates per setting).
CAREFULNESS_FLAG_FRACTION = 0.4
CAREFULNESS_FLAG_HELP = (
    "A value f flags annotators whose carefulness is below f times the upper quartile of the study's annotators "
    "(not rejected ones). Suggested: 0.4. On simulated studies (scales 1-5 and 0-5, 10-45% careless annotators) "
    "with 40 or more real ratings per annotator it flagged at most 6% of careful annotators on average (17% in "
    "the worst study), every straight-liner and every annotator one category off, and every random or "
    "mode-guessing one (at least 2 in 3 when they also pass the controls and take their time); with 11-25 "
    "ratings per annotator it flagged up to 14% of careful annotators (a third in the worst study), every "
    "straight-liner and 33-100% of the other careless kinds. An offset of half a category is rarely flagged."
)


@dataclass(frozen=True)
class RatingRecord:
    annotator: Hashable
    item: Hashable
    question: str
    value: int
    submitted_at: float  # POSIX seconds of the item's first submission
    kind: str = ItemKind.REAL
    expected: int | None = None  # controls: the expected answer to this question
    estimate: float | None = None  # real items: the LLM estimate on the question's scale


@dataclass(frozen=True)
class Timing:
    n_timed: int
    n_breaks: int
    median_seconds: float | None
    share_too_fast: float | None


@dataclass(frozen=True)
class StraightLining:
    longest_run: int
    run_question: str | None
    entropy_bits: float | None


@dataclass(frozen=True)
class ControlRate:
    n_checked: int
    n_within: int
    rate: float | None
    ci_low: float | None
    ci_high: float | None
    mean_error: float | None = None  # mean of answer - expected, in categories (+ = too high)
    mean_abs_error: float | None = None


@dataclass(frozen=True)
class Deviation:
    n_shared: int
    peer_mad: float | None
    peer_spearman: float | None
    n_llm: int
    llm_mad: float | None


@dataclass(frozen=True)
class AnnotatorQuality:
    annotator: Hashable
    n_items: int
    n_ratings: int
    timing: Timing
    straight_lining: StraightLining
    controls: ControlRate
    deviation: Deviation
    distribution: dict[str, dict[int, int]]  # question -> value -> count


def item_times(submitted: Iterable[float], *, max_gap_seconds: float = MAX_GAP_SECONDS) -> tuple[list[float], int]:
    """Seconds spent on each item but the first (sorted submission times), and the number of
    gaps left out as breaks."""
    times = sorted(submitted)
    gaps = [later - earlier for earlier, later in zip(times, times[1:], strict=False)]
    kept = [g for g in gaps if g <= max_gap_seconds]
    return kept, len(gaps) - len(kept)


def timing(submitted: Iterable[float], *, min_seconds: float, max_gap_seconds: float = MAX_GAP_SECONDS) -> Timing:
    gaps, breaks = item_times(submitted, max_gap_seconds=max_gap_seconds)
    if not gaps:
        return Timing(n_timed=0, n_breaks=breaks, median_seconds=None, share_too_fast=None)
    fast = sum(1 for g in gaps if g < min_seconds)
    return Timing(
        n_timed=len(gaps), n_breaks=breaks, median_seconds=float(median(gaps)), share_too_fast=fast / len(gaps)
    )


def longest_run(values: Sequence[Hashable]) -> int:
    """Length of the longest run of equal consecutive values (0 for none)."""
    best = run = 0
    for n, value in enumerate(values):
        run = run + 1 if n and value == values[n - 1] else 1
        best = max(best, run)
    return best


def entropy_bits(values: Iterable[Hashable]) -> float | None:
    """Shannon entropy (base 2) of the distribution of ``values``; None for no values."""
    counts = Counter(values)
    total = sum(counts.values())
    if not total:
        return None
    return abs(-sum(c / total * math.log2(c / total) for c in counts.values()))  # abs: no -0.0


def straight_lining(records: Sequence[RatingRecord]) -> StraightLining:
    """Longest run per question in submission order, and the answer entropy (weighted mean over
    questions)."""
    per_question: dict[str, list[RatingRecord]] = defaultdict(list)
    for record in records:
        per_question[record.question].append(record)
    best, best_question, weighted, total = 0, None, 0.0, 0
    for question, rows in sorted(per_question.items()):
        rows.sort(key=lambda r: (r.submitted_at, str(r.item)))
        run = longest_run([r.value for r in rows])
        if run > best:
            best, best_question = run, question
        weighted += entropy_bits(r.value for r in rows) * len(rows)
        total += len(rows)
    return StraightLining(
        longest_run=best, run_question=best_question, entropy_bits=weighted / total if total else None
    )


def control_rate(records: Iterable[RatingRecord], *, margin: int) -> ControlRate:
    """The pass rate within ``margin`` with its Wilson interval, and how far off the answers are
    and in which direction (signed and absolute mean error)."""
    checked = [ControlRating(expected=r.expected, value=r.value) for r in records if r.expected is not None]
    check = control_check(checked, margin=margin, min_ratings=0)
    if not check.n_checked:
        return ControlRate(n_checked=0, n_within=0, rate=None, ci_low=None, ci_high=None)
    low, high = wilson_interval(check.n_within, check.n_checked)
    errors = [c.value - c.expected for c in checked]
    return ControlRate(
        n_checked=check.n_checked,
        n_within=check.n_within,
        rate=check.pass_rate,
        ci_low=low,
        ci_high=high,
        mean_error=sum(errors) / len(errors),
        mean_abs_error=sum(abs(e) for e in errors) / len(errors),
    )


def peer_consensus(
    records: Iterable[RatingRecord], *, exclude: Collection[Hashable] = ()
) -> dict[tuple[Hashable, Hashable, str], float]:
    """(annotator, item, question) -> mean answer of the other raters of that real item's question.

    Raters in ``exclude`` (rejected ones) count as no one's peer, but get a consensus themselves."""
    answers: dict[tuple[Hashable, str], dict[Hashable, int]] = defaultdict(dict)
    for r in records:
        if r.kind == ItemKind.REAL:
            answers[(r.item, r.question)][r.annotator] = r.value
    consensus = {}
    for (item, question), by_rater in answers.items():
        counted = {a: v for a, v in by_rater.items() if a not in exclude}
        for annotator in by_rater:
            others = [v for a, v in counted.items() if a != annotator]
            if others:
                consensus[(annotator, item, question)] = sum(others) / len(others)
    return consensus


def deviation(
    records: Sequence[RatingRecord],
    consensus: dict[tuple[Hashable, Hashable, str], float],
    *,
    min_shared: int = MIN_SHARED,
) -> Deviation:
    pairs = [
        (r.value, consensus[(r.annotator, r.item, r.question)])
        for r in records
        if (r.annotator, r.item, r.question) in consensus
    ]
    llm = [abs(r.value - r.estimate) for r in records if r.kind == ItemKind.REAL and r.estimate is not None]
    rho = None
    if len(pairs) >= min_shared:
        rho = spearman_rho([p[0] for p in pairs], [p[1] for p in pairs])
    return Deviation(
        n_shared=len(pairs),
        peer_mad=sum(abs(a - b) for a, b in pairs) / len(pairs) if pairs else None,
        peer_spearman=rho,
        n_llm=len(llm),
        llm_mad=sum(llm) / len(llm) if llm else None,
    )


def annotator_quality(
    records: Sequence[RatingRecord],
    *,
    min_seconds: float,
    control_margin: int,
    max_gap_seconds: float = MAX_GAP_SECONDS,
    min_shared: int = MIN_SHARED,
    exclude_from_consensus: Collection[Hashable] = (),
) -> dict[Hashable, AnnotatorQuality]:
    """Every figure above per annotator of ``records`` (one record per rating)."""
    if min_seconds < 0 or max_gap_seconds <= 0:
        raise ValueError(f"min_seconds must be >= 0 and max_gap_seconds > 0, got {min_seconds}, {max_gap_seconds}")
    by_annotator: dict[Hashable, list[RatingRecord]] = defaultdict(list)
    for record in records:
        by_annotator[record.annotator].append(record)
    consensus = peer_consensus(records, exclude=exclude_from_consensus)
    result = {}
    for annotator, rows in by_annotator.items():
        first_submission: dict[Hashable, float] = {}
        for r in rows:
            first_submission[r.item] = min(first_submission.get(r.item, r.submitted_at), r.submitted_at)
        distribution: dict[str, dict[int, int]] = defaultdict(dict)
        for r in rows:
            distribution[r.question][r.value] = distribution[r.question].get(r.value, 0) + 1
        result[annotator] = AnnotatorQuality(
            annotator=annotator,
            n_items=len(first_submission),
            n_ratings=len(rows),
            timing=timing(first_submission.values(), min_seconds=min_seconds, max_gap_seconds=max_gap_seconds),
            straight_lining=straight_lining([r for r in rows if r.kind == ItemKind.REAL]),
            controls=control_rate(rows, margin=control_margin),
            deviation=deviation(rows, consensus, min_shared=min_shared),
            distribution={q: dict(sorted(v.items())) for q, v in sorted(distribution.items())},
        )
    return result


@dataclass(frozen=True)
class AnnotatorFlagHit:
    rule: str  # an annotator-level annotation.kinds.FlagRule value
    figure: float  # the figure that broke the rule (share, run length, competence upper bound)


def annotator_flag_hits(
    quality: AnnotatorQuality,
    *,
    competence_high: float | None,
    too_fast_share: float,
    straight_line_run: int,
    low_competence: float,
    carefulness: float | None = None,
    low_carefulness: float = 0.0,
) -> list[AnnotatorFlagHit]:
    """The declared annotator-level rules ``quality`` breaks (a threshold of 0 turns a rule off):
    more than ``too_fast_share`` of timed items too fast; a run of at least ``straight_line_run``
    identical answers; a competence interval whose upper end lies below ``low_competence``; a
    ``carefulness`` below ``low_carefulness`` (an unknown carefulness flags nothing)."""
    hits = []
    share = quality.timing.share_too_fast
    if too_fast_share > 0 and share is not None and share > too_fast_share:
        hits.append(AnnotatorFlagHit("too_fast", share))
    run = quality.straight_lining.longest_run
    if straight_line_run > 0 and run >= straight_line_run:
        hits.append(AnnotatorFlagHit("straight_lining", float(run)))
    if low_competence > 0 and competence_high is not None and competence_high < low_competence:
        hits.append(AnnotatorFlagHit("low_competence", competence_high))
    if low_carefulness > 0 and carefulness is not None and carefulness < low_carefulness:
        hits.append(AnnotatorFlagHit("low_carefulness", carefulness))
    return hits


def shrunk_offset(estimate: RaterEstimate) -> float:
    """The rater's offset from the consensus, moved towards 0 by two standard errors (0 when the
    offset is within two standard errors of 0: a few ratings prove no offset)."""
    se = estimate.offset_se or 0.0
    return math.copysign(max(0.0, abs(estimate.offset) - 2.0 * se), estimate.offset)


def carefulness(quality: AnnotatorQuality, estimate: RaterEstimate | None) -> float | None:
    """One score in [0, 1] from every signal, the product of:

    - the **agreement** with the leave-one-out consensus on real items (Lin's concordance
      correlation, ``RaterEstimate.agreement``): 0 for a straight-liner and near 0 for a random
      rater or one answering near the study's mode without reading; lowered by noise and by an
      offset, relative to how much the items differ;
    - ``1 / (1 + b**2)`` with ``b`` the **offset** from the consensus in categories, shrunk by two
      standard errors (``shrunk_offset``): an offset counts in absolute terms too, as the gate
      compares means with a fixed threshold (0.5 for a careful reader one category off);
    - the **control pass rate** (1 without checked controls) times ``1 / (1 + (2 e)**2)`` with
      ``e`` the mean signed error on the controls: their expected answers sit at the ends of the
      scale, so an offset shows on about half of them and ``2 e`` estimates it;
    - the share of timed items **not too fast** (1 without timed items).

    None without an agreement (fewer than ``MIN_PAIRS`` real ratings with a consensus: nobody
    else rated the rater's real items). A product, so any one signal at 0 puts the rater at 0.
    Carefulness is comparable within a study, not across studies: on a study whose items barely
    differ the agreement of careful raters is lower (``carefulness_flag_floor`` compares it with
    the study's own raters)."""
    if estimate is None or estimate.n_consensus < MIN_PAIRS:
        return None
    score = estimate.agreement / (1.0 + shrunk_offset(estimate) ** 2)
    controls = quality.controls
    if controls.rate is not None:
        score *= controls.rate / (1.0 + (2.0 * (controls.mean_error or 0.0)) ** 2)
    if quality.timing.share_too_fast is not None:
        score *= 1.0 - quality.timing.share_too_fast
    return float(score)


def carefulness_flag_floor(scores: Iterable[float | None], fraction: float) -> float | None:
    """The carefulness below which a rater is flagged: ``fraction`` of the upper quartile of the
    known ``scores`` (the study's raters who are not rejected). Relative, because how high a
    careful rater's carefulness is depends on how much the study's items differ; the upper
    quartile, so that it still stands on careful raters when up to three in four are careless.
    None when the rule is off (``fraction`` 0) or no score is known."""
    known = sorted(s for s in scores if s is not None)
    if fraction <= 0 or not known:
        return None
    return fraction * _quantile(known, 0.75)


def _quantile(ordered: Sequence[float], q: float) -> float:
    """The ``q`` quantile of sorted values, interpolating linearly (numpy's default rule)."""
    position = q * (len(ordered) - 1)
    below = math.floor(position)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (position - below) * (ordered[above] - ordered[below])
