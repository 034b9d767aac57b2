"""Which study kind validates which transformations (pure module; issue 30).

Meaning-changing rewrites (the sensitivity axis, ``transforms.registry.MEANING_CHANGES``) are
validated by the inverse question only ("did the meaning change?", ``StudyKind.SENSITIVITY``), and
only they are: a rewrite study would pass a negation whose meaning was kept, a sensitivity study a
paraphrase whose meaning changed.
"""

from __future__ import annotations

from collections.abc import Iterable

from transforms.registry import TRANSFORMATIONS

SENSITIVITY_KIND = "sensitivity"


def meaning_changing(transformations: Iterable[str]) -> list[str]:
    """The meaning-changing transformations among ``transformations``, sorted."""
    return sorted(t for t in transformations if t in TRANSFORMATIONS and TRANSFORMATIONS[t].changes_meaning)


def kind_mismatch(kind: str, transformations: Iterable[str]) -> str | None:
    """Why a study of ``kind`` cannot validate ``transformations`` (None when it can)."""
    names = list(transformations)
    changing = meaning_changing(names)
    keeping = sorted(set(names) - set(changing))
    if kind == SENSITIVITY_KIND and keeping:
        allowed = ", ".join(meaning_changing(TRANSFORMATIONS))
        return (
            f"a sensitivity study asks whether the meaning changed, but {', '.join(keeping)} must keep the "
            f"meaning: validate them in a rewrite or similarity study, and here only runs of meaning-changing "
            f"transformations ({allowed})"
        )
    if kind != SENSITIVITY_KIND and changing:
        return (
            f"{', '.join(changing)} must change the meaning, but a {kind} study passes outputs that keep it: "
            "choose the sensitivity kind (did the meaning change?) for these runs"
        )
    return None
