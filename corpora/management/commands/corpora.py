import json
from collections.abc import Callable

from django.core.management.base import CommandError, CommandParser

from core.commands import ShiftlabCommand
from core.projects import project_require_write, projects_readable, user_by_name
from corpora.models import Dataset
from corpora.mteb_services import dataset_import_mteb
from corpora.readers import FORMATS
from corpora.selectors import dataset_get, dataset_item_list, dataset_list
from corpora.services import (
    ImportOptions,
    dataset_delete,
    dataset_import_source,
    dataset_share_set,
    dataset_trust_for_controls,
)
from corpora.task_types import TaskType


def _field_map(values: list[str]) -> dict[str, str]:
    mapping = {}
    for value in values:
        field, sep, column = value.partition("=")
        if not sep or not field or not column:
            raise CommandError(f"--map expects FIELD=COLUMN (e.g. label=category), got {value!r}")
        mapping[field.strip()] = column.strip()
    return mapping


class Command(ShiftlabCommand):
    help = (
        "Import, list, show, share, trust (for another project's control items) and delete benchmark datasets. "
        "With --as USER the command acts as that "
        "researcher (their projects only); without it, as the system (all projects)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)

        imp = sub.add_parser("import", help="Import a file, folder, Hugging Face dataset or MTEB task.")
        imp.add_argument(
            "path", nargs="?", help="File, folder (train/test files or BEIR layout), or hub id with --format hf."
        )
        imp.add_argument("--task", choices=[t.value for t in TaskType], help="Task type (with --mteb: from MTEB).")
        imp.add_argument("--name", help="Unique dataset name, e.g. stsb-en-test (with --mteb: the task name).")
        imp.add_argument("--language", default="en", help="Language code of the texts (default: en).")
        imp.add_argument("--format", dest="fmt", choices=FORMATS, help="Override format detection.")
        imp.add_argument("--columns", help="Comma-separated column names of a headerless file.")
        imp.add_argument("--split", help="Split name for a single file (default: test) or hub split.")
        imp.add_argument(
            "--map",
            action="append",
            default=[],
            metavar="FIELD=COLUMN",
            help="Read FIELD from COLUMN, e.g. --map label=category (repeatable).",
        )
        imp.add_argument("--description", default="")
        imp.add_argument("--hf-config", help="Hugging Face dataset configuration name.")
        imp.add_argument("--hf-revision", help="Hugging Face dataset revision (commit or tag).")
        mteb = imp.add_argument_group("MTEB tasks by name (instead of PATH)")
        mteb.add_argument("--mteb", metavar="TASK", help="An MTEB task name, e.g. STSBenchmark, SciFact.")
        mteb.add_argument("--subset", help="The subset (eval language) of a multilingual task, e.g. en-de.")
        mteb.add_argument(
            "--from-dir",
            help="Local copy of the task's hub dataset (default: SHIFTLAB_MTEB_DATA_DIR/TASK, else the hub).",
        )

        imp.add_argument(
            "--project",
            help="Slug of the project to import into (default: the --as user's one project, else shiftlab).",
        )

        listing = sub.add_parser("list", help="List datasets.")
        listing.add_argument("--json", action="store_true")
        listing.add_argument("--project", help="Only the datasets of this project (by slug).")

        show = sub.add_parser("show", help="Show one dataset and a few items.")
        show.add_argument("name")
        show.add_argument("--items", type=int, default=3, help="How many items to print (default 3).")
        show.add_argument("--json", action="store_true")

        delete = sub.add_parser("delete", help="Delete a dataset and its items.")
        delete.add_argument("name")

        share = sub.add_parser("share", help="Share a dataset with every project (read-only), or stop with --off.")
        share.add_argument("name")
        share.add_argument("--off", action="store_true", help="Stop sharing: only its own project reads it.")

        trust = sub.add_parser(
            "trust",
            help="Let a shared dataset of another project supply a project's control items (project owners and "
            "admins only; audited), or stop with --revoke. Sharing alone never does.",
        )
        trust.add_argument("name", help="The shared dataset.")
        trust.add_argument("--project", required=True, help="Slug of the project whose studies may draw from it.")
        trust.add_argument(
            "--of", dest="of", metavar="PROJECT", help="Slug of the dataset's project, when several share its name."
        )
        trust.add_argument("--revoke", action="store_true", help="Stop drawing this project's controls from it.")

        for action in (imp, listing, show, delete, share, trust):
            action.add_argument(
                "--as",
                dest="as_user",
                metavar="USER",
                help="Act as this user: only their projects' (and shared) datasets exist, changes need their rights.",
            )

    def handle(self, *args, **options):
        self.user = user_by_name(options["as_user"]) if options.get("as_user") else None
        return getattr(self, f"_{options['action']}")(options)

    def _import(self, o) -> None:
        service, inputs = self._mteb_inputs(o) if o["mteb"] else self._source_inputs(o)
        self.refused_heading = "Nothing was imported."
        dataset = service(actor=self.user, project=o["project"], **inputs)
        self._imported(dataset)

    @staticmethod
    def _source_inputs(o) -> tuple[Callable[..., Dataset], dict]:
        if o["subset"] or o["from_dir"]:
            raise CommandError("--subset and --from-dir go with --mteb TASK.")
        if not o["path"] or not o["task"] or not o["name"]:
            raise CommandError("Pass PATH, --task and --name (or --mteb TASK to import an MTEB task by name).")
        options = ImportOptions(
            language=o["language"],
            fmt=o["fmt"],
            columns=[c.strip() for c in o["columns"].split(",")] if o["columns"] else None,
            split=o["split"],
            field_map=_field_map(o["map"]) or None,
            hf_config=o["hf_config"],
            hf_revision=o["hf_revision"],
        )
        inputs = {"source": o["path"], "task": o["task"], "name": o["name"], "description": o["description"]}
        return dataset_import_source, {**inputs, "options": options}

    @staticmethod
    def _mteb_inputs(o) -> tuple[Callable[..., Dataset], dict]:
        if o["path"]:
            raise CommandError(f"Pass either PATH ({o['path']}) or --mteb {o['mteb']}, not both.")
        inputs = {"task_name": o["mteb"], "name": o["name"], "subset": o["subset"], "from_dir": o["from_dir"]}
        return dataset_import_mteb, {**inputs, "task": o["task"], "description": o["description"] or None}

    def _imported(self, dataset: Dataset) -> None:
        splits = ", ".join(f"{k}: {v}" for k, v in dataset.splits.items())
        self.stdout.write(
            self.style.SUCCESS(
                f"Imported {dataset.n_items} items into {dataset.name} (project {dataset.project.slug}; "
                f"{dataset.task_type}; {splits}; "
                f"languages {', '.join(dataset.languages)}; content hash {dataset.content_hash[:12]})"
            )
        )

    def _list(self, o) -> None:
        datasets = list(dataset_list(user=self.user, project=o["project"]))
        if o["json"]:
            self.stdout.write(json.dumps([_summary(d) for d in datasets], indent=2))
            return
        if not datasets:
            self.stdout.write(
                "No datasets yet. Import one with: python manage.py corpora import PATH --task sts --name NAME"
            )
            return
        self.stdout.write(f"{'name':<32} {'project':<20} {'task':<20} {'items':>8}  languages  hash")
        for d in datasets:
            project = d.project.slug + (" (shared)" if d.shared else "")
            self.stdout.write(
                f"{d.name:<32} {project:<20} {d.task_type:<20} {d.n_items:>8}  {','.join(d.languages):<9}  "
                f"{d.content_hash[:12]}"
            )

    def _show(self, o) -> None:
        dataset = self._get(o["name"])
        items = list(dataset_item_list(dataset=dataset)[: max(o["items"], 0)])
        if o["json"]:
            summary = _summary(dataset) | {
                "items": [
                    {"split": i.split, "kind": i.kind, "id": i.item_id, "payload": i.payload, "gold": i.gold}
                    for i in items
                ]
            }
            self.stdout.write(json.dumps(summary, indent=2, ensure_ascii=False))
            return
        for key, value in _summary(dataset).items():
            self.stdout.write(f"{key:>14}: {value}")
        for item in items:
            self.stdout.write(
                f"  [{item.split}/{item.item_id}] {json.dumps(item.payload, ensure_ascii=False)[:160]}"
                f"  gold={item.gold}"
            )

    def _delete(self, o) -> None:
        dataset = self._get(o["name"])
        project_require_write(self.user, dataset.project)
        dataset_delete(dataset=dataset, actor=self.user)
        self.stdout.write(self.style.SUCCESS(f"Deleted {o['name']}."))

    def _share(self, o) -> None:
        dataset = self._get(o["name"])
        dataset_share_set(dataset=dataset, shared=not o["off"], actor=self.user)
        if dataset.shared:
            self.stdout.write(self.style.SUCCESS(f"{dataset.name} is shared: every project's researchers may read it."))
        else:
            self.stdout.write(
                self.style.SUCCESS(f"{dataset.name} is not shared: only {dataset.project.slug} reads it.")
            )

    def _trust(self, o) -> None:
        project = projects_readable(self.user).filter(slug=o["project"]).first()
        if project is None:
            raise CommandError(f"No project {o['project']!r} that you belong to. See: python manage.py project list")
        readable = dataset_list(user=self.user).filter(name=o["name"], shared=True)
        trusted = Dataset.objects.filter(name=o["name"], control_trusts__project=project)
        found = {d.pk: d for d in [*readable, *trusted.select_related("project")] if d.project_id != project.pk}
        if o["of"]:
            found = {pk: d for pk, d in found.items() if d.project.slug == o["of"]}
        if not found:
            raise CommandError(
                f"No shared dataset named {o['name']!r} outside project {project.slug}"
                + (f" in project {o['of']!r}" if o["of"] else "")
                + ". See: python manage.py corpora list"
            )
        if len(found) > 1:
            slugs = ", ".join(sorted(d.project.slug for d in found.values()))
            raise CommandError(f"Several shared datasets are named {o['name']!r} (projects {slugs}): add --of PROJECT.")
        dataset = next(iter(found.values()))
        dataset_trust_for_controls(actor=self.user, project=project, dataset=dataset, trusted=not o["revoke"])
        where = f"{dataset.name} of {dataset.project.slug}"
        if o["revoke"]:
            self.stdout.write(self.style.SUCCESS(f"{project.slug} no longer draws control items from {where}."))
        else:
            self.stdout.write(
                self.style.SUCCESS(f"{project.slug} may draw control items (gold pairs, texts) from {where}.")
            )

    def _get(self, name: str) -> Dataset:
        try:
            return dataset_get(name=name, user=self.user)
        except Dataset.DoesNotExist:
            raise CommandError(f"No dataset named {name!r}. See: python manage.py corpora list") from None


def _summary(d: Dataset) -> dict:
    return {
        "name": d.name,
        "task_type": d.task_type,
        "n_items": d.n_items,
        "splits": d.splits,
        "languages": d.languages,
        "source": d.source,
        "format": d.source_format,
        "content_hash": d.content_hash,
        "project": d.project.slug,
        "shared": d.shared,
        "metadata": d.metadata,
        "created_at": d.created_at.isoformat(),
    }
