"""MTEB tasks by name (adapter: the only corpora module that imports ``mteb``).

A task is loaded through ``mteb``'s own task object: its metadata (type, main score, splits,
languages, revision, licence) and its data loader (``task.load_data``, which calls
``datasets.load_dataset`` on the task's hub repository and then the task's own
``dataset_transform``). Offline, the same loader reads a local copy of that repository (what
``huggingface-cli download <repo> --repo-type dataset --local-dir DIR`` gives): the task's
metadata is kept and only the path it loads from changes.

The loaded rows become :class:`~corpora.rows.RawTable` objects with Shiftlab's field names,
so they go through the same validation as a file import.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import mteb
from mteb.abstasks.abstask import AbsTask
from mteb.abstasks.clustering_legacy import AbsTaskClusteringLegacy
from mteb.languages.iso_mappings import _get_iso1_to_iso3

from core.errors import ShiftlabError
from corpora.rows import RawRow, RawTable
from corpora.task_types import MTEB_TASK_TYPES, TaskType

DEFAULT_SUBSET = "default"


class MtebTaskError(ShiftlabError):
    """An MTEB task cannot be found, is of a type Shiftlab does not evaluate, or its data cannot be read."""


@dataclass(frozen=True)
class MtebTaskInfo:
    """What Shiftlab keeps of an MTEB task's metadata (stored under the dataset's ``metadata["mteb"]``)."""

    name: str
    mteb_type: str
    task: TaskType
    main_score: str
    eval_splits: tuple[str, ...]
    subset: str
    eval_langs: tuple[str, ...]
    hub_path: str
    revision: str
    license: str | None
    description: str
    reference: str | None
    loaded_from: str = ""

    @property
    def language(self) -> str:
        """The subset's languages as Shiftlab codes (ISO 639-1 where one exists), joined by "-"
        for a cross-lingual subset: "en", "en-de"."""
        return "-".join(dict.fromkeys(_short_language(code) for code in self.eval_langs)) or "und"

    def as_metadata(self) -> dict[str, Any]:
        return {
            "task_name": self.name,
            "type": self.mteb_type,
            "main_score": self.main_score,
            "eval_splits": list(self.eval_splits),
            "hf_subset": self.subset,
            "eval_langs": list(self.eval_langs),
            "dataset": {"path": self.hub_path, "revision": self.revision},
            "license": self.license,
            "reference": self.reference,
            "loaded_from": self.loaded_from,
            "mteb_version": mteb.__version__,
        }


def mteb_task_get(name: str) -> AbsTask:
    """``mteb.get_task(name)``, with Shiftlab's error (mteb's message suggests close names)."""
    try:
        task = mteb.get_task(name)
    except KeyError as exc:
        raise MtebTaskError(f"MTEB has no task {name!r}: {exc.args[0] if exc.args else exc}") from None
    if task.metadata.type not in MTEB_TASK_TYPES:
        supported = ", ".join(MTEB_TASK_TYPES)
        raise MtebTaskError(
            f"MTEB task {name!r} is a {task.metadata.type} task; Shiftlab evaluates {supported} tasks only."
        )
    if task.metadata.modalities != ["text"]:
        raise MtebTaskError(f"MTEB task {name!r} is not text-only ({', '.join(task.metadata.modalities)}).")
    return task


def mteb_task_subset(task: AbsTask, subset: str | None, *, option: str = "--subset") -> str:
    """The subset to import: ``subset`` if the task has it; the only subset when there is one.

    MTEB scores each subset of a multilingual task on its own, so one Shiftlab dataset holds one
    subset (import several subsets as several datasets)."""
    subsets = list(task.metadata.hf_subsets)
    if subset is None:
        if len(subsets) == 1:
            return subsets[0]
        raise MtebTaskError(
            f"MTEB task {task.metadata.name!r} has {len(subsets)} subsets ({', '.join(subsets)}); MTEB scores "
            f"each on its own: choose one with {option} (one dataset per subset)."
        )
    if subset not in subsets:
        raise MtebTaskError(
            f"MTEB task {task.metadata.name!r} has no subset {subset!r}: choose one of {', '.join(subsets)}."
        )
    return subset


def mteb_task_info(task: AbsTask, *, subset: str) -> MtebTaskInfo:
    meta = task.metadata
    return MtebTaskInfo(
        name=meta.name,
        mteb_type=meta.type,
        task=MTEB_TASK_TYPES[meta.type],
        main_score=meta.main_score,
        eval_splits=tuple(meta.eval_splits),
        subset=subset,
        eval_langs=tuple(meta.hf_subsets_to_langscripts.get(subset, [])),
        hub_path=str(meta.dataset["path"]),
        revision=str(meta.dataset.get("revision") or ""),
        license=meta.license,
        description=meta.description or "",
        reference=meta.reference,
    )


def mteb_task_load(task: AbsTask, *, subset: str, local_dir: Path | None) -> str:
    """Load ``subset`` of ``task`` with mteb's own loader, from ``local_dir`` (a local copy of the
    task's hub repository) when given, else from the hub or its cache. Returns where it read from."""
    meta = task.metadata
    source = f"hf://datasets/{meta.dataset['path']}@{meta.dataset.get('revision') or 'main'}"
    if local_dir is not None:
        local_dir = Path(local_dir).expanduser().resolve()
        if not local_dir.is_dir():
            raise MtebTaskError(f"{local_dir}: no such folder (the local copy of {meta.dataset['path']}).")
        # An instance attribute shadows the class's metadata: only this task object reads locally.
        task.metadata = meta.model_copy(update={"dataset": {**meta.dataset, "path": str(local_dir)}})
        source = str(local_dir)
    if meta.is_multilingual:
        task.filter_languages(None, hf_subsets=[subset])
    try:
        task.load_data()
    except Exception as exc:  # datasets and the hub client raise many unrelated types
        hint = (
            "Check that the folder is a copy of the task's dataset repository "
            f"(huggingface-cli download {meta.dataset['path']} --repo-type dataset --local-dir DIR)."
            if local_dir is not None
            else f"Offline? Download {meta.dataset['path']} and import it with --from-dir DIR "
            "(or put it under SHIFTLAB_MTEB_DATA_DIR/<task name>)."
        )
        raise MtebTaskError(
            f"Could not load the data of MTEB task {meta.name!r} from {source}: {type(exc).__name__}: {exc}. {hint}"
        ) from None
    return source


