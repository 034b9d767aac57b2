"""Peak memory of a control pool upload (issue 27, finding 9b): what the study page's and the API's
lock do with an uploaded pool, for a pool of N MB of JSON Lines.

Each size runs in a fresh process that sets Django up, builds the upload as Django hands it to a
view (a ``TemporaryUploadedFile`` spooled to disk, as for any upload over
``FILE_UPLOAD_MAX_MEMORY_SIZE``), reads it the way the lock does, and reports its peak resident
set (``ru_maxrss``) and that of the same process doing everything but the read (baseline).

    .venv/bin/python benchmarks/control_pool_memory.py [--mb 100 5]

Prints one line per size: peak, baseline, the read's share, and the outcome (pairs read, or the
refusal's message).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = """
import json, resource, sys
import django
django.setup()
from django.core.files.uploadedfile import TemporaryUploadedFile
from annotation.studies.control_pool import control_pool_from_upload

megabytes, measure = int(sys.argv[1]), sys.argv[2] == "read"
row = json.dumps({"text_a": "The cat sat on the mat by the door.", "text_b": "A dog ran far away.",
                  "kind": "easy_negative"})
upload = TemporaryUploadedFile("pool.jsonl", "application/jsonl", 0, "utf-8")
written = n = 0
while written < megabytes * 2**20:
    line = row.replace("door", f"door {n}") + "\\n"
    upload.write(line.encode())
    written += len(line)
    n += 1
upload.size = written
upload.seek(0)
outcome = "not read"
if measure:
    try:
        outcome = f"{len(control_pool_from_upload(upload))} pairs"
    except Exception as exc:
        outcome = f"refused: {str(exc)[:160]}"
print(json.dumps({"peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "outcome": outcome}))
"""


def measure(megabytes: int, mode: str) -> dict:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "shiftlab.settings"}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(megabytes), mode],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, nargs="+", default=[100, 5])
    args = parser.parse_args()
    for megabytes in args.mb:
        base = measure(megabytes, "baseline")
        read = measure(megabytes, "read")
        print(
            f"{megabytes} MB pool: peak {read['peak_mb']:.0f} MB, baseline {base['peak_mb']:.0f} MB, "
            f"read {read['peak_mb'] - base['peak_mb']:.0f} MB; {read['outcome']}"
        )


if __name__ == "__main__":
    main()
