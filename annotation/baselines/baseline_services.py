"""Services of human-baseline studies (SPEC §6): the only code that writes ``BaselineStudy``,
``BaselineInstance`` and human ``BaselineAnswer`` rows.

Order: create (seeded sample of instances, gold kept in Django) → publish (Argilla workspace,
annotator accounts, one dataset with the task's question, records carrying the instance key and
its texts only) → sync (submitted responses into ``BaselineAnswer``) → close, and, independently,
llm-annotate (``baseline_llm_services``: an LLM answers the same instances with the same
instructions). Scoring the answers is evaluation's job (``evaluation.human_baseline``), which only
reads these rows.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from django.contrib.auth.base_user import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from annotation.argilla import client as argilla
from annotation.argilla.client import argilla_connection
from annotation.baselines import baseline_sampling as sampling
from annotation.baselines import llm_annotator
from annotation.models import (
    BASELINE_TASK_TYPES,
    BaselineAnnotator,
    BaselineAnswer,
    BaselineAnswerRevision,
    BaselineInstance,
    BaselineStudy,
)
from annotation.publishing.argilla_services import (
    PublishResult,
    annotator_dataset_ensure,
    annotator_roles_check,
    annotators_audit_published,
    mark_published,
)
from annotation.publishing.sync_diff import Response, SyncCounts, latest_responses, sync_diff, without_nul
from annotation.publishing.sync_services import (
    BASELINE_SYNC_LOCK,
    fetch_outdated,
    invalid_entry,
    seen_at,
    sync_invalid_audit,
    sync_lock,
)
from annotation.studies.assignment import receivers
from annotation.studies.sampling import seeded_rng
from core.errors import ShiftlabError
from core.models import Project
from core.projects import default_project, project_require_same
from core.rosters import roster_require
from core.services import audit_record
from corpora.models import Dataset, DatasetItem
from corpora.task_types import TaskType

DEFAULT_INSTRUCTIONS = {
    TaskType.STS: (
        "Each task shows two sentences. Rate how similar their meanings are, from 0 to 5:\n\n"
        "- 0: about different things\n- 1: not the same meaning, but on the same topic\n"
        "- 2: not the same meaning, some details in common\n"
        "- 3: roughly the same meaning, some important detail differs or is missing\n"
        "- 4: mostly the same meaning, only minor details differ\n- 5: exactly the same meaning\n\n"
        "Judge the meaning, not the wording. Work on your own and do not look anything up."
    ),
    TaskType.CLASSIFICATION: (
        "Each task shows one text. Choose the label that describes it best; exactly one label applies. "
        "Read the list of labels carefully (its search box helps with long lists). Work on your own and "
        "do not look anything up."
    ),
    TaskType.CLUSTERING: (
        "Texts come in batches; each task shows one text and, below it, every text of its batch. "
        "Sort the batch into groups of texts about the same subject: for each text, type a short group "
        "name, and type exactly the same name for every text of the batch that belongs in that group. "
        "A name only has to make sense within its batch; how many groups there are is for you to decide."
    ),
    TaskType.RERANKING: (
        "Each task shows a query and one candidate text. Say whether the candidate is relevant to the "
        "query, i.e. whether it answers it or is what someone asking it would want to find. Judge each "
        "candidate on its own."
    ),
}

# Argilla fields per task (name, title), in the order of ``BaselineInstance.texts``.
FIELDS = {
    TaskType.STS: (argilla.TextField("sentence1", "Sentence 1"), argilla.TextField("sentence2", "Sentence 2")),
    TaskType.CLASSIFICATION: (argilla.TextField("text", "Text"),),
    TaskType.CLUSTERING: (argilla.TextField("text", "Text to place in a group"),),
    TaskType.RERANKING: (argilla.TextField("query", "Query"), argilla.TextField("candidate", "Candidate")),
}
BATCH_FIELD = argilla.TextField("batch", "Every text of this batch")
QUESTION = {
    TaskType.STS: "similarity",
    TaskType.CLASSIFICATION: "label",
    TaskType.CLUSTERING: "group",
    TaskType.RERANKING: "relevant",
}
RELEVANCE_LABELS = (("1", "Relevant"), ("0", "Not relevant"))
STS_VALUES = (0, 1, 2, 3, 4, 5)

# Options each task accepts (anything else is a typo worth reporting), with their defaults.
OPTION_DEFAULTS: dict[str, dict[str, Any]] = {
    TaskType.STS: {},
    TaskType.CLASSIFICATION: {"stratify": False},
    TaskType.CLUSTERING: {"batch_size": sampling.DEFAULT_BATCH_SIZE, "clusters_per_batch": None},
    TaskType.RERANKING: {"candidates": sampling.DEFAULT_CANDIDATES},
}
COMMON_OPTIONS = {"raters_per_instance": 3}


# --- create ----------------------------------------------------------------------------------


def _options(task_type: str, given: Mapping[str, Any], dataset: Dataset) -> dict[str, Any]:
    allowed = {**COMMON_OPTIONS, **OPTION_DEFAULTS[task_type]}
    unknown = sorted(set(given) - set(allowed) - {"labels"})
    if unknown:
        raise ShiftlabError(
            f"unknown option(s) {', '.join(unknown)} for a {task_type} baseline; known: {', '.join(sorted(allowed))}"
        )
    options = {**allowed, **given}
    for name in ("raters_per_instance", "batch_size", "clusters_per_batch", "candidates"):
        value = options.get(name)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise ShiftlabError(f"option {name} must be a positive whole number, got {value!r}")
    if not isinstance(options.get("stratify", False), bool):
        raise ShiftlabError(f"option stratify must be true or false, got {options['stratify']!r}")
    if task_type == TaskType.CLASSIFICATION:
        if "labels" in given:
            raise ShiftlabError("the label set comes from the dataset; do not pass option labels")
        labels = (dataset.metadata or {}).get("labels")
        if not labels:
            labels = DatasetItem.objects.filter(dataset=dataset, kind="example").values_list("gold", flat=True)
        options["labels"] = sorted({str(label) for label in labels})
    elif "labels" in given:
        raise ShiftlabError(f"option labels belongs to classification baselines, not {task_type}")
    return options


def baseline_create(
    *,
    name: str,
    dataset: Dataset,
    task_type: str,
    n_instances: int,
    split: str = "test",
    seed: int = 0,
    options: Mapping[str, Any] | None = None,
    instructions: str = "",
    project: Project | None = None,
    created_by: AbstractBaseUser | None = None,
) -> BaselineStudy:
    """A draft baseline study with its seeded sample of instances, in one transaction.

    ``n_instances`` counts pairs (sts), items (classification, clustering) or queries (reranking).
    ``instructions`` default to the project's wording for the task. The study belongs to
    ``project`` (default: the dataset's, or the default project for a shared dataset) and is
    published to the Argilla workspace named after it; ``dataset`` must be in that project or
    shared. Raises ``ShiftlabError`` naming the wrong input.
    """
    project = project or (default_project() if dataset.shared else dataset.project)
    project_require_same(project, dataset, role="the baseline's dataset")
    if task_type not in BASELINE_TASK_TYPES:
        raise ShiftlabError(f"unknown baseline task type {task_type!r}: choose one of {', '.join(BASELINE_TASK_TYPES)}")
    if dataset.task_type != task_type:
        raise ShiftlabError(
            f"dataset {dataset.name} is a {dataset.task_type} dataset; a {task_type} baseline needs "
            f"a {task_type} dataset"
        )
    if split not in (dataset.splits or {}):
        raise ShiftlabError(
            f"dataset {dataset.name} has no split {split!r}; its splits: "
            f"{', '.join(sorted(dataset.splits or {})) or 'none'}"
        )
    if seed < 0:
        raise ShiftlabError(f"seed must be zero or positive, got {seed}")
    if BaselineStudy.objects.filter(project=project, name=name).exists():
        raise ShiftlabError(f"a baseline study named {name!r} exists in project {project.slug}: choose another name")
    options = _options(task_type, options or {}, dataset)
    study = BaselineStudy(
        name=name,
        dataset=dataset,
        task_type=task_type,
        split=split,
        seed=seed,
        n_instances=n_instances,
        options=options,
        instructions=instructions.strip() or DEFAULT_INSTRUCTIONS[task_type],
        project=project,
        workspace=project.slug,
        created_by=created_by,
    )
    try:
        study.full_clean(exclude=["dataset", "created_by"])
    except ValidationError as exc:
        raise ShiftlabError(f"invalid baseline study: {'; '.join(exc.messages)}") from exc
    rows = DatasetItem.objects.filter(dataset=dataset, split=split, kind="example").values_list("pk", "payload", "gold")
    items = [sampling.SourceItem(ref=pk, payload=payload, gold=gold) for pk, payload, gold in rows]
    try:
        drawn = sampling.sample_instances(
            task_type, items, n_instances, rng=np.random.default_rng(seed), options=options
        )
    except sampling.SamplingError as exc:
        raise ShiftlabError(f"{dataset.name} ({split}): {exc}") from exc
    with transaction.atomic():
        study.save()
        BaselineInstance.objects.bulk_create(
            BaselineInstance(
                study=study,
                key=d.key,
                position=d.position,
                item_id=d.ref,
                group=d.group,
                texts=list(d.texts),
                gold=d.gold,
            )
            for d in drawn
        )
        audit_record(
            actor=created_by,
            verb="baseline.create",
            obj=study,
            payload={
                "dataset": dataset.name,
                "content_hash": dataset.content_hash,
                "task_type": task_type,
                "split": split,
                "seed": seed,
                "n_instances": n_instances,
                "instances": len(drawn),
                "options": options,
            },
        )
    return study


# --- publish ---------------------------------------------------------------------------------


def _questions(study: BaselineStudy) -> list[argilla.Question]:
    name = QUESTION[study.task_type]
    if study.task_type == TaskType.STS:
        return [argilla.RatingQuestion(name, "How similar are the meanings? (0 = different, 5 = the same)", STS_VALUES)]
    if study.task_type == TaskType.CLASSIFICATION:
        labels = tuple((label, label.replace("_", " ")) for label in study.options["labels"])
        return [argilla.LabelQuestion(name, "Which label fits the text?", labels)]
    if study.task_type == TaskType.CLUSTERING:
        return [
            argilla.TextQuestion(
                name, "Group name for this text", "Use the same name for every text of the batch that belongs with it."
            )
        ]
    return [argilla.LabelQuestion(name, "Is the candidate relevant to the query?", RELEVANCE_LABELS)]


def _records(study: BaselineStudy, instances: Sequence[BaselineInstance]) -> list[argilla.RecordIn]:
    """The instance key and the texts, nothing else: no gold, no label hint, no metadata."""
    names = [f.name for f in FIELDS[study.task_type]]
    batches: dict[str, list[str]] = defaultdict(list)
    if study.task_type == TaskType.CLUSTERING:
        for instance in instances:
            batches[instance.group].append(instance.texts[0])
    records = []
    for instance in instances:
        fields = dict(zip(names, instance.texts, strict=True))
        if study.task_type == TaskType.CLUSTERING:
            fields[BATCH_FIELD.name] = "\n".join(f"{k}. {text}" for k, text in enumerate(batches[instance.group], 1))
        records.append(argilla.RecordIn(external_id=instance.key, fields=fields))
    return records


def _units(instances: Sequence[BaselineInstance]) -> dict[str, list[BaselineInstance]]:
    """Instances answered together go to the same annotators: a clustering batch or a reranking
    query (``group``); any other instance is a unit of its own. In the study's order."""
    units: dict[str, list[BaselineInstance]] = defaultdict(list)
    for instance in instances:
        units[instance.group or instance.key].append(instance)
    return units


def _baseline_assign(study: BaselineStudy, instances: Sequence[BaselineInstance]) -> tuple[dict[str, int], int]:
    """Give each of the study's annotators (``study.annotators``) a seat and deal the units
    (``_units``) that have fewer than ``raters_per_instance`` holders to the least-loaded
    annotators who do not hold them yet (``assignment.receivers``, seeded). Holders are the
    annotators whose dataset holds a unit and those who answered one of its instances (in a
    shared dataset of an earlier publish: those instances are not asked again). A seat's keys only
    grow: records once sent stay. The caller holds the study's row lock. Returns (username ->
    instances given now, instances still short of raters: too few annotators)."""
    raters = study.options.get("raters_per_instance", COMMON_OPTIONS["raters_per_instance"])
    seats = {seat.user_id: seat for seat in study.baseline_annotators.select_related("user")}
    for user in study.annotators.order_by("pk"):
        if user.pk not in seats:
            seats[user.pk] = BaselineAnnotator.objects.create(study=study, user=user)
    units = _units(instances)
    unit_of = {i.key: unit for unit, members in units.items() for i in members}
    answered: dict[int, set[str]] = defaultdict(set)
    for user_id, key in BaselineAnswer.objects.filter(
        instance__study=study, source=BaselineAnswer.Source.HUMAN, user__isnull=False
    ).values_list("user_id", "instance__key"):
        answered[user_id].add(key)
    holders: dict[str, set[int]] = {unit: set() for unit in units}
    for pk, seat in seats.items():
        for key in [*seat.keys, *answered[pk]]:
            if key in unit_of:
                holders[unit_of[key]].add(pk)
    loads = {pk: sum(pk in held for held in holders.values()) for pk in sorted(seats)}
    rng = seeded_rng(study.seed, "baseline-assign-" + ",".join(map(str, sorted(seats))))
    for _ in range(raters):
        given, _ = receivers([u for u in units if len(holders[u]) < raters], holders, loads, rng=rng)
        for unit, pk in given.items():
            holders[unit].add(pk)
            loads[pk] += 1
        if not given:
            break
    counts: dict[str, int] = {}
    for pk, seat in seats.items():
        had = set(seat.keys)
        new = [i.key for i in instances if pk in holders[unit_of[i.key]] and i.key not in had | answered[pk]]
        if new:
            seat.keys = [i.key for i in instances if i.key in had or i.key in new]
            seat.save(update_fields=["keys"])
            counts[seat.user.get_username()] = len(new)
    short = sum(len(members) for unit, members in units.items() if len(holders[unit]) < raters)
    return counts, short


def _baseline_reconcile(
    study: BaselineStudy, instances: Sequence[BaselineInstance], *, roles: dict[str, str], client
) -> tuple[int, tuple[str, ...]]:
    """Make Argilla hold, for each annotator of the study, their own workspace and dataset with
    the records of their seat's instances (upserted by key), as ``study_argilla_reconcile`` does
    for validation studies. Returns (records the datasets hold, usernames of the accounts
    created now, whose random password nobody is shown)."""
    fields = FIELDS[study.task_type] + ((BATCH_FIELD,) if study.task_type == TaskType.CLUSTERING else ())
    # One annotator per dataset: a record is done once its owner submitted it.
    spec = {"fields": fields, "questions": _questions(study), "guidelines": study.instructions, "min_submitted": 1}
    records = {r.external_id: r for r in _records(study, instances)}
    new_accounts: list[str] = []
    held = 0
    for seat in study.baseline_annotators.select_related("user").order_by("pk"):
        placed = annotator_dataset_ensure(
            study,
            seat.user,
            workspace=seat.argilla_workspace,
            dataset_id=seat.argilla_dataset_id,
            spec=spec,
            roles=roles,
            new_accounts=new_accounts,
            client=client,
        )
        BaselineAnnotator.objects.filter(pk=seat.pk).update(
            argilla_user_id=placed.user_id, argilla_workspace=placed.workspace, argilla_dataset_id=placed.dataset_id
        )
        held += argilla.records_log(placed.dataset_id, [records[key] for key in seat.keys], client=client)
    return held, tuple(new_accounts)


def baseline_publish(
    *,
    study: BaselineStudy,
    annotators: Iterable[AbstractBaseUser] = (),
    actor: AbstractBaseUser | None = None,
    client=None,
) -> PublishResult:
    """Publish the study to Argilla: each annotator gets their own workspace and dataset, holding
    only the instances assigned to them (``_baseline_assign``: every instance goes to
    ``raters_per_instance`` annotators, where there are that many), as validation studies do, so
    that nobody reads or answers a baseline, or a part of one, not given to them. Only annotators on
    the roster of the study's project.

    Idempotent: workspaces, accounts and datasets are reused and records upserted by instance key;
    publishing again with more annotators gives them the instances still short of raters. New
    accounts get a random password that nobody is shown (``new_accounts`` names them). A study
    published before per-annotator datasets (one dataset shared in the project's workspace, which every baseline
    annotator of the project could open) moves: its answers are synced, each annotator gets their
    own dataset without the instances they answered, and the shared dataset is deleted (audited
    ``baseline.move``); the answers stay in Shiftlab and count as before.
    """
    study = BaselineStudy.objects.get(pk=study.pk)
    if study.status == BaselineStudy.Status.CLOSED:
        raise ShiftlabError(f"{study} is closed: it takes no more answers")
    users = list(dict.fromkeys(annotators))
    roster_require(study.project, users)  # only the annotators of its project
    newcomers = [u for u in users if not study.annotators.filter(pk=u.pk).exists()]
    with argilla_connection(client) as conn:
        roles = annotator_roles_check(users, client=conn)
        shared = study.argilla_dataset_id
        if shared is not None:
            baseline_sync(study=study, client=conn)  # every answer in Shiftlab before the dataset goes
        instances = list(study.instances.order_by("position"))
        with transaction.atomic():
            study = BaselineStudy.objects.select_for_update().get(pk=study.pk)
            study.annotators.add(*users)
            given, short = _baseline_assign(study, instances)
        records, new_accounts = _baseline_reconcile(study, instances, roles=roles, client=conn)
        if shared is not None:
            argilla.dataset_delete(shared, client=conn)
            BaselineStudy.objects.filter(pk=study.pk).update(argilla_dataset_id=None)
            kept = BaselineAnswer.objects.filter(instance__study=study, source=BaselineAnswer.Source.HUMAN, active=True)
            audit_record(
                actor=actor,
                verb="baseline.move",
                obj=study,
                payload={"dataset_deleted": str(shared), "workspace": study.workspace, "answers_kept": kept.count()},
            )
    payload = {
        "records": records,
        "annotators": sorted(u.get_username() for u in study.annotators.all()),
        "given": given,
        "instances_short_of_raters": short,
        "new_accounts": sorted(new_accounts),
    }
    study = mark_published(study, actor=actor, verb="baseline.publish", payload=payload)
    annotators_audit_published(study, newcomers, actor=actor)
    return PublishResult(study=study, dataset_id="", records=records, new_accounts=new_accounts)


# --- sync ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BaselineSyncResult(SyncCounts):
    invalid: int = 0  # submitted values that are no answer of the task (should not happen)
    nul_stripped: int = 0  # text answers stored without the NUL characters they held
    ignored_users: int = 0  # answers of Argilla users who are not the study's annotators
    ignored_records: int = 0


def baseline_close(*, study: BaselineStudy, actor: AbstractBaseUser | None = None, client=None) -> BaselineStudy:
    """Close a published study: a last sync of the human answers, then no more publishing, syncing
    or LLM answers, so the report of a closed study no longer changes. Closing twice is an error."""
    study = BaselineStudy.objects.get(pk=study.pk)
    if study.status != BaselineStudy.Status.PUBLISHED:
        raise ShiftlabError(f"{study} is {study.status}: only a published study can be closed")
    last = baseline_sync(study=study, client=client)
    with transaction.atomic():
        study = BaselineStudy.objects.select_for_update().get(pk=study.pk)
        if study.status != BaselineStudy.Status.PUBLISHED:
            raise ShiftlabError(f"{study} is {study.status}: only a published study can be closed")
        study.status = BaselineStudy.Status.CLOSED
        study.save(update_fields=["status"])
        answers = BaselineAnswer.objects.filter(instance__study=study, active=True).count()
        audit_record(
            actor=actor,
            verb="baseline.close",
            obj=study,
            payload={"last_sync_changes": last.changed, "answers": answers},
        )
    return study


def answer_value(study: BaselineStudy, value: Any) -> Any | None:
    """A submitted Argilla value as the task's answer value, or None if it is none."""
    if study.task_type == TaskType.STS:
        ok = isinstance(value, int) and not isinstance(value, bool) and value in STS_VALUES
        return float(value) if ok else None
    if study.task_type == TaskType.CLASSIFICATION:
        return value if isinstance(value, str) and value in study.options["labels"] else None
    if study.task_type == TaskType.CLUSTERING:
        return (llm_annotator.normalise_cluster(value) or None) if isinstance(value, str) else None
    return int(value) if value in ("0", "1") else None


def baseline_sync(*, study: BaselineStudy, client=None) -> BaselineSyncResult:
    """Bring the study's submitted Argilla responses into ``BaselineAnswer`` rows (source human).

    Idempotent: one answer per (instance, annotator); unchanged responses write nothing, a changed
    value updates the answer, and an answer whose response is no longer submitted (discarded, back
    to draft, deleted) becomes inactive; each change adds a ``BaselineAnswerRevision``. Only the
    study's annotators count. As in ``study_sync``: nothing older than what is stored replaces it,
    a value that is no answer of the task is counted and audited and leaves the stored answer as it
    was, and syncs of one study run one at a time.
    """
    study = BaselineStudy.objects.get(pk=study.pk)
    seats = list(study.baseline_annotators.exclude(argilla_dataset_id=None).select_related("user").order_by("pk"))
    datasets = [seat.argilla_dataset_id for seat in seats]
    if study.argilla_dataset_id is not None:  # published before per-annotator datasets
        datasets.append(study.argilla_dataset_id)
    if not datasets:
        raise ShiftlabError(f"{study} is not published yet: publish it before syncing answers")
    if study.status == BaselineStudy.Status.CLOSED:
        raise ShiftlabError(f"{study} is closed: its answers are final and are not synced again")
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
        return _baseline_store(study, responses, started, readable)


def _baseline_store(
    study: BaselineStudy,
    responses: Mapping[tuple[str, str | None], Response],
    started: datetime,
    readable: set[tuple[str, str]] | None,
) -> BaselineSyncResult:
    question = QUESTION[study.task_type]
    counts: dict[str, int] = defaultdict(int)
    invalid: list[dict[str, Any]] = []
    ignored_usernames = set()
    with transaction.atomic():
        study = BaselineStudy.objects.select_for_update().get(pk=study.pk)
        if study.status == BaselineStudy.Status.CLOSED:
            raise ShiftlabError(f"{study} is closed: its answers are final and are not synced again")
        if fetch_outdated(started, study.synced_at):
            return BaselineSyncResult(stale=sum(len(r.values) for r in responses.values() if r.status == "submitted"))
        instances = {i.key: i for i in study.instances.all()}
        users = {u.get_username(): u for u in study.annotators.all()}
        existing = {
            (a.instance_id, a.rater): a
            for a in BaselineAnswer.objects.filter(instance__study=study, source=BaselineAnswer.Source.HUMAN).annotate(
                last_revision_at=Max("revisions__argilla_updated_at")
            )
        }
        by_rater: dict[tuple[int, str], Response] = {}
        submitted: dict[tuple[int, str], tuple[Any, Any]] = {}
        held: set[tuple[int, str]] = set()
        for (key, username), response in responses.items():
            if response.status != "submitted":
                if key in instances and username in users:
                    by_rater[(instances[key].pk, username)] = response  # its answer is withdrawn below
                continue
            instance, user = instances.get(key), users.get(username)
            if instance is None:
                counts["ignored_records"] += 1
                continue
            if user is None:
                ignored_usernames.add(username)
                counts["ignored_users"] += 1
                continue
            row_key = (instance.pk, username)
            by_rater[row_key] = response
            for name, raw in response.values.items():
                if isinstance(raw, str) and without_nul(raw) != raw:
                    counts["nul_stripped"] += 1
                    raw = without_nul(raw)
                value = answer_value(study, raw) if name == question else None
                if value is None:
                    held.add(row_key)
                    invalid.append(invalid_entry(key, username, name, raw, response.at))
                else:
                    submitted[row_key] = (value, response.at)

        if readable is not None:
            keys = {i.pk: key for key, i in instances.items()}
            held |= {row_key for row_key in existing if (keys[row_key[0]], row_key[1]) not in readable}

        def withdrawn_at(row_key: tuple[int, str]) -> Any:
            response = by_rater.get(row_key)
            return response.at if response is not None else started

        diff = sync_diff(
            submitted,
            existing,
            is_current=lambda answer, value: answer.active and answer.value == value,
            is_live=lambda answer: answer.active,
            seen_at=seen_at,
            withdrawn_at=withdrawn_at,
            held=held - submitted.keys(),  # an answer to another question beside a valid one holds nothing
        )
        for (instance_id, username), value, at in diff.create:
            answer = BaselineAnswer.objects.create(
                instance_id=instance_id,
                rater=username,
                source=BaselineAnswer.Source.HUMAN,
                user=users[username],
                value=value,
                submitted_at=at,
            )
            BaselineAnswerRevision.objects.create(answer=answer, value=value, status="submitted", argilla_updated_at=at)
        for answer, value, at in diff.update:
            answer.value, answer.active, answer.submitted_at = value, True, at
            answer.save(update_fields=["value", "active", "submitted_at", "updated_at"])
            BaselineAnswerRevision.objects.create(answer=answer, value=value, status="submitted", argilla_updated_at=at)
        for answer, at in diff.touch:
            answer.submitted_at = at
            answer.save(update_fields=["submitted_at", "updated_at"])
        for row_key, answer, at in diff.withdraw:
            response = by_rater.get(row_key)
            answer.active = False
            answer.save(update_fields=["active", "updated_at"])
            status = response.status if response is not None else "missing"
            BaselineAnswerRevision.objects.create(answer=answer, value=None, status=status, argilla_updated_at=at)
        result = BaselineSyncResult(**diff.counts(), invalid=len(invalid), **counts)
        study.synced_at = started
        study.save(update_fields=["synced_at"])
        if result.changed:
            audit_record(
                actor=None,
                verb="baseline.sync",
                obj=study,
                payload={**result.audit_payload(), "ignored_usernames": sorted(map(str, ignored_usernames))},
            )
        if invalid:
            sync_invalid_audit(obj=study, verb="baseline.sync.invalid", found=invalid)
    return result
