"""A Celery worker whose tasks that wait on an LLM backend retry within seconds, for
tests/test_job_waiting.py: ``python -m tests.waiting_worker BACKOFF MAX_RETRIES worker ARGS...``.

The policy is replaced before the task modules are imported (the worker imports them when it
starts), so their ``max_retries`` and backoff are the test's; everything else is the real worker.
"""

from __future__ import annotations

import os
import sys


def main(argv: list[str]) -> None:
    backoff, max_retries, worker_argv = int(argv[0]), int(argv[1]), argv[2:]
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shiftlab.settings")
    import django

    django.setup()
    from core import task_policy

    task_policy.TRANSIENT_BACKEND = task_policy.RetryPolicy(
        backoff=backoff, backoff_max=backoff, max_retries=max_retries
    )
    from shiftlab.celery import app

    app.worker_main(worker_argv)


if __name__ == "__main__":
    main(sys.argv[1:])
