"""Dataset import throughput: Shiftlab's full import (read, validate, hash, store in one
transaction) against the floor of merely parsing the same file with pandas, in the same run.

Usage: .venv/bin/python benchmarks/import_speed.py [--database-url URL]
Uses ../shared/data when present (STS-B test CSV, Banking77, TwitterURLCorpus); prints items/s
and the ratio of import time to parse time for each file.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "data"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", help="Import into this database instead of a fresh SQLite file.")
    args = parser.parse_args()
    os.environ["SHIFTLAB_DATA_DIR"] = tempfile.mkdtemp(prefix="shiftlab-bench-")
    if args.database_url:
        os.environ["DATABASE_URL"] = args.database_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shiftlab.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    import pandas as pd
    from django.core.management import call_command
    from django.db import connection

    from corpora.models import Dataset
    from corpora.services import ImportOptions, dataset_import

    call_command("migrate", verbosity=0)
    cases = [
        (
            "STS-B en test",
            SHARED / "stsb-multi-mt/stsb-en-test.csv",
            "sts",
            ImportOptions(columns=["sentence1", "sentence2", "score"]),
            lambda p: pd.read_csv(p, header=None),
        ),
        (
            "Banking77 train+test",
            SHARED / "banking77",
            "classification",
            ImportOptions(field_map={"label": "category"}),
            lambda p: pd.concat([pd.read_csv(p / "train.csv"), pd.read_csv(p / "test.csv")]),
        ),
        (
            "TwitterURLCorpus",
            SHARED / "twitterurlcorpus/test.jsonl",
            "pair_classification",
            ImportOptions(),
            lambda p: pd.read_json(p, lines=True),
        ),
    ]
    if not SHARED.is_dir():
        cases = [
            ("demo STS fixture", ROOT / "fixtures/sts/demo-sts.csv", "sts", ImportOptions(), lambda p: pd.read_csv(p))
        ]
    print(f"database: {connection.vendor}")
    print(f"{'file':<24} {'items':>8} {'parse s':>9} {'import s':>9} {'items/s':>10} {'ratio':>7}")
    for index, (label, path, task, options, parse) in enumerate(cases):
        start = time.perf_counter()
        parse(path)
        parse_seconds = time.perf_counter() - start
        start = time.perf_counter()
        dataset = dataset_import(source=path, task=task, name=f"bench-{index}", options=options)
        import_seconds = time.perf_counter() - start
        print(
            f"{label:<24} {dataset.n_items:>8} {parse_seconds:>9.3f} {import_seconds:>9.3f} "
            f"{dataset.n_items / import_seconds:>10.0f} {import_seconds / parse_seconds:>6.1f}x"
        )
    Dataset.objects.all().delete()


if __name__ == "__main__":
    main()
