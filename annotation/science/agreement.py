"""Agreement between raters (pure module: numpy/pandas, no Django, no I/O): every rater-agreement
coefficient of Shiftlab lives here.

For study ratings, the primary coefficient is Gwet's AC2 with ordinal weights, computed by
``irrCAC`` (with its standard error and t-based confidence interval); Krippendorff's alpha at the
ordinal level, computed by ``krippendorff``, stands beside it; mean and sample SD describe the
ratings themselves. Human baselines (``evaluation.human_baseline``) use Fleiss' kappa and the mean
of a statistic over rater pairs (``pairwise_agreement``).

Input is a matrix with one row per item and one column per rater, ``NaN`` where a rater did not
rate an item. Coefficients are ``None`` when the data cannot define them (fewer than two items
rated by two raters or more; no variation at all for alpha), never a made-up number.

References
----------
Gwet, K. L. (2014). Handbook of Inter-Rater Reliability, 4th ed. Advanced Analytics.
Krippendorff, K. (2011). Computing Krippendorff's Alpha-Reliability. Annenberg School for
Communication, University of Pennsylvania.
Fleiss, J. L. (1971). Measuring nominal scale agreement among many raters. Psychological
Bulletin 76(5), 378–382.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Literal

import krippendorff
import numpy as np
import pandas as pd

Weights = Literal["identity", "ordinal", "quadratic", "linear"]
_DIGITS = 12


@dataclass(frozen=True)
class GwetResult:
    """Gwet's AC1 (identity weights) or AC2 (any other weights)."""

    coefficient: float
    se: float
    ci_low: float
    ci_high: float
    confidence: float
    percent_agreement: float
    chance_agreement: float
    weights: str


@dataclass(frozen=True)
class AgreementSummary:
    n_items: int
    n_raters: int
    n_ratings: int
    mean: float | None
    sd: float | None
    ac2: GwetResult | None
    alpha: float | None

    def to_dict(self) -> dict:
        return {
            "n_items": self.n_items,
            "n_raters": self.n_raters,
            "n_ratings": self.n_ratings,
            "mean": self.mean,
            "sd": self.sd,
            "ac2": None
            if self.ac2 is None
            else {
                "value": self.ac2.coefficient,
                "se": self.ac2.se,
                "ci_low": self.ac2.ci_low,
                "ci_high": self.ac2.ci_high,
                "confidence": self.ac2.confidence,
                "weights": self.ac2.weights,
            },
            "alpha": self.alpha,
        }


def _matrix(ratings: Sequence[Sequence[float]] | np.ndarray, categories: Sequence[float]) -> np.ndarray:
    x = np.asarray(ratings, dtype=float)
    if x.ndim != 2:
        raise ValueError(f"ratings must be a 2-D items x raters matrix, got shape {x.shape}")
    if len(set(categories)) != len(categories) or len(categories) < 2:
        raise ValueError(f"categories must be at least two distinct values, got {list(categories)}")
    observed = x[~np.isnan(x)]
    unknown = sorted(set(observed.tolist()) - {float(c) for c in categories})
    if unknown:
        raise ValueError(f"ratings {unknown} are not among the categories {list(categories)}")
    return x


def _pairable_items(x: np.ndarray) -> int:
    return int(np.sum(np.sum(~np.isnan(x), axis=1) >= 2))


