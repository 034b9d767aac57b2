"""A database created while the corpora app was still called ``datasets`` migrates intact.

``tests/data/pre-rename-2026-11.sqlite3.gz`` was written by the code before the rename (commit
f565896): ``migrate``, ``manage.py datasets import fixtures/sts/demo-sts.csv``, a user holding
``datasets.view_dataset`` and a transformation run pointing at the dataset. Migrating it with
today's code must keep every row, key, permission and audit record.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

from django.conf import settings

OLD_DATABASE = Path(__file__).parent / "data" / "pre-rename-2026-11.sqlite3.gz"
DEMO_STS_HASH = "57ed0d1f15c25031da050ef6866a13d9852fc9b91f25c8b22fbafaf8cd945219"

PROBE = """
import json
from django.contrib.auth.models import Group, User
from django.contrib.contenttypes.models import ContentType
from core.models import AuditEvent
from corpora.models import Dataset
from transforms.models import TransformRun

dataset = Dataset.objects.get(name="demo-sts")
print(json.dumps({
    "content_hash": dataset.content_hash,
    "items": dataset.items.count(),
    "run_dataset": TransformRun.objects.get().dataset.name,
    "user_perm": User.objects.get(username="olduser").has_perm("corpora.view_dataset"),
    "researcher_perms": Group.objects.get(name="researcher").permissions.filter(
        content_type__app_label="corpora").count(),
    "old_types": ContentType.objects.filter(app_label="datasets").count(),
    "audit_types": sorted(set(AuditEvent.objects.values_list("object_type", flat=True))),
}))
"""


def _manage(database: Path, *args: str) -> str:
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{database}", "SHIFTLAB_DATA_DIR": str(database.parent)}
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_a_database_from_before_the_rename_migrates_with_its_data(tmp_path):
    database = tmp_path / "old.sqlite3"
    with gzip.open(OLD_DATABASE) as source, database.open("wb") as target:
        shutil.copyfileobj(source, target)

    _manage(database, "migrate", "--no-input")

    tables = {row[0] for row in sqlite3.connect(database).execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"corpora_dataset", "corpora_datasetitem", "corpora_datasetimport"} <= tables
    assert not {t for t in tables if t.startswith("datasets_")}
    found = json.loads(_manage(database, "shell", "-c", PROBE).strip().splitlines()[-1])
    assert found == {
        "content_hash": DEMO_STS_HASH,
        "items": 40,
        "run_dataset": "demo-sts",
        "user_perm": True,
        "researcher_perms": 16,  # add/change/delete/view of the four corpora models (ControlTrust the fourth)
        "old_types": 0,
        "audit_types": ["corpora.dataset"],
    }
    # Nothing is left for makemigrations to do, and a second migrate is a no-op.
    assert "No migrations to apply" in _manage(database, "migrate", "--no-input")
