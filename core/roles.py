"""The three roles of SPEC §8, as Django groups, and the questions code asks about them."""

from __future__ import annotations

from enum import StrEnum

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser


class Role(StrEnum):
    ANNOTATOR = "annotator"
    RESEARCHER = "researcher"
    ADMIN = "admin"


def has_role(user: AbstractBaseUser | AnonymousUser, *roles: Role) -> bool:
    """True when ``user`` is active and in one of ``roles``; superusers hold every role."""
    if not user.is_authenticated or not user.is_active:
        return False
    if user.is_superuser:
        return True
    return user.groups.filter(name__in=[str(r) for r in roles]).exists()


def is_researcher(user: AbstractBaseUser | AnonymousUser) -> bool:
    """Researchers and admins may manage datasets, runs, studies and benchmarks."""
    return has_role(user, Role.RESEARCHER, Role.ADMIN)


def is_admin(user: AbstractBaseUser | AnonymousUser) -> bool:
    return has_role(user, Role.ADMIN)
