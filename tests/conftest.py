"""Shared fixtures: users per role, API clients, Redis. Plain helpers live in ``tests/support.py``;
the public benchmark data fixture (``shared_data``) in the root ``conftest.py``."""

from __future__ import annotations

import os

import pytest
from rest_framework.test import APIClient

from core.roles import Role
from tests.support import make_user, require_or_skip


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


@pytest.fixture(autouse=True)
def _fresh_cache():
    """Log-in failures, lockouts and throttle counters live in the cache: none leak between tests."""
    from django.core.cache import cache

    cache.clear()
    yield
    cache.clear()
