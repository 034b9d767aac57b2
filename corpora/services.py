from __future__ import annotations

import logging
import shutil
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.db.models import F, ProtectedError, RestrictedError
from django.utils import timezone

from core.errors import ConflictError, ShiftlabError, TooLargeError
from core.job_services import job_fail, job_note
from core.models import Project
from core.projects import (
    ProjectAccessError,
    default_project,
    project_can_manage,
    project_for_new,
    project_require_write,
)
from core.services import audit_record
from core.task_policy import dispatch_on_commit, task_named
from corpora.bounded_import import ChildRead, parse_in_child
from corpora.hub import read_hub
from corpora.limits import ReadLimits
from corpora.models import ControlTrust, Dataset, DatasetImport, DatasetItem, dataset_name_validator
from corpora.parsing import OPTION_NAMES, ParsedDataset, parse_tables
from corpora.readers import megabytes, read_source
from corpora.rows import RawTable
from corpora.task_types import TaskType, task_spec

BULK_BATCH_SIZE = 2000
# A job whose worker died this many times is failed rather than handed to another worker.
IMPORT_MAX_ATTEMPTS = 3
logger = logging.getLogger(__name__)


class UploadTooLargeError(TooLargeError):
    """The uploaded files together exceed ``DATASET_MAX_UPLOAD_MB``."""

    code = "upload_too_large"


class DatasetInUseError(ConflictError):
    """The dataset is referenced by runs, results or studies that must not lose it."""

    code = "dataset_in_use"


@dataclass(frozen=True)
class ImportOptions:
    """How to read a source. ``fmt`` "hf" reads ``source`` with ``datasets.load_dataset``;
    ``interface`` (a key of ``corpora.parsing.OPTION_NAMES``) is where the import was started, so
    that its messages name that interface's options."""

    language: str = "en"
    fmt: str | None = None
    columns: Sequence[str] | None = None
    split: str | None = None
    field_map: Mapping[str, str] | None = None
    hf_config: str | None = None
    hf_revision: str | None = None
    interface: str = "command"

    @classmethod
    def from_input(cls, data: Mapping, *, interface: str) -> ImportOptions:
        """The options an import form ("fmt") or the API's serializer ("format") validated."""
        return cls(
            language=data["language"],
            fmt=data.get("format") or data.get("fmt") or None,
            columns=data.get("columns"),
            split=data.get("split") or None,
            field_map=data.get("field_map"),
            interface=interface,
        )

    def as_dict(self) -> dict:
        return {
            "language": self.language,
            "fmt": self.fmt,
            "columns": list(self.columns) if self.columns else None,
            "split": self.split,
            "field_map": dict(self.field_map) if self.field_map else None,
            "hf_config": self.hf_config,
            "hf_revision": self.hf_revision,
            "interface": self.interface,
        }


def dataset_import(
    *,
    source: str | Path,
    task: str | TaskType,
    name: str,
    options: ImportOptions | None = None,
    description: str = "",
    created_by: AbstractBaseUser | None = None,
    source_label: str | None = None,
    project: Project | None = None,
    label: str | None = None,
    memory_ceiling: bool = False,
) -> Dataset:
    """Read, validate and store a dataset in one transaction: on any problem nothing is written.

    The dataset records ``source_label`` as its source, else the resolved path or the hub id. It
    goes into ``project`` (the caller has checked it may write there), else the default project.
    Messages name the files as ``label`` says (``corpora.readers.read_source``). Reading is bounded
    by the ``DATASET_MAX_*`` settings; with ``memory_ceiling`` (import jobs) files are read and
    checked in a child process capped at ``DATASET_IMPORT_MEMORY_MB``.

    Raises ``ShiftlabError`` (``DatasetFormatError`` for bad files, ``ImportMemoryError`` over the
    ceiling) with a message naming the file, the line and the problem.
    """
    options = options or ImportOptions()
    task = TaskType(task_spec(task).task)
    dataset_name_check(name, options.interface, project)
    if memory_ceiling and settings.DATASET_IMPORT_MEMORY_MB > 0 and options.fmt != "hf":
        parsed = parse_in_child(
            ChildRead(
                source=str(source),
                task=task.value,
                label=label,
                limits=import_read_limits(),
                language=options.language,
                fmt=options.fmt,
                columns=options.columns,
                split=options.split,
                field_map=options.field_map,
                interface=options.interface,
            ),
            memory_bytes=settings.DATASET_IMPORT_MEMORY_MB * 2**20,
            cpu_seconds=settings.DATASET_IMPORT_CPU_S or None,
            timeout_s=max(60, settings.CELERY_TASK_SOFT_TIME_LIMIT - 60),
        )
    else:
        parsed = parse_tables(
            _read(source, options, label),
            task=task,
            language=options.language,
            split=options.split,
            field_map=options.field_map,
            option_names=OPTION_NAMES[options.interface],
        )
    return dataset_store(
        parsed,
        name=name,
        source=str(source),
        source_label=source_label,
        options=options,
        description=description,
        created_by=created_by,
        project=project,
    )


