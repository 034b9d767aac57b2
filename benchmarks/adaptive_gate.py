"""Adaptive stopping (issue 18): how many ratings the sequential gate saves, how often its early
decision differs from the decision on the complete study, and its error rate at the threshold.

Usage: .venv/bin/python benchmarks/adaptive_gate.py [--studies 150] [--orders 4] [--null 4000] [--seed 0]
       .venv/bin/python benchmarks/adaptive_gate.py --grid-only [--grid-studies 200] [--settings 40]

The calibration data are read from ``../shared/data`` (or ``$SHIFTLAB_BENCH_DATA``, e.g. from a
git worktree).

- **grid of true means** (issue 29, printed first): studies whose questions (quality, fluency)
  both have the true mean ``threshold + d`` for ``d`` from -0.75 to +0.75, pull assignment with
  batches of 10, for two designs: the gate on each item's first 2 of 3 raters, a third only where
  they disagree (``design.adaptive_gate_raters`` = 2), and every item rated by all 3. Ratings saved
  (in flight included), items not needed, decisions differing from the complete study (every item
  with its 3 raters; early decisions, and the end-of-study one where the gate rests on fewer
  raters), and the saving ``annotation.science.saving_forecast.forecast_saving`` predicted after
  10 and 20 observed items (what the study page shows then) against the realised saving of the
  same replay: mean absolute difference, in points, and how often its 80% interval covered it.
  With ``--settings N`` the grid is also replayed (N studies per point) on studies unlike the
  calibration, one change each (``SETTINGS``: 4 raters per item, 50 or 200 items, raters twice as
  noisy, items half as spread, threshold 3.5 or 2.5, batches of 20), with the worst point of each.

Complete studies are replayed in random orders through ``annotation.science.sequential.settle_questions``
(the code the service runs), checked after every completed item (the finest a study can look),
with the defaults of a design: threshold 3.0, alpha 0.05, at least 10 items, 100 items per
transformation, 3 raters per item.

- **(a) simulated raters**, calibrated on real ratings in ``../shared/data``: a panel of five
  raters with the per-rater biases and the residual noise of BIOSSES' five raters (0-4, shifted to
  1-5), items spread like SummEval's expert coherence ratings within one system (the spread of the
  per-item means, less the rater noise). Rating = clip(round(centre + item + rater bias + noise),
  1, 5). A rewrite study: quality and fluency, each transformation's centres drawn uniformly in
  [2, 4] (true means spread around 3.0). Two replays per order:
  *item order*: items complete one after the other (annotators working through a common order);
  *queues*: each of the five annotators works through their own shuffled queue (the whole queue
  in Argilla at once, shown in Argilla's own order) at random relative speeds, an item completes
  at its third rating, and at settlement every assignment not yet submitted is withdrawn: ratings
  submitted on items that never completed are spent too;
  *released batches of 20 / 10*: the same, but queues follow one common item order, shuffled
  only inside batches (as ``annotation.science.assignment`` draws them, shown one batch at a time with
  the design's ``batches_released``);
  *pull, batches of 20 / 10 / 5*: the design's ``assignment = "pull"``: nothing is drawn ahead; an
  annotator who finished their batch gets the next one from ``annotation.science.assignment.pull_items``
  (the function the service calls: items closest to completion first), so the work follows the
  faster annotators and items complete in about one order.
- **(b) real ratings**: SummEval (16 summarisation systems as transformations, 100 articles as
  items, each item's observation the mean of its three experts' ratings, 1-5), coherence alone and
  coherence + relevance; and BIOSSES as one transformation (100 pairs x 5 raters, 0-4 shifted to
  1-5). The ratings of the local Argilla end-to-end test are a handful of items, too few to replay.
- **error at the threshold**: studies whose expected rating is exactly 3.0 (the centre is solved
  so that the expected rating, over items, raters and noise, is 3.0): the share of replays that
  settle pass or fail before the end. The rule allows alpha in all, alpha/2 for each side.

Ratings saved = 1 - ratings spent / ratings of the complete study; "differ" = settled early on
the other side of the threshold than the complete study's mean. Took 897 s on a 2-core machine
shared with other jobs (the pull replays call ``pull_items`` for every batch).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass
from math import erf, sqrt
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from annotation.science.assignment import pull_items, raters_needed  # noqa: E402
from annotation.science.saving_forecast import RatingCosts, forecast_saving  # noqa: E402
from annotation.science.sequential import Settled, settle_questions  # noqa: E402

DATA = Path(os.environ.get("SHIFTLAB_BENCH_DATA", ROOT.parent / "shared" / "data"))  # a worktree: set it
THRESHOLD, ALPHA, MIN_ITEMS, ITEMS, RATERS_PER_ITEM, PANEL = 3.0, 0.05, 10, 100, 3, 5
SCALE = (1, 5)
# Queues in one common order, released batch by batch (design ``batches_released``), by batch size.
RELEASED = {"released batches of 20": 20, "released batches of 10": 10}
# Pull assignment (design ``assignment = "pull"``, one batch released at a time), by batch size.
PULLED = {"pull, batches of 20": 20, "pull, batches of 10": 10, "pull, batches of 5": 5}


def calibration() -> tuple[np.ndarray, float, float]:
    """Rater biases and residual noise from BIOSSES' five raters; item spread from SummEval."""
    with (DATA / "biosses" / "biosses.tsv").open() as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    scores = np.array([[float(r[c]) for c in "ABCDE"] for r in rows])
    biases = scores.mean(axis=0) - scores.mean()
    residual = scores - scores.mean(axis=1, keepdims=True) - biases
    noise = float(np.sqrt((residual**2).sum() / (residual.size - scores.shape[0] - scores.shape[1] + 1)))
    per_system: dict[str, list[float]] = {}
    for line in (DATA / "summeval" / "summeval.jsonl").open():
        r = json.loads(line)
        per_system.setdefault(r["summary_id"], []).append(r["coherence"])
    within = statistics.mean(statistics.variance(v) for v in per_system.values())
    item_sd = sqrt(max(within - noise**2 / 3, 0.05))
    return biases, noise, item_sd


