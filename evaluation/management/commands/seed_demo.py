"""Seed the single-machine demo: roles, three demo users (the annotator on the default project's
roster) and one fixture dataset per task type.

Lives in the most downstream app so that it may seed data of every app as later features land.
Idempotent: existing users keep their passwords, existing datasets are left alone.
"""

import os
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from core.commands import ShiftlabCommand
from core.projects import default_project
from core.roles import Role
from core.rosters import roster_add
from core.services import roles_sync
from corpora.models import Dataset
from corpora.services import ImportOptions, dataset_import

FIXTURES = settings.BASE_DIR / "fixtures"
DEMO_DATASETS = [
    ("demo-sts", "sts", "sts/demo-sts.csv"),
    ("demo-str", "str", "str/demo-str.csv"),
    ("demo-paraphrase-pairs", "pair_classification", "pair_classification/demo-paraphrase-pairs.jsonl"),
    ("demo-intents", "classification", "classification/demo-intents"),
    ("demo-topics", "clustering", "clustering/demo-topics.jsonl"),
    ("demo-reranking", "reranking", "reranking/demo-reranking.jsonl"),
    ("demo-retrieval", "retrieval", "retrieval/demo-retrieval"),
    ("demo-summarization", "summarization", "summarization/demo-summarization.jsonl"),
]
DEMO_USERS = [("researcher", Role.RESEARCHER), ("annotator", Role.ANNOTATOR), ("admin", Role.ADMIN)]


class Command(ShiftlabCommand):
    help = "Create demo users (researcher, annotator, admin) and import the demo fixture datasets."

    def add_arguments(self, parser):
        parser.add_argument(
            "--password",
            default=os.environ.get("SHIFTLAB_DEMO_PASSWORD", "shiftlab-demo"),
            help="Password for new demo users (default: $SHIFTLAB_DEMO_PASSWORD or shiftlab-demo).",
        )

    def handle(self, *args, **options):
        roles_sync()
        users = get_user_model()
        for username, role in DEMO_USERS:
            user, created = users.objects.get_or_create(
                username=username, defaults={"email": f"{username}@example.org"}
            )
            if created:
                user.set_password(options["password"])
                user.is_staff = user.is_superuser = role is Role.ADMIN
                user.save()
            user.groups.add(Group.objects.get(name=role))
            self.stdout.write(f"user {username:<11} role {role:<11} {'created' if created else 'exists'}")
        # The demo's studies live in the default project: its annotator is on that roster.
        roster_add(project=default_project(), user=users.objects.get(username="annotator"), actor=None)
        researcher = users.objects.get(username="researcher")
        for name, task, relative in DEMO_DATASETS:
            if Dataset.objects.filter(name=name).exists():
                continue
            dataset = dataset_import(
                source=Path(FIXTURES / relative),
                task=task,
                name=name,
                options=ImportOptions(),
                description="Demo data written for Shiftlab.",
                created_by=researcher,
            )
            self.stdout.write(f"dataset {dataset.name:<22} {dataset.task_type:<20} {dataset.n_items} items")
