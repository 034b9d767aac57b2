"""Syncing a human baseline's submitted Argilla responses into ``BaselineAnswer`` rows (source
human), through the sync skeleton validation studies use (``publishing.answer_store``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.base_user import AbstractBaseUser
from django.utils import timezone

from annotation.argilla import client as argilla
from annotation.argilla.client import argilla_connection
from annotation.baselines.baseline_tasks import baseline_task
from annotation.models import BaselineAnswer, BaselineAnswerRevision, BaselineStudy
from annotation.studies.answer_store import (
    BASELINE_SYNC_LOCK,
    AnswerStore,
    Collected,
    Responses,
    invalid_entry,
    sync_invalid_audit,
    sync_lock,
)
from annotation.studies.onboarding_services import SyncJob, sync_job_state
from annotation.studies.sync_diff import SyncCounts, latest_responses, without_nul
from core.errors import ShiftlabError
from core.projects import project_require_write
from core.task_policy import task_named

SYNC_TASK = "annotation.sync_baseline"


@dataclass(frozen=True)
class BaselineSyncResult(SyncCounts):
    invalid: int = 0  # submitted values that are no answer of the task (should not happen)
    nul_stripped: int = 0  # text answers stored without the NUL characters they held
    ignored_users: int = 0  # answers of Argilla users who are not the study's annotators
    ignored_records: int = 0


def answer_value(study: BaselineStudy, value: Any) -> Any | None:
    """A submitted Argilla value as the task's answer value, or None if it is none."""
    return baseline_task(study.task_type).answer_value(value, study.options)


def _closed(study: BaselineStudy) -> ShiftlabError:
    return ShiftlabError(f"{study} is closed: its answers are final and are not synced again")


def _syncable_seats(study: BaselineStudy, actor: AbstractBaseUser | None) -> list:
    """The published seats of a study that may be synced by ``actor``; refused otherwise."""
    project_require_write(actor, study.project)
    seats = list(study.baseline_annotators.exclude(argilla_dataset_id=None).select_related("user").order_by("pk"))
    if not seats and study.argilla_dataset_id is None:
        raise ShiftlabError(f"{study} is not published yet: publish it before syncing answers")
    if study.status == BaselineStudy.Status.CLOSED:
        raise _closed(study)
    return seats


def baseline_sync_queue(*, study: BaselineStudy, actor: AbstractBaseUser | None):
    """The page's entry for a sync: the same refusals as ``baseline_sync`` at once, then the sync as
    the ``annotation.sync_baseline`` task (one Argilla read per annotator, so not inside the request;
    without a broker it runs in this call and the result is an ``EagerResult``)."""
    study = BaselineStudy.objects.select_related("project").get(pk=study.pk)
    _syncable_seats(study, actor)
    return task_named(SYNC_TASK).type.delay(study.pk, getattr(actor, "pk", None))


def baseline_sync_job(*, study: BaselineStudy, task_id: str) -> SyncJob | None:
    """The state and outcome of the queued sync ``task_id`` of ``study`` (None when it is none)."""
    return sync_job_state(task_id=task_id, task_name=SYNC_TASK, pk=study.pk, summary=baseline_sync_summary)


def baseline_sync_summary(counts: Mapping[str, Any]) -> str:
    """A baseline sync's counts in words: each answer is one instance answered by one annotator."""
    text = (
        f"{counts.get('created', 0)} instances newly answered, {counts.get('updated', 0)} answers changed, "
        f"{counts.get('withdrawn', 0)} withdrawn ({counts.get('unchanged', 0)} unchanged)"
    )
    if counts.get("ignored_users"):
        text += f"; ignored {counts['ignored_users']} answers of users outside the study"
    return text