def _cdf(x: float) -> float:
    return 0.5 * (1 + erf(x / sqrt(2)))


def expected_rating(centre: float, biases: np.ndarray, sd: float) -> float:
    """E[clip(round(centre + bias + N(0, sd)), 1, 5)], a rater drawn uniformly from the panel."""
    total = 0.0
    for b in biases:
        mu = centre + b
        cuts = [_cdf((k + 0.5 - mu) / sd) for k in range(1, 5)]  # P(value <= k)
        probs = np.diff([0.0, *cuts, 1.0])
        total += float(np.dot(probs, np.arange(1, 6)))
    return total / len(biases)


def centre_for(target: float, biases: np.ndarray, sd: float) -> float:
    low, high = 0.0, 6.0
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if expected_rating(mid, biases, sd) < target else (low, mid)
    return (low + high) / 2


def simulate(centres: dict[str, float], biases, noise, item_sd, rng, *, items=ITEMS, raters=None):
    """One complete study of one transformation: ratings[question] of shape (items, raters per
    item), and the raters of each item (distinct members of the panel; drawn unless given)."""
    if raters is None:
        raters = np.array([rng.choice(PANEL, RATERS_PER_ITEM, replace=False) for _ in range(items)])
    ratings = {}
    for name, centre in centres.items():
        latent = centre + rng.normal(0, item_sd, (items, 1)) + biases[raters] + rng.normal(0, noise, raters.shape)
        ratings[name] = np.clip(np.rint(latent), 1, 5)
    return ratings, raters


def decide(per_item: dict[str, np.ndarray], threshold: float = THRESHOLD):
    return settle_questions(
        {q: v.tolist() for q, v in per_item.items()},
        threshold=threshold,
        alpha=ALPHA,
        scales=dict.fromkeys(per_item, SCALE),
        min_items=MIN_ITEMS,
    )


