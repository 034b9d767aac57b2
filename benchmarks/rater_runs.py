"""Rater runs: what keeps the one-rater gate's error at the threshold within alpha when each item's
first rater comes in runs of consecutive items (one annotator working through a batch).

Usage: .venv/bin/python benchmarks/rater_runs.py [--null 4000] [--replays 1000] [--seed 0]
                                                [--runs 1 5 10 20] [--worst 0.5]

The simulator is ``benchmarks/gate_savings.py``'s (``draw_pool(..., runs=...)``, ``draw_study``,
``overlap_items``; rater sd 0.9, item sd 0.7, 8 annotators at uniform paces in [0.5, 2], each with
a persistent bias N(0, bias sd); 20% of the 100 items rated by all 3 and counted; threshold 3,
alpha 0.05, 2 questions with ``settle_questions``' corrections; the true mean is the one-rater
gate's estimand, the pace-weighted pool mean). The gate reads each item's first rating, with the
plug-in (today's), aGRAPA or asymptotic sequence on the recentred observations.

Mitigations (each a rule that looks at who rated, never at the ratings)
------------------------------------------------------------------------
- **M0** today: observations in completion order, a decision once ``MIN_ITEMS`` items and
  ``MIN_RATERS`` distinct raters are behind them;
- **M1** M0, and also no decision while one rater is behind more than half of the observed items
  (checked at each observation: a stopping time);
- **M2** round robin: the gate's sequence takes the items rater by rater, the next being the earliest
  item of the rater with the fewest observations so far (ties: the rater whose next item completes
  first); the gate waits for that item to complete;
- **M3** M1 and M2.

When the items complete (``completion_times``)
----------------------------------------------
Each rater rates the items whose first rater they are (their runs, in item order), one after the
other, at their own pace (the pool's; rating an item takes 1/pace). Two worlds:

- **serial** (the world behind ``gate_savings.py --bias``'s finding): a run starts when the one
  before it ends, so annotators work one after another and completion order is item order; M0 here
  reproduces that finding seed for seed;
- **parallel**: every annotator starts at once on their own runs, so completion order interleaves
  them by pace.

The round robin as first stated, "the next observation is the earliest completed, not yet observed
item of the rater with the fewest observations among raters with one waiting", is the identity when
the gate checks after every completion (one item is ever waiting, the one just completed) in either
world, so M2 is measured with the wait: the gate may hold a completed item back until the raters
behind fewer observations have delivered theirs. That costs ratings: every item completed by the
time the gate settles has been paid for, observed or not, so ratings used = items completed when the
gate's deciding observation arrives + 2 x the overlap items among them (M0 and M1 hold nothing back:
the same count as ``gate_savings.replay_kind``). Never settled: all 100 items + 40 overlap ratings.

Figures: error = settled early (either way) with the true mean exactly at the threshold, with its
Monte Carlo +/- 2 SE; saved = 1 - ratings used / 300, the mean over the 9 points of the grid
(threshold -/+ 0, 0.1, 0.25, 0.5, 0.75).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from annotation.science.variance_sequences import (  # noqa: E402
    _log_capital,
    _ppi_rows,
    _running_moments,
    asymptotic_radius,
)
from benchmarks.gate_savings import (  # noqa: E402
    ALPHA,
    ITEMS,
    MIN_ITEMS,
    MIN_RATERS,
    POOL,
    POPULATION,
    QUESTIONS,
    RATERS,
    SCALE,
    TABLE_DISTANCES,
    TABLE_ITEM_SD,
    TABLE_OVERLAP,
    TABLE_RATER_SD,
    THRESHOLD,
    TRUNCATION,
    draw_pool,
    draw_study,
    gate_events,
    joint,
    overlap_items,
    raters_start,
)

SEQUENCES = ("plugin", "agrapa", "asymptotic")
MITIGATIONS = ("M0", "M1", "M2", "M3")
WORLDS = ("serial", "parallel")
RUNS = (1, 5, 10, 20)
BIAS_SD, WORST_BIAS_SD = 0.3, 0.5


def completion_times(first: np.ndarray, pace: np.ndarray, world: str) -> np.ndarray:
    """(replays, ITEMS) when each item's first rating completes: ``first`` its rater, ``pace`` the
    raters' paces (replays, POOL); an item takes 1/pace of its rater."""
    took = 1.0 / np.take_along_axis(pace, first, axis=1)
    if world == "serial":
        return np.cumsum(took, axis=1)
    own = first[:, :, None] == np.arange(pace.shape[1])
    rank = np.take_along_axis(np.cumsum(own, axis=1), first[:, :, None], axis=2)[:, :, 0]
    return rank * took


