"""Pytest plugin: a real local Argilla server for the tests that need one.

The session-scoped ``argilla_server`` fixture runs ``annotation/argilla_local/launcher.py`` from
``.venv-argilla`` on a free port, with a fresh SQLite database in a temporary directory, a random
owner API key and its own Redis database (``SHIFTLAB_TEST_ARGILLA_REDIS_URL``, default DB 13,
flushed first: it holds only this server's job queues). Without ``.venv-argilla`` or Redis the tests
that use it are skipped, or fail when ``SHIFTLAB_REQUIRE_SERVICES=1``.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from annotation.argilla.local_server import INSTALL_HINT, LocalArgillaServer, argilla_server_available

DEFAULT_TEST_REDIS_URL = "redis://127.0.0.1:6379/13"


@dataclass(frozen=True)
class ArgillaEndpoint:
    """What a test needs: the server's base URL and the owner's API key."""

    url: str
    api_key: str
    server: LocalArgillaServer


@pytest.fixture(scope="session")
def argilla_server(tmp_path_factory) -> Iterator[ArgillaEndpoint]:
    import redis

    from tests.support import require_or_skip  # imported late: that module needs Django set up

    if not argilla_server_available():
        require_or_skip(f"the local Argilla server needs .venv-argilla: {INSTALL_HINT}")
    redis_url = os.environ.get("SHIFTLAB_TEST_ARGILLA_REDIS_URL", DEFAULT_TEST_REDIS_URL)
    try:
        redis.Redis.from_url(redis_url, socket_connect_timeout=2).flushdb()
    except redis.RedisError as exc:
        require_or_skip(f"Redis not reachable at {redis_url} ({exc}); run scripts/services.sh redis")
    root = tmp_path_factory.mktemp("argilla")
    api_key = secrets.token_urlsafe(24)
    server = LocalArgillaServer(
        data_dir=root / "data",
        redis_url=redis_url,
        api_key=api_key,
        owner_password=secrets.token_urlsafe(12),
        log_path=root / "argilla.log",
    )
    with server:
        yield ArgillaEndpoint(url=server.url, api_key=api_key, server=server)