def gwet_ac(
    ratings: Sequence[Sequence[float]] | np.ndarray,
    *,
    categories: Sequence[float],
    weights: Weights = "ordinal",
    confidence: float = 0.95,
) -> GwetResult | None:
    """Gwet's agreement coefficient over an items x raters matrix (``NaN`` = missing).

    ``categories`` lists every value of the scale, used or not (the weights depend on it).
    None when fewer than two items have two ratings or more (no standard error then).
    """
    # irrCAC is installed apart, without its dependencies (requirements-nodeps.txt: it hard-pins
    # old scipy and pandas), so only Gwet's coefficient needs it.
    from irrCAC.raw import CAC

    x = _matrix(ratings, categories)
    if _pairable_items(x) < 2:
        return None
    frame = pd.DataFrame(x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = CAC(
            frame,
            weights=weights,
            categories=[float(c) for c in categories],
            confidence_level=confidence,
            digits=_DIGITS,
        ).gwet()["est"]
    low, high = est["confidence_interval"]
    return GwetResult(
        coefficient=float(est["coefficient_value"]),
        se=float(est["se"]) if est["se"] > 1e-14 else 0.0,
        ci_low=float(low),
        ci_high=float(high),
        confidence=confidence,
        percent_agreement=float(est["pa"]),
        chance_agreement=float(est["pe"]),
        weights=weights,
    )


def krippendorff_alpha(
    ratings: Sequence[Sequence[float]] | np.ndarray,
    *,
    categories: Sequence[float],
    level: Literal["nominal", "ordinal", "interval"] = "ordinal",
) -> float | None:
    """Krippendorff's alpha over an items x raters matrix; None when undefined (no variation, or
    fewer than two items with two ratings or more)."""
    x = _matrix(ratings, categories)
    if _pairable_items(x) < 2:
        return None
    paired = x[np.sum(~np.isnan(x), axis=1) >= 2]
    if np.unique(paired[~np.isnan(paired)]).size < 2:
        return None  # every pairable rating is the same value: expected disagreement is zero
    with np.errstate(divide="ignore", invalid="ignore"):
        value = krippendorff.alpha(
            reliability_data=x.T, level_of_measurement=level, value_domain=[float(c) for c in categories]
        )
    return float(value) if math.isfinite(value) else None


def agreement_summary(
    ratings: Sequence[Sequence[float]] | np.ndarray, *, categories: Sequence[float]
) -> AgreementSummary:
    """AC2 (ordinal), Krippendorff's alpha (ordinal), mean and SD of one question's ratings."""
    x = _matrix(ratings, categories)
    rated = x[np.any(~np.isnan(x), axis=1)] if x.size else x
    values = rated[~np.isnan(rated)] if rated.size else np.array([])
    return AgreementSummary(
        n_items=int(rated.shape[0]) if rated.size else 0,
        n_raters=int(np.sum(np.any(~np.isnan(x), axis=0))) if x.size else 0,
        n_ratings=int(values.size),
        mean=float(np.mean(values)) if values.size else None,
        sd=float(np.std(values, ddof=1)) if values.size > 1 else None,
        ac2=gwet_ac(x, categories=categories) if x.size else None,
        alpha=krippendorff_alpha(x, categories=categories) if x.size else None,
    )


# Where AC2 and alpha can mislead (agreement_warnings): fewer items with two raters or more than
# this, or more than this share of all ratings on one value.
FEW_ITEMS = 30
SKEWED_SHARE = 0.8


def agreement_warnings(
    ratings: Sequence[Sequence[float]] | np.ndarray, *, categories: Sequence[float]
) -> tuple[str, ...]:
    """Why AC2 and Krippendorff's alpha of this items x raters matrix may mislead (empty when
    nothing stands out): no item with two raters (both undefined), every rating on one value (no
    variation: undefined or degenerate), most ratings on one value (the prevalence paradox:
    kappa-like coefficients swing with the share), or few items with two raters (wide intervals)."""
    x = _matrix(ratings, categories)
    values = x[~np.isnan(x)]
    if not values.size:
        return ()
    pairable = _pairable_items(x)
    if pairable == 0:
        return ("no item has 2 or more raters: AC2 and α are undefined (one rater per item measures no agreement)",)
    found, counts = np.unique(values, return_counts=True)
    warnings_ = []
    if found.size == 1:
        warnings_.append(
            f"every rating is {found[0]:g}: AC2 and α are undefined or degenerate (there is no variation to agree on)"
        )
    else:
        top = int(np.argmax(counts))
        share = counts[top] / values.size
        if share > SKEWED_SHARE:
            warnings_.append(
                f"{share:.0%} of ratings are {found[top]:g} (more than {SKEWED_SHARE:.0%}): with ratings this "
                "concentrated AC2 and α can disagree and both can mislead (the prevalence paradox); read them "
                "beside the mean and the share"
            )
    if pairable < FEW_ITEMS:
        warnings_.append(
            f"only {pairable} item{'s' if pairable != 1 else ''} with 2 or more raters (fewer than {FEW_ITEMS}): "
            "AC2 and α rest on few items and their intervals are wide"
        )
    return tuple(warnings_)


def ratings_matrix(
    triples: Sequence[tuple[object, object, float]],
) -> tuple[np.ndarray, list[object], list[object]]:
    """Turn (item, rater, value) triples into an items x raters matrix with ``NaN`` gaps.

    Items and raters are ordered by first appearance; a repeated (item, rater) pair is an error.
    """
    items: dict[object, int] = {}
    raters: dict[object, int] = {}
    for item, rater, _ in triples:
        items.setdefault(item, len(items))
        raters.setdefault(rater, len(raters))
    x = np.full((len(items), len(raters)), np.nan)
    for item, rater, value in triples:
        i, j = items[item], raters[rater]
        if not np.isnan(x[i, j]):
            raise ValueError(f"rater {rater!r} rated item {item!r} twice")
        x[i, j] = value
    return x, list(items), list(raters)


def fleiss_kappa(counts: Sequence[Sequence[int]] | np.ndarray) -> float | None:
    """Fleiss' kappa from a subjects × categories table of how many raters chose each category.

    Subjects may have different numbers of raters (at least two each; rows with fewer are
    dropped): each subject's observed agreement is the share of agreeing rater pairs among its
    own pairs, and chance agreement uses the category shares of all ratings. With the same number
    of raters everywhere this is Fleiss' (1971) kappa exactly. Returns None when it is undefined:
    no subject with two raters, or every rating in one category (chance agreement 1).
    """
    table = np.asarray(counts, dtype=float)
    if table.ndim != 2:
        raise ValueError(f"counts must be a subjects x categories table, got shape {table.shape}")
    if np.any(table < 0) or not np.all(np.isfinite(table)):
        raise ValueError("counts must be finite and non-negative")
    raters = table.sum(axis=1)
    table, raters = table[raters >= 2], raters[raters >= 2]
    if table.shape[0] == 0:
        return None
    observed = float(np.mean(((table * table).sum(axis=1) - raters) / (raters * (raters - 1))))
    shares = table.sum(axis=0) / raters.sum()
    chance = float(np.sum(shares * shares))
    if chance >= 1.0 - 1e-12:
        return None
    return (observed - chance) / (1.0 - chance)


def pairwise_agreement(
    ratings: Mapping[str, Mapping[Hashable, object]],
    statistic: Callable[[list, list], float | None],
    *,
    min_common: int = 2,
) -> tuple[float, ...]:
    """``statistic`` of every pair of raters over the items both rated (at least ``min_common``).

    ``ratings`` maps each rater to their ratings by item. Pairs are taken in sorted rater order and
    items in sorted order, so the result does not depend on how the input was ordered; pairs
    where the statistic is undefined (None or NaN) are left out.
    """
    values = []
    for first, second in combinations(sorted(ratings), 2):
        common = sorted(set(ratings[first]) & set(ratings[second]), key=str)
        if len(common) < min_common:
            continue
        value = statistic([ratings[first][k] for k in common], [ratings[second][k] for k in common])
        if value is not None and not np.isnan(value):
            values.append(float(value))
    return tuple(values)
