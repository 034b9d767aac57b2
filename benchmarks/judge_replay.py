"""Issue 40, point 5: the prediction-powered gate replayed on real raters and the embedded LLM judge's
real scores (SICK relatedness, BIOSSES).

Usage: .venv/bin/python benchmarks/judge_replay.py [--quick] [--sick-pairs 300] [--replays 500]
       [--model qwen2.5-coder-1.5b-instruct] [--threads 2] [--seed 0]

Needs ``../shared/data`` (``sick/``, ``biosses/``; ``--data`` names another folder) and, the first
time, llama-cpp-python (requirements-embedded.txt) with the embedded model (fetched and verified by
``transforms.embedded.ensure_model`` into ``--models-dir``, default ``$SHIFTLAB_MODELS_DIR`` or
``~/.cache/shiftlab/models``). The judge's answers are cached in ``var/judge_replay/judgements.json``
(ignored by git), keyed like the product's judgements (``transforms.cache_keys.judgement_key``:
kind, model and the SHA-256 of its weights, prompt hash, sampling parameters, texts, seed, attempt),
so a rerun starts no server and takes seconds. Measured on a 2-core machine shared with other jobs
(Dec 2026, Qwen2.5-Coder-1.5B, 2 threads): 1.6-2.5 s per pair (up to 4 s while a compiler ran
beside it; the 200 SICK pairs beyond ``--quick``'s took 315 s), so ``--quick`` (200 pairs) takes 5-8
minutes from an empty cache and the default run (400 pairs) 11-17; 2 s from the cache.

The judge
---------
The similarity judge of the product: ``transforms.judging.JUDGE_PROMPTS[JudgeKind.SIMILARITY]``
(0-5 with one decimal), greedy decoding and at most 16 tokens (the defaults of
``transforms.params.JudgeParams``), an answer without a number on the scale asked again with a new
sampling seed up to 3 times, then counted as a failure (as ``judgement_services.judge_pairs`` does;
that service needs the Django database, this script only its cache key and prompt). The judge scores
a seeded random sample of SICK pairs (``--sick-pairs``, drawn from the 9,927 pairs of the three
files; ``--quick`` takes the first 100 of the same sample, so its answers are in the full run's
cache) and all 100 BIOSSES pairs. Its 0-5 score is mapped linearly onto the human scale (SICK 1-5,
BIOSSES 0-4) by the product's ``validation.llm_estimate``. Printed: Pearson and Spearman
correlation with the published human item mean, mean bias (judge on the human scale minus human
mean), failures, the most common answers. A failed answer gets the product's fixed
stand-in, the midpoint of the human scale, before any human rating (issue 40, point 3).

The replay (one question, alpha 0.05, at least 10 items and 3 distinct raters)
-----------------------------------------------------------------------------
A data set's judged pairs play a transformation's ``N`` outputs (SICK: ``--sick-pairs``; BIOSSES:
100). Each replay draws all ``N`` items without replacement in a random order and gives each one
human rating:

- **BIOSSES**: the rating of one of its five published raters (A-E), picked uniformly at random per
  item: real ratings, real rater differences (bias included);
- **SICK**: only the mean of ten raters is published, so one rater's rating is **simulated**:
  ``clip(round(c_i + e), 1, 5)`` with ``e ~ N(0, rater_sd)`` and ``c_i`` solved so that the
  rating's expectation equals the published mean of item ``i`` exactly (``benchmarks.gate_savings``'
  rater model); rater ids are drawn from a pool of 10 with no rater bias. ``rater_sd`` is not in the
  data: 0.44 is BIOSSES's pooled within-item standard deviation of its five raters (computed from
  the file: trained raters on a five-point scale), 0.9 the noisy rater of ``gate_savings.py``.

The "true mean" is the mean over the ``N`` items of each item's expected single rating (BIOSSES: its
five-rater mean; SICK: the published ten-rater mean, up to the rater model's clip at the scale's
ends); the complete study (every item, every rater) passes when it is at or above the threshold.
The threshold is placed at ``true mean - d`` for ``d`` in {-0.5, -0.25, 0, +0.25, +0.5} (scale units;
both scales are 4 points wide). Designs, each reading one rating per item in draw order:

- **human, asymptotic / human, aGRAPA**: the human ratings alone (``variance_sequences``: the
  asymptotic sequence, tightest at 100 items, or the betting sequence with the aGRAPA bet; observations
  recentred for draws without replacement);
- **PPI, asymptotic / PPI, aGRAPA**: the same sequences on the PPI++ observations of the judge's
  real scores (``prediction_powered_observations``, without replacement, ``lam_t`` from earlier
  items only).

A decision is taken from the first item at which both 10 items and 3 distinct raters are behind it
(``bounded_settle``'s rule); a design never settled uses all ``N`` items and decides on their
mean (with every output rated, the PPI++ estimate is that mean too). Ratings used = items read (one
rating each; no overlap for agreement counted, unlike ``gate_savings.py``). Printed per distance:
mean ratings used, share of decisions that differ from the complete study's, and at ``d = 0`` the
share settled early on either side (the error at the threshold against the complete study), with in
brackets the share settled early on the wrong side of the mean of the single ratings the ``N`` items
got: the sequences' target, which differs from the true mean by the average of ``N`` rater deviations,
so only the bracketed share is bounded by alpha = 5%. Then what a judge could remove of a single
rating's variance, and the PPI designs on the same replays with the published item means as the
judge (an oracle: the most any judge could do).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy import stats

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from annotation.science.validation import llm_estimate  # noqa: E402
from annotation.science.variance_sequences import (  # noqa: E402
    MIN_RATERS,
    _ppi_rows,
    asymptotic_first_settlements,
    first_settlements,
)
from benchmarks.gate_savings import expected_rating  # noqa: E402
from core.hashing import sha256_text  # noqa: E402
from transforms import planning  # noqa: E402
from transforms.cache_keys import judgement_key  # noqa: E402
from transforms.judging import JUDGE_PROMPTS, SCALES, JudgeKind, parse_score  # noqa: E402
from transforms.params import JudgeParams  # noqa: E402
from transforms.prompts import prompt_hash  # noqa: E402

ALPHA, MIN_ITEMS = 0.05, 10
DISTANCES = (-0.5, -0.25, 0.0, 0.25, 0.5)
SICK_FILES = ("SICK_train.txt", "SICK_trial.txt", "SICK_test_annotated.txt")
SICK_SCALE, BIOSSES_SCALE = (1.0, 5.0), (0.0, 4.0)
SICK_RATER_POOL = 10
NOISY_RATER_SD = 0.9  # gate_savings.RATER_SDS' noisier rater
KIND = JudgeKind.SIMILARITY
JUDGE_SCALE = SCALES[KIND]
JUDGE_PARAMS = JudgeParams()  # the judge's defaults, as judge_pairs uses them
DESIGNS = (("human", "asymptotic"), ("PPI", "asymptotic"), ("human", "betting"), ("PPI", "betting"))
CACHE = ROOT / "var" / "judge_replay" / "judgements.json"
DEFAULT_MODELS_DIR = Path.home() / ".cache" / "shiftlab" / "models"  # where scripts/test.sh keeps them
CHUNK = 8  # judge answers between two cache writes


# --------------------------------------------------------------------------- data


@dataclass(frozen=True)
class PairSet:
    """Sentence pairs with their published human ratings.

    ``item_means`` is each pair's published human mean; ``ratings`` (items, raters) each rater's
    rating where the data set publishes them (BIOSSES), else None (SICK).
    """

    name: str
    text_a: tuple[str, ...]
    text_b: tuple[str, ...]
    item_means: np.ndarray
    ratings: np.ndarray | None
    scale: tuple[float, float]


def load_sick(data: Path, n: int, rng: np.random.Generator) -> PairSet:
    """``n`` SICK pairs drawn at random (without replacement) from its three files."""
    rows = []
    for name in SICK_FILES:
        with open(data / "sick" / name, encoding="utf-8", newline="") as fh:
            rows += list(csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE))
    picked = [rows[i] for i in rng.permutation(len(rows))[:n]]
    return PairSet(
        "SICK",
        tuple(r["sentence_A"] for r in picked),
        tuple(r["sentence_B"] for r in picked),
        np.array([float(r["relatedness_score"]) for r in picked]),
        None,
        SICK_SCALE,
    )


def load_biosses(data: Path) -> PairSet:
    with open(data / "biosses" / "biosses.tsv", encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE))
    ratings = np.array([[float(r[k]) for k in "ABCDE"] for r in rows])
    return PairSet(
        "BIOSSES",
        tuple(r["sentence1"] for r in rows),
        tuple(r["sentence2"] for r in rows),
        ratings.mean(axis=1),
        ratings,
        BIOSSES_SCALE,
    )


def pooled_within_sd(ratings: np.ndarray) -> float:
    """Square root of the mean over items of the raters' sample variance on that item."""
    return float(np.sqrt(ratings.var(axis=1, ddof=1).mean()))