def dataset_delete(*, dataset: Dataset, actor: AbstractBaseUser | None) -> None:
    """Delete a dataset and its items. Raises ``DatasetInUseError``, changing nothing, while
    transformation runs, benchmark results, studies... still point at it."""
    try:
        with transaction.atomic():
            audit_record(
                actor=actor, verb="dataset.delete", obj=dataset, payload={"content_hash": dataset.content_hash}
            )
            dataset.delete()
    except ProtectedError as exc:
        raise DatasetInUseError(_in_use_message(dataset, exc.protected_objects)) from None
    except RestrictedError as exc:
        raise DatasetInUseError(_in_use_message(dataset, exc.restricted_objects)) from None


def dataset_share_set(*, dataset: Dataset, shared: bool, actor: AbstractBaseUser | None) -> Dataset:
    """Share ``dataset`` with every project (its researchers may read it and use it as input), or
    stop sharing it. Only admins and the owners and members of its project may: others get
    ``ProjectAccessError``. Setting the value it already has changes and records nothing."""
    project_require_write(actor, dataset.project)
    if dataset.shared == shared:
        return dataset
    with transaction.atomic():
        Dataset.objects.filter(pk=dataset.pk).update(shared=shared)
        dataset.shared = shared
        audit_record(
            actor=actor,
            verb="dataset.share" if shared else "dataset.unshare",
            obj=dataset,
            payload={"project": dataset.project.slug},
        )
    return dataset


def trust_command(dataset: Dataset, project: Project) -> str:
    """The command that makes ``project`` trust ``dataset`` for controls (for messages)."""
    return f"manage.py corpora trust {dataset.name} --of {dataset.project.slug} --project {project.slug} --as OWNER"


def dataset_trust_for_controls(
    *, actor: AbstractBaseUser | None, project: Project, dataset: Dataset, trusted: bool
) -> ControlTrust | None:
    """Let the shared ``dataset`` of another project supply control items (gold pairs, unrelated
    texts) to ``project``'s studies (``trusted``), or withdraw that. Only admins and the owners of
    ``project`` may (``ProjectAccessError`` otherwise): the dataset's own researchers can share it,
    never make another project take their answers. Audited in ``project``; setting what is already
    so changes and records nothing. Returns the trust, None once revoked."""
    if not project_can_manage(actor, project):
        raise ProjectAccessError(
            f"Only admins and owners of {project.slug!r} choose which shared datasets supply its control items."
        )
    if dataset.project_id == project.pk:
        raise ShiftlabError(
            f"{dataset.name} belongs to {project.slug}: a project's own datasets supply its controls without trust."
        )
    if trusted and not dataset.shared:
        raise ShiftlabError(
            f"{dataset.name} of {dataset.project.slug} is not shared: its project must share it first "
            f"(manage.py corpora share {dataset.name}) before {project.slug} can trust it for controls."
        )
    existing = ControlTrust.objects.filter(project=project, dataset=dataset).first()
    if trusted == (existing is not None):
        return existing
    payload = {"dataset": dataset.name, "dataset_project": dataset.project.slug, "dataset_id": dataset.pk}
    with transaction.atomic():
        if trusted:
            existing = ControlTrust.objects.create(project=project, dataset=dataset, granted_by=actor)
        else:
            existing.delete()
            existing = None
        audit_record(
            actor=actor,
            verb="dataset.control_trust" if trusted else "dataset.control_trust.revoke",
            obj=dataset,
            payload=payload,
            project=project,
        )
    return existing


