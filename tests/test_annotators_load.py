"""The annotators' load test of issue 16, bounded for CI: ``benchmarks/annotators_load.py`` with 12
annotators answering at once through a real local Argilla's API while syncs run; every submitted
response must be stored as exactly one rating (the script exits 1 otherwise). The full figure
(50 annotators) comes from running the script by hand (docs/performance.md).

Once per ``make test`` (the SQLite pass): the script makes its own database either way."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from django.conf import settings
from django.db import connection

from annotation.argilla.local_server import INSTALL_HINT, argilla_server_available
from tests.support import private_redis_url, require_or_skip

pytestmark = [pytest.mark.services, pytest.mark.heavy]


def test_a_dozen_annotators_at_once_lose_and_duplicate_no_rating(redis_url):
    if connection.vendor == "postgresql":
        pytest.skip("runs once, in the SQLite pass (the script makes its own database)")
    if not argilla_server_available():
        require_or_skip(f"the local Argilla server needs .venv-argilla: {INSTALL_HINT}")
    argilla_redis = private_redis_url(redis_url, 11)  # its own database: the script empties it
    done = subprocess.run(
        [sys.executable, "benchmarks/annotators_load.py", "--annotators", "12", "--timeout", "300"]
        + ["--argilla-redis-url", argilla_redis],
        cwd=settings.BASE_DIR,
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    figures = re.search(r"ratings stored (\d+); lost (\d+); duplicated (\d+)", out)
    assert figures and int(figures[1]) > 0 and figures[2] == figures[3] == "0", out[-3000:]
    print("\n" + "\n".join(line for line in out.splitlines() if "annotators" in line or "ratings stored" in line))
