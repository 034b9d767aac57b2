"""`manage.py protocol DATASET [--set NAME=VALUE ...] [--reset]`: show or set a dataset's
evaluation protocol options (samples per label, experiments, clustering settings), the ones
``mteb`` lets a task declare. Values are read as JSON (numbers, null), else as text."""

from __future__ import annotations

import json

from django.core.management.base import CommandError

from core.commands import ShiftlabCommand
from core.projects import project_require_write, user_by_name
from corpora.models import Dataset
from corpora.selectors import dataset_get
from evaluation.evaluators.options import PROTOCOL_OPTIONS
from evaluation.services import dataset_protocol_options, dataset_protocol_set


class Command(ShiftlabCommand):
    help = (
        "Show or set a dataset's evaluation protocol options (used by evaluate and benchmark runs). With --as, "
        "only datasets that user may read are found, and setting options needs an owner's or member's role."
    )

    def add_arguments(self, parser):
        parser.add_argument("dataset", help="The dataset's name.")
        parser.add_argument(
            "--set",
            action="append",
            default=[],
            metavar="NAME=VALUE",
            help="An option to set (repeat for several); the others keep their values.",
        )
        parser.add_argument("--reset", action="store_true", help="Forget every option: the defaults again.")
        self.add_actor_argument(parser)

    def handle(self, *args, dataset: str, set: list[str], reset: bool, actor: str | None = None, **options):  # noqa: A002
        user = user_by_name(actor) if actor else None
        try:
            found = dataset_get(name=dataset, user=user)
        except Dataset.DoesNotExist:
            raise CommandError(f"no dataset {dataset!r}: see `manage.py corpora list`") from None
        if set or reset:
            project_require_write(user, found.project)
        current = {} if reset else dataset_protocol_options(found)
        for assignment in set:
            name, sep, raw = assignment.partition("=")
            if not sep or not name.strip():
                raise CommandError(f"--set takes NAME=VALUE, got {assignment!r}")
            try:
                current[name.strip()] = json.loads(raw)
            except json.JSONDecodeError:
                current[name.strip()] = raw  # a word, e.g. --set protocol=legacy
        if set or reset:
            found = dataset_protocol_set(dataset=found, options=current)
        shown = dataset_protocol_options(found)
        accepted = ", ".join(sorted(PROTOCOL_OPTIONS.get(found.task_type, (None, {}))[1])) or "none"
        self.stdout.write(f"{found.name} ({found.task_type}): {json.dumps(shown) if shown else 'the defaults'}")
        self.stdout.write(f"options for {found.task_type}: {accepted}")
