"""Reading settings from environment variables (used by ``shiftlab.settings``).

Each reader takes the variable's name and a default; a value that cannot mean anything is
``ImproperlyConfigured`` naming the variable and what it should hold.
"""

from __future__ import annotations

import json
import os

from django.core.exceptions import ImproperlyConfigured


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean: use 1/0, true/false, yes/no or on/off.")


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [part.strip() for part in raw.split(",") if part.strip()]


def extra_aliases(
    raw: str, *, variable: str, backend: str, options: dict, example: str, options_apart: bool = False
) -> dict:
    """More aliases of a Django-backend-style setting (LLM backends, encoders), as JSON in
    ``variable``: ``{"alias": {option: value}}`` for ``backend`` (``options`` fill the rest), or
    ``{"alias": {"BACKEND": "dotted.path", "OPTIONS": {...}}}`` for any class. With
    ``options_apart`` an alias naming a BACKEND may hold nothing but BACKEND and OPTIONS."""
    try:
        extra = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError as exc:
        raise ImproperlyConfigured(f"{variable} is not valid JSON: {exc}") from None
    if not isinstance(extra, dict) or not all(isinstance(v, dict) for v in extra.values()):
        raise ImproperlyConfigured(f"{variable} must map aliases to objects, e.g. {example}")
    for alias, config in extra.items() if options_apart else ():
        stray = sorted(set(config) - {"BACKEND", "OPTIONS"}) if "BACKEND" in config else []
        if stray:
            raise ImproperlyConfigured(
                f"{variable}[{alias!r}] names a BACKEND, so its options go under "
                f"OPTIONS: move {', '.join(stray)} there."
            )
    return {
        alias: config if "BACKEND" in config else {"BACKEND": backend, "OPTIONS": {**options, **config}}
        for alias, config in extra.items()
    }