# --------------------------------------------------------------------------- the judge


def to_scale(judge: np.ndarray, scale: tuple[float, float]) -> np.ndarray:
    """The judge's 0-5 similarity on the human ``scale`` as the product maps it
    (``validation.llm_estimate``: linear), NaN where no answer parsed."""
    return np.array(
        [
            np.nan if np.isnan(g) else llm_estimate([float(g)], judge_scale=JUDGE_SCALE, question_scale=scale)
            for g in np.asarray(judge, dtype=float)
        ]
    )


def with_stand_in(judge: np.ndarray, scale: tuple[float, float]) -> np.ndarray:
    """Failed answers (NaN) replaced by the scale's midpoint, the product's stand-in
    (``judge_population_services.STAND_IN``), fixed before any human rating."""
    g = np.asarray(judge, dtype=float)
    return np.where(np.isnan(g), (scale[0] + scale[1]) / 2, g)


@dataclass(frozen=True)
class JudgeAgreement:
    """The judge against the published human item means, over the pairs it scored (failures out)."""

    n: int
    failures: int
    pearson: float
    spearman: float
    bias: float  # mean of judge (on the human scale) minus human mean
    mae: float


def _correlations(g: np.ndarray, h: np.ndarray) -> tuple[float, float]:
    """Pearson and Spearman; NaN where either side is constant (a judge with one answer)."""
    if g.size < 2 or np.ptp(g) == 0 or np.ptp(h) == 0:
        return float("nan"), float("nan")
    return float(stats.pearsonr(g, h).statistic), float(stats.spearmanr(g, h).statistic)


