"""The acceptance gate of a transformation (pure module).

A transformation passes when it has rated items and every question's mean rating (after
rejections) is at least the declared threshold. Agreement is evidence shown beside the decision,
not part of it: the design declares only the mean threshold (SPEC §4).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class GateDecision:
    passed: bool
    reasons: tuple[str, ...]  # why it failed; empty when it passed


def gate_decide(means: Mapping[str, float | None], *, threshold: float) -> GateDecision:
    """``means`` maps every question of the study to its mean rating (None: no ratings)."""
    if not means:
        raise ValueError("the gate needs at least one question")
    reasons = []
    for question, mean in sorted(means.items()):
        if mean is None:
            reasons.append(f"{question}: no ratings")
        elif mean < threshold:
            reasons.append(f"{question}: mean {mean:.3f} < {threshold:g}")
    return GateDecision(passed=not reasons, reasons=tuple(reasons))
