"""The perturbed side of a ranking unit: which queries and corpus documents a transformed unit
scores, as transformed and as original (``evaluation.benchmark_scoring`` scores them).

Query side (every task type): the examples' transformable fields are rewritten by the unit's
transformation run; an example whose rewrite failed is left out of both scorings.

Document side (retrieval datasets): a second transformation run, of the dataset's documents
(``TransformRun.item_scope``), rewrites each covered document's text (its title is kept); the
other documents stay as they are. A document whose rewrite failed is dropped from both corpora
(never scored with its original text), and an example that judges such a document relevant is
left out of both scorings. Both sides: the two rules at once, on the same examples.

Document side (reranking datasets): the candidates live inside each query's row, so the second
run is a run of candidates (item scope "candidates"): each distinct candidate text of the
examples' lists is rewritten once and substituted into every list where it appears
(``evaluation.reranking_candidates``). A failed candidate is dropped from every list on both
sides, and a query left without a positive is left out of both scorings.

A config may fix the sides (its ``perturbation`` block): a run of it narrows them, never widens
them (``sides_with_config``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from annotation.configs.config_schema import PerturbationEntry
from core.errors import ShiftlabError
from corpora.models import Dataset
from corpora.task_types import TASK_SPECS, task_spec
from evaluation.reranking_candidates import distinct_candidates, perturbed_candidate_lists
from evaluation.services import corpus_payloads, document_text
from transforms.models import TransformedItem, TransformRun
from transforms.selectors import CANDIDATES, DOCUMENT_FIELDS, relevant_document_ids

SIDE_WORDS = {
    "corpus": {"query": "query", "document": "documents", "both": "query and documents"},
    "candidates": {"query": "query", "document": "candidates", "both": "query and candidates"},
}
"""What a side rewrites, in words, by what the task type's documents are (``TaskSpec.documents``:
a retrieval corpus, reranking candidates); ``core.vocabulary.SIDES`` names the sides alone."""

SIDED_TASK_TYPES = tuple(
    task for documents in SIDE_WORDS for task, spec in TASK_SPECS.items() if spec.documents == documents
)
"""The task types whose documents a document side can perturb (a corpus, candidates)."""


def has_candidate_lists(task_type: str) -> bool:
    """Whether a ``task_type`` dataset's documents are the candidates of each example's list
    (reranking) rather than a corpus (retrieval) or nothing."""
    return task_spec(task_type).documents == "candidates"


def unit_side_words(task_type: str, side: str) -> str:
    """What a unit of a ``task_type`` dataset on ``side`` rewrites, in words ("query",
    "documents", "candidates"...); "" for a task without sides (sts, classification...)."""
    documents = task_spec(task_type).documents
    return SIDE_WORDS[documents].get(side, side) if documents else ""


Example = tuple[str, dict, object, int]  # (item_id, payload, gold, DatasetItem pk)
Corpus = dict[str, dict]  # document id -> payload ({"title", "text"})


@dataclass(frozen=True)
class Perturbation:
    """The examples and corpus a transformed unit scores, as original and as transformed (a
    corpus of None: the dataset's stored one), and what the document side changed."""

    original: list[Example]
    transformed: list[Example]
    original_corpus: Corpus | None = None
    transformed_corpus: Corpus | None = None
    documents_transformed: int = 0
    documents_left_out: int = 0

    def document_texts(self) -> set[str]:
        """The distinct document texts the transformed side scores: its corpus's (retrieval), or
        the candidates of its lists (reranking, whose corpus is None)."""
        if self.transformed_corpus is not None:
            return {document_text(payload) for payload in self.transformed_corpus.values()}
        return set(distinct_candidates(self.transformed).values())


def document_item_scope(dataset: Dataset, document_scope: str) -> str:
    """The item scope of the run that perturbs ``dataset``'s document side: ``document_scope``
    for a retrieval corpus, the candidates of the lists for a reranking dataset (which has no
    corpus, so the document scope does not apply)."""
    return CANDIDATES if has_candidate_lists(dataset.task_type) else document_scope


def paired_examples(
    dataset: Dataset, transform_run: TransformRun, examples: Sequence[Example]
) -> tuple[list[Example], list[Example]]:
    """The examples whose every transformed field succeeded, as original and as transformed.
    A failed transformation leaves the item out of both, never replaced by its original text."""
    fields = task_spec(dataset.task_type).transformable_fields
    outputs = {
        (item_pk, side): (ok, text)
        for item_pk, side, ok, text in TransformedItem.objects.filter(run=transform_run).values_list(
            "item_id", "side", "ok", "output_text"
        )
    }
    kept_original, kept_transformed = [], []
    for item_id, payload, gold, pk in examples:
        outs = [outputs.get((pk, side)) for side in fields]
        if any(out is None or not out[0] for out in outs):
            continue
        kept_original.append((item_id, payload, gold, pk))
        transformed = {**payload, **{side: out[1] for side, out in zip(fields, outs, strict=True)}}
        kept_transformed.append((item_id, transformed, gold, pk))
    return kept_original, kept_transformed


def document_outputs(transform_run: TransformRun) -> dict[str, tuple[bool, str]]:
    """Document id -> (succeeded, rewritten text) of a run of documents."""
    (field,) = DOCUMENT_FIELDS
    rows = TransformedItem.objects.filter(run=transform_run, side=field)
    rows = rows.values_list("item__item_id", "ok", "output_text")
    return {doc_id: (ok, text) for doc_id, ok, text in rows}


def perturbed_corpus(
    corpus: Mapping[str, dict], outputs: Mapping[str, tuple[bool, str]]
) -> tuple[Corpus, Corpus, set[str]]:
    """The corpus without the documents whose rewrite failed, as original and with the rewritten
    texts, and the ids of the failed documents (pure)."""
    (field,) = DOCUMENT_FIELDS
    failed = {doc for doc, (ok, _) in outputs.items() if not ok}
    original = {doc: payload for doc, payload in corpus.items() if doc not in failed}
    transformed = {
        doc: {**payload, field: outputs[doc][1]} if doc in outputs else payload for doc, payload in original.items()
    }
    return original, transformed, failed


def without_failed_relevant(
    original: Sequence[Example], transformed: Sequence[Example], failed: set[str]
) -> tuple[list[Example], list[Example]]:
    """The examples (paired lists) none of whose relevant documents failed to be rewritten."""
    keep = [not (relevant_document_ids([gold]) & failed) for _, _, gold, _ in original]
    return (
        [e for e, k in zip(original, keep, strict=True) if k],
        [e for e, k in zip(transformed, keep, strict=True) if k],
    )


def unit_perturbation(
    dataset: Dataset,
    examples: Sequence[Example],
    *,
    query_run: TransformRun | None,
    document_run: TransformRun | None,
) -> Perturbation:
    """What a transformed unit scores: its queries rewritten by ``query_run`` (None: as they
    are), its documents by ``document_run`` (None: the stored corpus)."""
    if query_run is not None:
        original, transformed = paired_examples(dataset, query_run, examples)
    else:
        original, transformed = list(examples), list(examples)
    if document_run is None:
        return Perturbation(original, transformed)
    if document_run.item_scope == CANDIDATES:
        return candidate_perturbation(original, transformed, document_run)
    outputs = document_outputs(document_run)
    original_corpus, transformed_corpus, failed = perturbed_corpus(dict(corpus_payloads(dataset)), outputs)
    original, transformed = without_failed_relevant(original, transformed, failed)
    return Perturbation(
        original,
        transformed,
        original_corpus,
        transformed_corpus,
        documents_transformed=len(outputs) - len(failed),
        documents_left_out=len(failed),
    )


def candidate_perturbation(
    original: Sequence[Example], transformed: Sequence[Example], candidate_run: TransformRun
) -> Perturbation:
    """The reranking rows (paired lists, their queries as the query side left them) with the
    candidates rewritten by ``candidate_run``: the original rows lose the failed candidates, the
    transformed ones also get the rewrites; the counts cover the candidates of these rows only."""
    rows = TransformedItem.objects.filter(run=candidate_run).values_list("side", "ok", "output_text")
    used = distinct_candidates(original)
    outputs = {key: (ok, text) for key, ok, text in rows if key in used}
    kept = perturbed_candidate_lists(original, outputs)
    rewritten = perturbed_candidate_lists(transformed, outputs)
    return Perturbation(
        kept.original,
        rewritten.transformed,
        documents_transformed=kept.candidates_transformed,
        documents_left_out=kept.candidates_left_out,
    )


def sides_with_config(
    fixed: PerturbationEntry | None, sides: Sequence[str] | None, document_scope: str | None
) -> tuple[tuple[str, ...] | None, str | None]:
    """The sides and document scope of a run of a config that may fix them (``fixed``, its
    ``perturbation`` block): what the run asks for narrows the config's, never widens or changes
    it. A run that names no sides gets the config's; one that names a side the config lacks, or
    another document scope, is refused (pure). Without a block the run's choice stands."""
    if fixed is None:
        return (tuple(sides) if sides else None), document_scope
    if sides:
        extra = [side for side in sides if side not in fixed.sides]
        if extra:
            raise ShiftlabError(
                f"the config fixes the perturbed sides to {', '.join(fixed.sides)}, and the run asks for "
                f"{', '.join(extra)}: ask for some of the config's sides (or none, to run them all), or export "
                "a config with that side",
                field="sides",
            )
    if document_scope and document_scope != fixed.document_scope:
        raise ShiftlabError(
            f"the config fixes the document scope to {fixed.document_scope!r}, and the run asks for "
            f"{document_scope!r}: leave the document scope out, or export a config with that scope",
            field="document_scope",
        )
    return (tuple(sides) if sides else fixed.sides), fixed.document_scope
