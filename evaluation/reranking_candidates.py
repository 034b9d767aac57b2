"""The document side of a reranking dataset (pure): its candidates live inside each query's row
(``payload["positive"]``, ``payload["negative"]``), not as documents of a corpus, and the same
text may be a candidate of many queries.

The work units of a document run are therefore the distinct candidate texts, each keyed by
``candidate_key`` (a stable digest of the text; ``transforms.candidates``). Each distinct text
is rewritten once, and ``perturbed_candidate_lists`` substitutes its rewrite into every list
where it appears. A
candidate whose rewrite failed is dropped from every list, in the original rows as in the
transformed ones (never scored with its original text), and a query that loses its last positive
is left out of both scorings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from transforms.candidates import CANDIDATE_FIELDS, candidate_key
from transforms.candidates import candidate_units as _units_of_rows

Example = tuple[str, dict, object, int]  # (item_id, payload, gold, DatasetItem pk)


def distinct_candidates(examples: Sequence[Example]) -> dict[str, str]:
    """Key -> text of every distinct candidate of the examples, in first-seen order."""
    return {key: text for owned in candidate_units(examples).values() for key, text in owned.items()}


def candidate_units(examples: Sequence[Example]) -> dict[int, dict[str, str]]:
    """Each distinct candidate once, under the first example (its DatasetItem pk) whose lists
    hold it: pk -> {key: text} (``transforms.candidates.candidate_units``, the units a run of
    candidates stores as (that item, side = the key))."""
    return _units_of_rows((pk, payload) for _, payload, _, pk in examples)


@dataclass(frozen=True)
class CandidatePerturbation:
    """The reranking rows a document side scores, as original and as rewritten, and its counts."""

    original: list[Example]
    transformed: list[Example]
    candidates_transformed: int  # distinct candidates rewritten (and used by a kept query)
    candidates_left_out: int  # distinct candidates whose rewrite failed
    queries_left_out: int  # queries that lost their last positive


def perturbed_candidate_lists(
    examples: Sequence[Example], outputs: Mapping[str, tuple[bool, str]]
) -> CandidatePerturbation:
    """The examples with each candidate's rewrite (``outputs``: key -> (succeeded, text); a key
    missing from it stays as it is) in every list where the candidate appears. Failed candidates
    are dropped from both sides' lists; a query left without a positive is left out of both."""
    failed = {key for key, (ok, _) in outputs.items() if not ok}
    original, transformed, rewritten, dropped_queries = [], [], set(), 0
    for item_id, payload, gold, pk in examples:
        kept = {field: [t for t in payload[field] if candidate_key(t) not in failed] for field in CANDIDATE_FIELDS}
        if not kept["positive"]:
            dropped_queries += 1
            continue
        new = {}
        for field, texts in kept.items():
            keys = [candidate_key(t) for t in texts]
            rewritten.update(k for k in keys if k in outputs)
            new[field] = [outputs[k][1] if k in outputs else t for k, t in zip(keys, texts, strict=True)]
        original.append((item_id, {**payload, **kept}, gold, pk))
        transformed.append((item_id, {**payload, **new}, gold, pk))
    return CandidatePerturbation(original, transformed, len(rewritten), len(failed), dropped_queries)
