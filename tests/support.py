"""Plain helpers shared by the integration tests (fixtures live in the conftest files).

Test modules import from here, never from one another.
"""

from __future__ import annotations

import csv
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from django.conf import settings
from django.contrib.auth.models import Group
from django.db import connection
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from annotation.argilla.client import API_KEY_HEADER
from annotation.configs.config_export import config_render, config_seal
from annotation.export_services import config_run_entry
from annotation.models import Approval, GateResult, Study
from annotation.science.design import StudyDesign
from annotation.studies.design_services import StudyCreateRequest, study_create, study_lock
from core.models import Project
from core.projects import default_project
from core.roles import Role
from core.rosters import roster_add
from corpora.models import Dataset, DatasetItem
from corpora.services import dataset_import
from evaluation.models import BenchmarkResult, BenchmarkRun
from transforms.chunk_services import transform_run_execute_chunk
from transforms.models import TransformedItem, TransformRun
from transforms.registry import TRANSFORMATIONS
from transforms.services import transform_run_create, transform_run_finalize
from transforms.tasks import start_run

PASSWORD = "correct-horse-battery-staple"
# Examples per transformation run made by ``keyword_run``.
LIMIT = 10
# Argilla's search body for "records this annotator has not answered yet", as its UI sends it.
PENDING_FOR_ME = {
    "filters": {
        "and": [
            {"type": "terms", "scope": {"entity": "response", "property": "status"}, "values": ["pending"]},
            {"type": "terms", "scope": {"entity": "record", "property": "status"}, "values": ["pending"]},
        ]
    }
}


def require_or_skip(reason: str) -> None:
    """Skip, or fail when CI says every service must be present."""
    if os.environ.get("SHIFTLAB_REQUIRE_SERVICES") == "1":
        pytest.fail(f"{reason} (SHIFTLAB_REQUIRE_SERVICES=1)")
    pytest.skip(reason)


def make_user(django_user_model, username: str, role: Role | None, *, roster: Project | None = None):
    """A user with the shared test password, in the group of ``role``. An annotator goes on the
    roster of ``roster`` (default: the default project, where studies go unless a test names one),
    as an admin would put them there."""
    user = django_user_model.objects.create_user(username=username, password=PASSWORD)
    if role is not None:
        user.groups.add(Group.objects.get(name=role))
    if role == Role.ANNOTATOR:
        roster_add(project=roster or default_project(), user=user, actor=None)
    return user


def roster_at_least(project: Project, n: int) -> None:
    """At least ``n`` annotators on ``project``'s roster, adding test annotators ``<slug>-rater-k``
    as needed: ``study_create`` refuses a design with more raters per item than that (issue 43)."""
    from django.contrib.auth import get_user_model

    from core.rosters import project_annotators

    users, k = get_user_model(), 0
    while project_annotators(project).count() < n:
        k += 1
        username = f"{project.slug}-rater-{k}"
        if not users.objects.filter(username=username).exists():
            make_user(users, username, Role.ANNOTATOR, roster=project)


def rostered(request: StudyCreateRequest) -> StudyCreateRequest:
    """``request``, once its project's roster holds as many annotators as its design's raters per
    item (``roster_at_least``): tests that make a study before its annotators."""
    runs = [
        run if isinstance(run, TransformRun) else TransformRun.objects.filter(pk=run).first() for run in request.runs
    ]
    project = Project.objects.filter(slug=request.project).first() if request.project else (runs or [None])[0]
    project = project.project if isinstance(project, TransformRun) else project
    design = request.design if isinstance(request.design, StudyDesign) else StudyDesign().overlaid(request.design)
    if project is not None:  # else the service refuses the request, as the test expects
        roster_at_least(project, design.raters_per_item)
    return request


def api_as(user) -> APIClient:
    """An API client signed in as ``user`` (no token round trip)."""
    client = APIClient()
    client.force_authenticate(user)
    return client


def page_as(user) -> Client:
    """A browser-less page client with ``user``'s session."""
    client = Client()
    client.force_login(user)
    return client


