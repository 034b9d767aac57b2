"""Shared fixtures: users per role, API clients, the public benchmark data, real services."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.models import Group
from django.db import connection
from rest_framework.test import APIClient

from core.roles import Role

SHARED_DATA = Path(settings.BASE_DIR).parent / "shared" / "data"
PASSWORD = "correct-horse-battery-staple"


def require_or_skip(reason: str) -> None:
    """Skip, or fail when CI says every service must be present."""
    if os.environ.get("SHIFTLAB_REQUIRE_SERVICES") == "1":
        pytest.fail(f"{reason} (SHIFTLAB_REQUIRE_SERVICES=1)")
    pytest.skip(reason)


@pytest.fixture
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"public benchmark data not found at {SHARED_DATA}")
    return SHARED_DATA


def make_user(django_user_model, username: str, role: Role | None):
    """A user with the shared test password, in the group of ``role``."""
    user = django_user_model.objects.create_user(username=username, password=PASSWORD)
    if role is not None:
        user.groups.add(Group.objects.get(name=role))
    return user


@pytest.fixture
def researcher(db, django_user_model):
    return make_user(django_user_model, "rita", Role.RESEARCHER)


@pytest.fixture
def annotator(db, django_user_model):
    return make_user(django_user_model, "anna", Role.ANNOTATOR)


@pytest.fixture
def admin_user_role(db, django_user_model):
    return make_user(django_user_model, "adam", Role.ADMIN)


@pytest.fixture
def api_client() -> APIClient:
    return APIClient()


@pytest.fixture
def researcher_client(researcher) -> APIClient:
    client = APIClient()
    client.force_authenticate(researcher)
    return client


@pytest.fixture
def redis_url() -> str:
    import redis

    url = os.environ.get("SHIFTLAB_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
    try:
        redis.Redis.from_url(url, socket_connect_timeout=2).ping()
    except redis.RedisError as exc:
        require_or_skip(f"Redis not reachable at {url} ({exc}); run scripts/services.sh or set SHIFTLAB_TEST_REDIS_URL")
    return url


def database_url_for_worker() -> str:
    """The URL of the test database, for a worker process started by a test."""
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    return f"postgres://{db['USER']}:{db['PASSWORD']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


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
            [
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
            ],
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


@pytest.fixture
def llm_backend(llm_server, settings):
    """The default LLM backend pointed at the session's embedded llama.cpp server (SmolLM2)."""
    from transforms.backends import reset_backends

    settings.TRANSFORM_BACKENDS = {
        "default": {
            "BACKEND": "transforms.backends.openai_compat.OpenAICompatBackend",
            "OPTIONS": {"base_url": llm_server.base_url, "model": llm_server.model, "max_concurrency": 4},
        }
    }
    reset_backends()
    yield llm_server
    reset_backends()