def round_robin(first: np.ndarray, done: np.ndarray) -> np.ndarray:
    """(replays, ITEMS) the item observed at each position: the earliest remaining item of the rater
    with the fewest observations so far among raters with an item left, ties to the rater whose next
    item completes first (``done``: completion times). Depends on who rated, not on the ratings."""
    replays, raters = first.shape[0], POOL
    rows = np.arange(replays)
    mine = [np.argsort(np.where(first == r, done, np.inf), axis=1, kind="stable") for r in range(raters)]
    queues = np.stack(mine, axis=1)  # (replays, POOL, ITEMS): each rater's items by completion time
    left = np.stack([(first == r).sum(axis=1) for r in range(raters)], axis=1)
    taken = np.zeros((replays, raters), dtype=int)
    order = np.empty((replays, ITEMS), dtype=int)
    for k in range(ITEMS):
        nxt = queues[rows[:, None], np.arange(raters)[None, :], np.minimum(taken, ITEMS - 1)]
        when = np.where(taken < left, done[rows[:, None], nxt], np.inf)
        key = np.where(taken < left, taken * 1e6 + np.argsort(np.argsort(when, axis=1), axis=1), np.inf)
        pick = key.argmin(axis=1)
        order[:, k] = nxt[rows, pick]
        taken[rows, pick] += 1
    return order


def crossings(z: np.ndarray, lo: np.ndarray, hi: np.ndarray, sequence: str) -> tuple[np.ndarray, np.ndarray]:
    """(replays, ITEMS) whether the sequence would pass / fail after each observation (no minimum):
    the per-step tests of ``variance_sequences.first_settlements`` and
    ``asymptotic_first_settlements`` at one question's share of alpha."""
    alpha, alpha_pass = ALPHA / QUESTIONS, ALPHA
    if sequence == "asymptotic":
        t, mean, variance = _running_moments(z)
        above = mean - asymptotic_radius(t, variance, alpha=alpha_pass, optimize_at=ITEMS)
        below = mean + asymptotic_radius(t, variance, alpha=alpha, optimize_at=ITEMS)
        return above > THRESHOLD, below < THRESHOLD
    m = np.full((1, 1), THRESHOLD)
    up, down = _log_capital(z, lo, hi, m, alpha=alpha, strategy=sequence, truncation=TRUNCATION)
    return up[..., 0] >= np.log(2 / alpha_pass), down[..., 0] >= np.log(2 / alpha)


