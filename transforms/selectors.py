from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from django.db.models import Avg, QuerySet

from core.projects import User, scoped
from corpora.models import Dataset, DatasetItem
from corpora.task_types import task_spec
from transforms.candidates import candidate_units
from transforms.models import JudgeReport, PromptTemplate, TransformedItem, TransformRun

DOCUMENTS_RELEVANT = "relevant_documents"
DOCUMENTS_ALL = "documents"
DOCUMENT_SCOPES = (DOCUMENTS_RELEVANT, DOCUMENTS_ALL)
CANDIDATES = "candidates"
ITEM_SCOPES = ("", *DOCUMENT_SCOPES, CANDIDATES)
"""What a run transforms: its examples (""), the documents relevant to them, the whole corpus
(retrieval), or the distinct candidates of its examples' lists (reranking)."""
DOCUMENT_FIELDS = ("text",)


def transform_run_list(*, user: User = None, write: bool = False) -> QuerySet[TransformRun]:
    """The runs ``user`` may read (or change, with ``write``); None: the system, every run."""
    return scoped(TransformRun.objects.select_related("dataset", "generator", "project"), user, write=write)


def transform_run_items(*, run: TransformRun) -> QuerySet[DatasetItem]:
    """The dataset items a run transforms, in order: its dataset's examples, the first
    ``item_limit`` of them when it has one; for a run of documents (``item_scope``), the corpus
    documents relevant to those examples, or the whole corpus; for a run of candidates, the
    examples that own a distinct candidate (``run_candidate_units``)."""
    return scoped_items(dataset=run.dataset, limit=run.item_limit, scope=run.item_scope)


def scoped_items(*, dataset: Dataset, limit: int | None, scope: str = "") -> QuerySet[DatasetItem]:
    """The items a run of ``dataset`` with ``limit`` and ``item_scope`` ``scope`` transforms."""
    items = DatasetItem.objects.filter(dataset=dataset, kind="example").order_by("position")
    if limit:
        limit_ids = list(items.values_list("pk", flat=True)[:limit])
        items = items.filter(pk__in=limit_ids)
    if not scope:
        return items
    if scope == CANDIDATES:
        return items.filter(pk__in=list(scoped_candidate_units(dataset=dataset, limit=limit)))
    documents = DatasetItem.objects.filter(dataset=dataset, kind="document").order_by("position")
    if scope == DOCUMENTS_RELEVANT:
        documents = documents.filter(item_id__in=relevant_document_ids(items.values_list("gold", flat=True)))
    return documents


def run_candidate_units(*, run: TransformRun) -> dict[int, dict[str, str]]:
    """A run of candidates' work units: its examples' distinct candidate texts, each under the
    first example whose lists hold it, pk -> {key: text} (``transforms.candidates``)."""
    return scoped_candidate_units(dataset=run.dataset, limit=run.item_limit)


def scoped_candidate_units(*, dataset: Dataset, limit: int | None) -> dict[int, dict[str, str]]:
    """``run_candidate_units`` for ``dataset`` and ``limit``. Which example owns a candidate depends
    on every example before it, so the map is built from the whole range; a worker keeps the last
    few maps (an imported dataset's items never change; the key holds its content hash), so a run's
    chunks do not each read and hash every example's lists again. Callers must not change it."""
    key = (dataset.pk, dataset.content_hash, limit)
    units = _UNITS_SEEN.pop(key, None)
    if units is None:
        units = _candidate_units(scoped_items(dataset=dataset, limit=limit))
    _UNITS_SEEN[key] = units
    while len(_UNITS_SEEN) > _UNITS_KEPT:
        _UNITS_SEEN.pop(next(iter(_UNITS_SEEN)))
    return units


_UNITS_KEPT = 4
_UNITS_SEEN: dict[tuple, dict[int, dict[str, str]]] = {}  # least recently used first


def _candidate_units(examples: QuerySet[DatasetItem]) -> dict[int, dict[str, str]]:
    return candidate_units(examples.values_list("pk", "payload"))


def scoped_total(*, dataset: Dataset, limit: int | None, scope: str = "") -> int:
    """How many texts a run of ``dataset`` with ``limit`` and ``scope`` rewrites (its ``total``)."""
    if scope == CANDIDATES:
        return sum(len(owned) for owned in scoped_candidate_units(dataset=dataset, limit=limit).values())
    return scoped_items(dataset=dataset, limit=limit, scope=scope).count() * len(run_fields(dataset, scope))


def transform_run_texts(*, run: TransformRun, items: Iterable[DatasetItem]) -> list[tuple[DatasetItem, str, str]]:
    """(item, side, text) of every text the run rewrites in ``items``: each transformed field of
    an example or document, or, for a run of candidates, each distinct candidate the item owns
    (side: its key)."""
    if run.item_scope == CANDIDATES:
        units = run_candidate_units(run=run)
        return [(item, key, text) for item in items for key, text in units.get(item.pk, {}).items()]
    fields = transform_run_fields(run=run)
    return [(item, side, item.payload[side]) for item in items for side in fields]


