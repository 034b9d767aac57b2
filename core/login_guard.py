"""Lockout after repeated failed log-ins, counted per username and per client address in the cache.

Every password check goes through ``LockoutModelBackend`` (the log-in page, the admin's, the API
token endpoint), so a locked username or address cannot even be tried; the log-in views ask
``login_lockout_wait`` first to tell the user how long to wait. A username is locked after
``SHIFTLAB_LOGIN_MAX_FAILURES`` failures within ``SHIFTLAB_LOGIN_FAILURE_WINDOW_SECONDS``, an address
after ``SHIFTLAB_LOGIN_MAX_FAILURES_PER_IP`` (one address tries many usernames); each lock lasts
``SHIFTLAB_LOGIN_LOCKOUT_SECONDS`` and is audited as ``auth.lockout``.

A signed-in user's password asked again before a sensitive change (the *My Argilla account* page
and its API, the password change page) is checked by ``password_confirm``: the same counts and
locks as a log-in, so a session left open cannot be used to guess the password, and wrong guesses
there lock the log-in out too (and the other way round).
"""

from __future__ import annotations

import hashlib
import math
import time

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.core.cache import cache
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from rest_framework.throttling import BaseThrottle

from core.errors import ShiftlabError
from core.services import audit_record


def client_address(request: HttpRequest) -> str:
    """The caller's address behind ``REST_FRAMEWORK["NUM_PROXIES"]`` trusted proxies: DRF's rule,
    so the lockout and the API throttles count the same client."""
    return BaseThrottle().get_ident(request) or ""


def login_lockout_wait(*, username: str, address: str) -> int:
    """Seconds until ``username`` from ``address`` may try to log in again; 0 when neither is locked."""
    now = time.time()
    until = [cache.get(_key("locked", kind, value)) for kind, value, _ in _subjects(username, address)]
    return max((math.ceil(u - now) for u in until if u and u > now), default=0)


def login_lockout_message(wait: int) -> str:
    minutes = math.ceil(wait / 60)
    later = f"{minutes} minute{'s' if minutes != 1 else ''}" if wait >= 60 else f"{wait} seconds"
    return (
        f"Too many failed log-ins for this username or from this address: try again in {later}, "
        "or ask an admin to check the account."
    )


def login_failure_record(*, username: str, address: str) -> None:
    """Count one failed log-in; lock the username or address that reaches its limit."""
    window, lockout = settings.SHIFTLAB_LOGIN_FAILURE_WINDOW_SECONDS, settings.SHIFTLAB_LOGIN_LOCKOUT_SECONDS
    for kind, value, limit in _subjects(username, address):
        key = _key("failures", kind, value)
        cache.add(key, 0, timeout=window)  # the window starts at the first failure
        try:
            failures = cache.incr(key)
        except ValueError:  # expired between add and incr
            cache.set(key, failures := 1, timeout=window)
        if failures >= limit and cache.add(_key("locked", kind, value), time.time() + lockout, timeout=lockout):
            cache.delete(key)
            audit_record(
                actor=None,
                verb="auth.lockout",
                payload={
                    "locked": kind,
                    "username": username,
                    "address": address,
                    "failures": failures,
                    "seconds": lockout,
                },
            )


def login_success_record(*, username: str) -> None:
    """Forget the username's failures. The address keeps its count: one valid account must not
    reset the count of an address that is guessing the passwords of others."""
    cache.delete(_key("failures", "username", username))


class LockedOutError(ShiftlabError):
    """A password check refused while the username or address is locked out: 429."""

    http_status = 429
    code = "locked_out"

    def __init__(self, wait: int) -> None:
        super().__init__(login_lockout_message(wait))
        self.wait = wait


def password_confirm(*, user, password: str, address: str) -> bool:
    """Whether ``password`` is the signed-in ``user``'s, checked through the log-in lockout: refused
    (``LockedOutError``) while the username or ``address`` is locked, a wrong one counts as a failed
    log-in (and the one that locks says so at once), a right one clears the username's failures."""
    username = user.get_username()
    if wait := login_lockout_wait(username=username, address=address):
        raise LockedOutError(wait)
    if user.check_password(password or ""):
        login_success_record(username=username)
        return True
    login_failure_record(username=username, address=address)
    if wait := login_lockout_wait(username=username, address=address):
        raise LockedOutError(wait)
    return False


class LockoutModelBackend(ModelBackend):
    """Django's model backend, refusing locked usernames and addresses and counting failures."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        username = username if username is not None else kwargs.get(get_user_model().USERNAME_FIELD)
        if username is None:
            return None
        address = client_address(request) if request is not None else ""
        if login_lockout_wait(username=username, address=address):
            raise PermissionDenied  # authenticate() stops here: no backend checks the password
        user = super().authenticate(request, username=username, password=password, **kwargs)
        if user is None:
            login_failure_record(username=username, address=address)
        else:
            login_success_record(username=username)
        return user


def _subjects(username: str, address: str) -> list[tuple[str, str, int]]:
    subjects = [("username", username, settings.SHIFTLAB_LOGIN_MAX_FAILURES)] if username else []
    if address:
        subjects.append(("address", address, settings.SHIFTLAB_LOGIN_MAX_FAILURES_PER_IP))
    return subjects


def _key(what: str, kind: str, value: str) -> str:
    # Hashed: usernames may hold characters a cache key cannot.
    return f"login-{what}:{kind}:{hashlib.sha256(value.lower().encode()).hexdigest()[:32]}"
