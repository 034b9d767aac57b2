"""Careless-vs-careful separation of the rater figures on simulated studies, and the
low-carefulness flag rule (issue 29).

Usage: .venv/bin/python benchmarks/rater_model_sim.py [--seeds 5] [--grid] [--grid-seeds 3]
[--grid-crowd-kit | --skip-crowd-kit] [--fractions 0.3 0.4 0.5] [--only LABEL-PART ...]

Simulates studies with ``annotation.science.rater_simulation``. The three base variants (200 real
items rated by 5 of 22 raters, 10 controls rated by everyone; 12 careful raters and 2 each of
straight-liners at the mode, straight-liners at another value, uniform random, "savvy" and biased
raters, offset +-1): true quality clustered at 3-4 with honest controls, the same *disguised*
(careless raters answer the controls right and take as long as careful ones), and spread over
1-5. ``--grid`` adds the widened grid: one parameter changed at a time from the clustered
variants (60 items; 2 or 3 raters per item; 10% or 40% careless; biased raters +-0.5; careful
noise sd 0.5-0.8), and a *held-out* part that was not looked at while the score was chosen:
scale 0-5 (the similarity scale) with 300 items, and scale 0-5 with 3 raters per item, 10%
careless and offsets +-0.5, each for the three base variants.

Per setting and score it prints the careless-vs-careful AUC (mean and worst over seeds), the
careful-vs-biased AUC, and in how many studies a straight-liner ranks at or above (and strictly
above) some careful rater. Scores:

- ``crowd-kit DS``, ``crowd-kit MACE``, ``crowd-kit GLAD``: the crowd-kit library's models
  (requirements-dev.txt) on the same ratings, controls included, each unit (item, question) a
  task: Dawid-Skene's expected accuracy from ``errors_`` and ``priors_``, MACE's probability of
  not spamming (``spamming_[:, 1]``), GLAD's expertise ``alphas_``; on the grid only with
  ``--grid-crowd-kit`` (MACE takes about a minute per study);
- ``competence``: Pearson's r with the leave-one-out consensus on real items (reweighted);
- ``agreement``: Lin's concordance correlation with the same consensus;
- ``carefulness v1``: the first issue-29 score, competence x 1/(1 + model bias^2) x control pass
  rate x share not too fast, reproduced here;
- ``carefulness``: ``annotation.science.annotator_quality.carefulness``.

Then the flag rule (``carefulness_flag_floor``) at each fraction: per setting, the share of
careful raters flagged (mean over seeds and worst study) and the share of each careless kind
flagged (mean and worst study), with the mean number of real ratings per rater.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from annotation.science import rater_model  # noqa: E402
from annotation.science.annotator_quality import annotator_quality, carefulness, carefulness_flag_floor  # noqa: E402
from annotation.science.rater_simulation import CARELESS_KINDS, auc, simulate_study  # noqa: E402

BASE = {
    "clustered 3-4": {},
    "clustered, disguised": {"disguised": True},
    "spread 1-5": {"clustered": False},
}
CHANGES = {
    "60 items": {"n_items": 60},
    "2 raters/item": {"raters_per_item": 2},
    "3 raters/item": {"raters_per_item": 3},
    "10% careless": {"n_careful": 45, "n_each_careless": 1},
    "40% careless": {"n_careful": 15, "n_each_careless": 2},
    "offset +-0.5": {"bias_offset": 0.5},
    "noisier careful": {"noise": (0.5, 0.8)},
}
HELD_OUT = {
    "0-5, 300 items": {"scale": (0, 5), "n_items": 300},
    "0-5, 3 raters/item, 10% careless, offset +-0.5": {
        "scale": (0, 5),
        "raters_per_item": 3,
        "n_careful": 20,
        "n_each_careless": 1,
        "bias_offset": 0.5,
    },
}


def settings(grid: bool) -> dict[str, dict]:
    """Label -> simulate_study keywords."""
    chosen = dict(BASE)
    if grid:
        for base in ("clustered 3-4", "clustered, disguised"):
            chosen |= {f"{base}, {label}": BASE[base] | change for label, change in CHANGES.items()}
        for base, keywords in BASE.items():
            chosen |= {f"held out: {base}, {label}": keywords | change for label, change in HELD_OUT.items()}
    return chosen


def crowd_kit_skills(triples) -> dict[str, dict]:
    """Each rater's skill under crowd-kit's Dawid-Skene, MACE and GLAD (categorical labels)."""
    import pandas as pd
    from crowdkit.aggregation import GLAD, MACE, DawidSkene

    data = pd.DataFrame([(str(u), w, int(v)) for u, w, v in triples], columns=["task", "worker", "label"])
    ds = DawidSkene(n_iter=100).fit(data)
    priors = ds.priors_
    ds_skill = {
        w: float(sum(priors[t] * ds.errors_.loc[(w, t), t] for t in priors.index if (w, t) in ds.errors_.index))
        for w in data["worker"].unique()
    }
    mace = MACE(n_iter=100, random_state=0).fit(data)
    _, names = pd.factorize(data["worker"])
    mace_skill = dict(zip(names, mace.spamming_[:, 1], strict=True))
    glad = GLAD(n_iter=50).fit(data)
    return {
        "crowd-kit DS": ds_skill,
        "crowd-kit MACE": mace_skill,
        "crowd-kit GLAD": dict(glad.alphas_.items()),
    }


def scores(study, scale: tuple[int, int], *, with_crowd_kit: bool) -> dict[str, dict]:
    records = study.records
    triples = [((r.item, r.question), r.annotator, r.value) for r in records]
    real = {(r.item, r.question) for r in records if r.kind == "real"}
    fit = rater_model.fit_rater_model(
        triples, scale=scale, rng=np.random.default_rng(0), n_boot=0, competence_units=real
    )
    quality = annotator_quality(records, min_seconds=3, control_margin=1)

    def first_version(e):
        q = quality[e.rater]
        return e.competence / (1 + e.bias**2) * (q.controls.rate or 1.0) * (1 - (q.timing.share_too_fast or 0.0))

    return {
        **(crowd_kit_skills(triples) if with_crowd_kit else {}),
        "competence": {e.rater: e.competence for e in fit.raters},
        "agreement": {e.rater: e.agreement for e in fit.raters},
        "carefulness v1": {e.rater: first_version(e) for e in fit.raters},
        "carefulness": {e.rater: carefulness(quality[e.rater], e) for e in fit.raters},
        "_real_per_rater": float(np.mean([e.n_consensus for e in fit.raters])),
    }


def separation(study, score: dict) -> tuple[float, float, bool, bool]:
    """(AUC careful vs careless, AUC careful vs biased, a straight-liner at or above a careful
    rater, a straight-liner strictly above one). An unknown score (too few shared ratings) counts as 0."""
    score = {r: 0.0 if s is None else s for r, s in score.items()}
    careful = [s for r, s in score.items() if study.careful(r)]
    careless = [s for r, s in score.items() if not study.careful(r)]
    biased = [s for r, s in score.items() if study.kinds[r] == "biased"]
    straight = max(s for r, s in score.items() if study.kinds[r].startswith("straight"))
    return auc(careful, careless), auc(careful, biased), straight >= min(careful), straight > min(careful)


def flag_rates(study, score: dict, fraction: float) -> dict[str, float]:
    """Share of each kind of rater whose carefulness is below the flag floor (an unknown one is
    not flagged)."""
    floor = carefulness_flag_floor(score.values(), fraction)
    flagged = defaultdict(list)
    for rater, value in score.items():
        flagged[study.kinds[rater]].append(value is not None and value < floor)
    return {kind: float(np.mean(v)) for kind, v in flagged.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=5, help="seeds per base variant")
    parser.add_argument("--grid", action="store_true", help="add the widened grid and the held-out settings")
    parser.add_argument("--grid-seeds", type=int, default=3, help="seeds per grid setting")
    parser.add_argument("--grid-crowd-kit", action="store_true", help="fit crowd-kit's models on the grid too")
    parser.add_argument("--skip-crowd-kit", action="store_true", help="fit crowd-kit's models nowhere")
    parser.add_argument("--fractions", type=float, nargs="+", default=[0.3, 0.4, 0.5])
    parser.add_argument("--only", nargs="+", default=[], help="run only the settings whose label contains one of these")
    args = parser.parse_args()
    started = time.perf_counter()
    separations: dict[str, dict[str, list]] = {}
    flags: dict[float, dict[str, dict[str, list]]] = {f: {} for f in args.fractions}
    per_rater: dict[str, list[float]] = {}
    chosen = settings(args.grid)
    chosen = {k: v for k, v in chosen.items() if not args.only or any(part in k for part in args.only)}
    for label, keywords in chosen.items():
        base = label in BASE
        crowd_kit = (base or args.grid_crowd_kit) and not args.skip_crowd_kit
        for seed in range(args.seeds if base else args.grid_seeds):
            study = simulate_study(seed, **keywords)
            found = scores(study, keywords.get("scale", (1, 5)), with_crowd_kit=crowd_kit)
            per_rater.setdefault(label, []).append(found.pop("_real_per_rater"))
            for name, score in found.items():
                separations.setdefault(label, {}).setdefault(name, []).append(separation(study, score))
            for fraction in args.fractions:
                for kind, rate in flag_rates(study, found["carefulness"], fraction).items():
                    flags[fraction].setdefault(label, {}).setdefault(kind, []).append(rate)
        print(f"... {label} ({time.perf_counter() - started:.0f} s)", file=sys.stderr, flush=True)
    print_separation(separations, per_rater)
    for fraction, table in flags.items():
        print_flags(fraction, table)
    seconds = time.perf_counter() - started
    print(f"\n{args.seeds} seeds per base variant, {args.grid_seeds} per grid setting, {seconds:.0f} s")


def print_separation(separations, per_rater) -> None:
    print(
        "| setting | real ratings / rater | score | AUC mean | AUC worst | AUC vs biased (mean) "
        "| straight-liner at or above a careful rater | strictly above |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for label, rows in separations.items():
        for name, results in rows.items():
            aucs = [r[0] for r in results]
            print(
                f"| {label} | {np.mean(per_rater[label]):.0f} | {name} | {np.mean(aucs):.3f} | {min(aucs):.3f} | "
                f"{np.mean([r[1] for r in results]):.3f} | {sum(r[2] for r in results)} of {len(results)} | "
                f"{sum(r[3] for r in results)} of {len(results)} |"
            )


def print_flags(fraction: float, table) -> None:
    kinds = ("careful", *CARELESS_KINDS)
    print(f"\nFlag rule at {fraction:g} x the upper quartile: share flagged, mean (worst study)")
    print("| setting | " + " | ".join(kinds) + " |")
    print("|---|" + "---|" * len(kinds))
    for label, by_kind in table.items():
        cells = []
        for kind in kinds:
            rates = by_kind[kind]
            worst = max(rates) if kind == "careful" else min(rates)
            cells.append(f"{np.mean(rates):.2f} ({worst:.2f})")
        print(f"| {label} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
