"""Root pytest configuration: plugins shared by the tests of every app, and the ``heavy`` marker.

A test is heavy when it runs a real model or a real external service: it asks for one of the
fixtures below (the embedded LLM server, the local Argilla server, Redis for a Celery worker,
the public benchmark data, which the tests score with a real encoder, the packaged MiniLM), is
marked ``services``, or is marked ``heavy`` by hand (a real embedding model without any of those
fixtures).
Tests that cannot reach the database are marked ``no_database``: ``make test`` runs them in the
SQLite pass only (they behave the same on PostgreSQL).
``make test-fast`` runs the rest (pure and service-layer tests) for the inner loop; ``make test``
runs everything.
"""

from pathlib import Path

import pytest

pytest_plugins = ["tests.llm_fixtures", "tests.argilla_fixtures"]

SHARED_DATA = Path(__file__).resolve().parent.parent / "shared" / "data"

HEAVY_FIXTURES = frozenset(
    {"llm_test_model", "llm_server", "llm_backend", "argilla_server", "redis_url", "shared_data", "browser", "minilm"}
)


def pytest_configure(config):
    """Tests hash passwords with a fast hasher: Django's default (PBKDF2, 1,000,000 rounds) costs
    0.23 s a password on this machine, paid by every test user created or logging in with a
    password, minutes of each CI pass. Only the test process: the servers tests start never check
    a password a test made (Argilla hashes its own)."""
    from django.conf import settings

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def touches_database(item) -> bool:
    """Whether pytest-django lets the test reach the database (a ``django_db`` mark, or a fixture
    that needs ``db``/``transactional_db``, however indirectly). Any other test fails if it tries, so
    it behaves the same on SQLite and PostgreSQL."""
    return item.get_closest_marker("django_db") is not None or "_django_db_helper" in getattr(item, "fixturenames", ())


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("services") or HEAVY_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.heavy)
        if not touches_database(item):
            item.add_marker(pytest.mark.no_database)


@pytest.fixture
def shared_data() -> Path:
    """The public benchmark data next to the checkout (``../shared/data``); skips when it is absent,
    and fails instead where every service and data set must be present (CI)."""
    if not SHARED_DATA.is_dir():
        # Imported here: tests.support needs Django, which is set up after this file loads.
        from tests.support import require_or_skip

        require_or_skip(f"public benchmark data not found at {SHARED_DATA}")
    return SHARED_DATA