def database_url_for_worker() -> str:
    """The URL of the test database, for a worker process started by a test."""
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    return f"postgres://{db['USER']}:{db['PASSWORD']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def private_redis_url(redis_url: str, db: int) -> str:
    """``redis_url`` on database ``db``, emptied: for tests whose timing depends on the broker's
    bookkeeping (the unacked hash and its restore lock), which other tests' killed workers leave
    behind in a shared database."""
    import redis

    url = f"{redis_url.rpartition('/')[0]}/{db}"
    redis.Redis.from_url(url, socket_connect_timeout=2).flushdb()
    return url


def celery_worker_command(queue: str) -> list[str]:
    """The `celery worker` command line of the worker tests: one solo worker on its own queue."""
    return [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "shiftlab",
        "worker",
        "--pool=solo",
        "--queues",
        queue,
        "--without-gossip",
        "--without-mingle",
        "--without-heartbeat",
        "--loglevel=INFO",
    ]


@contextmanager
def celery_worker(
    *, redis_url: str, queue: str, log_path: Path, env: dict[str, str] | None = None
) -> Iterator[subprocess.Popen]:
    """A real `celery worker` process on its own queue, using the test database."""
    full_env = {
        **os.environ,
        "CELERY_BROKER_URL": redis_url,
        "DATABASE_URL": database_url_for_worker(),
        "SHIFTLAB_DATA_DIR": str(settings.DATA_DIR),
        **(env or {}),
    }
    with log_path.open("a") as log:
        process = subprocess.Popen(
            celery_worker_command(queue),
            cwd=settings.BASE_DIR,
            env=full_env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            yield process
        finally:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    process.kill()


@contextmanager
def celery_sender(*, broker_url: str, queue: str | None = None) -> Iterator[None]:
    """Send this process's tasks to ``broker_url`` instead of running them eagerly: all of them to
    ``queue`` when given (the resource routes off), as a test's own worker consumes it. Restores
    the app's configuration, and forgets its connections, afterwards."""
    from shiftlab.celery import app

    conf = app.conf
    previous = conf.task_always_eager, conf.broker_url, conf.task_default_queue, conf.task_routes

    def reset() -> None:
        app.amqp.flush_routes()
        app.amqp.__dict__.pop("router", None)  # a cached router keeps the routes it was made with
        app._pool = app.amqp._producer_pool = None

    conf.task_always_eager, conf.broker_url = False, broker_url
    if queue is not None:
        conf.task_default_queue, conf.task_routes = queue, {}
    reset()
    try:
        yield
    finally:
        conf.task_always_eager, conf.broker_url, conf.task_default_queue, conf.task_routes = previous
        reset()


def wait_for(predicate, timeout: float, what: str, log_path: Path) -> None:
    """Poll ``predicate`` until it holds; on time-out, fail with the end of the worker's log."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}\n{log_path.read_text()[-4000:]}")


def argilla_annotator_client(owner: httpx.Client, user_id) -> httpx.Client:
    """A client of the same Argilla server acting as the annotator ``user_id`` (their own API key)."""
    key = owner.get(f"/api/v1/users/{user_id}").raise_for_status().json()["api_key"]
    return httpx.Client(base_url=owner.base_url, headers={API_KEY_HEADER: key}, timeout=30, trust_env=False)


def argilla_pending(client: httpx.Client, dataset_id, *, include=("responses", "suggestions")) -> list[dict]:
    """The records of ``dataset_id`` the client's annotator has not answered, as the UI asks for them."""
    found = (
        client.post(
            f"/api/v1/me/datasets/{dataset_id}/records/search",
            params=[*(("include", part) for part in include), ("limit", 100)],
            json=PENDING_FOR_ME,
        )
        .raise_for_status()
        .json()
    )
    return [item["record"] for item in found["items"]]


def config_text(
    runs: list[TransformRun], *, rejected: tuple[str, ...] = (), fmt: str = "yaml", perturbation: dict | None = None
) -> str:
    """A config approving the transformations of ``runs`` (and rejecting ``rejected``), sealed and
    signed with this deployment's key but not registered: what a deployment sharing the key exports
    (with ``perturbation``: the block that fixes its runs' sides)."""
    by_name: dict[str, list[TransformRun]] = {}
    for run in runs:
        by_name.setdefault(run.transformation, []).append(run)
    entries = []
    datasets = {}
    for name, group in sorted(by_name.items()):
        decision = "reject" if name in rejected else "approve"
        run_entries = [config_run_entry(run) for run in group]
        for entry in run_entries:
            datasets[entry["dataset"]["name"]] = entry["dataset"]
        entries.append(
            {
                "transformation": name,
                "axis": TRANSFORMATIONS[name].axis.value,
                "study": {"name": "test-study", "version": 1, "design_hash": "0" * 64, "design": {}},
                "runs": run_entries,
                "approval": {"decision": decision, "by": "rita", "at": "2026-01-01T00:00:00+00:00", "comment": ""},
                "gate": {"id": 1, "passed": decision == "approve", "evidence_hash": "0" * 64, "evidence": {}},
            }
        )
    document = config_seal(
        {
            "name": "test",
            "exported_at": "2026-01-01T00:00:00+00:00",
            "exported_by": "rita",
            "transformations": entries,
            "datasets": [datasets[k] for k in sorted(datasets)],
            **({"perturbation": perturbation} if perturbation is not None else {}),
        },
        key=settings.CONFIG_SIGNING_KEY,
    )
    return config_render(document, fmt)


def minimal_config_body() -> dict:
    """The smallest well-formed benchmark config body (what the export writes before sealing it),
    without a database."""
    dataset = {"name": "demo-sts", "content_hash": "c" * 64, "task_type": "sts", "languages": ["en"]}
    run = {
        "run_id": 1,
        "run_hash": "r" * 64,
        "seed": 1,
        "dataset": dataset,
        "generator": {"backend_alias": "default", "model": "m", "params": {"temperature": 0.7}, "hash": "g" * 64},
        "prompts": [{"key": "paraphrase", "version": 1, "hash": "p" * 64, "system": "Be kind.", "user": "déjà vu"}],
        "target_languages": [],
        "run_language": "",
        "item_limit": None,
    }
    return {
        "name": "test",
        "exported_at": "2026-01-01T00:00:00+00:00",
        "exported_by": "rita",
        "transformations": [
            {
                "transformation": "paraphrase",
                "axis": "lexical",
                "study": {"name": "s", "version": 1, "design_hash": "0" * 64, "design": {"seed": 3}},
                "runs": [run],
                "approval": {"decision": "approve", "by": "rita", "at": "2026-01-01T00:00:00+00:00", "comment": "ok"},
                "gate": {"id": 1, "passed": True, "evidence_hash": "0" * 64, "evidence": {"mean": 4.25}},
            }
        ],
        "datasets": [dataset],
    }


def reworded_demo_sts(path: Path, place: str) -> Path:
    """The demo STS pairs with every text set in ``place`` ("Over in Belmont, the volcano..."),
    written to ``path``: a dataset that shares no text with the demo file (another project's data,
    whose controls an annotator of both projects has not seen)."""
    with open(settings.BASE_DIR / "fixtures/sts/demo-sts.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        for key in ("sentence1", "sentence2"):
            row[key] = f"Over in {place}, {row[key][0].lower()}{row[key][1:]}"
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def eager_keyword_run(dataset, *, limit: int, seed: int = 1) -> TransformRun:
    """A random_keywords run over the first ``limit`` items of ``dataset``, started and finished
    through the task (eager Celery: the run finishes before this returns)."""
    run = transform_run_create(
        dataset=dataset, transformation="random_keywords", seed=seed, limit=limit, dispatch=False
    )
    start_run.delay(run.pk)
    run.refresh_from_db()
    return run


def keyword_run(dataset, seed, *, fail_items=()):
    """A finished random_keywords run (no LLM); the outputs of ``fail_items`` are marked failed."""
    run = transform_run_create(
        dataset=dataset, transformation="random_keywords", seed=seed, limit=LIMIT, dispatch=False
    )
    items = list(DatasetItem.objects.filter(dataset=dataset, kind="example").order_by("position")[:LIMIT])
    transform_run_execute_chunk(run_id=run.pk, item_ids=[i.pk for i in items])
    TransformedItem.objects.filter(run=run, item__in=[items[i] for i in fail_items], side="sentence2").update(
        ok=False, error_type="copy"
    )
    return transform_run_finalize(run_id=run.pk)


RESULT_MODELS = ["alpha", "beta", "gamma"]
RESULT_TRANSFORMATIONS = {"paraphrase": "lexical", "summary": "length"}


def benchmark_run_with_results() -> BenchmarkRun:
    """A finished benchmark run of three models on three datasets, two transformations and two seeds,
    built from result rows directly (no encoder, no Celery)."""
    datasets = [
        Dataset.objects.create(name=name, task_type=task, source="test", source_format="jsonl", content_hash=name * 4)
        for name, task in (("sts_a", "sts"), ("sts_b", "sts"), ("cls_c", "classification"))
    ]
    run = BenchmarkRun.objects.create(
        source=BenchmarkRun.Source.CONFIG, model_names=RESULT_MODELS, status="done", name="robust"
    )
    rows = []
    for m, model in enumerate(RESULT_MODELS):
        for d, dataset in enumerate(datasets):
            original = 0.5 + 0.1 * d + 0.03 * m
            common = {
                "run": run,
                "model": model,
                "model_id": model,
                "model_revision": "r1",
                "dataset": dataset,
                "main_metric": "cosine_spearman",
                "n_items": 10,
            }
            rows.append(BenchmarkResult(**common, transformation="original", axis="", seed=0, main_score=original))
            for t, (name, axis) in enumerate(RESULT_TRANSFORMATIONS.items()):
                for seed in (1, 2):
                    same = original - 0.001 * seed
                    rows.append(
                        BenchmarkResult(
                            **common,
                            transformation=name,
                            axis=axis,
                            seed=seed,
                            main_score=same - 0.02 * (t + 1) - 0.01 * m + 0.002 * seed * d,
                            original_main_score=same,
                        )
                    )
    BenchmarkResult.objects.bulk_create(rows)
    return run


# The reason test studies of a few items give to lock (issue 39): with fewer than 5 easy positives
# per transformation nobody can estimate how detectable their controls are, and a lock then needs
# the same recorded override as for detectable controls.
FEW_CONTROLS_OVERRIDE = "test study of a few items: too few controls to estimate their detectability"


def published_keyword_study(
    *,
    researcher,
    name: str,
    limit: int,
    items: int,
    batch_size: int,
    design_fields: dict | None = None,
    **published_fields,
) -> Study:
    """A locked study, marked published, of a random-keywords run over the first ``limit`` demo STS
    pairs (no LLM): 2 raters per item, 2 controls per batch, no LLM judge, seed 3 (``design_fields``
    change the design). Its few controls are too few to estimate their detectability, so the design
    carries the recorded override the lock then needs (``FEW_CONTROLS_OVERRIDE``)."""
    sts = dataset_import(source=settings.BASE_DIR / "fixtures/sts/demo-sts.csv", task="sts", name="demo-sts")
    run = eager_keyword_run(sts, limit=limit)
    design = StudyDesign(
        items_per_transformation=items,
        raters_per_item=2,
        batch_size=batch_size,
        controls_per_batch=2,
        min_control_ratings=2,
        llm_judges=(),
        seed=3,
        detectability_override=FEW_CONTROLS_OVERRIDE,
    ).revised(**(design_fields or {}))
    roster_at_least(run.project, design.raters_per_item)
    study = study_lock(
        study=study_create(actor=researcher, request=StudyCreateRequest(name=name, runs=[run], design=design))
    )
    Study.objects.filter(pk=study.pk).update(
        published_at=timezone.now(), status=Study.Status.PUBLISHED, **published_fields
    )
    return Study.objects.get(pk=study.pk)


def keywords_approved(study: Study, researcher, *, comment: str) -> None:
    """The random-keywords transformation of ``study`` passed its gate and ``researcher`` approved it
    (as recorded rows: no ratings behind them)."""
    gate = GateResult.objects.create(
        study=study,
        transformation="random_keywords",
        passed=True,
        evidence={"state": "passed", "n_items": 6},
        evidence_hash="e" * 64,
        created_by=researcher,
    )
    Approval.objects.create(gate_result=gate, decision="approve", comment=comment, decided_by=researcher)