def _in_use_message(dataset: Dataset, users: Iterable) -> str:
    counts = Counter(type(obj)._meta for obj in users)
    uses = [
        f"{n} {meta.verbose_name if n == 1 else meta.verbose_name_plural}"
        for meta, n in sorted(counts.items(), key=lambda pair: str(pair[0].verbose_name))
    ]
    listed = uses[0] if len(uses) == 1 else f"{', '.join(uses[:-1])} and {uses[-1]}"
    return f"Dataset {dataset.name!r} is still used by {listed}: delete those first. Nothing was deleted."


def dataset_import_source(
    *,
    actor: AbstractBaseUser | None,
    project: str | None,
    source: str | Path,
    task: str | TaskType,
    name: str,
    options: ImportOptions,
    description: str = "",
) -> Dataset:
    """Import a file, folder or hub dataset on the server, for ``actor`` (None: the system), into
    the project named by slug, else the one :func:`core.projects.project_for_new` picks. The
    command's entry; raises ``ShiftlabError`` and writes nothing on any problem."""
    return dataset_import(
        source=source,
        task=task,
        name=name,
        options=options,
        description=description,
        created_by=actor,
        project=project_for_new(actor, project, field="project"),
    )


def dataset_import_job_create(
    *,
    actor: AbstractBaseUser | None,
    project: str | None,
    files: Iterable[UploadedFile],
    task: str,
    name: str,
    options: ImportOptions,
) -> DatasetImport:
    """Store uploaded files and queue their import, for ``actor`` into the project named by slug,
    else the one :func:`core.projects.project_for_new` picks (the page's and the API's entry).
    Several files form a folder: train/test files for classification, or corpus.jsonl +
    queries.jsonl + <split>.tsv for retrieval."""
    chosen = project_for_new(actor, project, field="project")
    dataset_name_check(name, options.interface, chosen)
    task_spec(task)
    files = list(files)
    if not files:
        raise ShiftlabError("Choose at least one file to upload.")
    names = [Path(f.name).name for f in files]
    if len(set(names)) != len(names):
        raise ShiftlabError(
            f"Two uploaded files share a name ({', '.join(sorted(names))}): each file needs its own name."
        )
    _check_upload_size(files, names)
    upload_dir = Path(settings.MEDIA_ROOT) / "imports" / uuid.uuid4().hex
    upload_dir.mkdir(parents=True)
    try:
        for upload in files:
            target = upload_dir / Path(upload.name).name
            with target.open("wb") as handle:
                for chunk in upload.chunks():
                    handle.write(chunk)
        with transaction.atomic():
            job = DatasetImport.objects.create(
                name=name,
                task_type=task,
                upload_dir=str(upload_dir),
                options=options.as_dict(),
                created_by=actor,
                project=chosen,
            )
            dataset_import_job_dispatch(job_id=job.pk)
    except BaseException:
        shutil.rmtree(upload_dir, ignore_errors=True)
        raise
    job.refresh_from_db()  # a broker outage at dispatch left a note on it
    return job


def dataset_import_job_dispatch(*, job_id: int, reclaim: bool = False) -> None:
    """Queue the job's import after commit. When the broker is unreachable the job stays pending
    with a note and keeps its files: the stuck-job sweeper queues it again. ``reclaim`` lets the
    task take over a job left "running" by a worker that is gone (as a broker redelivery does)."""
    dispatch_on_commit(
        lambda: task_named(
            "corpora.run_dataset_import", job_id, **({"reclaim": reclaim} if reclaim else {})
        ).apply_async(),
        on_broker_down=lambda message: job_note(
            model=DatasetImport,
            job_id=job_id,
            message=(
                f"{message}. The uploaded files are kept: the import is queued again automatically once the "
                "broker answers."
            ),
        ),
    )


def dataset_import_job_fail(*, job_id: int, reason: str) -> None:
    """Fail an unfinished import with ``reason`` (its uploaded files go: nothing will read them)."""
    job = DatasetImport.objects.get(pk=job_id)
    if job_fail(model=DatasetImport, job_id=job_id, message=f"{reason}. Nothing was imported: upload the files again."):
        shutil.rmtree(job.upload_dir, ignore_errors=True)


