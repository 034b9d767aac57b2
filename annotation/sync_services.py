"""Syncing the submitted responses of a validation study's Argilla datasets into ``Rating`` rows
(idempotent; see ``sync_study`` and docs/annotation.md)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any
from uuid import UUID

from django.db import transaction
from django.utils import timezone

from annotation.argilla import client as argilla
from annotation.argilla_services import argilla_connection
from annotation.design_services import study_design
from annotation.models import Rating, RatingComment, RatingRevision, Study
from annotation.sync_diff import SyncCounts, sync_diff
from core.errors import ShiftlabError
from core.services import audit_record


def study_argilla_datasets(study: Study) -> list[UUID]:
    """The Argilla datasets holding the study's records: one per annotator (their own batch), and
    the single shared dataset of a study published before per-annotator batches existed."""
    ids = [a.argilla_dataset_id for a in study.annotators.exclude(argilla_dataset_id=None).order_by("pk")]
    if study.argilla_dataset_id is not None:
        ids.append(study.argilla_dataset_id)
    return ids


@dataclass(frozen=True)
class SyncResult(SyncCounts):
    ignored_users: int = 0
    ignored_records: int = 0


def sync_summary(counts: Mapping[str, int]) -> str:
    """A sync's counts (``SyncResult`` as a dict, as ``Study.last_sync`` holds them) in words."""
    text = (
        f"{counts.get('created', 0)} new, {counts.get('updated', 0)} edited, {counts.get('withdrawn', 0)} withdrawn "
        f"({counts.get('unchanged', 0)} unchanged)"
    )
    ignored = [
        f"{counts[key]} {what}"
        for key, what in (
            ("ignored_users", "responses of users not in the study"),
            ("ignored_records", "responses to records not in the study"),
        )
        if counts.get(key)
    ]
    return text + (f"; ignored {' and '.join(ignored)}" if ignored else "")


def study_sync(*, study: Study, client=None) -> SyncResult:
    """Bring the submitted responses of the study's Argilla dataset into ``Rating`` rows.

    Idempotent: a rating exists once per (item, annotator, question); re-syncing unchanged
    responses writes nothing. Only submitted responses count: a response that is a draft or
    discarded, or was deleted, makes the matching ratings inactive. A changed value updates the
    rating, increments ``edits`` and adds a ``RatingRevision``.
    """
    study = Study.objects.get(pk=study.pk)
    datasets = study_argilla_datasets(study)
    if study.published_at is None or not datasets:
        raise ShiftlabError(f"{study} is not published yet: publish it before syncing responses")
    design = study_design(study)
    question_names = {q.name: q for q in design.questions}
    with argilla_connection(client) as conn:
        rows = [row for dataset_id in datasets for row in argilla.responses_fetch(dataset_id, client=conn)]
    responses: dict[tuple[str, Any], dict] = {}
    for row in rows:
        entry = responses.setdefault(
            (row.record_external_id, row.user_id), {"status": row.status, "at": row.updated_at, "values": {}}
        )
        if row.question is not None:
            entry["values"][row.question] = row.value
    ignored: dict[str, int] = defaultdict(int)
    now = timezone.now()
    with transaction.atomic():
        study = Study.objects.select_for_update().get(pk=study.pk)
        items = {i.external_id: i for i in study.items.all()}
        annotators = {a.argilla_user_id: a for a in study.annotators.select_related("user")}
        existing = {
            (r.study_item_id, r.annotator_id, r.question): r for r in Rating.objects.filter(study_item__study=study)
        }
        items_by_pk = {i.pk: i for i in items.values()}
        annotators_by_pk = {a.pk: a for a in annotators.values()}
        submitted: dict[tuple[int, int, str], tuple[int, Any]] = {}
        for (external_id, user_id), response in responses.items():
            item, annotator = items.get(external_id), annotators.get(user_id)
            if item is None:
                ignored["ignored_records"] += 1
                continue
            if annotator is None:
                ignored["ignored_users"] += 1
                continue
            if response["status"] != "submitted":
                continue  # its ratings, if any, are withdrawn below
            for question, value in response["values"].items():
                if question == "comment":
                    RatingComment.objects.update_or_create(
                        study_item=item, annotator=annotator, defaults={"text": str(value or "")}
                    )
                    continue
                spec = question_names.get(question)
                if spec is not None and isinstance(value, int) and spec.low <= value <= spec.high:
                    submitted[(item.pk, annotator.pk, question)] = (value, response["at"])
        diff = sync_diff(
            submitted,
            existing,
            is_current=lambda rating, value: rating.active and rating.value == value,
            is_live=lambda rating: rating.active,
        )
        for (item_id, annotator_id, question), value, at in diff.create:
            rating = Rating.objects.create(
                study_item_id=item_id, annotator_id=annotator_id, question=question, value=value, submitted_at=at
            )
            RatingRevision.objects.create(rating=rating, value=value, status="submitted", argilla_updated_at=at)
        for rating, value, at in diff.update:
            rating.edits += 1
            rating.value, rating.active, rating.submitted_at = value, True, at
            rating.save(update_fields=["value", "active", "submitted_at", "edits", "updated_at"])
            RatingRevision.objects.create(rating=rating, value=value, status="submitted", argilla_updated_at=at)
        for (item_id, annotator_id, _), rating in diff.withdraw:
            item, annotator = items_by_pk[item_id], annotators_by_pk[annotator_id]
            status = responses.get((item.external_id, annotator.argilla_user_id), {}).get("status", "missing")
            rating.active = False
            rating.save(update_fields=["active", "updated_at"])
            RatingRevision.objects.create(rating=rating, value=None, status=status)
        result = SyncResult(**diff.counts(), **ignored)
        study.synced_at, study.last_sync = now, asdict(result)
        fields = ["synced_at", "last_sync"]
        if result.changed:
            study.ratings_changed_at = now
            fields.append("ratings_changed_at")
        study.save(update_fields=fields)
        if result.changed:
            audit_record(actor=None, verb="study.sync", obj=study, payload=result.audit_payload())
    return result
