"""Issue 40, point 4: how many human ratings the sequential gate needs when ratings go one per item,
the confidence sequence uses the variance, and an LLM judge scores every output (PPI++).

Usage: .venv/bin/python benchmarks/gate_savings.py [--quick] [--replays 1000] [--null 4000] [--seed 0]

An independent simulator (it shares no code with ``benchmarks/adaptive_gate.py``; the rules it
replays are the library's: ``annotation.quality.sequential.first_events`` for today's gate and
``annotation.quality.variance_sequences`` for the new one).

Model (per replay, per question; two questions, quality and fluency, independent, same true mean)
--------------------------------------------------------------------------------------------
- a run of ``N = 1000`` outputs; output ``i`` has a latent mean ``c + u_i``, ``u_i ~ N(0, item_sd)``;
- a rating is ``clip(round(c + u_i + e), 1, 5)``, ``e ~ N(0, rater_sd)`` independent (no rater
  bias: raters differ only by noise); the output's *true mean* ``E_i`` is its expected rating;
- ``c`` is solved per replay so that the mean of ``E_i`` over the ``N`` outputs is exactly
  ``threshold + d`` (the grid's "true mean - threshold");
- the judge scores every output: ``g_i = clip(E_i + bias + n_i, 1, 5)`` with ``n_i ~ N(0, s)``,
  ``s = sd(E) sqrt(1/rho^2 - 1)`` so that its correlation with the true item means is ``rho``
  before the clip (``rho = 0``: ``g_i = mean(E) + bias + N(0, sd(E))``, unrelated to the items);
  the realised correlation after the clip is printed;
- the study draws 100 of the ``N`` outputs without replacement, in random order; the complete
  study rates each by 3 raters; the raters of an item's first rating rotate over a pool of 5, so
  the 3 distinct raters a decision needs are there from the 3rd item (``min_items`` = 10 binds).

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

from annotation.quality.sequential import first_events  # noqa: E402
from annotation.quality.variance_sequences import (  # noqa: E402
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


def population(rng, replays: int, target: float, rater_sd: float, item_sd: float):
    """Latent means (replays, N) whose expected ratings average exactly ``target`` per row."""
    u = rng.normal(0, item_sd, (replays, POPULATION))
    c = np.full((replays, 1), target)
    for _ in range(30):  # Newton on the row's centre
        value, slope = expected_rating(c + u, rater_sd)
        gap = value.mean(axis=1, keepdims=True) - target
        c -= gap / np.maximum(slope.mean(axis=1, keepdims=True), 1e-6)
        if np.abs(gap).max() < 1e-10:
            break
    return c + u


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


@dataclass
class Judge:
    judge_all: list[np.ndarray]  # per question (replays, N)
    judge: list[np.ndarray]  # per question (replays, ITEMS): the drawn outputs' scores
    corr: float  # realised correlation with the true item means (mean over replays and questions)


def draw_study(rng, replays: int, d: float, rater_sd: float, item_sd: float) -> Study:
    ratings, true = [], []
    order = np.argsort(rng.random((replays, POPULATION)), axis=1)[:, :ITEMS]
    for _ in range(QUESTIONS):
        latent = population(rng, replays, THRESHOLD + d, rater_sd, item_sd)
        true.append(expected_rating(latent, rater_sd)[0])
        picked = np.take_along_axis(latent, order, axis=1)
        noise = rng.normal(0, rater_sd, (replays, ITEMS, RATERS))
        ratings.append(np.clip(np.rint(picked[..., None] + noise), *SCALE))
    return Study(ratings, true, order)


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
    events, ends = [], []
    for q in range(QUESTIONS):
        h = study.ratings[q][:, :, 0]
        if judge is None:
            g_all, g = np.zeros((h.shape[0], POPULATION)), np.zeros_like(h)
        else:
            g_all, g = judge.judge_all[q], judge.judge[q]
        z, lo, hi, _ = _ppi_rows(
            g_all, g, h, scale=SCALE, sampling="without_replacement", weight=None if judge else 0.0
        )
        levels = {"threshold": THRESHOLD, "alpha": ALPHA / QUESTIONS, "alpha_pass": ALPHA, "min_items": MIN_ITEMS}
        if method == "betting":
            events.append(first_settlements(z, lo, hi, truncation=TRUNCATION, **levels))
        else:
            events.append(asymptotic_first_settlements(z, optimize_at=ITEMS, **levels))
        if judge is None:
            ends.append(h.mean(axis=1) >= THRESHOLD)
        else:
            lam = ppi_weight(h, g, g_all)[:, None]
            ends.append((lam * g_all).mean(axis=1) + (h - lam * g).mean(axis=1) >= THRESHOLD)
    at, passed = joint(events)
    n = np.where(np.isfinite(at), at, ITEMS)
    return Outcome(_overlap(n, overlap), np.where(np.isfinite(at), passed, np.all(ends, axis=0)), np.isfinite(at))


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


def run_condition(rng, replays: int, overlap: float, rater_sd: float, item_sd: float, judges, grid=GRID):
    """For each distance of ``grid``: tallies of the designs without a judge, and of the judge
    design for each (rho, bias) on the same human ratings; realised judge correlation per rho."""
    rows: dict[float, dict] = {}
    corr: dict[float, list[float]] = {}
    for d in grid:
        study = draw_study(rng, replays, d, rater_sd, item_sd)
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


def at_threshold(rng, replays: int, overlap: float, judges) -> None:
    """Early settlements (wrong by construction) at a true mean exactly at the threshold."""
    print(f"\nerror at the threshold (true mean exactly 3.0, {replays} replays each; allowed: 5% in all):")
    keys = [*NO_JUDGE, *((m, r, b) for r, b in judges for m in METHODS)]
    print(f"  {'rater sd':>8} {'item sd':>7} " + " ".join(f"{_name(k):>24}" for k in keys))
    worst = 0.0
    for rater_sd in RATER_SDS:
        for item_sd in ITEM_SDS:
            rows, _ = run_condition(rng, replays, overlap, rater_sd, item_sd, judges, grid=(0.0,))
            row = rows[0.0]
            cells = []
            for k in keys:
                worst = max(worst, row[k].early)
                se = np.sqrt(max(row[k].early * (1 - row[k].early), 1e-9) / replays)
                cells.append(f"{row[k].early:>6.2%} +/- {se:.2%}")
            print(f"  {rater_sd:>8} {item_sd:>7} " + " ".join(f"{c:>24}" for c in cells))
    print(f"  worst: {worst:.2%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200 replays per point, biases -1, 0, +1")
    parser.add_argument("--replays", type=int, default=None, help="replays per point (default 1000, quick 200)")
    parser.add_argument("--null", type=int, default=None, help="replays at the threshold (default 4000, quick 1000)")
    parser.add_argument("--overlap", type=float, default=0.10, help="share of used items rated twice for AC2")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--truncation", type=float, default=0.5, help="c of the betting sequence (diagnostic)")
    args = parser.parse_args()
    global TRUNCATION
    TRUNCATION = args.truncation
    replays = args.replays or (200 if args.quick else 1000)
    null = args.null or (1000 if args.quick else 4000)
    biases = (-1.0, 0.0, 1.0) if args.quick else (-1.0, -0.5, 0.0, 0.5, 1.0)
    judges = [(rho, b) for rho in CORRELATIONS for b in biases]
    headline = [("betting", 0.9, 0.0), ("asymptotic", 0.9, 0.0), ("asymptotic", 0.97, 0.0)]
    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()
    print(
        f"rule: threshold {THRESHOLD}, alpha {ALPHA}, min items {MIN_ITEMS}, {QUESTIONS} questions, N = {POPULATION} "
        f"outputs, complete study {ITEMS} items x {RATERS} raters; {replays} replays per point, overlap "
        f"{args.overlap:.0%}, seed {args.seed}, betting truncation c = {TRUNCATION}"
    )
    summary = []
    for rater_sd in RATER_SDS:
        for item_sd in ITEM_SDS:
            rows, corr = run_condition(rng, replays, args.overlap, rater_sd, item_sd, judges)
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
    at_threshold(rng, null, args.overlap, [(0.0, 1.0), (0.9, 0.0), (0.97, -1.0)])
    print(f"\n{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