def baseline_sync(*, study: BaselineStudy, actor: AbstractBaseUser | None = None, client=None) -> BaselineSyncResult:
    """Bring the study's submitted Argilla responses into ``BaselineAnswer`` rows (source human).

    Idempotent: one answer per (instance, annotator); unchanged responses write nothing, a changed
    value updates the answer, and an answer whose response is no longer submitted (discarded, back
    to draft, deleted) becomes inactive; each change adds a ``BaselineAnswerRevision``. Only the
    study's annotators count. As in ``study_sync``: nothing older than what is stored replaces it,
    a value that is no answer of the task is counted and audited and leaves the stored answer as it
    was, and syncs of one study run one at a time. ``actor`` must be able to change the study's
    project (the system may).
    """
    study = BaselineStudy.objects.select_related("project").get(pk=study.pk)
    seats = _syncable_seats(study, actor)
    datasets = [seat.argilla_dataset_id for seat in seats]
    if study.argilla_dataset_id is not None:  # published before per-annotator datasets
        datasets.append(study.argilla_dataset_id)
    # An answer can only be withdrawn by a read of the dataset that holds its record: an answer
    # given in a shared dataset that was since moved away stays as it was.
    readable = None
    if study.argilla_dataset_id is None:
        readable = {(key, seat.user.get_username()) for seat in seats for key in seat.keys}
    with sync_lock(BASELINE_SYNC_LOCK, study.pk):
        started = timezone.now()  # a response missing from this fetch was gone by then
        with argilla_connection(client) as conn:
            rows = [row for dataset_id in datasets for row in argilla.responses_fetch(dataset_id, client=conn)]
            names = argilla.usernames(client=conn)
        responses = {(key, names.get(user_id)): response for (key, user_id), response in latest_responses(rows).items()}
        return _BaselineStore(readable).store(study, responses, started)


class _BaselineStore(AnswerStore):
    """A baseline's human answers: one per (instance, annotator username), to the task's one
    question. ``readable``: the (key, username) pairs whose records the fetch could read (None:
    all); the answers of the others are left as they are."""

    model = BaselineStudy
    revision_model = BaselineAnswerRevision
    revision_of = "answer"
    result_type = BaselineSyncResult
    verb = "baseline.sync"

    def __init__(self, readable: set[tuple[str, str]] | None):
        self.readable = readable
        self.users: dict[str, AbstractBaseUser] = {}

    def refuse(self, obj: BaselineStudy) -> None:
        if obj.status == BaselineStudy.Status.CLOSED:
            raise _closed(obj)

    def stale(self, responses: Responses) -> int:
        return sum(len(r.values) for r in responses.values() if r.status == "submitted")

    def answers(self, obj: BaselineStudy):
        return BaselineAnswer.objects.filter(instance__study=obj, source=BaselineAnswer.Source.HUMAN)

    def key_of(self, row: BaselineAnswer) -> tuple[int, str]:
        return (row.instance_id, row.rater)

    def collect(self, obj: BaselineStudy, responses: Responses, existing: Mapping) -> Collected:
        task = baseline_task(obj.task_type)
        instances = {i.key: i for i in obj.instances.all()}
        self.users = users = {u.get_username(): u for u in obj.annotators.all()}
        by_rater: dict[tuple[int, str], Any] = {}
        found = Collected(response_of=by_rater.get)
        ignored_usernames = set()
        for (key, username), response in responses.items():
            if response.status != "submitted":
                if key in instances and username in users:
                    by_rater[(instances[key].pk, username)] = response  # its answer is withdrawn
                continue
            instance, user = instances.get(key), users.get(username)
            if instance is None:
                found.counts["ignored_records"] += 1
                continue
            if user is None:
                ignored_usernames.add(username)
                found.counts["ignored_users"] += 1
                continue
            row_key = (instance.pk, username)
            by_rater[row_key] = response
            for name, raw in response.values.items():
                if isinstance(raw, str) and without_nul(raw) != raw:
                    found.counts["nul_stripped"] += 1
                    raw = without_nul(raw)
                value = task.answer_value(raw, obj.options) if name == task.question else None
                if value is None:
                    found.held.add(row_key)
                    found.invalid.append(invalid_entry(key, username, name, raw, response.at))
                else:
                    found.submitted[row_key] = (value, response.at)
        if self.readable is not None:
            keys = {i.pk: key for key, i in instances.items()}
            found.held |= {row_key for row_key in existing if (keys[row_key[0]], row_key[1]) not in self.readable}
        found.held -= found.submitted.keys()  # an answer to another question beside a valid one holds nothing
        found.audit_extra = {"ignored_usernames": sorted(map(str, ignored_usernames))}
        return found

    def create(self, key: tuple[int, str], value: Any, at: Any) -> BaselineAnswer:
        instance_id, username = key
        return BaselineAnswer.objects.create(
            instance_id=instance_id,
            rater=username,
            source=BaselineAnswer.Source.HUMAN,
            user=self.users[username],
            value=value,
            submitted_at=at,
        )

    def audit_left_alone(self, obj: BaselineStudy, collected: Collected) -> None:
        if collected.invalid:
            sync_invalid_audit(obj=obj, verb="baseline.sync.invalid", found=collected.invalid)