def first_event(passes: np.ndarray, fails: np.ndarray, allowed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The first allowed crossing (1-based observation, inf: never) and whether it is a pass."""
    p, f = passes & allowed, fails & allowed
    first_pass = np.where(p.any(axis=1), p.argmax(axis=1) + 1, np.inf)
    first_fail = np.where(f.any(axis=1), f.argmax(axis=1) + 1, np.inf)
    return np.minimum(first_pass, first_fail), first_pass < first_fail


def allowed_steps(raters: np.ndarray, half: bool) -> np.ndarray:
    """(replays, ITEMS) whether a decision may be taken after each observation: ``MIN_ITEMS``
    observed and ``MIN_RATERS`` distinct raters behind them; ``half``: and no rater behind more
    than half of them (M1)."""
    counts = np.cumsum(raters[:, :, None] == np.arange(POOL), axis=1)
    t = np.arange(1, ITEMS + 1)
    ok = (t >= MIN_ITEMS) & ((counts > 0).sum(axis=2) >= MIN_RATERS)
    if half:
        ok &= 2 * counts.max(axis=2) <= t
    return ok


def gate_runs(study, order: np.ndarray, half: bool) -> dict[str, np.ndarray]:
    """Per sequence: the observation (1-based, inf: never) at which the gate settles early, both
    questions joined, observing the items in ``order``."""
    rows = np.arange(order.shape[0])[:, None]
    raters = study.pool.assigned[:, :, 0][rows, order]
    allowed = allowed_steps(raters, half)
    per_question = {s: [] for s in SEQUENCES}
    for q in range(QUESTIONS):
        h = study.ratings[q][:, :, 0][rows, order]
        z, lo, hi, _ = _ppi_rows(
            np.zeros((h.shape[0], POPULATION)),
            np.zeros_like(h),
            h,
            scale=SCALE,
            sampling="without_replacement",
            weight=0.0,
        )
        for s in SEQUENCES:
            per_question[s].append(first_event(*crossings(z, lo, hi, s), allowed))
    return {s: joint(events)[0] for s, events in per_question.items()}


def ratings_used(at: np.ndarray, order: np.ndarray, done: np.ndarray, overlap: np.ndarray) -> np.ndarray:
    """Ratings paid for when the gate settles at observation ``at``: every item completed by then
    (observed or held back) and the 2 further ratings of the overlap items among them."""
    rows = np.arange(order.shape[0])
    arrival = np.maximum.accumulate(done[rows[:, None], order], axis=1)
    settled = np.isfinite(at)
    when = np.where(settled, arrival[rows, np.where(settled, at, ITEMS).astype(int) - 1], np.inf)
    completed = done <= when[:, None]
    return completed.sum(axis=1) + (RATERS - 1) * (completed & overlap).sum(axis=1)


def replay(
    runs: int, bias_sd: float, d: float, replays: int, rng, pool_rng, overlap_rng
) -> dict[tuple[str, str, str], tuple[np.ndarray, np.ndarray]]:
    """(world, mitigation, sequence) -> (settled early, ratings used) per replay."""
    pool = draw_pool(pool_rng, replays, bias_sd, runs=runs)
    study = draw_study(rng, replays, d, TABLE_RATER_SD, TABLE_ITEM_SD, pool)
    overlap = overlap_items(overlap_rng, replays, TABLE_OVERLAP)
    first = pool.assigned[:, :, 0]
    out = {}
    for world in WORLDS:
        done = completion_times(first, pool.share, world)
        orders = {"M0": np.argsort(done, axis=1, kind="stable"), "M2": round_robin(first, done)}
        for mitigation in MITIGATIONS:
            order = orders["M0" if mitigation in ("M0", "M1") else "M2"]
            at = gate_runs(study, order, half=mitigation in ("M1", "M3"))
            for s, n in at.items():
                out[(world, mitigation, s)] = (np.isfinite(n), ratings_used(n, order, done, overlap))
    return out


def check_today(seed: int, replays: int = 400) -> None:
    """M0 in the serial world is ``gate_savings.gate_events`` on item order: the same settlements."""
    pool = draw_pool(np.random.default_rng([seed, 4]), replays, BIAS_SD, runs=10)
    study = draw_study(np.random.default_rng(seed + 2), replays, 0.0, TABLE_RATER_SD, TABLE_ITEM_SD, pool)
    mine = gate_runs(study, np.tile(np.arange(ITEMS), (replays, 1)), half=False)
    for s in SEQUENCES:
        method = "asymptotic" if s == "asymptotic" else "betting"
        n, _, settled = gate_events(study, None, method, s, raters_start(pool))
        assert np.array_equal(np.isfinite(mine[s]), settled), s
        assert np.array_equal(np.where(settled, mine[s], ITEMS), n), s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--null", type=int, default=4000, help="studies at the threshold per condition")
    parser.add_argument("--replays", type=int, default=1000, help="studies per grid point")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--runs", type=int, nargs="+", default=list(RUNS))
    parser.add_argument("--worst", type=float, default=WORST_BIAS_SD, help="bias sd of the worst case (longest runs)")
    args = parser.parse_args()
    started = time.perf_counter()
    check_today(args.seed)
    conditions = [(runs, BIAS_SD) for runs in args.runs] + [(max(args.runs), args.worst)]
    print(
        f"rater sd {TABLE_RATER_SD}, item sd {TABLE_ITEM_SD}, {POOL} annotators (paces uniform in [0.5, 2]), "
        f"overlap {TABLE_OVERLAP:.0%} counted, threshold {THRESHOLD}, alpha {ALPHA}, {QUESTIONS} questions, "
        f"min {MIN_ITEMS} items and {MIN_RATERS} raters; error: {args.null} studies at the threshold (+/- 2 SE); "
        f"saved: mean over the grid 0, +/-{', +/-'.join(map(str, TABLE_DISTANCES[1:]))}, {args.replays} per point; "
        f"seed {args.seed}"
    )
    head = f"{'world':>8} {'bias sd':>7} {'runs':>4} {'rule':>4} {'sequence':>10}"
    print(f"{head} {'error d=0':>16} {'saved (grid)':>12}")
    for runs, bias_sd in conditions:
        rngs = (np.random.default_rng(args.seed + 2), np.random.default_rng([args.seed, 4]))
        null = replay(runs, bias_sd, 0.0, args.null, *rngs, np.random.default_rng([args.seed, 5]))
        rng, pool_rng, overlap_rng = (np.random.default_rng([args.seed, k, runs]) for k in (6, 7, 8))
        used: dict = {}
        for d in sorted({s * x for x in TABLE_DISTANCES for s in (-1, 1)}):
            for key, (_, n) in replay(runs, bias_sd, d, args.replays, rng, pool_rng, overlap_rng).items():
                used.setdefault(key, []).append(1 - n.mean() / (ITEMS * RATERS))
        for world in WORLDS:
            for mitigation in MITIGATIONS:
                for s in SEQUENCES:
                    early = null[(world, mitigation, s)][0].mean()
                    se = np.sqrt(early * (1 - early) / args.null)
                    saved = np.mean(used[(world, mitigation, s)])
                    print(
                        f"{world:>8} {bias_sd:>7} {runs:>4} {mitigation:>4} {s:>10} "
                        f"{early:>7.2%} +/- {2 * se:.2%} {saved:>12.1%}"
                    )
        print(f"# {time.perf_counter() - started:.0f} s", flush=True)


if __name__ == "__main__":
    main()
