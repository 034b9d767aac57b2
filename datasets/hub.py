"""Hugging Face hub adapter: load a dataset with ``datasets.load_dataset`` and hand back raw tables.

This project's own app is also called ``datasets``, which shadows the Hugging Face package inside
the Django process. The hub is therefore read in a child interpreter started with ``-P`` (no
project directory on ``sys.path``) that writes each split as JSONL; those files then go through
the same validation as local files. It also keeps the heavy import out of the web process.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from datasets.parsing import DatasetFormatError, Problem, RawTable
from datasets.readers import read_table

_EXPORT_SCRIPT = r"""
import json, sys
import datasets

name, config, split, revision, out_dir = sys.argv[1:6]
loaded = datasets.load_dataset(name, config or None, split=split or None, revision=revision or None)
parts = {split: loaded} if split else dict(loaded)
for part_name, part in parts.items():
    with open(f"{out_dir}/{part_name}.jsonl", "w", encoding="utf-8") as handle:
        for row in part:
            handle.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
"""

HUB_TIMEOUT_SECONDS = 3600


def read_hub(
    name: str, *, config: str | None = None, split: str | None = None, revision: str | None = None
) -> list[RawTable]:
    """Load ``name`` (a hub id such as ``mteb/stsbenchmark-sts``, or a local folder that
    ``load_dataset`` understands) and return one raw table per split."""
    with tempfile.TemporaryDirectory(prefix="shiftlab-hub-") as out_dir:
        command = [sys.executable, "-P", "-c", _EXPORT_SCRIPT, name, config or "", split or "", revision or "", out_dir]
        try:
            done = subprocess.run(
                command, cwd=out_dir, capture_output=True, text=True, timeout=HUB_TIMEOUT_SECONDS, check=False
            )
        except subprocess.TimeoutExpired:
            raise DatasetFormatError(
                [Problem(name, None, f"loading from the hub took over {HUB_TIMEOUT_SECONDS} s")]
            ) from None
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no error output"])[-1]
            raise DatasetFormatError(
                [
                    Problem(
                        name,
                        None,
                        f"could not load it with datasets.load_dataset: {last}. Offline? "
                        "Download the files and import them from disk.",
                    )
                ]
            )
        tables = []
        for path in sorted(Path(out_dir).glob("*.jsonl")):
            table = read_table(path, fmt="jsonl", split=path.stem)
            # Report the hub name, not the temporary file, in messages.
            label = f"{name} [{path.stem}]"
            tables.append(replace(table, source=label, rows=[replace(r, source=label) for r in table.rows]))
        return tables