def mteb_task_tables(task: AbsTask, *, subset: str) -> list[RawTable]:
    """The loaded data of one subset as raw tables in Shiftlab's field names: the evaluation splits,
    plus the training split of a classification task (its classifier is fit on it)."""
    meta = task.metadata
    by_subset = task.dataset if meta.is_multilingual or meta.type in ("Retrieval", "Reranking") else None
    data = by_subset[subset] if by_subset is not None else task.dataset
    splits = list(meta.eval_splits)
    if meta.type == "Classification":
        splits = [task.train_split, *[s for s in splits if s != task.train_split]]
    missing = [s for s in splits if s not in data]
    if missing:
        raise MtebTaskError(
            f"The data loaded for MTEB task {meta.name!r} ({subset}) has no split {', '.join(missing)} "
            f"(found: {', '.join(data) or 'none'})."
        )
    label = f"mteb:{meta.name}" + ("" if subset == DEFAULT_SUBSET else f"/{subset}")
    if meta.type == "Retrieval":
        return _retrieval_tables(data, splits, label)
    if meta.type == "Reranking":
        return [_reranking_table(data[split], label, split) for split in splits]
    return [_table(f"{label} [{split}]", split, _rows(task, data[split])) for split in splits]


def _rows(task: AbsTask, split_data: Any) -> Iterable[dict[str, Any]]:
    kind = task.metadata.type
    if kind == "STS":
        first, second = task.column_names
        for row in split_data:
            yield _with_id(row, sentence1=row[first], sentence2=row[second], score=row["score"])
    elif kind == "PairClassification":
        first, second, labels = task.input1_column_name, task.input2_column_name, task.label_column_name
        rows = list(split_data)
        if len(rows) == 1 and isinstance(rows[0][first], list):
            # MTEB v1 layout: the whole split in one row of parallel lists.
            rows = [
                dict(zip((first, second, labels), values, strict=True))
                for values in zip(rows[0][first], rows[0][second], rows[0][labels], strict=True)
            ]
        for row in rows:
            yield _with_id(row, sentence1=row[first], sentence2=row[second], label=row[labels])
    elif kind == "Classification":
        for row in split_data:
            yield _with_id(row, text=row[task.input_column_name], label=_label(row[task.label_column_name]))
    elif kind == "Clustering":
        yield from _clustering_rows(task, split_data)
    elif kind == "Summarization":
        for row in split_data:
            yield _with_id(
                row,
                text=row[task.text_column_name],
                human_summaries=row[task.human_summaries_column_name],
                machine_summaries=row[task.machine_summaries_column_name],
                relevance=row[task.relevancy_column_name],
            )
    else:  # pragma: no cover - retrieval and reranking have their own converters
        raise AssertionError(kind)


