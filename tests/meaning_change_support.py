"""Test helpers for the sensitivity axis (issue 30): meaning changes written by a rule, no LLM."""

from __future__ import annotations

import re

from corpora.models import DatasetItem
from transforms.models import TransformedItem, TransformRun
from transforms.services import transform_run_create, transform_run_finalize

_VERB = re.compile(r"\b(is|are|was|were|has|have|will|can)\b")


def negated(text: str) -> str:
    """A rule-made negation: 'not' after the first auxiliary, else 'It is not true that ...'."""
    if _VERB.search(text):
        return _VERB.sub(lambda m: f"{m.group(0)} not", text, count=1)
    return f"It is not true that {text[0].lower()}{text[1:]}"


def negation_run(dataset, *, limit: int, sides=("sentence1", "sentence2")) -> TransformRun:
    """A finished negation run over the first ``limit`` pairs of ``dataset``, every output rule-made."""
    run = transform_run_create(dataset=dataset, transformation="negation", seed=1, limit=limit, dispatch=False)
    items = DatasetItem.objects.filter(dataset=dataset, kind="example").order_by("position")[:limit]
    for item in items:
        for side in sides:
            source = item.payload[side]
            TransformedItem.objects.create(
                run=run,
                item=item,
                side=side,
                source_text=source,
                output_text=negated(source),
                ok=True,
                attempts=1,
                target_language="en",
            )
    return transform_run_finalize(run_id=run.pk)