def dataset_import_job_run(*, job_id: int, redelivered: bool = False) -> DatasetImport:
    """Run a queued import once. A finished job, or one another worker is running, is left alone.

    ``redelivered`` (the broker handed the task out again because its worker died) lets a job
    stuck in "running" be claimed again: the import is one transaction, so the dead worker
    wrote nothing. After ``IMPORT_MAX_ATTEMPTS`` claims the job is failed instead: a file that
    kills its worker would otherwise be redelivered forever.
    """
    claimable = [DatasetImport.Status.PENDING] + ([DatasetImport.Status.RUNNING] if redelivered else [])
    claimed = DatasetImport.objects.filter(pk=job_id, status__in=claimable, attempts__lt=IMPORT_MAX_ATTEMPTS).update(
        status=DatasetImport.Status.RUNNING, started_at=timezone.now(), attempts=F("attempts") + 1
    )
    job = DatasetImport.objects.get(pk=job_id)
    if not claimed:
        if redelivered and job.status == DatasetImport.Status.RUNNING and job.attempts >= IMPORT_MAX_ATTEMPTS:
            message = (
                f"The import crashed its worker {job.attempts} times; check the file: a very large file, or a "
                "Parquet file that decodes to far more data than its size, can exhaust the worker's memory. "
                "Split it into smaller files and upload them again."
            )
            _finish(job, DatasetImport.Status.FAILED, message)
        if job.status in (DatasetImport.Status.SUCCEEDED, DatasetImport.Status.FAILED):
            # A worker that died after recording the outcome may have left the files behind.
            shutil.rmtree(job.upload_dir, ignore_errors=True)
        return job
    upload_dir = Path(job.upload_dir)
    entries = sorted(upload_dir.iterdir()) if upload_dir.is_dir() else []
    source: Path = entries[0] if len(entries) == 1 else upload_dir
    options = ImportOptions(**{k: v for k, v in job.options.items() if v is not None})
    try:
        # The dataset and the job's success commit together: a worker dying in between can neither
        # leave a stored dataset behind a job still "running" nor make a redelivery import it twice.
        with transaction.atomic():
            dataset = dataset_import(
                source=source,
                task=job.task_type,
                name=job.name,
                options=options,
                created_by=job.created_by,
                project=job.project,
                # The uploaded files' names: their storage folder is the server's business and is gone
                # once the import is over.
                source_label=", ".join(entry.name for entry in entries),
                label=source.name if source != upload_dir else "",
                memory_ceiling=True,
            )
            job.dataset = dataset
            _finish(job, DatasetImport.Status.SUCCEEDED, "")
    except ShiftlabError as exc:
        job.dataset = None
        _finish(job, DatasetImport.Status.FAILED, _relative_message(str(exc), upload_dir))
    except Exception:
        # Never leave a job "running" forever: record the failure, then let the error surface.
        logger.exception("dataset import job %s crashed", job_id)
        job.dataset = None
        _finish(job, DatasetImport.Status.FAILED, "Internal error while importing: see the server log.")
        shutil.rmtree(upload_dir, ignore_errors=True)
        raise
    # The uploaded copy is not needed once the outcome is known: the dataset holds the data, and a
    # failed job keeps its error message. A crash before this line is tidied by a later delivery.
    shutil.rmtree(upload_dir, ignore_errors=True)
    return job


def _finish(job: DatasetImport, status: str, error: str) -> None:
    # A message can quote the file (a column name of a header that repeats it): PostgreSQL text takes
    # no NUL byte, so it is written as \x00, as the reader's messages show other control characters.
    job.status, job.error = status, error.replace("\x00", "\\x00")
    job.finished_at = timezone.now()
    job.save(update_fields=["status", "error", "dataset", "finished_at"])


def _check_upload_size(files: Sequence[UploadedFile], names: Sequence[str]) -> None:
    # Django has spooled the request to a temporary file it deletes afterwards: refusing here
    # means nothing reaches the media folder or the database.
    limit_mb = settings.DATASET_MAX_UPLOAD_MB
    size = sum(f.size for f in files)
    if size > limit_mb * 2**20:
        raise UploadTooLargeError(
            f"The upload is {megabytes(size)} ({', '.join(names)}), over the {limit_mb} MB limit "
            "(SHIFTLAB_MAX_UPLOAD_MB); nothing was stored. Upload smaller files, or import the dataset on the "
            "server with: python manage.py corpora import PATH --task TASK --name NAME"
        )


