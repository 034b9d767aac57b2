"""Seeded stratified sampling of study items (pure module).

Units are successfully transformed texts; strata are (dataset, language) cells. Each stratum gets
a share of the sample proportional to its size (largest-remainder rounding, ties broken by the
stratum key), then its units are drawn without replacement with ``rng``. The same units, ``n`` and
seed always give the same sample, whatever order the units came in.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from core.hashing import sha256_text


def seeded_rng(seed: int, label: str) -> np.random.Generator:
    """A generator for one named use of a study's seed (sampling per transformation, controls,
    order, assignment...), so that each use draws independently of the others."""
    return np.random.default_rng([seed, int(sha256_text(label)[:12], 16)])


@dataclass(frozen=True)
class Unit:
    key: Hashable
    stratum: str


@dataclass(frozen=True)
class Sample:
    keys: tuple[Hashable, ...]
    allocation: dict[str, int]  # stratum -> units drawn
    available: dict[str, int]  # stratum -> units in the pool
    shortfall: int  # requested minus drawn (the pool was smaller than n)


def allocate(sizes: dict[str, int], n: int) -> dict[str, int]:
    """Proportional allocation of ``n`` draws over strata of the given sizes, never above a size."""
    if n < 0:
        raise ValueError(f"n must be non-negative, got {n}")
    total = sum(sizes.values())
    if n >= total:
        return dict(sizes)
    quotas = {s: n * size / total for s, size in sizes.items()}
    alloc = {s: int(np.floor(q)) for s, q in quotas.items()}
    remainder = n - sum(alloc.values())
    order = sorted(sizes, key=lambda s: (-(quotas[s] - alloc[s]), s))
    for stratum in order[:remainder]:
        alloc[stratum] += 1
    return alloc


def stratified_sample(units: Sequence[Unit], n: int, *, rng: np.random.Generator) -> Sample:
    """Draw ``n`` units (all of them when fewer), stratified proportionally; see the module docstring."""
    by_stratum: dict[str, list[Hashable]] = defaultdict(list)
    seen: set[Hashable] = set()
    for unit in units:
        if unit.key in seen:
            raise ValueError(f"unit key {unit.key!r} appears twice: keys must be unique")
        seen.add(unit.key)
        by_stratum[unit.stratum].append(unit.key)
    for keys in by_stratum.values():
        keys.sort(key=repr)  # input order must not matter
    sizes = {s: len(k) for s, k in sorted(by_stratum.items())}
    alloc = allocate(sizes, n)
    drawn: list[Hashable] = []
    for stratum in sorted(by_stratum):
        keys = by_stratum[stratum]
        picks = rng.choice(len(keys), size=alloc[stratum], replace=False) if alloc[stratum] else []
        drawn.extend(keys[i] for i in sorted(int(p) for p in picks))
    return Sample(keys=tuple(drawn), allocation=alloc, available=sizes, shortfall=max(0, n - len(drawn)))


@dataclass(frozen=True)
class Candidate:
    """A transformed text that may be drawn: its unique ``key``, its stratum and its original text
    (normalised), by which two transformations of one original are told apart."""

    key: Hashable
    stratum: str
    source: str


@dataclass(frozen=True)
class Draw:
    """The real items of a study: the keys drawn per transformation and what ``sample_info``
    records of each draw (drawn, allocation, available, shortfall, shared originals)."""

    keys: dict[str, list[Hashable]]
    info: dict[str, dict]
    population: dict[str, list[Hashable]] = field(default_factory=dict)


def draw_real_items(
    pools: Mapping[str, Sequence[Candidate]], n: int, *, seed: int, record_population: bool = False
) -> Draw:
    """Draw ``n`` candidates of each transformation (in name order), stratified and seeded.

    Each original text is drawn for one transformation only while the pools allow: an original
    shown twice (its paraphrase and its summary, say) tells real items from controls, whose texts
    appear nowhere else, and shows annotators the same text twice. A pool short of fresh originals
    is topped up with originals drawn already (``shared_originals``).

    With ``record_population`` the draw also returns (in ``population``, not in ``info``) the
    candidates each transformation's sample was drawn from uniformly when that is so: its fresh
    pool, when the pool did not need topping up (a prediction-powered gate's ``N`` outputs).
    """
    keys: dict[str, list[Hashable]] = {}
    info: dict[str, dict] = {}
    population: dict[str, list[Hashable]] = {}
    used_sources: set[str] = set()
    for name in sorted(pools):
        pool = {c.key: c for c in pools[name]}
        fresh = [c for c in pool.values() if c.source not in used_sources]
        sample = stratified_sample([Unit(c.key, c.stratum) for c in fresh], n, rng=seeded_rng(seed, name))
        drawn, allocation = list(sample.keys), dict(sample.allocation)
        shared = 0
        if sample.shortfall and len(fresh) < len(pool):
            fresh_keys = {c.key for c in fresh}
            extra = stratified_sample(
                [Unit(c.key, c.stratum) for c in pool.values() if c.key not in fresh_keys],
                sample.shortfall,
                rng=seeded_rng(seed, f"{name}-shared-originals"),
            )
            drawn.extend(extra.keys)
            shared = len(extra.keys)
            for stratum, count in extra.allocation.items():
                allocation[stratum] = allocation.get(stratum, 0) + count
        if record_population and not shared:
            population[name] = [c.key for c in fresh]
        used_sources.update(pool[key].source for key in drawn)
        available: dict[str, int] = defaultdict(int)
        for candidate in pool.values():
            available[candidate.stratum] += 1
        keys[name] = drawn
        info[name] = {
            "drawn": len(drawn),
            "allocation": allocation,
            "available": dict(available),
            "shortfall": n - len(drawn),
            "shared_originals": shared,
        }
    return Draw(keys=keys, info=info, population=population)


def sample_summary(info: Mapping) -> dict:
    """What records of a transformation's draw keep (the gate's evidence, the lock's audit event):
    the draw as ``sample_info`` holds it, with a prediction-powered study's list of judged outputs
    reduced to its size (``population_outputs``)."""
    if "population" not in info:
        return dict(info)
    return {**{k: v for k, v in info.items() if k != "population"}, "population_outputs": len(info["population"])}
