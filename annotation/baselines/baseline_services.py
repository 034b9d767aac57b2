"""Services of human-baseline studies (SPEC §6): the only code that writes ``BaselineStudy``,
``BaselineInstance`` and human ``BaselineAnswer`` rows.

Order: create (seeded sample of instances, gold kept in Django) → publish (Argilla workspace,
annotator accounts, one dataset per annotator with the task's question, records carrying the
instance key and its texts only) → sync (``baseline_sync_services``: submitted responses into
``BaselineAnswer``) → close, and, independently, llm-annotate (``baseline_llm_services``: an LLM
answers the same instances with the same instructions). What differs per task type is asked of
``baseline_tasks``. Scoring the answers is evaluation's job (``evaluation.human_baseline``), which
only reads these rows.

Each action is one service entry that page and command call alike: it takes the caller
(``actor``; None is the system), picks or checks the project and enforces every rule, raising
only ``ShiftlabError``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.contrib.auth.base_user import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import transaction

from annotation.argilla import client as argilla
from annotation.argilla.client import argilla_connection
from annotation.baselines import baseline_sampling as sampling
from annotation.baselines.baseline_sync_services import baseline_sync
from annotation.baselines.baseline_tasks import COMMON_OPTIONS, BaselineTask, baseline_task
from annotation.models import (
    BaselineAnnotator,
    BaselineAnswer,
    BaselineInstance,
    BaselineStudy,
)
from annotation.science.assignment import receivers
from annotation.science.sampling import seeded_rng
from annotation.studies.argilla_services import (
    PublishResult,
    annotator_dataset_ensure,
    annotator_roles_check,
    annotators_audit_published,
    mark_published,
)
from core.errors import ConflictError, NotFoundError, ShiftlabError
from core.models import Project
from core.projects import project_for_new, project_require_same, project_require_write
from core.rosters import roster_require
from core.services import audit_record
from corpora.models import Dataset, DatasetItem
from corpora.selectors import dataset_get

# --- create ----------------------------------------------------------------------------------


def _dataset(actor: AbstractBaseUser | None, name: str, project: str | None) -> Dataset:
    try:
        return dataset_get(name=name, user=actor, project=project)
    except Dataset.DoesNotExist:
        raise NotFoundError(
            f"no dataset {name!r}: import it first (`manage.py dataset import`)", field="dataset"
        ) from None


def _dataset_labels(dataset: Dataset) -> list[Any]:
    labels = (dataset.metadata or {}).get("labels")
    if not labels:
        labels = DatasetItem.objects.filter(dataset=dataset, kind="example").values_list("gold", flat=True)
    return list(labels)


def _baseline_check(
    *, project: Project, name: str, dataset: Dataset, task_type: str, split: str, seed: int
) -> BaselineTask:
    """Every rule on the inputs of a new study but its options; the task's definition."""
    project_require_same(project, dataset, role="the baseline's dataset")
    task = baseline_task(task_type)
    if dataset.task_type != task_type:
        raise ShiftlabError(
            f"dataset {dataset.name} is a {dataset.task_type} dataset; a {task_type} baseline needs "
            f"a {task_type} dataset",
            field="dataset",
        )
    if split not in (dataset.splits or {}):
        raise ShiftlabError(
            f"dataset {dataset.name} has no split {split!r}; its splits: "
            f"{', '.join(sorted(dataset.splits or {})) or 'none'}",
            field="split",
        )
    if seed < 0:
        raise ShiftlabError(f"seed must be zero or positive, got {seed}", field="seed")
    if BaselineStudy.objects.filter(project=project, name=name).exists():
        raise ShiftlabError(
            f"a baseline study named {name!r} exists in project {project.slug}: choose another name", field="name"
        )
    return task


def _baseline_draw(study: BaselineStudy, task: BaselineTask) -> list[sampling.DrawnInstance]:
    rows = DatasetItem.objects.filter(dataset=study.dataset, split=study.split, kind="example").values_list(
        "pk", "payload", "gold"
    )
    items = [sampling.SourceItem(ref=pk, payload=payload, gold=gold) for pk, payload, gold in rows]
    try:
        return task.sample(items, study.n_instances, rng=np.random.default_rng(study.seed), options=study.options)
    except sampling.SamplingError as exc:
        raise ShiftlabError(f"{study.dataset.name} ({study.split}): {exc}") from exc


