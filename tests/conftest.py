"""Shared fixtures: users per role, API clients, the public benchmark data, real services."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.models import Group
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


def _user(django_user_model, username: str, role: Role | None):
    user = django_user_model.objects.create_user(username=username, password=PASSWORD)
    if role is not None:
        user.groups.add(Group.objects.get(name=role))
    return user


@pytest.fixture
def researcher(db, django_user_model):
    return _user(django_user_model, "rita", Role.RESEARCHER)


@pytest.fixture
def annotator(db, django_user_model):
    return _user(django_user_model, "anna", Role.ANNOTATOR)


@pytest.fixture
def admin_user_role(db, django_user_model):
    return _user(django_user_model, "adam", Role.ADMIN)


@pytest.fixture
def api_client() -> APIClient:
    return APIClient()


@pytest.fixture
def researcher_client(researcher) -> APIClient:
    client = APIClient()
    client.force_authenticate(researcher)
    return client