def _relative_message(message: str, upload_dir: Path) -> str:
    # Show "stsb.csv, line 3" rather than the server's storage path.
    return message.replace(f"{upload_dir}/", "").replace(str(upload_dir), "upload")


def dataset_name_check(name: str, interface: str, project: Project | None) -> None:
    """Names are unique per project: another project's name is free and never revealed. A name of a
    shared dataset (which every project reads, so naming it reveals nothing) is refused too, so
    that a name means one dataset to the project's researchers."""
    try:
        dataset_name_validator(name)
    except ValidationError:
        raise ShiftlabError(
            f"Dataset name {name!r} is not allowed: use letters, digits, '.', '_' and '-', "
            "starting with a letter or digit."
        ) from None
    project = project or default_project()
    if Dataset.objects.filter(name=name, project=project).exists():
        raise ShiftlabError(
            f"A dataset named {name!r} already exists in project {project.slug}: choose another name, or delete "
            f"it first ({OPTION_NAMES[interface].delete.format(name=name)})."
        )
    if Dataset.objects.filter(name=name, shared=True).exists():
        raise ShiftlabError(
            f"A shared dataset is named {name!r}: every project reads it under that name, so choose another name."
        )


def import_read_limits() -> ReadLimits:
    """What one import may decode, from the ``DATASET_MAX_*`` settings."""
    return ReadLimits(
        max_cell_bytes=settings.DATASET_MAX_CELL_KB * 2**10,
        max_row_bytes=settings.DATASET_MAX_ROW_KB * 2**10,
        max_total_bytes=settings.DATASET_MAX_UNCOMPRESSED_MB * 2**20,
        max_rows=settings.DATASET_MAX_ROWS,
    )


def _read(source: str | Path, options: ImportOptions, label: str | None) -> list[RawTable]:
    if options.fmt == "hf":
        return read_hub(
            str(source),
            config=options.hf_config,
            split=options.split,
            revision=options.hf_revision,
            limits=import_read_limits(),
        )
    return read_source(
        source,
        fmt=options.fmt,
        columns=options.columns,
        split=options.split,
        option_names=OPTION_NAMES[options.interface],
        limits=import_read_limits(),
        label=label,
    )


@transaction.atomic
def dataset_store(
    parsed: ParsedDataset,
    *,
    name: str,
    source: str,
    source_label: str | None,
    options: ImportOptions,
    description: str,
    created_by: AbstractBaseUser | None,
    project: Project | None,
) -> Dataset:
    dataset = Dataset.objects.create(
        name=name,
        task_type=parsed.task.value,
        description=description,
        languages=parsed.languages,
        splits=parsed.splits,
        source=(source_label or _display_source(source))[:500],
        source_format=options.fmt or _format_of(source),
        content_hash=parsed.content_hash,
        n_items=len(parsed.items),
        metadata=parsed.metadata,
        created_by=created_by,
        **_in_project(project),
    )
    DatasetItem.objects.bulk_create(
        (
            DatasetItem(
                dataset=dataset,
                split=item.split,
                kind=item.kind,
                item_id=item.item_id,
                position=position,
                payload=item.payload,
                gold=item.gold,
                language=item.language,
                text_hashes=item.text_hashes,
                content_hash=item.content_hash,
            )
            for position, item in enumerate(parsed.items)
        ),
        batch_size=BULK_BATCH_SIZE,
    )
    audit_record(
        actor=created_by,
        verb="dataset.import",
        obj=dataset,
        payload={
            "source": dataset.source,
            "content_hash": dataset.content_hash,
            "n_items": dataset.n_items,
            "options": options.as_dict(),
        },
    )
    return dataset


def _in_project(project: Project | None) -> dict[str, Project]:
    # No project named: the model's default (the open default project) applies.
    return {"project": project} if project is not None else {}


def _format_of(source: str) -> str:
    path = Path(source)
    if path.is_dir():
        return "beir" if (path / "corpus.jsonl").exists() else "folder"
    return path.suffix.lstrip(".").lower() or "unknown"


def _display_source(source: str) -> str:
    path = Path(source)
    return str(path.resolve()) if path.exists() else source
