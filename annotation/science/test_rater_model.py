"""The ordinal rater model: recovers known competence from simulated raters; sane on BIOSSES."""

import csv

import numpy as np
import pytest

from annotation.science.rater_model import confusion_matrix, fit_rater_model
from annotation.science.rater_simulation import SCALE, auc, simulate_study
from core.stats import spearman_rho

N_ITEMS, N_RATERS = 200, 20
SIGMAS = np.geomspace(0.2, 3.0, 16)  # careful to nearly random, then 2 straight-liners and 2 random


def _answer(kind, theta, rng):
    name, bias, sigma = kind
    if name == "noise":
        return np.clip(np.rint(theta + bias + sigma * rng.normal(size=theta.shape)), 1, 5)
    if name == "straight":
        return np.full(theta.shape, bias, dtype=float)
    return rng.integers(1, 6, size=theta.shape).astype(float)


def simulate(seed: int):
    """A rewrite-like study: 200 items x 2 questions on 1-5, 3-5 raters per item from 20 raters
    whose true competence is their accuracy on the true category over 100,000 fresh items."""
    rng = np.random.default_rng(seed)
    kinds = [("noise", rng.normal(0, 0.25), s) for s in SIGMAS]
    kinds += [("straight", 3, None), ("straight", 4, None), ("random", None, None), ("random", None, None)]
    fresh = rng.uniform(0.5, 5.5, 100_000)
    truth = [float(np.mean(_answer(k, fresh, rng) == np.clip(np.rint(fresh), 1, 5))) for k in kinds]
    ratings = []
    for item in range(N_ITEMS):
        raters = rng.choice(N_RATERS, rng.integers(3, 6), replace=False)
        for question in ("quality", "fluency"):
            theta = rng.uniform(0.5, 5.5, 1)
            ratings += [((item, question), r, int(_answer(kinds[r], theta, rng)[0])) for r in raters]
    return ratings, truth


def test_recovers_the_ranking_of_known_competence():
    ratings, truth = simulate(seed=0)
    fit = fit_rater_model(ratings, scale=(1, 5), rng=np.random.default_rng(1), n_boot=200)
    assert fit.converged and len(fit.raters) == N_RATERS
    estimated = [fit.rater(r).competence for r in range(N_RATERS)]
    assert spearman_rho(estimated, truth) >= 0.9
    for e in fit.raters:
        assert 0 <= e.ci_low <= e.competence <= e.ci_high <= 1
    # Straight-liners and random raters are found out: all four rank below every careful rater.
    careful = [fit.rater(r).competence for r in range(8)]
    assert max(fit.rater(r).competence for r in range(16, 20)) < min(careful)


def test_the_recovery_holds_across_simulated_studies_not_only_one():
    """Six independent simulated studies: the rank correlation is >= 0.9 in the typical study
    (median) and in five of six, never below 0.8 (with the consensus-correlation competence of
    issue 29 the worst of seeds 0-9 is 0.89, seed 2)."""
    rhos = []
    for seed in range(6):
        ratings, truth = simulate(seed=seed)
        fit = fit_rater_model(ratings, scale=(1, 5), rng=np.random.default_rng(1), n_boot=0)
        rhos.append(spearman_rho([fit.rater(r).competence for r in range(N_RATERS)], truth))
    assert np.median(rhos) >= 0.9 and min(rhos) >= 0.8
    assert sum(rho >= 0.9 for rho in rhos) >= 5


def test_agreeing_raters_are_competent_and_input_is_checked():
    ratings = [(u, r, 1 + u % 5) for u in range(30) for r in "abc"] + [(u, "d", 3) for u in range(30)]
    fit = fit_rater_model(ratings, scale=(1, 5), rng=np.random.default_rng(0), n_boot=50)
    assert min(fit.rater(r).competence for r in "abc") > 0.9 > 0.3 > fit.rater("d").competence
    assert fit_rater_model([(1, "a", 3)], scale=(1, 5), rng=np.random.default_rng(0)).raters == ()
    with pytest.raises(ValueError, match="twice"):
        fit_rater_model([(1, "a", 3), (1, "a", 4)], scale=(1, 5), rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="not a category"):
        fit_rater_model([(1, "a", 7), (1, "b", 4)], scale=(1, 5), rng=np.random.default_rng(0))
    rows = confusion_matrix(0.0, 0.5, 5).sum(axis=1)
    assert np.allclose(rows, 1.0)


