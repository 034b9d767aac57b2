"""Import an MTEB task by name (issue 17): the entry of the page, the API and the command.

Orchestration over the ``corpora.mteb_tasks`` adapter (which imports ``mteb`` and torch, so this
module is only loaded when an MTEB task is imported); storing goes through
``corpora.services.dataset_store`` as a file import does.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser

from core.errors import ShiftlabError
from core.projects import project_for_new
from corpora import mteb_tasks
from corpora.models import Dataset
from corpora.parsing import OPTION_NAMES, ParsedDataset, parse_tables
from corpora.services import ImportOptions, dataset_name_check, dataset_store
from corpora.task_types import MTEB_TASK_TYPES, TaskType, task_spec


def dataset_import_mteb(
    *,
    actor: AbstractBaseUser | None = None,
    project: str | None = None,
    task_name: str,
    name: str | None = None,
    subset: str | None = None,
    from_dir: str | Path | None = None,
    task: str | TaskType | None = None,
    description: str | None = None,
    interface: str = "command",
) -> Dataset:
    """Import an MTEB task by name through mteb's task object (metadata and data loader).

    The data comes from ``from_dir`` (a local copy of the task's hub dataset), else from
    ``MTEB_DATA_DIR/<task name>`` or ``MTEB_DATA_DIR/<hub path>`` when that folder exists, else
    from the hub (or its local cache). ``name`` defaults to the task name (plus the subset);
    ``task`` may turn an STS task into "str". The task's metadata is stored under
    ``metadata["mteb"]``. The dataset is ``actor``'s (None: the system's) and goes into the
    project named by slug, else the one :func:`core.projects.project_for_new` picks. Nothing is
    written on any problem.
    """
    chosen = project_for_new(actor, project, field="project")
    mteb_task = mteb_tasks.mteb_task_get(task_name)
    subset = mteb_tasks.mteb_task_subset(mteb_task, subset, option=_SUBSET_OPTION.get(interface, "--subset"))
    name = name or (task_name if subset == mteb_tasks.DEFAULT_SUBSET else f"{task_name}-{subset}")
    dataset_name_check(name, interface, chosen)
    shiftlab_task = MTEB_TASK_TYPES[mteb_task.metadata.type]
    if task is not None:
        shiftlab_task = _mteb_task_override(task, shiftlab_task, task_name)
    local_dir = Path(from_dir) if from_dir else _mteb_local_copy(task_name, mteb_task.metadata.dataset["path"])
    # The metadata is read before loading: a local copy replaces the path the task loads from.
    info = mteb_tasks.mteb_task_info(mteb_task, subset=subset)
    info = replace(info, loaded_from=mteb_tasks.mteb_task_load(mteb_task, subset=subset, local_dir=local_dir))
    parsed = parse_tables(
        mteb_tasks.mteb_task_tables(mteb_task, subset=subset),
        task=shiftlab_task,
        language=info.language,
        option_names=OPTION_NAMES[interface],
    )
    parsed = ParsedDataset(parsed.task, parsed.items, {**parsed.metadata, "mteb": info.as_metadata()})
    options = ImportOptions(
        language=info.language, fmt="mteb", hf_config=subset, hf_revision=info.revision, interface=interface
    )
    return dataset_store(
        parsed,
        name=name,
        source=f"mteb:{task_name}",
        source_label=f"mteb:{task_name}" + ("" if subset == mteb_tasks.DEFAULT_SUBSET else f" ({subset})"),
        options=options,
        description=info.description if description is None else description,
        created_by=actor,
        project=chosen,
    )


_SUBSET_OPTION = {"command": "--subset", "api": '"mteb_subset"', "page": "the Subset field"}


def _mteb_task_override(task: str | TaskType, natural: TaskType, task_name: str) -> TaskType:
    wanted = task_spec(task)
    # The only choice MTEB leaves open: a task type scored alike (relatedness, STR, is scored like
    # similarity, STS).
    if wanted.scored_as != task_spec(natural).scored_as:
        raise ShiftlabError(
            f"MTEB task {task_name!r} is a {natural.value} task, not {wanted.task.value}: leave the task type out "
            "(it comes from MTEB), or choose sts/str for an STS task."
        )
    return wanted.task


def _mteb_local_copy(task_name: str, hub_path: str) -> Path | None:
    if not settings.MTEB_DATA_DIR:
        return None
    root = Path(settings.MTEB_DATA_DIR).expanduser()
    return next((path for path in (root / task_name, root / hub_path) if path.is_dir()), None)