def _clustering_rows(task: AbsTask, split_data: Any) -> Iterable[dict[str, Any]]:
    texts, labels = task.input_column_name, task.label_column_name
    if isinstance(task, AbsTaskClusteringLegacy):
        # Legacy clustering stores sets of texts per row (MTEB scores each set and averages);
        # Shiftlab clusters the texts of a split as one set, so the sets are concatenated.
        for row in split_data:
            for text, label in zip(row[texts], row[labels], strict=True):
                yield {"text": text, "label": _label(label)}
        return
    for row in split_data:
        label = row[labels]
        # Hierarchical labels: the first (coarsest) level, which is MTEB's first evaluation level.
        yield _with_id(row, text=row[texts], label=_label(label[0] if isinstance(label, list) else label))


def _retrieval_tables(data: Mapping[str, Mapping[str, Any]], splits: Sequence[str], label: str) -> list[RawTable]:
    """One corpus and one query table for all splits (ids are shared), one qrels table per split."""
    corpus: dict[str, dict[str, str]] = {}
    queries: dict[str, dict[str, str]] = {}
    qrels = []
    for split in splits:
        for document in data[split]["corpus"]:
            doc_id = str(document["id"])
            corpus.setdefault(
                doc_id, {"_id": doc_id, "title": document.get("title") or "", "text": document.get("text") or ""}
            )
        for query in data[split]["queries"]:
            queries.setdefault(str(query["id"]), {"_id": str(query["id"]), "text": query["text"]})
        rows = [
            {"query-id": query_id, "corpus-id": doc_id, "score": score}
            for query_id, docs in sorted(data[split]["relevant_docs"].items())
            for doc_id, score in sorted(docs.items())
        ]
        qrels.append(_table(f"{label} [{split} qrels]", split, rows, role="qrels"))
    return [
        _table(f"{label} [corpus]", None, list(corpus.values()), role="corpus"),
        _table(f"{label} [queries]", None, list(queries.values()), role="queries"),
        *qrels,
    ]


def _reranking_table(split_data: Mapping[str, Any], label: str, split: str) -> RawTable:
    documents = {str(d["id"]): _document_text(d) for d in split_data["corpus"]}
    relevant = split_data["relevant_docs"]
    top_ranked = split_data.get("top_ranked") or {}
    rows = []
    for query in split_data["queries"]:
        query_id = str(query["id"])
        judged = relevant.get(query_id, {})
        candidates = top_ranked.get(query_id) or list(judged)
        rows.append(
            {
                "id": query_id,
                "query": query["text"],
                "positive": [documents[c] for c in candidates if judged.get(c, 0) > 0],
                "negative": [documents[c] for c in candidates if judged.get(c, 0) <= 0],
            }
        )
    return _table(f"{label} [{split}]", split, rows)


def _document_text(document: Mapping[str, Any]) -> str:
    # MTEB's corpus text: "title text" when there is a title.
    title, text = document.get("title") or "", document.get("text") or ""
    return f"{title} {text}".strip() if title else text


def _with_id(row: Mapping[str, Any], **fields: Any) -> dict[str, Any]:
    return {**({"id": row["id"]} if row.get("id") not in (None, "") else {}), **fields}


def _label(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _table(source: str, split: str | None, rows: Iterable[Mapping[str, Any]], *, role: str = "rows") -> RawTable:
    # A JSON round trip turns numpy and other non-JSON values into plain ones, as a file holds them.
    return RawTable(
        source,
        role,
        split,
        [RawRow(source, number, json.loads(json.dumps(row, default=str))) for number, row in enumerate(rows, start=1)],
    )


def _short_language(langscript: str) -> str:
    iso3 = langscript.split("-", 1)[0]
    return _iso3_to_iso1().get(iso3, iso3)


@cache
def _iso3_to_iso1() -> dict[str, str]:
    return {iso3: iso1 for iso1, iso3 in _get_iso1_to_iso3().items()}