def queue_replay(raters: np.ndarray, rng, *, batch_size: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Annotators working through their queues at random speeds: the order items complete in, and
    how many ratings had been submitted when each of them completed. Without ``batch_size`` each
    queue is shuffled on its own (the whole queue in Argilla at once, in Argilla's own order);
    with it, queues follow one common item order in batches shuffled inside (``assignment`` draws
    them so, and ``batches_released`` shows them one batch at a time)."""
    if batch_size is None:
        queues = [rng.permutation(np.flatnonzero((raters == a).any(axis=1))).tolist() for a in range(PANEL)]
    else:
        common = rng.permutation(len(raters))
        queues = []
        for a in range(PANEL):
            mine = [int(i) for i in common if (raters[i] == a).any()]
            queue: list[int] = []
            for start in range(0, len(mine), batch_size):
                chunk = mine[start : start + batch_size]
                queue.extend(chunk[j] for j in rng.permutation(len(chunk)))
            queues.append(queue)
    speed = rng.uniform(0.5, 1.5, PANEL)
    done = np.zeros(len(raters), dtype=int)
    order, spent, submitted = [], [], 0
    while any(queues):
        busy = [a for a in range(PANEL) if queues[a]]
        a = busy[rng.choice(len(busy), p=speed[busy] / speed[busy].sum())]
        item = queues[a].pop(0)
        submitted += 1
        done[item] += 1
        if done[item] == RATERS_PER_ITEM:
            order.append(item)
            spent.append(submitted)
    return np.array(order), np.array(spent)


@dataclass(frozen=True)
class Setting:
    """One kind of study the grid is replayed on: items per transformation, raters per item (and
    how many the gate observes), threshold, batch size, and the rater noise and item spread as
    multiples of the calibrated ones."""

    name: str
    items: int = ITEMS
    raters: int = RATERS_PER_ITEM
    gate_raters: int = 2
    threshold: float = THRESHOLD
    batch_size: int = 10
    noise: float = 1.0
    spread: float = 1.0


BASE = Setting("100 items x 3 raters, gate on 2 (the base)")
# Studies unlike the calibration (issue 29: independent simulators will replay it), one change each.
SETTINGS = (
    BASE,
    Setting("every item rated by all 3 raters (gate on 3)", gate_raters=3),
    Setting("4 raters per item, gate on 2", raters=4),
    Setting("50 items", items=50),
    Setting("200 items", items=200),
    Setting("raters twice as noisy", noise=2.0),
    Setting("items half as spread", spread=0.5),
    Setting("threshold 3.5", threshold=3.5),
    Setting("threshold 2.5", threshold=2.5),
    Setting("batches of 20", batch_size=20),
)


class LatentStudy:
    """One transformation's study drawn before anyone rates: the items' effects and every rater
    slot's noise per question, so that a rating exists as soon as a rater is given a slot (the pull
    replay needs ratings while it runs, to know whether an item's first raters agree)."""

    def __init__(self, centres: dict[str, float], biases, noise, item_sd, rng, *, setting: Setting = BASE):
        self.centres, self.biases, self.setting = centres, biases, setting
        self.effect = {q: rng.normal(0, item_sd, setting.items) for q in centres}
        self.noise = {q: rng.normal(0, noise, (setting.items, setting.raters)) for q in centres}

    def rating(self, item: int, slot: int, rater: int) -> dict[str, float]:
        return {
            q: float(np.clip(np.rint(c + self.effect[q][item] + self.biases[rater] + self.noise[q][item, slot]), 1, 5))
            for q, c in self.centres.items()
        }


def gate_pull_replay(study: LatentStudy, rng) -> dict:
    """Pull assignment (batches of ``setting.batch_size``) where an item first gets
    ``setting.gate_raters`` raters and its further raters only when those disagree
    (``raters_needed``): the order items reach ``gate_raters`` answers (the gate's observations),
    the ratings submitted then, the gate's per-item means (first ``gate_raters`` answers), and the
    complete study's per-item means (``setting.raters`` raters on every item; slots never handed out
    are rated by a panel member the item does not have yet)."""
    setting = study.setting
    items, gate_raters, full_raters = setting.items, setting.gate_raters, setting.raters
    order = [int(i) for i in rng.permutation(items)]
    raters = np.full((items, full_raters), -1)
    count = np.zeros(items, dtype=int)
    needed = dict.fromkeys(range(items), gate_raters)
    answers: list[list[dict[str, float]]] = [[] for _ in range(items)]
    held: list[set[int]] = [set() for _ in range(PANEL)]
    queues: list[list[int]] = [[] for _ in range(PANEL)]

    def pull(a: int) -> None:
        counts = dict(enumerate(count.tolist()))
        batch = pull_items(
            order, counts, held[a], raters_per_item=full_raters, batch_size=setting.batch_size, needed=needed
        )
        for i in batch:
            raters[i, count[i]] = a
            count[i] += 1
            held[a].add(i)
        queues[a] = [batch[j] for j in rng.permutation(len(batch))]

    for a in range(PANEL):
        pull(a)
    speed = rng.uniform(0.5, 1.5, PANEL)
    completed, spent, submitted = [], [], 0
    timeline: list[int] = []  # the item of each submitted rating, in order
    scales = dict.fromkeys(study.centres, SCALE)
    while any(queues):
        busy = [a for a in range(PANEL) if queues[a]]
        a = busy[rng.choice(len(busy), p=speed[busy] / speed[busy].sum())]
        item = queues[a].pop(0)
        submitted += 1
        answers[item].append(study.rating(item, int(np.flatnonzero(raters[item] == a)[0]), a))
        timeline.append(item)
        if len(answers[item]) == gate_raters:
            completed.append(item)
            spent.append(submitted)
            needed[item] = raters_needed(answers[item], scales, gate_raters=gate_raters, raters_per_item=full_raters)
        for b in range(PANEL):
            if not queues[b]:
                pull(b)
    return {
        "order": np.array(completed),
        "spent": np.array(spent),
        "gate": {
            q: np.array([np.mean([r[q] for r in answers[i][:gate_raters]]) for i in range(items)]) for q in scales
        },
        "full": _complete_means(study, raters, rng),
        "extra": int(sum(max(len(a) - gate_raters, 0) for a in answers)),
        "contested": {i: int(needed[i] > gate_raters) for i in range(items)},
        "timeline": timeline,
        "answers": answers,
    }


def _complete_means(study: LatentStudy, raters: np.ndarray, rng) -> dict[str, np.ndarray]:
    """Per-item means of the complete study: every rater slot rated (a slot never handed out by a
    panel member the item does not have yet)."""
    everyone = raters.copy()
    for row in everyone:
        missing = [p for p in rng.permutation(PANEL) if p not in row]
        for s in np.flatnonzero(row < 0):
            row[s] = missing.pop(0)
    return {
        q: np.clip(np.rint(c + study.effect[q][:, None] + study.biases[everyone] + study.noise[q]), 1, 5).mean(axis=1)
        for q, c in study.centres.items()
    }


def replay(ratings, order):
    """The decision of one replay in ``order``, and the complete study's decision."""
    per_item = {q: v.mean(axis=1)[order] for q, v in ratings.items()}
    decision = decide(per_item)
    full = all(v.mean() >= THRESHOLD for v in ratings.values())
    return decision, full


def tally(row: list[int], decision, full: bool, spent: int, total: int) -> None:
    """Add one replay to ``row`` (replays, ratings spent, ratings of the complete study, decisions
    differing): ``spent`` counts when the decision settled; an undecided replay spends everything."""
    settled = decision.state is not Settled.UNDECIDED
    row[0] += 1
    row[1] += spent if settled else total
    row[2] += total
    row[3] += settled and (decision.state is Settled.PASS) != full


def scenario_a(args, biases, noise, item_sd, rng) -> dict:
    rows = {name: [0, 0, 0, 0] for name in ("item order", "queues", *RELEASED, *PULLED)}
    total = ITEMS * RATERS_PER_ITEM
    for _ in range(args.studies):
        centres = {"quality": rng.uniform(2, 4), "fluency": rng.uniform(2, 4)}
        ratings, raters = simulate(centres, biases, noise, item_sd, rng)
        for _ in range(args.orders):
            decision, full = replay(ratings, rng.permutation(ITEMS))
            tally(rows["item order"], decision, full, decision.n * RATERS_PER_ITEM, total)
            for name, batch_size in (("queues", None), *RELEASED.items()):
                order, spent = queue_replay(raters, rng, batch_size=batch_size)
                decision, full = replay(ratings, order)
                tally(rows[name], decision, full, int(spent[decision.n - 1]), total)
            for name, batch_size in PULLED.items():
                every = Setting(name, gate_raters=RATERS_PER_ITEM, batch_size=batch_size)
                r = gate_pull_replay(LatentStudy(centres, biases, noise, item_sd, rng, setting=every), rng)
                decision = decide({q: v[r["order"]] for q, v in r["gate"].items()})
                full = all(v.mean() >= THRESHOLD for v in r["full"].values())
                tally(rows[name], decision, full, int(r["spent"][decision.n - 1]), total)
    return rows


def real_studies(args, rng) -> dict:
    """SummEval systems and BIOSSES replayed in random orders (the observations are real per-item means)."""
    per_system: dict[str, dict[str, list[float]]] = {}
    for line in (DATA / "summeval" / "summeval.jsonl").open():
        r = json.loads(line)
        system = per_system.setdefault(r["summary_id"], {"coherence": [], "relevance": []})
        system["coherence"].append(r["coherence"])
        system["relevance"].append(r["relevance"])
    with (DATA / "biosses" / "biosses.tsv").open() as f:
        biosses = np.array([[float(r[c]) + 1 for c in "ABCDE"] for r in csv.DictReader(f, delimiter="\t")])
    studies = {
        "SummEval coherence (16 systems, 3 experts)": [{"coherence": v["coherence"]} for v in per_system.values()],
        "SummEval coherence + relevance": list(per_system.values()),
        "BIOSSES as one transformation (5 raters)": [{"similarity": biosses.mean(axis=1).tolist()}],
    }
    rows = {}
    for name, transformations in studies.items():
        replays = spent = total = differ = 0
        for t in transformations:
            values = {q: np.array(v) for q, v in t.items()}
            n_items = len(next(iter(values.values())))
            full = all(v.mean() >= THRESHOLD for v in values.values())
            for _ in range(args.real_orders):
                order = rng.permutation(n_items)
                decision = decide({q: v[order] for q, v in values.items()})
                settled = decision.state is not Settled.UNDECIDED
                replays += 1
                spent += decision.n if settled else n_items
                total += n_items
                differ += settled and (decision.state is Settled.PASS) != full
        rows[name] = [replays, spent, total, differ]
    return rows


def at_threshold(biases, noise, item_sd, rng, *, replays: int, questions: int, items: int) -> tuple[int, int, int]:
    """Replays of studies whose every question's expected rating is exactly the threshold."""
    centre = centre_for(THRESHOLD, biases, sqrt(item_sd**2 + noise**2))
    names = ["quality", "fluency"][:questions]
    passes = fails = 0
    for _ in range(replays):
        ratings, _ = simulate(dict.fromkeys(names, centre), biases, noise, item_sd, rng, items=items)
        decision = decide({q: v.mean(axis=1) for q, v in ratings.items()})
        passes += decision.state is Settled.PASS
        fails += decision.state is Settled.FAIL
    return replays, passes, fails


GRID = (-0.75, -0.5, -0.25, -0.1, 0.0, 0.1, 0.25, 0.5, 0.75)  # true mean - threshold
FORECAST_AT = (10, 20)  # items observed when the prediction is read


def grid_replay(args, biases, noise, item_sd, rng, setting: Setting = BASE, studies: int | None = None) -> dict:
    """Studies whose two questions (quality, fluency) both have the true mean ``threshold + d``
    for each ``d`` of ``GRID``, replayed with pull assignment, the gate observing each item's first
    ``setting.gate_raters`` raters (further raters only on contested items): ratings saved,
    decisions differing from the complete study's (early ones, and with fewer gate raters than
    raters also the end-of-study decision on the gate's ratings), and the saving
    ``forecast_saving`` predicted after ``FORECAST_AT`` items (the study page's prediction then)
    against the realised one, with its 80% interval's coverage. Returns d -> columns."""
    rows = {}
    noise, item_sd = noise * setting.noise, item_sd * setting.spread
    total = setting.items * setting.raters
    for d in GRID:
        centre = centre_for(setting.threshold + d, biases, sqrt(item_sd**2 + noise**2))
        row = {"replays": 0, "spent": 0, "items": 0, "differ": 0, "realised": []}
        for k in FORECAST_AT:
            row[f"predicted@{k}"], row[f"covered@{k}"] = [], []
        for _ in range(studies or args.grid_studies):
            study = LatentStudy({"quality": centre, "fluency": centre}, biases, noise, item_sd, rng, setting=setting)
            r = gate_pull_replay(study, rng)
            per_item = {q: v[r["order"]] for q, v in r["gate"].items()}
            decision = decide(per_item, setting.threshold)
            full = all(v.mean() >= setting.threshold for v in r["full"].values())
            if decision.state is not Settled.UNDECIDED:
                used, passed, n = int(r["spent"][decision.n - 1]), decision.state is Settled.PASS, decision.n
            else:
                used = setting.items * setting.gate_raters + r["extra"]
                passed, n = all(v.mean() >= setting.threshold for v in r["gate"].values()), setting.items
            row["replays"] += 1
            row["spent"] += used
            row["items"] += n
            row["differ"] += passed != full
            realised = 1 - used / total
            row["realised"].append(realised)
            for k in FORECAST_AT:
                forecast = _forecast(per_item, r, k, setting, rng)
                row[f"predicted@{k}"].append(forecast.saving)
                row[f"covered@{k}"].append(forecast.saving_low - 1e-9 <= realised <= forecast.saving_high + 1e-9)
        rows[d] = row
    return rows


def _forecast(per_item, replayed, k, setting: Setting, rng):
    """``forecast_saving`` as the study page computes it after ``k`` observed items: the contested
    items among them and the ratings in flight on items not observed yet."""
    contested = sum(replayed["contested"][int(i)] for i in replayed["order"][:k])
    observed = k * setting.gate_raters + contested * (setting.raters - setting.gate_raters)
    seen = {int(i) for i in replayed["order"][:k]}
    given = Counter(replayed["timeline"][: int(replayed["spent"][k - 1])])
    started = [i for i in given if i not in seen]
    partial = {
        q: [float(np.mean([r[q] for r in replayed["answers"][i][: given[i]]])) for i in started] for q in per_item
    }
    return forecast_saving(
        {q: v[:k].tolist() for q, v in per_item.items()},
        partial=partial,
        threshold=setting.threshold,
        alpha=ALPHA,
        scales=dict.fromkeys(per_item, SCALE),
        min_items=MIN_ITEMS,
        total=setting.items,
        seed=int(rng.integers(2**31)),
        costs=RatingCosts(
            setting.gate_raters, setting.raters, contested, max(int(replayed["spent"][k - 1]) - observed, 0)
        ),
    )


def print_grid(rows: dict, setting: Setting = BASE) -> None:
    total = setting.items * setting.raters
    heads = " ".join(f"{'pred@' + str(k):>8} {'|err|':>6} {'cover':>6}" for k in FORECAST_AT)
    print(f"{'true mean - threshold':>22} {'replays':>8} {'saved':>7} {'items':>7} {'differ':>7} {heads}")
    every = {"spent": 0, "replays": 0, "differ": 0, "realised": []}
    for k in FORECAST_AT:
        every[f"predicted@{k}"], every[f"covered@{k}"] = [], []
    for d, row in rows.items():
        for key in every:
            every[key] += row[key]
        print(
            f"{d:>+22.2f} {row['replays']:>8} {1 - row['spent'] / (row['replays'] * total):>7.1%} "
            f"{1 - row['items'] / (row['replays'] * setting.items):>7.1%} {row['differ'] / row['replays']:>7.1%} "
            + _forecast_cells(row)
        )
    print(
        f"{'grid, all':>22} {every['replays']:>8} {1 - every['spent'] / (every['replays'] * total):>7.1%} "
        f"{'':>7} {every['differ'] / every['replays']:>7.1%} " + _forecast_cells(every)
    )


def _forecast_cells(row: dict) -> str:
    realised = np.array(row["realised"])
    cells = []
    for k in FORECAST_AT:
        predicted = np.array(row[f"predicted@{k}"])
        error = np.abs(predicted - realised).mean()
        cells.append(f"{predicted.mean():>8.1%} {error:>6.1%} {np.mean(row[f'covered@{k}']):>6.0%}")
    return " ".join(cells)


def print_settings(args, biases, noise, item_sd, rng, done: dict) -> None:
    """The grid replayed on every ``SETTINGS`` (``done``: setting -> rows already replayed): the
    whole grid's figures and the worst point of it."""
    print(
        f"{'setting':<48} {'saved':>6} {'worst':>6} {'differ':>6} {'worst':>6} {'err@10':>6} {'worst':>6} {'cover':>6}"
    )
    for setting in SETTINGS:
        rows = done.get(setting) or grid_replay(args, biases, noise, item_sd, rng, setting, studies=args.settings)
        total = setting.items * setting.raters
        saved = [1 - row["spent"] / (row["replays"] * total) for row in rows.values()]
        differ = [row["differ"] / row["replays"] for row in rows.values()]
        errors = [np.abs(np.array(row["predicted@10"]) - np.array(row["realised"])).mean() for row in rows.values()]
        cover = np.mean([c for row in rows.values() for c in row["covered@10"]])
        print(
            f"{setting.name:<48} {np.mean(saved):>6.1%} {min(saved):>6.1%} {np.mean(differ):>6.1%} {max(differ):>6.1%} "
            f"{np.mean(errors):>6.1%} {max(errors):>6.1%} {cover:>6.0%}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--studies", type=int, default=150, help="simulated studies per scenario (a)")
    parser.add_argument("--orders", type=int, default=4, help="random orders per simulated study")
    parser.add_argument("--real-orders", type=int, default=100, help="random orders per real transformation")
    parser.add_argument("--null", type=int, default=4000, help="replays at the threshold")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--grid-studies", type=int, default=100, help="studies per point of the grid of true means")
    parser.add_argument("--grid-only", action="store_true", help="only the grid of true means around the threshold")
    parser.add_argument(
        "--settings", type=int, default=0, help="also the grid on studies unlike the calibration, this many per point"
    )
    args = parser.parse_args()
    if not DATA.is_dir():
        sys.exit(f"public data not found at {DATA}: this benchmark calibrates on it")
    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()
    biases, noise, item_sd = calibration()
    print(
        f"calibration: BIOSSES rater biases {np.round(biases, 3).tolist()}, residual SD {noise:.3f}; "
        f"SummEval coherence item SD {item_sd:.3f}"
    )
    print(f"rule: threshold {THRESHOLD}, alpha {ALPHA}, min items {MIN_ITEMS}, {ITEMS} items x {RATERS_PER_ITEM}")
    print()
    print("grid of true means (quality = fluency) around the threshold, pull assignment, batches of 10:")
    print("saved = ratings (in flight included), items = items not needed, differ = the study's decision (early, or")
    print("at the end where the gate rests on fewer raters) on the other side than the complete study's; pred@k =")
    print("the median saving forecast_saving predicts after k observed items, |err| = its mean absolute difference")
    print("from the realised saving of the same replay, cover = how often its 80% interval held it")
    done = {}
    for setting in SETTINGS[:2]:
        print(f"\n{setting.name}:")
        done[setting] = grid_replay(args, biases, noise, item_sd, rng, setting)
        print_grid(done[setting], setting)
    if args.settings:
        print("\nthe grid on studies unlike the calibration (one change each from the first line; saved, differ and")
        print("err@10 over the grid, worst = its worst point; cover = the 80% interval's coverage after 10 items):")
        print_settings(args, biases, noise, item_sd, rng, done)
    if args.grid_only:
        print(f"\n{time.perf_counter() - started:.0f} s")
        return
    print()
    print(f"{'replay':<52} {'replays':>8} {'saved':>7} {'differ':>7}")
    a = scenario_a(args, biases, noise, item_sd, rng)
    for name, (replays, spent, total, differ) in a.items():
        label = f"(a) simulated, quality+fluency, {name}"
        print(f"{label:<52} {replays:>8} {1 - spent / total:>7.1%} {differ / replays:>7.1%}")
    for name, (replays, spent, total, differ) in real_studies(args, rng).items():
        label = f"(b) {name}"
        print(f"{label:<52} {replays:>8} {1 - spent / total:>7.1%} {differ / replays:>7.1%}")
    print()
    print(f"{'true mean exactly at the threshold':<52} {'replays':>8} {'pass':>7} {'fail':>7} {'either':>7}")
    for questions, items, replays in ((1, ITEMS, args.null), (2, ITEMS, args.null), (1, 1000, args.null // 4)):
        n, passes, fails = at_threshold(biases, noise, item_sd, rng, replays=replays, questions=questions, items=items)
        label = f"{questions} question{'s' if questions > 1 else ''}, {items} items (alpha {ALPHA})"
        print(f"{label:<52} {n:>8} {passes / n:>7.2%} {fails / n:>7.2%} {(passes + fails) / n:>7.2%}")
    print(f"\n{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