def pending_candidate_items(*, run: TransformRun) -> list[int]:
    """The pks of a run of candidates' items that still lack an outcome for some candidate."""
    done = Counter(TransformedItem.objects.filter(run=run).values_list("item_id", flat=True))
    return [pk for pk, owned in run_candidate_units(run=run).items() if done[pk] < len(owned)]


def relevant_document_ids(golds: Iterable[object]) -> set[str]:
    """The documents judged relevant (qrels grade >= 1, as the ranking measures count them) in
    retrieval examples' golds."""
    return {doc for gold in golds if isinstance(gold, dict) for doc, grade in gold.items() if float(grade) >= 1}


def transform_run_fields(*, run: TransformRun) -> tuple[str, ...]:
    """The fields of each item the run rewrites: the task type's transformable fields, or a
    document's text (its title is kept) for a run of documents."""
    return run_fields(run.dataset, run.item_scope)


def run_fields(dataset: Dataset, scope: str) -> tuple[str, ...]:
    """The fixed fields an item of a run rewrites (a run of candidates rewrites each item's own
    candidates instead: ``transform_run_texts``)."""
    if scope == CANDIDATES:
        return ()
    return DOCUMENT_FIELDS if scope else task_spec(dataset.task_type).transformable_fields


def prompt_template_list(*, user: User = None, write: bool = False) -> QuerySet[PromptTemplate]:
    """The prompt versions of the projects ``user`` may read (or change, with ``write``)."""
    return scoped(PromptTemplate.objects.select_related("project"), user, write=write)


@dataclass(frozen=True)
class RunSummary:
    n: int
    n_failed: int
    error_rate: float
    error_rates: dict[str, float]
    mean_edit_distance: float | None
    mean_length_ratio: float | None
    attempt_error_rates: dict[str, float]
    languages: dict[str, int]
    # "applied", or "skipped" for a run made with --no-language-check (then no text can have the
    # wrong_language error); unchecked_languages: those of the run the identifier cannot check.
    language_check: str = "applied"
    unchecked_languages: tuple[str, ...] = ()


def transform_run_summary(*, run: TransformRun) -> RunSummary:
    """Error rates per type (each text counts at most once: its final error) and per attempt."""
    return transform_run_summaries(runs=[run])[run.pk]


def transform_run_summaries(*, runs: Sequence[TransformRun]) -> dict[int, RunSummary]:
    """Summaries of several runs in two queries, whatever their number (for the runs page)."""
    ids = [run.pk for run in runs]
    rows: dict[int, list] = defaultdict(list)
    fields = ("run_id", "ok", "error_type", "attempt_errors", "target_language")
    for row in TransformedItem.objects.filter(run_id__in=ids).values_list(*fields):
        rows[row[0]].append(row[1:])
    means = {
        m["run_id"]: m
        for m in TransformedItem.objects.filter(run_id__in=ids, ok=True)
        .values("run_id")
        .annotate(edit=Avg("edit_distance"), ratio=Avg("length_ratio"))
    }
    return {run.pk: _summary(rows[run.pk], means.get(run.pk, {}), run) for run in runs}


def transform_run_edit_distances(*, run: TransformRun) -> list[float]:
    """The edit distance of every successful text of the run (for its histogram)."""
    return list(
        TransformedItem.objects.filter(run=run, ok=True, edit_distance__isnull=False).values_list(
            "edit_distance", flat=True
        )
    )


def _summary(rows: list, means: dict, run: TransformRun) -> RunSummary:
    n = len(rows)
    final = Counter(error for ok, error, _, _ in rows if not ok)
    attempts = Counter(e for _, _, errors, _ in rows for e in errors if e)
    n_attempts = sum(len(errors) for _, _, errors, _ in rows)
    n_failed = sum(final.values())
    return RunSummary(
        n=n,
        n_failed=n_failed,
        error_rate=n_failed / n if n else 0.0,
        error_rates={k: v / n for k, v in sorted(final.items())} if n else {},
        mean_edit_distance=means.get("edit"),
        mean_length_ratio=means.get("ratio"),
        attempt_error_rates={k: v / n_attempts for k, v in sorted(attempts.items())} if n_attempts else {},
        languages=dict(sorted(Counter(language for *_, language in rows).items())),
        language_check="applied" if run.language_check else "skipped",
        unchecked_languages=tuple(run.unchecked_languages),
    )


def transformed_item_list(*, run: TransformRun, failed: bool | None = None) -> QuerySet[TransformedItem]:
    outputs = TransformedItem.objects.filter(run=run).select_related("item").order_by("item__position", "side")
    if failed is not None:
        outputs = outputs.filter(ok=not failed)
    return outputs


def judge_report_list(*, user: User = None) -> QuerySet[JudgeReport]:
    """The judge reports ``user`` may read; None: the system, every report."""
    return scoped(JudgeReport.objects.select_related("dataset", "project").prefetch_related("runs"), user)
