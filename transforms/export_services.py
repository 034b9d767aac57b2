"""Export of a transformation run's outputs in a format the dataset importer reads."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from core.errors import ShiftlabError
from core.spreadsheet import spreadsheet_writer
from corpora.layouts import BEIR
from corpora.models import DatasetItem
from corpora.task_types import task_spec
from transforms.models import TransformedItem, TransformRun
from transforms.selectors import transform_run_items


@dataclass(frozen=True)
class ExportResult:
    path: Path
    n_items: int
    n_skipped: int


def transform_run_export(*, run: TransformRun, path: Path | str) -> ExportResult:
    """Write the transformed dataset in a format the importer reads. Items with a failed field are
    left out (a failed text is never replaced by its original); the count is returned.

    Pair tasks go to CSV, whose cells carry the spreadsheet formula guard (a text starting with
    ``=``, ``+``, ``-`` or ``@`` gains a leading ``'``), unless ``path`` ends in ``.jsonl``: JSON
    Lines hold every text exactly, for a lossless round trip through the importer (which never
    alters a cell: benchmark texts such as STS-B's may themselves start with ``''``)."""
    if run.item_scope:
        raise ShiftlabError(
            f"transformation run {run.pk} rewrote the {run.item_scope.replace('_', ' ')} of {run.dataset.name} for a "
            "benchmark's document side, not the dataset's items: export a run of its queries or items instead"
        )
    path = Path(path)
    spec = task_spec(run.dataset.task_type)
    fields, gold_name = spec.transformable_fields, spec.gold_field
    outputs: dict[int, dict[str, TransformedItem]] = {}
    for out in TransformedItem.objects.filter(run=run).select_related("item"):
        outputs.setdefault(out.item_id, {})[out.side] = out
    rows, skipped = [], 0
    for item in transform_run_items(run=run):
        sides = outputs.get(item.pk, {})
        if len(sides) < len(fields) or not all(o.ok for o in sides.values()):
            skipped += 1
            continue
        payload = dict(item.payload) | {side: o.output_text for side, o in sides.items()}
        language = next(iter(sides.values())).target_language or item.language
        rows.append((item, payload, language))
    if spec.layout == BEIR:
        _export_beir(run, rows, path)
    elif spec.sentence_pairs and path.suffix.lower() != ".jsonl":
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", newline="", encoding="utf-8") as handle:
            writer = spreadsheet_writer(handle)
            writer.writerow(["id", "split", "language", "sentence1", "sentence2", gold_name])
            for item, payload, language in rows:
                writer.writerow(
                    [item.item_id, item.split, language, payload["sentence1"], payload["sentence2"], item.gold]
                )
    else:
        _write_jsonl(
            path,
            (
                {"id": item.item_id, "split": item.split, "language": language, **payload}
                | ({gold_name: item.gold} if gold_name else {})
                for item, payload, language in rows
            ),
        )
    return ExportResult(path, len(rows), skipped)


def _export_beir(run: TransformRun, rows, folder: Path) -> None:
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    documents = DatasetItem.objects.filter(dataset=run.dataset, kind="document").order_by("position")
    _write_jsonl(folder / "corpus.jsonl", ({"_id": d.item_id, **d.payload} for d in documents))
    _write_jsonl(folder / "queries.jsonl", ({"_id": item.item_id, "text": p["text"]} for item, p, _ in rows))
    by_split: dict[str, list] = {}
    for item, _, _ in rows:
        by_split.setdefault(item.split, []).append(item)
    for split, items in by_split.items():
        with (folder / "qrels" / f"{split}.tsv").open("w", encoding="utf-8") as handle:
            handle.write("query-id\tcorpus-id\tscore\n")
            for item in items:
                for doc_id, score in item.gold.items():
                    handle.write(f"{item.item_id}\t{doc_id}\t{int(score) if float(score).is_integer() else score}\n")


def _write_jsonl(path: Path, rows: Iterable[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
