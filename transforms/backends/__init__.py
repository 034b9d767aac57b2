"""LLM backends, chosen in settings like Django's pluggable backends.

``TRANSFORM_BACKENDS = {"default": {"BACKEND": "dotted.path.Class", "OPTIONS": {...}}}``; code asks
for ``get_backend(alias)`` and talks to one interface (``LLMBackend``).
"""

from __future__ import annotations

from functools import cache

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from core.errors import ShiftlabError
from transforms.backends.base import LLMBackend


def backend_aliases() -> list[str]:
    return list(settings.TRANSFORM_BACKENDS)


def configured_model(alias: str) -> str:
    """The model ``alias`` is configured with in TRANSFORM_BACKENDS (read, not loaded: pages call
    this for aliases that may no longer be configured); "" when it names none."""
    return str(settings.TRANSFORM_BACKENDS.get(alias, {}).get("OPTIONS", {}).get("model", ""))


@cache
def get_backend(alias: str = "default") -> LLMBackend:
    try:
        config = settings.TRANSFORM_BACKENDS[alias]
    except KeyError:
        raise ImproperlyConfigured(
            f"No LLM backend {alias!r} in TRANSFORM_BACKENDS (configured: {', '.join(backend_aliases())})."
        ) from None
    try:
        backend_class = import_string(config["BACKEND"])
    except (KeyError, ImportError) as exc:
        raise ImproperlyConfigured(f"TRANSFORM_BACKENDS[{alias!r}]['BACKEND'] cannot be loaded: {exc}") from exc
    return backend_class(alias=alias, **config.get("OPTIONS", {}))


def reset_backends() -> None:
    """Forget loaded backends (after settings change, e.g. in tests)."""
    get_backend.cache_clear()


def backend_chosen(alias: str) -> LLMBackend:
    """The backend a request names: an alias that cannot be loaded is the request's error
    (ShiftlabError, shown to the caller), where :func:`get_backend` says the configuration is."""
    try:
        return get_backend(alias)
    except ImproperlyConfigured as exc:
        raise ShiftlabError(str(exc)) from None