def biosses_ratings(shared_data):
    path = shared_data / "biosses" / "biosses.tsv"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    return [(row["id"], rater, int(float(row[rater]))) for row in rows for rater in "ABCDE"]


def test_biosses_five_raters(shared_data):
    ratings = biosses_ratings(shared_data)
    fits = [fit_rater_model(ratings, scale=(0, 4), rng=np.random.default_rng(seed), n_boot=1000) for seed in (0, 1)]
    for fit in fits:
        assert fit.n_units == 100 and fit.n_ratings == 500
        for e in fit.raters:
            assert 0.2 < e.ci_low <= e.competence <= e.ci_high < 1
    ranks = [sorted("ABCDE", key=lambda r, f=fit: f.rater(r).competence) for fit in fits]
    assert ranks[0] == ranks[1]
    for e in fits[0].raters:
        print(
            f"BIOSSES {e.rater}: competence {e.competence:.3f} [{e.ci_low:.3f}, {e.ci_high:.3f}], "
            f"bias {e.bias:+.2f}, sigma {e.sigma:.2f}"
        )


def _simulated_fit(seed, *, clustered=True):
    study = simulate_study(seed, clustered=clustered)
    triples = [((r.item, r.question), r.annotator, r.value) for r in study.records]
    real = {(r.item, r.question) for r in study.records if r.kind == "real"}
    fit = fit_rater_model(triples, scale=SCALE, rng=np.random.default_rng(0), n_boot=0, competence_units=real)
    return study, fit


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_straight_liners_cannot_look_competent_when_ratings_cluster_at_3_and_4(seed):
    """Issue 29: with true quality clustered at 3-4, a rater answering 3 everywhere agreed with
    the latent truth often enough to be fitted as the most precise rater (competence 0.73 against
    0.25-0.56 for the careful raters, AUC 0.53 on seed 0). Competence now rests on how the
    rater's answers follow the other raters' across items, which a constant answer cannot do."""
    study, fit = _simulated_fit(seed)
    careful = [e.competence for e in fit.raters if study.careful(e.rater)]
    by_kind = {}
    for e in fit.raters:
        by_kind.setdefault(study.kinds[e.rater], []).append(e.competence)
    assert max(by_kind["straight_mode"] + by_kind["straight_other"]) < min(careful)
    careless = [c for kind in ("straight_mode", "straight_other", "random", "savvy") for c in by_kind[kind]]
    assert auc(careful, careless) >= 0.9


def test_an_excluded_rater_moves_nobody_else():
    """Issue 29: rejected raters stayed in the fit and pushed careful raters down. Excluded, a
    rater still gets an estimate, but everyone else's figures are those of a fit without them."""
    study = simulate_study(4)
    triples = [((r.item, r.question), r.annotator, r.value) for r in study.records]
    real = {(r.item, r.question) for r in study.records if r.kind == "real"}
    gone = {"random0", "straight_other0", "savvy1"}
    kwargs = {"scale": SCALE, "rng": np.random.default_rng(0), "n_boot": 0, "competence_units": real}
    excluded = fit_rater_model(triples, exclude=gone, **kwargs)
    without = fit_rater_model([t for t in triples if t[1] not in gone], **kwargs)
    assert {e.rater for e in excluded.raters} == {e.rater for e in without.raters} | gone
    for e in without.raters:
        other = excluded.rater(e.rater)
        assert other.competence == pytest.approx(e.competence, abs=1e-9)
        if study.careful(e.rater):  # EM and L-BFGS stop at a tolerance: close, not equal
            assert (other.bias, other.sigma) == pytest.approx((e.bias, e.sigma), abs=0.02)
    assert excluded.rater("straight_other0").competence == 0.0
