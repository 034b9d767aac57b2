"""Annotators under load: N annotators (default 50) answer their records at once through a local
Argilla server's API while study syncs run back to back; afterwards every submitted response must
be stored as exactly one rating (none lost, none duplicated). Prints throughput and latency.

Usage: .venv/bin/python benchmarks/annotators_load.py [--annotators 50] [--timeout 600]
       [--argilla-redis-url redis://127.0.0.1:6379/14] [--database-url URL]
Needs .venv-argilla (make install) and Redis; everything runs on loopback, in a fresh data
folder. Exits 1 when a response was lost or duplicated, or the run went past --timeout.
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ITEMS = 16  # transformed demo pairs rated, each by three annotators
# The records an annotator has not answered yet, asked for as Argilla's own UI does.
PENDING_FOR_ME = {
    "filters": {
        "and": [
            {"type": "terms", "scope": {"entity": "response", "property": "status"}, "values": ["pending"]},
            {"type": "terms", "scope": {"entity": "record", "property": "status"}, "values": ["pending"]},
        ]
    }
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--annotators", type=int, default=50)
    parser.add_argument("--timeout", type=float, default=600, help="Give up after this many seconds.")
    parser.add_argument("--argilla-redis-url", default="redis://127.0.0.1:6379/14")
    parser.add_argument("--database-url", help="Use this database instead of a fresh SQLite file.")
    args = parser.parse_args()
    data_dir = Path(tempfile.mkdtemp(prefix="shiftlab-load-"))
    os.environ["SHIFTLAB_DATA_DIR"] = str(data_dir)
    os.environ.pop("CELERY_BROKER_URL", None)  # syncs run here, in threads
    if args.database_url:
        os.environ["DATABASE_URL"] = args.database_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shiftlab.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    import redis
    from django.conf import settings
    from django.core.management import call_command

    from annotation.argilla.local_server import INSTALL_HINT, LocalArgillaServer, argilla_server_available

    if not argilla_server_available():
        print(f"the local Argilla server needs .venv-argilla: {INSTALL_HINT}")
        return 2
    call_command("migrate", verbosity=0)
    redis.Redis.from_url(args.argilla_redis_url).flushdb()
    api_key = secrets.token_urlsafe(24)
    server = LocalArgillaServer(
        data_dir=data_dir / "argilla",
        redis_url=args.argilla_redis_url,
        api_key=api_key,
        owner_password=secrets.token_urlsafe(12),
        log_path=data_dir / "argilla.log",
    )
    with server:
        settings.ARGILLA_API_URL, settings.ARGILLA_API_KEY = server.url, api_key
        return _run(args, deadline=time.monotonic() + args.timeout)


def _run(args, *, deadline: float) -> int:
    import httpx
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group
    from django.db import connection

    from annotation.argilla.client import API_KEY_HEADER
    from annotation.models import Annotator, Rating
    from annotation.science.design import StudyDesign
    from annotation.studies.argilla_services import study_publish
    from annotation.studies.design_services import StudyCreateRequest, study_create
    from annotation.studies.sync_services import study_sync
    from core.projects import default_project
    from core.roles import Role
    from core.rosters import roster_add
    from corpora.services import dataset_import
    from transforms.services import transform_run_create

    users = get_user_model()
    researcher = users.objects.create_user("load-researcher", password=secrets.token_urlsafe(12))
    researcher.groups.add(Group.objects.get(name=Role.RESEARCHER))
    annotators = []
    for n in range(args.annotators):
        user = users.objects.create_user(f"load-annotator-{n:03d}", password=secrets.token_urlsafe(12))
        user.groups.add(Group.objects.get(name=Role.ANNOTATOR))
        roster_add(project=default_project(), user=user, actor=None)  # the study's project
        annotators.append(user)
    sts = dataset_import(source=ROOT / "fixtures/sts/demo-sts.csv", task="sts", name="load-sts")
    # The other demo pairs stay free to serve as control items.
    run = transform_run_create(dataset=sts, transformation="random_keywords", seed=1, limit=ITEMS)  # eager: done here
    run.refresh_from_db()
    design = StudyDesign(
        items_per_transformation=ITEMS,
        raters_per_item=3,
        batch_size=8,
        controls_per_batch=2,
        min_control_ratings=2,
        llm_judges=(),
        seed=3,
        # A load test, not a study: its few controls may be too few to estimate their detectability.
        detectability_override="load benchmark of a few demo pairs: control detectability is not under test",
    )
    study = study_create(actor=researcher, request=StudyCreateRequest(name="load-study", runs=[run], design=design))
    started = time.monotonic()
    study_publish(study=study, annotators=annotators, actor=researcher)
    print(f"published to {len(annotators)} annotators in {time.monotonic() - started:.1f} s")

    owner = httpx.Client(base_url=settings.ARGILLA_API_URL, headers={API_KEY_HEADER: settings.ARGILLA_API_KEY})
    clients = []
    for annotator in Annotator.objects.filter(study=study).order_by("pk"):
        key = owner.get(f"/api/v1/users/{annotator.argilla_user_id}").raise_for_status().json()["api_key"]
        client = httpx.Client(base_url=owner.base_url, headers={API_KEY_HEADER: key}, timeout=60, trust_env=False)
        clients.append((annotator, client))

    latencies: list[float] = []
    # One rating per (annotator, record, rating question) of every submitted response.
    submitted: set[tuple[int, str, str]] = set()
    errors: list[str] = []
    lock = threading.Lock()
    stop_syncing = threading.Event()
    syncs = 0

    def keep_syncing() -> None:
        nonlocal syncs
        try:
            while not stop_syncing.is_set() and time.monotonic() < deadline:
                study_sync(study=study)
                syncs += 1
        finally:
            connection.close()

    def answer_all(annotator, client) -> None:
        dataset = annotator.argilla_dataset_id
        questions = client.get(f"/api/v1/datasets/{dataset}/questions").raise_for_status().json()["items"]
        values = {q["name"]: {"value": _some_answer(q)} for q in questions if q["required"]}
        rated = [q["name"] for q in questions if q["required"] and q["settings"]["type"] == "rating"]
        found = client.post(
            f"/api/v1/me/datasets/{dataset}/records/search", params={"limit": 1000}, json=PENDING_FOR_ME
        ).raise_for_status()
        for record in (item["record"] for item in found.json()["items"]):
            if time.monotonic() > deadline:
                return
            t0 = time.perf_counter()
            response = client.post(
                f"/api/v1/records/{record['id']}/responses", json={"status": "submitted", "values": values}
            )
            elapsed = time.perf_counter() - t0
            with lock:
                if response.status_code == 201:
                    latencies.append(elapsed)
                    submitted.update((annotator.pk, record["external_id"], name) for name in rated)
                else:
                    errors.append(f"{response.status_code} {response.text[:200]}")

    syncer = threading.Thread(target=keep_syncing)
    syncer.start()
    t_start = time.monotonic()
    with ThreadPoolExecutor(max_workers=len(clients)) as pool:
        for future in [pool.submit(answer_all, annotator, client) for annotator, client in clients]:
            future.result()
    wall = time.monotonic() - t_start
    stop_syncing.set()
    syncer.join()
    study_sync(study=study)  # the last answers

    stored = list(
        Rating.objects.filter(study_item__study=study, active=True).values_list(
            "annotator_id", "study_item__external_id", "question"
        )
    )
    lost = submitted - set(stored)
    duplicated = len(stored) - len(set(stored))
    unexpected = set(stored) - submitted
    latencies.sort()
    p95 = latencies[max(0, int(0.95 * len(latencies)) - 1)] if latencies else float("nan")
    print(
        f"{len(clients)} annotators, {len(latencies)} responses ({len(submitted)} ratings) in {wall:.1f} s "
        f"({len(latencies) / wall:.1f} responses/s) while {syncs} syncs ran; "
        f"latency median {statistics.median(latencies) * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms"
    )
    print(
        f"ratings stored {len(stored)}; lost {len(lost)}; duplicated {duplicated}; not submitted {len(unexpected)}; "
        f"refused {len(errors)}{': ' + errors[0] if errors else ''}"
    )
    timed_out = time.monotonic() > deadline
    if timed_out:
        print("stopped at --timeout: not every annotator finished")
    return 1 if lost or duplicated or unexpected or errors or timed_out else 0


def _some_answer(question: dict):
    settings = question["settings"]
    if settings.get("options"):
        return settings["options"][len(settings["options"]) // 2]["value"]
    return "ok"


if __name__ == "__main__":
    sys.exit(main())
