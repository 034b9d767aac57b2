"""Hugging Face hub adapter: load a dataset with ``datasets.load_dataset`` and hand back raw tables.

The rows then go through the same validation as rows read from local files. ``name`` may also be a
local folder that ``load_dataset`` understands, which is how the path is tested offline.
"""

from __future__ import annotations

import json

import datasets

from corpora.limits import DecodeBudget, ReadLimits
from corpora.rows import DatasetFormatError, Problem, RawRow, RawTable


def read_hub(
    name: str,
    *,
    config: str | None = None,
    split: str | None = None,
    revision: str | None = None,
    limits: ReadLimits | None = None,
) -> list[RawTable]:
    """Load ``name`` (a hub id such as ``mteb/stsbenchmark-sts``, or a local folder that
    ``load_dataset`` understands) and return one raw table per split. ``limits`` bounds the rows
    taken: each record is measured as ``datasets`` hands it over (from its memory-mapped cache, one
    at a time), before it is copied into the tables."""
    try:
        loaded = datasets.load_dataset(name, config, split=split, revision=revision)
    except Exception as exc:  # the hub client raises many unrelated types; all mean "cannot load"
        raise DatasetFormatError(
            [
                Problem(
                    name,
                    None,
                    f"could not load it with datasets.load_dataset: {type(exc).__name__}: {exc}. Offline? "
                    "Download the files and import them from disk.",
                )
            ]
        ) from None
    parts = {split: loaded} if split else dict(loaded)
    budget = DecodeBudget(limits)
    tables = []
    for part_name in sorted(parts):
        label = f"{name} [{part_name}]"
        rows = []
        for number, row in enumerate(parts[part_name], start=1):
            budget.charge_row(label, number, row)
            # A JSON round trip turns dates, decimals and other non-JSON values into strings, as a
            # JSONL file of the same data would hold them.
            rows.append(RawRow(label, number, json.loads(json.dumps(row, ensure_ascii=False, default=str))))
        tables.append(RawTable(label, "rows", part_name, rows))
    return tables
