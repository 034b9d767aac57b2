"""Careless-vs-careful separation of the rater model's figures on simulated studies (issue 29).

Usage: .venv/bin/python benchmarks/rater_model_sim.py [--seeds 5]

Simulates studies with ``annotation.quality.rater_simulation`` (200 real items rated by 5 of 20 raters,
10 controls rated by everyone; 12 careful raters and 2 each of straight-liners at the mode,
straight-liners at another value, uniform random, "savvy" and biased raters), with true quality
clustered at 3-4 (also *disguised*: careless raters answer the controls right and take as long
as careful ones) and spread over 1-5, and prints per score the careless-vs-careful AUC (mean and
lowest over seeds) and in how many studies a straight-liner ranks at or above some careful rater:

- ``old competence``: the rater model's competence before issue 29 (mean posterior probability,
  given the other raters, that the true category is the one answered), reproduced here;
- ``Dawid-Skene acc.``: a plain Dawid–Skene model (one free confusion matrix per rater, add-one
  smoothing, EM from the vote shares), each rater's expected accuracy ``sum_t pi_t C[t, t]``;
- ``crowd-kit DS``, ``crowd-kit MACE``, ``crowd-kit GLAD``: the established models of the
  crowd-kit library (requirements-dev.txt) on the same ratings, each unit (item, question) a task:
  Dawid–Skene's expected accuracy from its ``errors_`` and ``priors_``, MACE's probability of
  not spamming (``spamming_[:, 1]``), GLAD's expertise ``alphas_``;
- ``competence``: the rater model's competence now (correlation with the leave-one-out
  consensus on real items, reweighted);
- ``controls``, ``not too fast``: the control pass rate and the share of timed items over 3 s
  (ties count half, so both are at 0.5 or below on the disguised study);
- ``carefulness``: ``annotation.quality.annotator_quality.carefulness``, the product of all of them with the bias.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from scipy import special

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from annotation.quality import rater_model  # noqa: E402
from annotation.quality.annotator_quality import annotator_quality, carefulness  # noqa: E402
from annotation.quality.rater_simulation import SCALE, auc, simulate_study  # noqa: E402


def old_competence(triples) -> dict:
    """The competence ``fit_rater_model`` returned before issue 29."""
    _, unit, raters, rater, answers = rater_model._validated(triples, scale=SCALE, min_raters=2)
    n_units, n_raters, k = int(unit.max()) + 1, len(raters), SCALE[1] - SCALE[0] + 1
    model = rater_model._Model(unit, rater, answers, n_units, n_raters, k, np.ones(answers.size, dtype=bool))
    params, prevalence, _ = model.fit()
    log_p = model._log_likelihood(params)[0]
    per_unit = np.zeros((n_units, k))
    np.add.at(per_unit, unit, log_p)
    log_joint = np.log(prevalence)[None, :] + per_unit[unit] - log_p
    posterior = np.exp(log_joint - special.logsumexp(log_joint, axis=1, keepdims=True))
    own = posterior[np.arange(answers.size), answers]
    mean = np.bincount(rater, weights=own, minlength=n_raters) / np.bincount(rater, minlength=n_raters)
    return dict(zip(raters, mean, strict=True))


def dawid_skene_accuracy(triples, iterations: int = 50) -> dict:
    """Plain Dawid–Skene (1979): a K x K confusion matrix per rater, EM from the vote shares."""
    _, unit, raters, rater, answers = rater_model._validated(triples, scale=SCALE, min_raters=2)
    n_units, n_raters, k = int(unit.max()) + 1, len(raters), SCALE[1] - SCALE[0] + 1
    votes = np.zeros((n_units, k))
    np.add.at(votes, (unit, answers), 1.0)
    posterior = votes / votes.sum(axis=1, keepdims=True)
    for _ in range(iterations):
        prevalence = posterior.mean(axis=0)
        confusion = np.ones((n_raters, k, k))  # add-one smoothing
        np.add.at(confusion, (rater, slice(None), answers), posterior[unit])
        confusion /= confusion.sum(axis=2, keepdims=True)
        log_joint = np.tile(np.log(prevalence), (n_units, 1))
        np.add.at(log_joint, unit, np.log(confusion[rater, :, answers]))
        posterior = np.exp(log_joint - special.logsumexp(log_joint, axis=1, keepdims=True))
    accuracy = (prevalence[None, :] * np.diagonal(confusion, axis1=1, axis2=2)).sum(axis=1)
    return dict(zip(raters, accuracy, strict=True))


def crowd_kit_skills(triples) -> dict[str, dict]:
    """Each rater's skill under crowd-kit's Dawid–Skene, MACE and GLAD (categorical labels)."""
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


def scores(study) -> dict[str, dict]:
    records = study.records
    triples = [((r.item, r.question), r.annotator, r.value) for r in records]
    real = {(r.item, r.question) for r in records if r.kind == "real"}
    fit = rater_model.fit_rater_model(
        triples, scale=SCALE, rng=np.random.default_rng(0), n_boot=0, competence_units=real
    )
    quality = annotator_quality(records, min_seconds=3, control_margin=1)
    return {
        "old competence": old_competence(triples),
        "Dawid-Skene acc.": dawid_skene_accuracy(triples),
        **crowd_kit_skills(triples),
        "competence": {e.rater: e.competence for e in fit.raters},
        "controls": {a: q.controls.rate for a, q in quality.items()},
        "not too fast": {a: 1 - q.timing.share_too_fast for a, q in quality.items()},
        "carefulness": {e.rater: carefulness(quality[e.rater], e) for e in fit.raters},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    started = time.perf_counter()
    print(
        "| ratings | score | AUC mean | AUC lowest | AUC without biased (mean) "
        "| studies with a straight-liner at or above a careful rater |"
    )
    print("|---|---|---|---|---|---|")
    settings = {"clustered 3-4": (True, False), "clustered, disguised": (True, True), "spread 1-5": (False, False)}
    for label, (clustered, disguised) in settings.items():
        rows: dict[str, list] = {}
        for seed in range(args.seeds):
            study = simulate_study(seed, clustered=clustered, disguised=disguised)
            for name, score in scores(study).items():
                careful = [s for r, s in score.items() if study.careful(r)]
                careless = [s for r, s in score.items() if not study.careful(r)]
                unbiased = [s for r, s in score.items() if study.kinds[r] not in ("careful", "biased")]
                straight = [s for r, s in score.items() if study.kinds[r].startswith("straight")]
                rows.setdefault(name, []).append(
                    (auc(careful, careless), auc(careful, unbiased), max(straight) >= min(careful))
                )
        for name, results in rows.items():
            all_auc = [r[0] for r in results]
            print(
                f"| {label} | {name} | {np.mean(all_auc):.3f} | "
                f"{min(all_auc):.3f} | {np.mean([r[1] for r in results]):.3f} | "
                f"{sum(r[2] for r in results)} of {len(results)} |"
            )
    print(f"\n{args.seeds} seeds per setting, {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