def judge_agreement(judge: np.ndarray, human: np.ndarray) -> JudgeAgreement:
    g, h = np.asarray(judge, dtype=float), np.asarray(human, dtype=float)
    ok = ~np.isnan(g)
    pearson, spearman = _correlations(g[ok], h[ok])
    return JudgeAgreement(
        n=int(g.size),
        failures=int((~ok).sum()),
        pearson=pearson,
        spearman=spearman,
        bias=float((g[ok] - h[ok]).mean()),
        mae=float(np.abs(g[ok] - h[ok]).mean()),
    )


def _load_cache(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def _save_cache(path: Path, cache: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(cache, indent=0, sort_keys=True), encoding="utf-8")
    os.replace(partial, path)


@dataclass
class EmbeddedJudge:
    """The embedded model served by llama.cpp, started only when an answer is missing from the cache."""

    model: str
    models_dir: Path
    threads: int
    log_path: Path
    say: Callable[[str], None] = print
    _server: object = field(default=None, init=False, repr=False)
    _backend: object = field(default=None, init=False, repr=False)

    @property
    def weights(self) -> str:
        from transforms.embedded import get_model

        return f"sha256:{get_model(self.model).sha256}"

    def backend(self):
        if self._backend is None:
            # Imported only when an answer is missing: the replay (and its test) need neither the
            # LLM client (its package imports Django) nor llama.cpp.
            from transforms.backends.openai_compat import OpenAICompatBackend
            from transforms.embedded import LlamaServer, ensure_model

            path = ensure_model(self.model, models_dir=self.models_dir, progress=self.say)
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._server = LlamaServer(
                path, model_alias=self.model, n_ctx=2048, n_threads=self.threads, log_path=self.log_path
            )
            started = time.perf_counter()
            self._server.start()
            self._server.wait_ready()
            self.say(f"  {self.model} served by llama-cpp-python ({time.perf_counter() - started:.0f} s to ready)")
            self._backend = OpenAICompatBackend(
                alias="judge-replay", model=self.model, base_url=self._server.base_url, max_concurrency=1
            )
        return self._backend

    def close(self) -> None:
        if self._server is not None:
            self._server.stop()


def judge_pairs_cached(pairs: PairSet, judge: EmbeddedJudge, *, cache_path: Path, seed: int) -> np.ndarray:
    """The judge's 0-5 score of every pair (NaN: no number on the scale after every attempt)."""
    from transforms.backends.base import ChatFailure, ChatRequest

    system, user = JUDGE_PROMPTS[KIND]
    template = prompt_hash(system, user)
    model_id = f"{judge.model}@{judge.weights}"
    cache = _load_cache(cache_path)
    scores = np.full(len(pairs.text_a), np.nan)
    pending = list(range(len(pairs.text_a)))
    low, high = JUDGE_SCALE
    asked, started = 0, time.perf_counter()
    for attempt in range(JUDGE_PARAMS.max_attempts):
        keys = {
            i: judgement_key(
                kind=KIND.value,
                model=model_id,
                prompt_hash=template,
                params_hash=JUDGE_PARAMS.sampling_hash,
                text_a=pairs.text_a[i],
                text_b=pairs.text_b[i],
                seed=seed,
                attempt=attempt,
            )
            for i in pending
        }
        missing = [i for i in pending if keys[i] not in cache]
        for start in range(0, len(missing), CHUNK):
            chunk = missing[start : start + CHUNK]
            requests = [
                ChatRequest(
                    messages=[
                        {"role": "system", "content": system},
                        {"role": "user", "content": user.format(text_a=pairs.text_a[i], text_b=pairs.text_b[i])},
                    ],
                    seed=planning.sampling_seed(
                        seed=seed,
                        text_hash=sha256_text(pairs.text_a[i] + "\x00" + pairs.text_b[i]),
                        step=0,
                        attempt=attempt,
                    ),
                    temperature=JUDGE_PARAMS.temperature,
                    top_p=JUDGE_PARAMS.top_p,
                    max_tokens=JUDGE_PARAMS.max_tokens,
                )
                for i in chunk
            ]
            for i, result in zip(chunk, judge.backend().generate(requests), strict=True):
                if isinstance(result, ChatFailure):
                    if not result.transient:
                        cache[keys[i]] = {"output": None, "failure": result.message[:500], "score": None}
                    continue
                score = parse_score(result.text, low=low, high=high)
                cache[keys[i]] = {"output": result.text, "score": score, "latency_s": round(result.latency_s, 3)}
            asked += len(chunk)
            _save_cache(cache_path, cache)
            rate = (time.perf_counter() - started) / asked
            judge.say(f"  {pairs.name}: {asked} answers asked, {rate:.2f} s each, attempt {attempt + 1}")
        still = []
        for i in pending:
            answer = cache.get(keys[i])
            if answer is not None and answer["score"] is not None:
                scores[i] = answer["score"]
            elif answer is not None:
                still.append(i)  # answered without a score: asked again with the next seed
        pending = still
    return scores


# --------------------------------------------------------------------------- human ratings


def latent_centres(means: np.ndarray, rater_sd: float) -> np.ndarray:
    """Per item, ``c`` with ``E[clip(round(c + N(0, rater_sd)), 1, 5)]`` equal to its mean (bisection;
    a mean at a scale end gets the nearest reachable centre, 6 sds beyond it)."""
    target = np.asarray(means, dtype=float)
    lo = np.full(target.shape, SICK_SCALE[0] - 6 * rater_sd)
    hi = np.full(target.shape, SICK_SCALE[1] + 6 * rater_sd)
    for _ in range(60):
        mid = (lo + hi) / 2
        below = expected_rating(mid, rater_sd)[0] < target
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    return (lo + hi) / 2


@dataclass(frozen=True)
class Replays:
    """Many replays of one study over the same ``N`` outputs: per replay (rows) the items in draw
    order with the one human rating each got, its rater and the judge's score."""

    human: np.ndarray  # (replays, N)
    judge: np.ndarray  # (replays, N)
    raters: np.ndarray  # (replays, N) integer rater ids
    judge_all: np.ndarray  # (N,) the judge's score of every output, stand-ins in
    truth: float  # mean over the N outputs of each one's expected single rating
    scale: tuple[float, float]
    order: np.ndarray | None = None  # (replays, N) the outputs drawn, in order

    def judged_by(self, judge_all: np.ndarray) -> Replays:
        """The same draws and ratings with another judge's scores of the ``N`` outputs."""
        return Replays(self.human, judge_all[self.order], self.raters, judge_all, self.truth, self.scale, self.order)


def draw_replays(
    rng: np.random.Generator, pairs: PairSet, judge_all: np.ndarray, replays: int, *, rater_sd: float | None = None
) -> Replays:
    """Published raters where the data set has them (``rater_sd`` None), else simulated ones."""
    n = len(pairs.text_a)
    order = np.argsort(rng.random((replays, n)), axis=1)
    if pairs.ratings is not None:
        raters = rng.integers(0, pairs.ratings.shape[1], (replays, n))
        human = pairs.ratings[order, raters]
        truth = float(pairs.ratings.mean())
    else:
        if rater_sd is None:
            raise ValueError(f"{pairs.name} publishes no single ratings: give rater_sd")
        centres = latent_centres(pairs.item_means, rater_sd)
        noise = rng.normal(0, rater_sd, (replays, n))
        human = np.clip(np.rint(centres[order] + noise), *pairs.scale)
        raters = rng.integers(0, SICK_RATER_POOL, (replays, n))
        truth = float(expected_rating(centres, rater_sd)[0].mean())
    return Replays(human, judge_all[order], raters, judge_all, truth, pairs.scale, order)


# --------------------------------------------------------------------------- the gate


def first_allowed(raters: np.ndarray, *, min_items: int = MIN_ITEMS, min_raters: int = MIN_RATERS) -> np.ndarray:
    """Per row, the first observation (1-based) with ``min_items`` observations and ``min_raters``
    distinct raters behind it (``N + 1``: never), as ``variance_sequences._first_allowed`` does."""
    rows, n = raters.shape
    seen = np.zeros((rows, int(raters.max()) + 1), dtype=bool)
    distinct = np.empty((rows, n), dtype=int)
    for t in range(n):
        seen[np.arange(rows), raters[:, t]] = True
        distinct[:, t] = seen.sum(axis=1)
    enough = distinct >= min_raters
    first = np.where(enough.any(axis=1), enough.argmax(axis=1) + 1, n + 1)
    return np.maximum(first, min_items)


@dataclass(frozen=True)
class Outcome:
    """Per replay: ratings used, the decision (True: pass) and whether it settled before the end."""

    ratings: np.ndarray
    passed: np.ndarray
    early: np.ndarray


def replay_design(rep: Replays, *, threshold: float, judge: bool, method: str) -> Outcome:
    """One rating per item, read in draw order until the gate settles (or every item is read)."""
    rows, n = rep.human.shape
    g_all = np.broadcast_to(rep.judge_all, (rows, n)) if judge else np.zeros((rows, n))
    g = rep.judge if judge else np.zeros((rows, n))
    z, lo, hi, _ = _ppi_rows(
        g_all, g, rep.human, scale=rep.scale, sampling="without_replacement", weight=None if judge else 0.0
    )
    start = first_allowed(rep.raters)
    at, passed = np.full(rows, np.inf), np.zeros(rows, dtype=bool)
    for first in np.unique(start[start <= n]):
        rows_here = start == first
        levels = {"threshold": threshold, "alpha": ALPHA, "alpha_pass": ALPHA, "min_items": int(first)}
        if method == "betting":
            at_here, passed_here = first_settlements(z[rows_here], lo[rows_here], hi[rows_here], **levels)
        elif method == "asymptotic":
            at_here, passed_here = asymptotic_first_settlements(z[rows_here], **levels)
        else:
            raise ValueError(f"method must be 'betting' or 'asymptotic', got {method!r}")
        at[rows_here], passed[rows_here] = at_here, passed_here
    early = np.isfinite(at)
    end = rep.human.mean(axis=1) >= threshold
    return Outcome(np.where(early, at, n), np.where(early, passed, end), early)


@dataclass(frozen=True)
class Row:
    """One design at one distance, over the replays: mean ratings used, share of decisions that
    differ from the complete study's, share settled early, and share settled early on the other
    side of the threshold from the mean of the single ratings all ``N`` items got (the quantity the
    sequences cover)."""

    ratings: float
    differ: float
    early: float
    early_wrong: float


def tally(outcome: Outcome, complete_passes: bool, sample_passes: np.ndarray) -> Row:
    return Row(
        float(outcome.ratings.mean()),
        float((outcome.passed != complete_passes).mean()),
        float(outcome.early.mean()),
        float((outcome.early & (outcome.passed != sample_passes)).mean()),
    )


def replay_rows(rep: Replays) -> dict[float, dict[tuple[str, str], Row]]:
    """Every design at every distance ``d`` (threshold at ``truth - d``), on the same replays."""
    rows = {}
    for d in DISTANCES:
        threshold = rep.truth - d
        complete_passes = rep.truth >= threshold
        sample_passes = rep.human.mean(axis=1) >= threshold
        rows[d] = {
            (source, method): tally(
                replay_design(rep, threshold=threshold, judge=source == "PPI", method=method),
                complete_passes,
                sample_passes,
            )
            for source, method in DESIGNS
        }
    return rows


# --------------------------------------------------------------------------- report


def explainable_share(pairs: PairSet, judge: np.ndarray, rep: Replays) -> float:
    """The share of a single rating's variance a judge could remove: corr(judge, item mean)^2 times
    the item means' share of that variance (the raters' own noise stays)."""
    rho = _correlations(np.asarray(judge, dtype=float), pairs.item_means)[0]
    return float(np.nan_to_num(rho) ** 2 * pairs.item_means.var() / rep.human.var())


def print_rows(label: str, rep: Replays, rows: dict, n: int) -> None:
    print(f"\n{label}: N = {n} outputs, true mean {rep.truth:.3f}, {rep.human.shape[0]} replays per distance")
    print("  ratings used (one per item), (decisions differing from the complete study / settled early)")
    head = " ".join(f"{s + ', ' + m:>26}" for s, m in DESIGNS)
    print(f"  {'d':>6} {head} {'PPI vs human: asympt.':>22} {'aGRAPA':>7}")
    for d, row in rows.items():
        cells = " ".join(f"{row[k].ratings:>8.1f} ({row[k].differ:>5.1%}/{row[k].early:>5.1%})" for k in DESIGNS)
        change = [row[("PPI", m)].ratings / row[("human", m)].ratings - 1 for m in ("asymptotic", "betting")]
        print(f"  {d:>+6.2f} {cells} {change[0]:>+22.1%} {change[1]:>+7.1%}")
    mean = {k: float(np.mean([row[k].ratings for row in rows.values()])) for k in DESIGNS}
    worst = {k: max(row[k].differ for d, row in rows.items() if d != 0) for k in DESIGNS}
    cells = " ".join(f"{mean[k]:>8.1f} (worst {worst[k]:>4.1%})  " for k in DESIGNS)
    change = [mean[("PPI", m)] / mean[("human", m)] - 1 for m in ("asymptotic", "betting")]
    print(f"  {'mean':>6} {cells} {change[0]:>+22.1%} {change[1]:>+7.1%}")
    at = rows[0.0]
    cells = " ".join(f"{at[k].early:>13.1%} ({at[k].early_wrong:>5.1%})    " for k in DESIGNS)
    print(f"  {'d = 0':>6} {cells}  <- error at the threshold: settled early (wrong for the N ratings' mean)")


def print_oracle(rows: dict, oracle: dict) -> None:
    """The PPI designs with the published item means as the judge: the most any judge could do."""
    cells = []
    for method in ("asymptotic", "betting"):
        human = np.mean([row[("human", method)].ratings for row in rows.values()])
        ppi = np.mean([row[("PPI", method)].ratings for row in oracle.values()])
        at = oracle[0.0][("PPI", method)]
        cells.append(f"{method} {ppi:.1f} ({ppi / human - 1:+.1%}, d = 0: {at.early:.1%} ({at.early_wrong:.1%}))")
    print("  the published item means as the judge (an oracle), mean ratings vs human: " + "; ".join(cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100 SICK pairs, 200 replays per distance")
    parser.add_argument("--sick-pairs", type=int, default=None, help="SICK pairs judged (default 300, quick 100)")
    parser.add_argument("--replays", type=int, default=None, help="replays per distance (default 500, quick 200)")
    parser.add_argument("--model", default="qwen2.5-coder-1.5b-instruct", help="embedded model (transforms.embedded)")
    parser.add_argument("--models-dir", type=Path, default=None)
    parser.add_argument("--threads", type=int, default=2, help="llama.cpp threads")
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--cache", type=Path, default=CACHE)
    parser.add_argument("--judge-seed", type=int, default=0, help="the judgement seed (cache key)")
    parser.add_argument("--sample-seed", type=int, default=0, help="which SICK pairs are judged")
    parser.add_argument("--seed", type=int, default=0, help="the replays' seed")
    args = parser.parse_args()
    if not args.data.is_dir():
        raise SystemExit(f"{args.data} not found: this benchmark needs the public data (sick/, biosses/)")
    sick_n = args.sick_pairs or (100 if args.quick else 300)
    replays = args.replays or (200 if args.quick else 500)
    models_dir = args.models_dir or Path(os.environ.get("SHIFTLAB_MODELS_DIR") or DEFAULT_MODELS_DIR)
    started = time.perf_counter()
    # the full run's sample, cut: a quick run's pairs are the first of the full run's
    sick = load_sick(args.data, max(sick_n, 300), np.random.default_rng(args.sample_seed))
    sick = PairSet(sick.name, sick.text_a[:sick_n], sick.text_b[:sick_n], sick.item_means[:sick_n], None, sick.scale)
    biosses = load_biosses(args.data)
    pair_sets = (sick, biosses)
    system, user = JUDGE_PROMPTS[KIND]
    judge = EmbeddedJudge(args.model, models_dir, args.threads, args.cache.parent / "llama-server.log")
    print(
        f"judge: {args.model} ({judge.weights}), prompt JUDGE_PROMPTS[JudgeKind.SIMILARITY] "
        f"(hash {prompt_hash(system, user)[:16]}), temperature {JUDGE_PARAMS.temperature}, max_tokens "
        f"{JUDGE_PARAMS.max_tokens}, up to {JUDGE_PARAMS.max_attempts} attempts, seed {args.judge_seed}"
    )
    try:
        raw = {p.name: judge_pairs_cached(p, judge, cache_path=args.cache, seed=args.judge_seed) for p in pair_sets}
    finally:
        judge.close()
    print(f"judge answers ready after {time.perf_counter() - started:.0f} s (cache {args.cache})")
    rng = np.random.default_rng(args.seed)
    biosses_sd = pooled_within_sd(biosses.ratings)
    print(f"\nBIOSSES raters' pooled within-item sd: {biosses_sd:.3f} (0-4 scale)")
    print(
        f"rule: alpha {ALPHA}, one question, at least {MIN_ITEMS} items and {MIN_RATERS} distinct raters, "
        f"draws without replacement, replay seed {args.seed}"
    )
    for pairs, sds in ((biosses, (None,)), (sick, (round(biosses_sd, 2), NOISY_RATER_SD))):
        on_scale = to_scale(raw[pairs.name], pairs.scale)
        agreement = judge_agreement(on_scale, pairs.item_means)
        print(
            f"\n{pairs.name} ({len(pairs.text_a)} pairs, scale {pairs.scale[0]:g}-{pairs.scale[1]:g}): judge vs the "
            f"published human mean: Pearson {agreement.pearson:.3f}, Spearman {agreement.spearman:.3f}, mean bias "
            f"{agreement.bias:+.3f}, MAE {agreement.mae:.3f}, failures {agreement.failures}/{agreement.n}; judge sd "
            f"{np.nanstd(on_scale):.3f}, human item-mean sd {pairs.item_means.std():.3f}"
        )
        answers = raw[pairs.name][~np.isnan(raw[pairs.name])]
        values, counts = np.unique(answers, return_counts=True)
        top = np.argsort(-counts)[:4]
        print(
            f"  the judge's 0-5 answers: {values.size} distinct values, most common "
            + ", ".join(f"{values[i]:g} ({counts[i] / answers.size:.0%})" for i in top)
        )
        judge_all = with_stand_in(on_scale, pairs.scale)
        for sd in sds:
            rep = draw_replays(rng, pairs, judge_all, replays, rater_sd=sd)
            rows = replay_rows(rep)
            label = f"{pairs.name}, " + (
                "a random published rater of five"
                if sd is None
                else f"simulated rater sd {sd:g} (pool of {SICK_RATER_POOL})"
            )
            print_rows(label, rep, rows, len(pairs.text_a))
            print(
                f"  share of a single rating's variance the judge could remove: "
                f"{explainable_share(pairs, judge_all, rep):.0%} (a judge equal to the item means: "
                f"{explainable_share(pairs, pairs.item_means, rep):.0%})"
            )
            print_oracle(rows, replay_rows(rep.judged_by(pairs.item_means)))
    print(f"\n{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
