"""A simulated study with careful and careless raters, to check the rater model and the quality
figures on data we did not write ourselves (pure module; used by ``annotation/studies/test_rater_model.py``
and ``benchmarks/rater_model_sim.py``).

Real items have a latent true quality ``theta`` on a 1-5 scale: *clustered* (``N(3.5, 0.45)``, so
that most true categories are 3 or 4, as on rewrite studies of a good transformation) or *spread*
(uniform on 0.5-5.5). Each real item is rated by ``raters_per_item`` raters drawn at random; every
rater also rates ``n_controls`` control items whose expected answer is 1 or 5 (easy negatives and
positives). Rater kinds:

- ``careful``: ``round(theta + N(bias, noise))`` with a small personal bias ~ N(0, 0.15) and noise
  between 0.25 and 0.5; controls answered the expected value (1 in 20 off by one);
- ``straight_mode`` / ``straight_other``: the same answer everywhere (the study's mode 4, or 3
  on the clustered study, 3 / 2 on the spread one), controls included;
- ``random``: uniform on the scale;
- ``savvy``: answers without reading but near where everyone answers: the study's mean rounded
  plus a step of -1/0/+1 now and then (one in four), controls too;
- ``biased``: a careful reader with a constant offset of +1 or -1 category (clipped to the scale).

Careful and biased raters read: their time per item is log-normal with median 15 s; the others
take 5 s (log sd 0.6, so the two overlap). Answers are clipped to 1-5. With ``disguised`` the
careless raters recognise the controls and answer them right, and take as long as careful ones:
only their answers to real items give them away.

``simulate_study`` also takes the scale (the clustered truth sits at 62.5% of its range), the
biased raters' offset (e.g. 0.5 category: a fractional offset shows where reading noise puts it)
and the careful raters' noise range, for the widened grid of ``benchmarks/rater_model_sim.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from annotation.kinds import ItemKind
from annotation.science.annotator_quality import RatingRecord

SCALE = (1, 5)
CAREFUL = "careful"
CARELESS_KINDS = ("straight_mode", "straight_other", "random", "savvy", "biased")


@dataclass(frozen=True)
class SimulatedStudy:
    records: list[RatingRecord]
    kinds: dict[str, str]  # rater -> kind ("careful" or one of CARELESS_KINDS)

    def careful(self, rater: str) -> bool:
        return self.kinds[rater] == CAREFUL


def rater_kinds(n_careful: int = 12, n_each_careless: int = 2) -> dict[str, str]:
    kinds = {f"careful{n:02d}": CAREFUL for n in range(n_careful)}
    for kind in CARELESS_KINDS:
        kinds |= {f"{kind}{n}": kind for n in range(n_each_careless)}
    return kinds


def simulate_study(
    seed: int,
    *,
    clustered: bool = True,
    n_items: int = 200,
    raters_per_item: int = 5,
    n_controls: int = 10,
    n_careful: int = 12,
    n_each_careless: int = 2,
    disguised: bool = False,
    scale: tuple[int, int] = SCALE,
    bias_offset: float = 1.0,
    noise: tuple[float, float] = (0.25, 0.5),
) -> SimulatedStudy:
    """One simulated study: a ``RatingRecord`` per rating (question ``quality``).

    ``scale`` is the answer scale (the clustered truth sits at 62.5% of its range with a spread of
    0.1125 of it: ``N(3.5, 0.45)`` on 1-5); ``bias_offset`` the biased raters' offset in
    categories (+ for the first, - for the second, ...); ``noise`` the range of the careful
    raters' noise sd in categories."""
    rng = np.random.default_rng(seed)
    kinds = rater_kinds(n_careful, n_each_careless)
    raters = list(kinds)
    low, high = scale
    width = high - low
    if clustered:
        theta = np.clip(rng.normal(low + 0.625 * width, 0.1125 * width, n_items), low, high)
    else:
        theta = rng.uniform(low - 0.5, high + 0.5, n_items)
    rounded = np.clip(np.rint(theta), low, high)
    mode = int(np.floor(low + (0.625 if clustered else 0.5) * width + 0.5))  # 4 or 3 on 1-5
    other = mode - 1
    mean = int(np.rint(rounded.mean()))
    personal = {r: (rng.normal(0, 0.15), rng.uniform(*noise)) for r in raters}
    offsets = {
        r: (bias_offset if n % 2 == 0 else -bias_offset)
        for n, r in enumerate(r for r in raters if kinds[r] == "biased")
    }

    def answer(rater: str, truth: float, expected: int | None) -> int:
        kind = kinds[rater]
        if disguised and expected is not None and kind not in (CAREFUL, "biased"):
            value = expected
        elif kind in (CAREFUL, "biased"):
            if expected is not None:
                value = expected + (rng.choice([-1, 1]) if rng.random() < 0.05 else 0)
                offset = offsets.get(rater, 0.0)
                if offset % 1:  # a fractional offset shows on some controls, as reading noise decides
                    offset += personal[rater][1] * rng.normal()
                value = np.rint(value + offset)
            else:
                bias, spread = personal[rater]
                value = np.rint(truth + bias + offsets.get(rater, 0.0) + spread * rng.normal())
        elif kind == "straight_mode":
            value = mode
        elif kind == "straight_other":
            value = other
        elif kind == "random":
            value = rng.integers(low, high + 1)
        else:  # savvy
            value = mean + (rng.choice([-1, 1]) if rng.random() < 0.25 else 0)
        return int(np.clip(value, low, high))

    clock = {r: 0.0 for r in raters}
    records: list[RatingRecord] = []

    def rate(rater: str, item: str, truth: float, kind: str, expected: int | None) -> None:
        reads = disguised or kinds[rater] in (CAREFUL, "biased")
        clock[rater] += float(rng.lognormal(np.log(15.0 if reads else 5.0), 0.6))
        records.append(
            RatingRecord(
                annotator=rater,
                item=item,
                question="quality",
                value=answer(rater, truth, expected),
                submitted_at=clock[rater],
                kind=kind,
                expected=expected,
            )
        )

    for n in range(n_items):
        for rater in rng.choice(raters, raters_per_item, replace=False):
            rate(str(rater), f"item{n}", float(theta[n]), ItemKind.REAL, None)
    for n in range(n_controls):
        positive = n % 2 == 0
        kind, expected = (ItemKind.EASY_POSITIVE, high) if positive else (ItemKind.EASY_NEGATIVE, low)
        for rater in raters:
            rate(rater, f"control{n}", float(expected), kind, expected)
    return SimulatedStudy(records=records, kinds=kinds)


def auc(scores_careful: list[float], scores_careless: list[float]) -> float:
    """Probability that a careful rater scores above a careless one (ties count half)."""
    if not scores_careful or not scores_careless:
        raise ValueError("both groups need at least one score")
    wins = sum((c > x) + 0.5 * (c == x) for c in scores_careful for x in scores_careless)
    return float(wins) / (len(scores_careful) * len(scores_careless))
