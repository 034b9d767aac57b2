"""Issue 40, point 4: how many human ratings the sequential gate needs when ratings go one per item,
the confidence sequence uses the variance, and an LLM judge scores every output (PPI++).

Usage: .venv/bin/python benchmarks/gate_savings.py [--quick] [--replays 1000] [--null 4000] [--seed 0]
                                                  [--bias-sd 0]
       .venv/bin/python benchmarks/gate_savings.py --tables [--replays 4000] [--seed 0]
       .venv/bin/python benchmarks/gate_savings.py --bias [--quick] [--replays 1000] [--null 4000]

An independent simulator (it shares no code with ``benchmarks/adaptive_gate.py``; the rules it
replays are the library's: ``annotation.science.sequential.first_events`` for today's gate and
``annotation.science.variance_sequences`` for the new one).

Model (per replay, per question; two questions, quality and fluency, independent, same true mean)
--------------------------------------------------------------------------------------------
- a run of ``N = 1000`` outputs; output ``i`` has a latent mean ``c + u_i``, ``u_i ~ N(0, item_sd)``;
- a rating is ``clip(round(c + u_i + e), 1, 5)``, ``e ~ N(0, rater_sd)`` independent (by
  default no rater bias: raters differ only by noise); the output's *true mean* ``E_i`` is its
  expected rating;
- ``c`` is solved per replay so that the mean of ``E_i`` over the ``N`` outputs is exactly
  ``threshold + d`` (the grid's "true mean - threshold");
- **rater bias** (``--bias-sd``, ``--bias``, ``--tables``' pool): a pool of 8 annotators
  (``POOL``), each with a persistent additive bias ``b_r ~ N(0, bias_sd)`` (the same on both
  questions) and a pace uniform in [0.5, 2]; an item's 3 raters are drawn without replacement in
  proportion to pace, the first being the one a one-rater gate reads, so rater ``r`` gives the
  share ``w_r`` (its pace over the pool's) of the single ratings. A rating is then
  ``clip(round(c + u_i + b_r + e), 1, 5)``. With one rating per item a rater's bias enters the
  estimate directly and does not average out within an item: **the gate's estimate targets the
  mean, over the rater pool weighted by ``w_r``, of each output's expected rating**, and ``E_i``
  and ``c`` are defined with that pool average (so ``d = 0`` is a true mean exactly at the
  threshold for the gate's estimand, and the error there is the rule's own). The complete study
  weighs the raters differently (3 distinct per item: flatter weights), and both carry the pool's
  mean bias against a bias-free truth (``--bias`` prints its spread). The pool is drawn from its
  own generator: with ``bias_sd = 0`` every figure is the one without a pool, seed for seed
  (with ``--bias-sd``, the main run's designs keep the 10-item minimum alone; ``--tables`` and
  ``--bias`` also wait for 3 distinct raters);
- the judge scores every output: ``g_i = clip(E_i + bias + n_i, 1, 5)`` with ``n_i ~ N(0, s)``,
  ``s = sd(E) sqrt(1/rho^2 - 1)`` so that its correlation with the true item means is ``rho``
  before the clip (``rho = 0``: ``g_i = mean(E) + bias + N(0, sd(E))``, unrelated to the items);
  the realised correlation after the clip is printed;
- the study draws 100 of the ``N`` outputs without replacement, in random order; the complete
  study rates each by 3 raters; without a pool the designs below assume the raters of an item's
  first rating rotate over 5 annotators, so the 3 distinct raters a decision needs are there from
  the 3rd item (``min_items`` = 10 binds).

Designs (threshold 3.0, alpha 0.05, at least 10 items, 2 questions with the corrections of
``settle_questions``; every design reads the items one after the other, no ratings in flight)
------------------------------------------------------------------------------------------
- **complete**: 100 items x 3 raters = 300 ratings, pass if every question's mean >= 3.0: the
  reference;
- **today (2+1)**: today's best design, idealised: the gate on each item's first 2 raters with
  today's confidence sequence (predictable plug-in bet, ``sequential.first_events``), a third
  rater only where the two are more than 1 point apart on a question (``raters_needed``); it
  counts 2 ratings per observed item plus the third raters of contested ones among them; never
  settled: all 100 items, decision on the gate's means;
- **1/item, today's CS**: one rating per item, the same plug-in sequence on the single ratings;
- **1/item, aGRAPA**: one rating per item, ``variance_sequences`` (variance-adaptive aGRAPA bet,
  observations recentred for draws without replacement from the ``N`` outputs);
- **1/item, asymptotic**: one rating per item, the asymptotic confidence sequence of
  ``variance_sequences`` (normal-mixture boundary with the empirical variance, tightest at 100
  items; valid as the number of items grows, no finite-sample guarantee: its error at the threshold
  is measured below);
- **aGRAPA + judge / asympt. + judge**: the same two sequences on the PPI++ observations
  (``prediction_powered_observations``, without replacement, ``lam_t`` from earlier items only),
  end-of-study decision on the fixed-``n`` PPI++ estimate.
The one-rating designs also rate a declared share (``--overlap``, default 10%) of the items they
use a second time, for agreement (AC2) and the rater model; those ratings are counted, and the
gate does not read them. A design never settled uses all 100 items (100 ratings + the overlap)
and decides on its end-of-study estimate.

Figures: ratings saved = 1 - ratings used / 300, averaged over replays (per distance) and over the
grid (the mean of the distances); differ = the design's decision not the complete study's; at
the threshold (``d = 0``), error = settled early on either side (the rule allows alpha = 5%).
``--quick`` replays 200 studies per point, judge biases -1, 0, +1, and 1000 studies at the
threshold; the default 1000 per point, biases -1, -0.5, 0, 0.5, 1, and 4000 at the threshold. The
quick mode took about 90 s on a 2-core machine shared with other jobs.

The design form's tables (``--tables``: prints the constants of
``annotation/science/adaptive_tables.py``, 4000 studies per point by default, 85 s on the same
2-core machine shared with other jobs): ``replay_kind`` replays one design kind (``TABLE_KINDS``:
one rater per item with the plug-in, aGRAPA or asymptotic sequence; prediction-powered with the
asymptotic sequence and a judge correlated 0.5 or 0.9 with the true item means, bias 0) over the
distances 0, 0.1, 0.25, 0.5, 0.75 below and above the threshold, rater sd 0.9 and item sd 0.7 (the
issue's held-out simulator; the noisier of the conditions above, so the smaller savings). It
differs from the designs above in three ways, those the product's one-rater design declares: a
share of 20% of the 100 items (``adaptive_overlap_share``), drawn before any rating, is rated by
all 3 raters and their 3 ratings are counted when the gate has observed them (instead of a second
rating of 10% of the observed items); no decision before 3 distinct raters are behind the observed
items (``adaptive_min_raters``; with 8 annotators the 10-item minimum binds); the plug-in bet runs
on the same recentred observations as the others (``variance_sequences.first_settlements`` with
``strategy="plugin"``). Items are read one after the other: ratings in flight when the gate
settles are not counted (the pull replays of ``benchmarks/adaptive_gate.py`` behind the two older
tables count them). Saved = 1 - (items observed + 2 x overlap items among them) / 300.

``--bias`` replays the first four kinds with rater bias sd 0 and 0.3 at each rater sd / item sd:
ratings saved over the grid, decisions differing from the complete study, and the error at the
threshold (``--null`` studies); then the error at the threshold with bias sd 0.3 when each item's
first rater comes in runs of 1, 5 or 10 consecutive items (one annotator working through a batch
before the next: the observations are then not independent given the pool, and the first items
estimate their few raters' mean, not the pool's); ``--quick`` (200 per point, 1000 at the
threshold) took about 4 minutes on the same machine, the default (1000, 4000) 10 to 15.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.special import ndtr

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from annotation.science.sequential import first_events  # noqa: E402
from annotation.science.variance_sequences import (  # noqa: E402
    _ppi_rows,
    asymptotic_first_settlements,
    first_settlements,
    ppi_weight,
)

THRESHOLD, ALPHA, MIN_ITEMS, ITEMS, RATERS, POPULATION = 3.0, 0.05, 10, 100, 3, 1000
SCALE = (1.0, 5.0)
QUESTIONS = 2
AGREE_WITHIN = 1.0  # raters_needed: more than a quarter of the 1-5 scale apart
GRID = (-0.75, -0.5, -0.25, -0.1, 0.0, 0.1, 0.25, 0.5, 0.75)
AWAY = 0.25  # "away from the threshold": |d| >= this
RATER_SDS = (0.5, 0.9)
ITEM_SDS = (0.4, 0.7)
CORRELATIONS = (0.0, 0.5, 0.7, 0.9, 0.97)
NO_JUDGE = ("today (2+1)", "1/item, today's CS", "1/item, aGRAPA", "1/item, asymptotic")
METHODS = ("betting", "asymptotic")
BASELINE = {"betting": "1/item, aGRAPA", "asymptotic": "1/item, asymptotic"}
POOL, PACES = 8, (0.5, 2.0)  # annotators in a pool, the range of their uniform random paces
MIN_RATERS = 3  # distinct raters behind a decision (the design's adaptive_min_raters)
BIAS_SDS = (0.0, 0.3)  # --bias: sd of a rater's persistent bias, points on the 1-5 scale
RUNS = (1, 5, 10)  # --bias: consecutive items whose first rater is one annotator
TABLE_RATER_SD, TABLE_ITEM_SD, TABLE_OVERLAP = 0.9, 0.7, 0.2  # the design form's tables (--tables)
TABLE_DISTANCES = (0.0, 0.1, 0.25, 0.5, 0.75)


@dataclass(frozen=True)
class Outcome:
    """Per replay: ratings used and the decision (True = pass)."""

    ratings: np.ndarray
    passed: np.ndarray
    early: np.ndarray  # settled before the end


def expected_rating(latent: np.ndarray, rater_sd: float) -> np.ndarray:
    """E[clip(round(latent + N(0, rater_sd)), 1, 5)] and its derivative in ``latent``."""
    cuts = np.arange(1, 5) + 0.5
    zs = (cuts - latent[..., None]) / rater_sd
    value = 5 - ndtr(zs).sum(axis=-1)
    slope = (np.exp(-0.5 * zs**2) / np.sqrt(2 * np.pi)).sum(axis=-1) / rater_sd
    return value, slope


@dataclass(frozen=True)
class RaterPool:
    """The annotators of each replay: a persistent additive bias each (the same on every question),
    a pace, and who rates which item.

    ``share[r]`` is rater ``r``'s pace over the pool's: the chance that ``r`` is an item's first
    rater (the one rating a one-rater gate reads), so the gate's estimand weighs raters by it.
    ``assigned[:, i, k]`` is item ``i``'s ``k``-th rater, the ``RATERS`` distinct raters drawn in
    proportion to pace without replacement (the first is the one that picked the item up first).
    """

    bias: np.ndarray  # (replays, POOL)
    share: np.ndarray  # (replays, POOL), rows sum to 1
    assigned: np.ndarray  # (replays, ITEMS, RATERS) rater indices


def draw_pool(rng, replays: int, bias_sd: float, size: int = POOL, runs: int = 1) -> RaterPool:
    """``runs`` > 1: the items come in runs of that many consecutive items whose first rater is one
    annotator (drawn in proportion to pace), as when an annotator works through a batch before the
    next starts; 1: each item's first rater drawn anew (annotators working side by side)."""
    bias = rng.normal(0, bias_sd, (replays, size)) if bias_sd > 0 else np.zeros((replays, size))
    pace = rng.uniform(*PACES, (replays, size))
    # Gumbel top-k: an ordered draw without replacement with probabilities in proportion to pace
    keys = np.log(pace)[:, None, :] + rng.gumbel(size=(replays, ITEMS, size))
    if runs > 1:
        blocks = np.log(pace)[:, None, :] + rng.gumbel(size=(replays, -(-ITEMS // runs), size))
        first = np.repeat(blocks.argmax(axis=2), runs, axis=1)[:, :ITEMS]
        np.put_along_axis(keys, first[:, :, None], np.inf, axis=2)
    assigned = np.argsort(-keys, axis=2)[:, :, :RATERS]
    return RaterPool(bias, pace / pace.sum(axis=1, keepdims=True), assigned)


def population(rng, replays: int, target: float, rater_sd: float, item_sd: float, pool: RaterPool | None = None):
    """Latent means (replays, N) whose expected ratings average exactly ``target`` per row; with a
    biased ``pool``, whose expected ratings averaged over the pool, weighted by ``pool.share``
    (what a one-rater gate estimates), average ``target``. Returns the latent means and each
    output's true mean (its expected rating, over the pool when biased)."""
    u = rng.normal(0, item_sd, (replays, POPULATION))
    c = np.full((replays, 1), target)
    biased = pool is not None and bool(pool.bias.any())
    for _ in range(30):  # Newton on the row's centre
        if biased:
            value, slope = _pool_rating(c + u, rater_sd, pool)
        else:
            value, slope = expected_rating(c + u, rater_sd)
        gap = value.mean(axis=1, keepdims=True) - target
        c -= gap / np.maximum(slope.mean(axis=1, keepdims=True), 1e-6)
        if np.abs(gap).max() < 1e-10:
            break
    latent = c + u
    true = _pool_rating(latent, rater_sd, pool)[0] if biased else expected_rating(latent, rater_sd)[0]
    return latent, true


def _pool_rating(latent: np.ndarray, rater_sd: float, pool: RaterPool) -> tuple[np.ndarray, np.ndarray]:
    """``expected_rating`` averaged over the pool's raters weighted by their share."""
    value = np.zeros_like(latent)
    slope = np.zeros_like(latent)
    for r in range(pool.bias.shape[1]):
        v, s = expected_rating(latent + pool.bias[:, r : r + 1], rater_sd)
        value += pool.share[:, r : r + 1] * v
        slope += pool.share[:, r : r + 1] * s
    return value, slope


def judge_scores(rng, true_means: np.ndarray, rho: float, bias: float) -> np.ndarray:
    sd = true_means.std(axis=1, keepdims=True)
    if rho > 0:
        noise = rng.standard_normal(true_means.shape) * sd * np.sqrt(1 / rho**2 - 1)
        g = true_means + noise
    else:
        g = true_means.mean(axis=1, keepdims=True) + rng.standard_normal(true_means.shape) * sd
    return np.clip(g + bias, *SCALE)


def joint(events: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """``settle_questions``' joint rule from each question's first event (n, passed)."""
    n = np.stack([e[0] for e in events])
    passed = np.stack([e[1] for e in events])
    failed = np.isfinite(n) & ~passed
    fail_at = np.where(failed, n, np.inf).min(axis=0)
    all_pass = (np.isfinite(n) & passed).all(axis=0)
    pass_at = np.where(all_pass, n.max(axis=0), np.inf)
    at = np.where(np.isfinite(fail_at), fail_at, pass_at)
    return at, np.isfinite(pass_at) & ~np.isfinite(fail_at)


@dataclass
class Study:
    """One batch of replays of one condition: the sampled items' ratings, the outputs' true means
    and the order the study draws them in."""

    ratings: list[np.ndarray]  # per question (replays, ITEMS, RATERS)
    true_means: list[np.ndarray]  # per question (replays, N): each output's expected rating
    order: np.ndarray  # (replays, ITEMS): the outputs drawn, in order
    pool: RaterPool | None = None  # who rated what (None: raters differ by noise only)


@dataclass
class Judge:
    judge_all: list[np.ndarray]  # per question (replays, N)
    judge: list[np.ndarray]  # per question (replays, ITEMS): the drawn outputs' scores
    corr: float  # realised correlation with the true item means (mean over replays and questions)


def draw_study(rng, replays: int, d: float, rater_sd: float, item_sd: float, pool: RaterPool | None = None) -> Study:
    """``pool`` (drawn from its own generator) adds each rater's bias to their ratings; without
    one, or with no bias, the draws from ``rng`` and so the figures are those of the unbiased model."""
    ratings, true = [], []
    order = np.argsort(rng.random((replays, POPULATION)), axis=1)[:, :ITEMS]
    bias = 0.0 if pool is None else np.take_along_axis(pool.bias[:, None, :], pool.assigned, axis=2)
    for _ in range(QUESTIONS):
        latent, true_means = population(rng, replays, THRESHOLD + d, rater_sd, item_sd, pool)
        true.append(true_means)
        picked = np.take_along_axis(latent, order, axis=1)
        noise = rng.normal(0, rater_sd, (replays, ITEMS, RATERS))
        ratings.append(np.clip(np.rint(picked[..., None] + bias + noise), *SCALE))
    return Study(ratings, true, order, pool)


def draw_judge(rng, study: Study, rho: float, bias: float) -> Judge:
    judge_all, judge, corrs = [], [], []
    for true_means in study.true_means:
        g_all = judge_scores(rng, true_means, rho, bias)
        judge_all.append(g_all)
        judge.append(np.take_along_axis(g_all, study.order, axis=1))
        gc = g_all - g_all.mean(axis=1, keepdims=True)
        ec = true_means - true_means.mean(axis=1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            corrs.append(np.nanmean((gc * ec).sum(1) / np.sqrt((gc**2).sum(1) * (ec**2).sum(1))))
    return Judge(judge_all, judge, float(np.mean(corrs)))


def complete(study: Study) -> np.ndarray:
    return np.all([r.mean(axis=(1, 2)) >= THRESHOLD for r in study.ratings], axis=0)


def today(study: Study) -> Outcome:
    gate = [r[:, :, :2].mean(axis=2) for r in study.ratings]
    unit = [(g - SCALE[0]) / (SCALE[1] - SCALE[0]) for g in gate]
    tau = (THRESHOLD - SCALE[0]) / (SCALE[1] - SCALE[0])
    share = ALPHA / QUESTIONS
    at, passed = joint([first_events(u, tau, alpha=share, alpha_pass=ALPHA, min_items=MIN_ITEMS) for u in unit])
    contested = np.any([np.abs(r[:, :, 0] - r[:, :, 1]) > AGREE_WITHIN + 1e-9 for r in study.ratings], axis=0)
    n = np.where(np.isfinite(at), at, ITEMS).astype(int)
    used = 2 * n + (np.cumsum(contested, axis=1)[np.arange(n.size), n - 1])
    end = np.all([g.mean(axis=1) >= THRESHOLD for g in gate], axis=0)
    return Outcome(used, np.where(np.isfinite(at), passed, end), np.isfinite(at))


def _overlap(n: np.ndarray, share: float) -> np.ndarray:
    return n + np.ceil(share * n)


def one_per_item_plugin(study: Study, overlap: float) -> Outcome:
    single = [r[:, :, 0] for r in study.ratings]
    tau = (THRESHOLD - SCALE[0]) / (SCALE[1] - SCALE[0])
    unit = [(s - SCALE[0]) / (SCALE[1] - SCALE[0]) for s in single]
    share = ALPHA / QUESTIONS
    at, passed = joint([first_events(u, tau, alpha=share, alpha_pass=ALPHA, min_items=MIN_ITEMS) for u in unit])
    n = np.where(np.isfinite(at), at, ITEMS)
    end = np.all([s.mean(axis=1) >= THRESHOLD for s in single], axis=0)
    return Outcome(_overlap(n, overlap), np.where(np.isfinite(at), passed, end), np.isfinite(at))


TRUNCATION = 0.5  # c of the betting sequence (``--truncation``, a diagnostic; the library's default)


def one_per_item(study: Study, overlap: float, judge: Judge | None, method: str = "betting") -> Outcome:
    """One rating per item on the variance-adaptive sequence (``method``: the betting one with the
    aGRAPA bet, or the asymptotic one); with ``judge``, PPI++ observations."""
    at, passed, early = gate_events(study, judge, method)
    return Outcome(_overlap(at, overlap), passed, early)


def gate_events(
    study: Study, judge: Judge | None, method: str, strategy: str = "agrapa", start: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The one-rater gate on each item's first rating, observations recentred for draws without
    replacement (PPI++ ones with ``judge``): items observed (all ``ITEMS`` when never settled), the
    decision, and whether it settled early. ``start``: per replay, the first item at which a
    decision may be taken (default ``MIN_ITEMS``)."""
    events, ends = [], []
    start = np.full(study.order.shape[0], MIN_ITEMS) if start is None else start
    for q in range(QUESTIONS):
        h = study.ratings[q][:, :, 0]
        if judge is None:
            g_all, g = np.zeros((h.shape[0], POPULATION)), np.zeros_like(h)
        else:
            g_all, g = judge.judge_all[q], judge.judge[q]
        z, lo, hi, _ = _ppi_rows(
            g_all, g, h, scale=SCALE, sampling="without_replacement", weight=None if judge else 0.0
        )
        levels = {"threshold": THRESHOLD, "alpha": ALPHA / QUESTIONS, "alpha_pass": ALPHA}
        if method == "betting":
            events.append(
                _from_start(first_settlements, start, z, lo, hi, truncation=TRUNCATION, strategy=strategy, **levels)
            )
        else:
            events.append(_from_start(asymptotic_first_settlements, start, z, optimize_at=ITEMS, **levels))
        if judge is None:
            ends.append(h.mean(axis=1) >= THRESHOLD)
        else:
            lam = ppi_weight(h, g, g_all)[:, None]
            ends.append((lam * g_all).mean(axis=1) + (h - lam * g).mean(axis=1) >= THRESHOLD)
    at, passed = joint(events)
    n = np.where(np.isfinite(at), at, ITEMS)
    return n, np.where(np.isfinite(at), passed, np.all(ends, axis=0)), np.isfinite(at)


def _from_start(settle, start: np.ndarray, *rows: np.ndarray, **options) -> tuple[np.ndarray, np.ndarray]:
    """``settle`` (a ``first_settlements``-like rule) with a per-row ``min_items``."""
    n, passed = np.full(start.size, np.inf), np.zeros(start.size, dtype=bool)
    for first in np.unique(start):
        which = start == first
        n[which], passed[which] = settle(*(r[which] for r in rows), min_items=int(first), **options)
    return n, passed


@dataclass
class Tally:
    saved: float  # 1 - mean ratings used / 300
    ratings: float  # mean ratings used
    differ: float
    early: float
    replays: int


def tally(outcome: Outcome, full: np.ndarray) -> Tally:
    return Tally(
        float(1 - outcome.ratings.mean() / (ITEMS * RATERS)),
        float(outcome.ratings.mean()),
        float((outcome.passed != full).mean()),
        float(outcome.early.mean()),
        int(full.size),
    )


def run_condition(
    rng, replays: int, overlap: float, rater_sd: float, item_sd: float, judges, grid=GRID, *, pool_rng=None, bias_sd=0.0
):
    """For each distance of ``grid``: tallies of the designs without a judge, and of the judge
    design for each (rho, bias) on the same human ratings; realised judge correlation per rho.
    With ``pool_rng``, raters from a pool whose biases have sd ``bias_sd`` (``draw_pool``)."""
    rows: dict[float, dict] = {}
    corr: dict[float, list[float]] = {}
    for d in grid:
        pool = None if pool_rng is None else draw_pool(pool_rng, replays, bias_sd)
        study = draw_study(rng, replays, d, rater_sd, item_sd, pool)
        share = np.mean(
            [
                t.var(axis=1).mean() / r[:, :, 0].var(axis=1).mean()
                for t, r in zip(study.true_means, study.ratings, strict=True)
            ]
        )
        corr.setdefault("explainable", []).append(float(share))
        full = complete(study)
        row: dict = {
            "today (2+1)": tally(today(study), full),
            "1/item, today's CS": tally(one_per_item_plugin(study, overlap), full),
            "1/item, aGRAPA": tally(one_per_item(study, overlap, None), full),
            "1/item, asymptotic": tally(one_per_item(study, overlap, None, "asymptotic"), full),
        }
        for rho, bias in judges:
            judge = draw_judge(rng, study, rho, bias)
            for method in METHODS:
                row[(method, rho, bias)] = tally(one_per_item(study, overlap, judge, method), full)
            corr.setdefault(rho, []).append(judge.corr)
        rows[d] = row
    return rows, {key: float(np.mean(v)) for key, v in corr.items()}


def grid_mean(rows: dict, key, attr: str) -> float:
    return float(np.mean([getattr(row[key], attr) for row in rows.values()]))


def away_max(rows: dict, key) -> float:
    return max(row[key].differ for d, row in rows.items() if abs(d) >= AWAY - 1e-9)


def _name(key) -> str:
    if isinstance(key, str):
        return key
    method, rho, bias = key
    return f"{'aGRAPA' if method == 'betting' else 'asympt.'}+judge r={rho:g} b={bias:+g}"


def print_condition(rows: dict, corr: dict, judges, headline) -> None:
    keys = [*NO_JUDGE, *headline]
    print("  ratings saved vs the complete study (300) by true mean - threshold, (differ / settled early)")
    print("  " + f"{'d':>6} " + " ".join(f"{_name(k):>24}" for k in keys))
    for d, row in rows.items():
        cells = " ".join(f"{row[k].saved:>8.1%} ({row[k].differ:>5.1%}/{row[k].early:>4.0%})" for k in keys)
        print(f"  {d:>+6.2f} " + cells)
    cells = " ".join(f"{grid_mean(rows, k, 'saved'):>8.1%} (away {away_max(rows, k):>5.1%})  " for k in keys)
    print(f"  {'grid':>6} {cells}")
    biases = sorted({b for _, b in judges})
    print(
        f"  share of a single rating's variance that the true item means explain (the most a judge can remove): "
        f"{corr['explainable']:.0%}"
    )
    for method in METHODS:
        none = grid_mean(rows, BASELINE[method], "ratings")
        print(
            f"  1/item + judge, {method} sequence, grid means: saved, ratings vs the same design without the judge "
            f"({none:.1f} ratings), worst differ at |d| >= {AWAY}"
        )
        print("  " + f"{'rho (realised)':>16} " + " ".join(f"{'bias ' + format(b, '+g'):>24}" for b in biases))
        for rho in sorted({r for r, _ in judges}):
            cells = []
            for b in biases:
                key = (method, rho, b)
                ratio = grid_mean(rows, key, "ratings") / none - 1
                cells.append(f"{grid_mean(rows, key, 'saved'):>6.1%} {ratio:>+7.1%} {away_max(rows, key):>6.1%}")
            print("  " + f"{rho:>5g} ({corr[rho]:.3f})   " + " ".join(f"{c:>24}" for c in cells))


def at_threshold(rng, replays: int, overlap: float, judges, pool_rng=None, bias_sd=0.0) -> None:
    """Early settlements (wrong by construction) at a true mean exactly at the threshold."""
    print(f"\nerror at the threshold (true mean exactly 3.0, {replays} replays each; allowed: 5% in all):")
    keys = [*NO_JUDGE, *((m, r, b) for r, b in judges for m in METHODS)]
    print(f"  {'rater sd':>8} {'item sd':>7} " + " ".join(f"{_name(k):>24}" for k in keys))
    worst = 0.0
    for rater_sd in RATER_SDS:
        for item_sd in ITEM_SDS:
            rows, _ = run_condition(
                rng, replays, overlap, rater_sd, item_sd, judges, grid=(0.0,), pool_rng=pool_rng, bias_sd=bias_sd
            )
            row = rows[0.0]
            cells = []
            for k in keys:
                worst = max(worst, row[k].early)
                se = np.sqrt(max(row[k].early * (1 - row[k].early), 1e-9) / replays)
                cells.append(f"{row[k].early:>6.2%} +/- {se:.2%}")
            print(f"  {rater_sd:>8} {item_sd:>7} " + " ".join(f"{c:>24}" for c in cells))
    print(f"  worst: {worst:.2%}")


# --------------------------------------------------------------------------- the design form's tables


@dataclass(frozen=True)
class DesignKind:
    """A one-rater design kind of the design form (``adaptive_gate_raters`` = 1): its
    ``adaptive_sequence`` and, for ``gate_estimator = "prediction_powered"``, the judge's
    correlation with the true item means (judge bias 0)."""

    name: str  # the stem of its constants in annotation/science/adaptive_tables.py
    sequence: str  # "plugin", "agrapa" or "asymptotic"
    judge_rho: float | None = None


TABLE_KINDS = (
    DesignKind("ONE_RATER_PLUGIN", "plugin"),
    DesignKind("ONE_RATER_AGRAPA", "agrapa"),
    DesignKind("ONE_RATER_ASYMPTOTIC", "asymptotic"),
    DesignKind("PREDICTION_POWERED", "asymptotic", 0.9),
    DesignKind("PREDICTION_POWERED_WEAK", "asymptotic", 0.5),
)


@dataclass(frozen=True)
class KindReplay:
    """What one design kind saved over the grid (``replay_kind``).

    ``rows``: (distance, saved when the true mean is that far below the threshold, saved when
    above); ``differ``: the share of decisions not the complete study's, over all the grid's
    points, ``differ_away`` the worst point at ``|d| >= AWAY``, ``differ_at_threshold`` at
    ``d = 0``; ``early_at_threshold``: settled early at a true mean exactly at the threshold
    (the error the rule allows up to alpha)."""

    rows: tuple[tuple[float, float, float], ...]
    differ: float
    differ_away: float
    differ_at_threshold: float
    early_at_threshold: float
    judge_corr: float | None
    replays: int


def overlap_items(rng, replays: int, share: float) -> np.ndarray:
    """(replays, ITEMS) True for the items, drawn before any rating, that all ``RATERS`` rate
    (``adaptive_overlap_share``: agreement and the rater model need them)."""
    chosen = np.argsort(rng.random((replays, ITEMS)), axis=1)[:, : int(round(share * ITEMS))]
    mask = np.zeros((replays, ITEMS), dtype=bool)
    np.put_along_axis(mask, chosen, True, axis=1)
    return mask


def raters_start(pool: RaterPool) -> np.ndarray:
    """Per replay, the first item at which a decision may be taken: ``MIN_ITEMS`` observed and
    ``MIN_RATERS`` distinct raters behind them (the gate's raters: each item's first)."""
    first = pool.assigned[:, :, 0]
    seen = np.maximum.accumulate(first[:, :, None] == np.arange(pool.bias.shape[1]), axis=1).sum(axis=2)
    enough = np.where((seen >= MIN_RATERS).any(axis=1), (seen >= MIN_RATERS).argmax(axis=1) + 1, ITEMS + 1)
    return np.maximum(enough, MIN_ITEMS)


def replay_kind(
    kind: DesignKind,
    *,
    replays: int,
    seed: int = 0,
    rater_sd: float = TABLE_RATER_SD,
    item_sd: float = TABLE_ITEM_SD,
    bias_sd: float = 0.0,
    overlap: float = TABLE_OVERLAP,
    distances: tuple[float, ...] = TABLE_DISTANCES,
) -> KindReplay:
    """Replay one design kind over the true means ``threshold -/+ distance``.

    Per replay: a pool of ``POOL`` annotators at uniform random paces in ``PACES`` (each with a
    persistent bias ``N(0, bias_sd)``), a run of ``N`` outputs drawn as ``draw_study`` does, 100 of
    them in random order; the gate reads each item's first rating (the first rater of the item),
    decides from ``MIN_ITEMS`` items and ``MIN_RATERS`` distinct raters on, both questions with
    ``settle_questions``' corrections; the ``overlap`` share of the 100 items (drawn before any
    rating) gets all ``RATERS`` ratings. Ratings used = items observed + the overlap items'
    further ratings among them; items are read one after the other, so no rating is in flight
    when the gate settles. The same ``seed`` gives every kind the same studies.
    """
    options = {"rater_sd": rater_sd, "item_sd": item_sd, "bias_sd": bias_sd, "overlap": overlap}
    return replay_kinds((kind,), replays=replays, seed=seed, distances=distances, **options)[kind.name]


def replay_kinds(
    kinds: tuple[DesignKind, ...],
    *,
    replays: int,
    seed: int,
    rater_sd: float,
    item_sd: float,
    bias_sd: float,
    overlap: float,
    distances: tuple[float, ...],
) -> dict[str, KindReplay]:
    """``replay_kind`` for several kinds on the same simulated studies (drawn once)."""
    rng = np.random.default_rng(seed)
    pool_rng, overlap_rng = np.random.default_rng([seed, 1]), np.random.default_rng([seed, 3])
    rhos = sorted({k.judge_rho for k in kinds} - {None})
    judge_rngs = {rho: np.random.default_rng([seed, 2, round(1000 * rho)]) for rho in rhos}
    points = sorted({s * d for d in distances for s in (-1, 1)})
    saved: dict[str, dict] = {k.name: {} for k in kinds}
    differ: dict[str, dict] = {k.name: {} for k in kinds}
    early: dict[str, dict] = {k.name: {} for k in kinds}
    corr: dict[str, list] = {k.name: [] for k in kinds}
    for d in points:
        pool = draw_pool(pool_rng, replays, bias_sd)
        study = draw_study(rng, replays, d, rater_sd, item_sd, pool)
        extra = np.cumsum(overlap_items(overlap_rng, replays, overlap), axis=1)
        full = complete(study)
        start = raters_start(pool)
        judges = {rho: draw_judge(judge_rngs[rho], study, rho, 0.0) for rho in rhos}
        for kind in kinds:
            judge = judges.get(kind.judge_rho)
            if judge is not None:
                corr[kind.name].append(judge.corr)
            method = "asymptotic" if kind.sequence == "asymptotic" else "betting"
            n, passed, settled = gate_events(study, judge, method, kind.sequence, start)
            n = n.astype(int)
            used = n + (RATERS - 1) * extra[np.arange(replays), n - 1]
            saved[kind.name][d] = float(1 - used.mean() / (ITEMS * RATERS))
            differ[kind.name][d] = float((passed != full).mean())
            early[kind.name][d] = float(settled.mean())
    results = {}
    for kind in kinds:
        s, f, e = saved[kind.name], differ[kind.name], early[kind.name]
        results[kind.name] = KindReplay(
            tuple((d, round(s[-d], 3), round(s[d], 3)) for d in sorted(distances)),
            float(np.mean(list(f.values()))),
            max((v for d, v in f.items() if abs(d) >= AWAY - 1e-9), default=float("nan")),
            f.get(0.0, float("nan")),
            e.get(0.0, float("nan")),
            float(np.mean(corr[kind.name])) if corr[kind.name] else None,
            replays,
        )
    return results


SEQUENCE_WORDS = {
    "plugin": "today's betting sequence (plug-in bet)",
    "agrapa": "the variance-adaptive betting sequence (aGRAPA bet)",
    "asymptotic": "the asymptotic confidence sequence (valid as items grow, no finite-sample guarantee)",
}


def table_conditions(
    kind: DesignKind, result: KindReplay, replays: int, weak: tuple[float, KindReplay] | None = None
) -> str:
    """The conditions string shown under a table on the design form; ``weak``: a weaker judge's
    correlation and replay, quoted at distance 0.5."""
    gate = f"the gate on each item's first rater with {SEQUENCE_WORDS[kind.sequence]}"
    if kind.judge_rho is not None:
        gate += (
            f", prediction-powered (PPI++) with an LLM judge on all {POPULATION:,} outputs of the run whose "
            f"correlation with the true item means is {kind.judge_rho:g} (no judge bias)"
        )
        if weak is not None:
            at = {d: (b + a) / 2 for d, b, a in result.rows}[0.5]
            at_weak = {d: (b + a) / 2 for d, b, a in weak[1].rows}[0.5]
            gate += (
                f"; a weaker judge saves less: at distance 0.5, {at_weak:.1%} with correlation {weak[0]:g} "
                f"against {at:.1%} (mean of below and above)"
            )
    return (
        f"{replays} simulated studies per mean, quality and fluency both at the mean shown, threshold 3 on 1–5, "
        f"α 0.05, at least {MIN_ITEMS} items and {MIN_RATERS} distinct raters, against 100 items × 3 raters; "
        f"{gate}; {TABLE_OVERLAP:.0%} of the items, drawn before any rating, rated by all 3 (counted); "
        f"{POOL} annotators at random paces, rater noise sd {TABLE_RATER_SD}, item spread sd {TABLE_ITEM_SD}, "
        f"no rater bias; items observed one after the other: ratings in flight when it settles are not counted "
        f"(with {POOL} annotators at most {POOL - 1} more); decisions differing from the complete study's: "
        f"{result.differ:.1%} over the grid, {result.differ_at_threshold:.1%} at a mean exactly at the threshold"
    )


def print_tables(replays: int, seed: int) -> None:
    """The constants of annotation/science/adaptive_tables.py for the one-rater kinds."""
    options = {"rater_sd": TABLE_RATER_SD, "item_sd": TABLE_ITEM_SD, "bias_sd": 0.0, "overlap": TABLE_OVERLAP}
    results = replay_kinds(TABLE_KINDS, replays=replays, seed=seed, distances=TABLE_DISTANCES, **options)
    weak = {"PREDICTION_POWERED": (TABLE_KINDS[-1].judge_rho, results["PREDICTION_POWERED_WEAK"])}
    print(f"# benchmarks/gate_savings.py --tables --replays {replays} --seed {seed}")
    for kind in TABLE_KINDS:
        result = results[kind.name]
        print(f"{kind.name}_SAVING_BY_DISTANCE = (")
        for d, below, above in result.rows:
            print(f"    ({d}, {below:.3f}, {above:.3f}),")
        print(")")
        text = table_conditions(kind, result, replays, weak.get(kind.name))
        print(f"{kind.name}_SAVING_CONDITIONS = (")
        line = ""
        for word in text.split(" "):
            if len(line) + len(word) > 100:
                print(f'    "{line}"')
                line = ""
            line += word + " "
        print(f'    "{line.rstrip()}"')
        print(")")
        corr = f", realised judge correlation {result.judge_corr:.3f}" if result.judge_corr is not None else ""
        print(
            f"# {kind.name}: saved {grid_saving(result):.1%} over the grid; differ {result.differ:.2%} over the grid, "
            f"worst {result.differ_away:.2%} at |d| >= {AWAY}, {result.differ_at_threshold:.2%} at d = 0; "
            "settled early at d = 0 "
            f"{result.early_at_threshold:.2%}{corr}"
        )


def grid_saving(result: KindReplay) -> float:
    """The mean saving over the grid's points (the threshold counted once)."""
    values = [v for d, below, above in result.rows for v in ((below,) if d == 0 else (below, above))]
    return float(np.mean(values))


def bias_report(replays: int, null: int, seed: int) -> None:
    """Savings, decisions differing from the complete study and error at the threshold with rater
    bias sd 0 and 0.3, for the one-rater kinds, at each rater sd / item sd condition."""
    kinds = TABLE_KINDS[:4]
    print(
        f"\nrater bias: {POOL} annotators at uniform paces in {PACES}, each with a persistent bias N(0, sd) on both "
        f"questions; overlap {TABLE_OVERLAP:.0%} rated by all 3; {replays} replays per point, {null} at the threshold. "
        "The true mean is the one-rater gate's estimand: each output's expected rating averaged over the pool, "
        "weighted by the raters' paces"
    )
    print(
        f"  {'rater sd':>8} {'item sd':>7} {'bias sd':>7} {'kind':>24} {'saved (grid)':>12} "
        f"{'differ (grid)':>13} {'differ |d|>=.25':>15} {'differ d=0':>10} {'error d=0':>15}"
    )
    for rater_sd in RATER_SDS:
        for item_sd in ITEM_SDS:
            for bias_sd in BIAS_SDS:
                options = {"rater_sd": rater_sd, "item_sd": item_sd, "bias_sd": bias_sd, "overlap": TABLE_OVERLAP}
                grid = replay_kinds(kinds, replays=replays, seed=seed, distances=TABLE_DISTANCES, **options)
                null_grid = replay_kinds(kinds, replays=null, seed=seed + 1, distances=(0.0,), **options)
                for kind in kinds:
                    on, at = grid[kind.name], null_grid[kind.name]
                    se = np.sqrt(max(at.early_at_threshold * (1 - at.early_at_threshold), 1e-9) / null)
                    mean_saved = grid_saving(on)
                    print(
                        f"  {rater_sd:>8} {item_sd:>7} {bias_sd:>7} {kind.name:>24} {mean_saved:>12.1%} "
                        f"{on.differ:>13.1%} {on.differ_away:>15.1%} {at.differ_at_threshold:>10.1%} "
                        f"{at.early_at_threshold:>7.2%} +/- {se:.2%}"
                    )
    print(
        f"  error at the threshold ({null} studies) with bias sd {BIAS_SDS[-1]} when each item's first rater comes "
        f"in runs of consecutive items (one annotator's batch), rater sd {TABLE_RATER_SD}, item sd {TABLE_ITEM_SD}:"
    )
    for runs in RUNS:
        rng, pool_rng = np.random.default_rng(seed + 2), np.random.default_rng([seed, 4])
        pool = draw_pool(pool_rng, null, BIAS_SDS[-1], runs=runs)
        study = draw_study(rng, null, 0.0, TABLE_RATER_SD, TABLE_ITEM_SD, pool)
        start = raters_start(pool)
        cells = []
        for kind in kinds[:3]:
            method = "asymptotic" if kind.sequence == "asymptotic" else "betting"
            early = gate_events(study, None, method, kind.sequence, start)[2].mean()
            cells.append(f"{kind.sequence} {early:.2%}")
        print(
            f"    runs of {runs:>2} (first decision allowed at item {np.median(start):.0f}, median): "
            + ", ".join(cells)
        )
    pool = draw_pool(np.random.default_rng([seed, 9]), 20_000, BIAS_SDS[-1])
    gate = (pool.share * pool.bias).sum(axis=1)
    full = np.take_along_axis(pool.bias[:, None, :], pool.assigned, axis=2).mean(axis=(1, 2))
    print(
        f"  bias sd {BIAS_SDS[-1]}: the pool's pace-weighted mean bias (what the one-rater gate's estimate carries) "
        f"has sd {gate.std():.3f}; it differs from the complete study's (3 distinct raters per item) by sd "
        f"{(gate - full).std():.3f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200 replays per point, biases -1, 0, +1")
    parser.add_argument("--replays", type=int, default=None, help="replays per point (default 1000, quick 200)")
    parser.add_argument("--null", type=int, default=None, help="replays at the threshold (default 4000, quick 1000)")
    parser.add_argument("--overlap", type=float, default=0.10, help="share of used items rated twice for AC2")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--truncation", type=float, default=0.5, help="c of the betting sequence (diagnostic)")
    parser.add_argument("--bias-sd", type=float, default=0.0, help="sd of each rater's persistent bias (main run)")
    parser.add_argument("--bias", action="store_true", help="only the rater-bias comparison (bias sd 0 vs 0.3)")
    parser.add_argument("--tables", action="store_true", help="only print annotation/science/adaptive_tables.py's")
    args = parser.parse_args()
    global TRUNCATION
    TRUNCATION = args.truncation
    replays = args.replays or (200 if args.quick else 1000)
    null = args.null or (1000 if args.quick else 4000)
    if args.tables or args.bias:
        started = time.perf_counter()
        if args.tables:
            print_tables(args.replays or (1000 if args.quick else 4000), args.seed)
        if args.bias:
            bias_report(replays, null, args.seed)
        print(f"# {time.perf_counter() - started:.0f} s")
        return
    biases = (-1.0, 0.0, 1.0) if args.quick else (-1.0, -0.5, 0.0, 0.5, 1.0)
    judges = [(rho, b) for rho in CORRELATIONS for b in biases]
    headline = [("betting", 0.9, 0.0), ("asymptotic", 0.9, 0.0), ("asymptotic", 0.97, 0.0)]
    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()
    print(
        f"rule: threshold {THRESHOLD}, alpha {ALPHA}, min items {MIN_ITEMS}, {QUESTIONS} questions, N = {POPULATION} "
        f"outputs, complete study {ITEMS} items x {RATERS} raters; {replays} replays per point, overlap "
        f"{args.overlap:.0%}, seed {args.seed}, betting truncation c = {TRUNCATION}, rater bias sd {args.bias_sd}"
    )
    pool_rng = np.random.default_rng([args.seed, 1]) if args.bias_sd > 0 else None
    summary = []
    for rater_sd in RATER_SDS:
        for item_sd in ITEM_SDS:
            rows, corr = run_condition(
                rng, replays, args.overlap, rater_sd, item_sd, judges, pool_rng=pool_rng, bias_sd=args.bias_sd
            )
            print(f"\nrater sd {rater_sd}, item sd {item_sd}:")
            print_condition(rows, corr, judges, headline)
            for method in METHODS:
                none = grid_mean(rows, BASELINE[method], "ratings")
                good = [grid_mean(rows, (method, r, b), "ratings") / none - 1 for r, b in judges if r >= 0.9]
                useless = [grid_mean(rows, (method, 0.0, b), "ratings") / none - 1 for b in biases]
                keys = [BASELINE[method], *((method, r, b) for r, b in judges)]
                away = max(away_max(rows, k) for k in keys)
                summary.append(
                    (
                        rater_sd,
                        item_sd,
                        method,
                        grid_mean(rows, BASELINE[method], "saved"),
                        min(good),
                        max(good),
                        max(useless),
                        away,
                    )
                )
    print("\nsummary per condition (grid means; judge: ratings vs the same design without it, negative = fewer):")
    print(
        f"  {'rater sd':>8} {'item sd':>7} {'sequence':>10} {'saved, no judge':>16} {'rho>=0.9: best .. worst':>24} "
        f"{'useless (rho 0): worst':>23} {'worst differ, |d|>=0.25':>24}"
    )
    for rater_sd, item_sd, method, saved, best, worst, useless, away in summary:
        print(
            f"  {rater_sd:>8} {item_sd:>7} {method:>10} {saved:>16.1%} {best:>+11.1%} .. {worst:>+8.1%}  "
            f"{useless:>+23.1%} {away:>24.1%}"
        )
    at_threshold(rng, null, args.overlap, [(0.0, 1.0), (0.9, 0.0), (0.97, -1.0)], pool_rng, args.bias_sd)
    print(f"\n{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