@dataclass(frozen=True)
class BaselineCreateRequest:
    """A human baseline study as the page and the ``baseline`` command ask for it (they only fill it
    in; ``baseline_create`` checks every rule). See there for each field."""

    name: str
    dataset: Dataset | str
    n_instances: int
    project: str | None = None
    task_type: str | None = None
    split: str = "test"
    seed: int = 0
    options: Mapping[str, Any] | None = None
    instructions: str = ""


def baseline_create(*, actor: AbstractBaseUser | None = None, request: BaselineCreateRequest) -> BaselineStudy:
    """A draft baseline study with its seeded sample of instances, in one transaction.

    ``dataset``: a Dataset or the name of one ``actor`` may read (in ``project`` when named).
    ``task_type`` defaults to the dataset's. ``n_instances`` counts pairs (sts), items
    (classification, clustering) or queries (reranking). ``instructions`` default to the
    project's wording for the task. The study goes into ``project`` (a slug), else the dataset's
    project, else the caller's (``project_for_new``), which ``actor`` must be able to change; it is
    published to the Argilla workspace named after it, and ``dataset`` must be in that project or
    shared. Raises ``ShiftlabError`` naming the wrong input.
    """
    project, name, dataset, n_instances = request.project, request.name, request.dataset, request.n_instances
    task_type, split, seed, options = request.task_type, request.split, request.seed, request.options
    instructions = request.instructions
    if isinstance(dataset, str):
        dataset = _dataset(actor, dataset, project)
    target = project_for_new(actor, project, dataset)
    task_type = task_type or dataset.task_type
    task = _baseline_check(project=target, name=name, dataset=dataset, task_type=task_type, split=split, seed=seed)
    given = options or {}
    labels = _dataset_labels(dataset) if task.asks_labels else ()
    study = BaselineStudy(
        name=name,
        dataset=dataset,
        task_type=task_type,
        split=split,
        seed=seed,
        n_instances=n_instances,
        options=task.check_options(given, labels),
        instructions=instructions.strip() or task.instructions,
        project=target,
        workspace=target.slug,
        created_by=actor,
    )
    try:
        study.full_clean(exclude=["dataset", "created_by"])
    except ValidationError as exc:
        raise ShiftlabError(f"invalid baseline study: {'; '.join(exc.messages)}") from exc
    drawn = _baseline_draw(study, task)
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
            actor=actor,
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
                "options": study.options,
            },
        )
    return study


# --- publish ---------------------------------------------------------------------------------


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
    task = baseline_task(study.task_type)
    # One annotator per dataset: a record is done once its owner submitted it.
    spec = {
        "fields": task.argilla_fields(),
        "questions": task.questions(study.options),
        "guidelines": study.instructions,
        "min_submitted": 1,
    }
    records = {r.external_id: r for r in task.records(instances)}
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
    ``baseline.move``); the answers stay in Shiftlab and count as before. ``actor`` must be able to
    change the study's project.
    """
    study = BaselineStudy.objects.select_related("project").get(pk=study.pk)
    project_require_write(actor, study.project)
    if study.status == BaselineStudy.Status.CLOSED:
        raise ConflictError(f"{study} is closed: it takes no more answers")
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


def baseline_close(*, study: BaselineStudy, actor: AbstractBaseUser | None = None, client=None) -> BaselineStudy:
    """Close a published study: a last sync of the human answers, then no more publishing, syncing
    or LLM answers, so the report of a closed study no longer changes. Closing twice is an error.
    ``actor`` must be able to change the study's project."""
    study = BaselineStudy.objects.select_related("project").get(pk=study.pk)
    project_require_write(actor, study.project)
    if study.status != BaselineStudy.Status.PUBLISHED:
        raise ShiftlabError(f"{study} is {study.status}: only a published study can be closed")
    last = baseline_sync(study=study, actor=actor, client=client)
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
