"""Reachability probes for the services the platform depends on (used by /health/)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import requests
from django.conf import settings
from django.db import connection

from shiftlab.celery import app


@dataclass(frozen=True)
class Probe:
    status: str  # "ok", "error", "eager" (no broker configured) or "not_configured"
    detail: str
    critical: bool

    def as_dict(self) -> dict[str, str]:
        return {k: v for k, v in asdict(self).items() if k != "critical"}


def probe_database() -> Probe:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:  # any driver error means the database is unusable
        return Probe("error", f"{connection.vendor}: {exc}", critical=True)
    return Probe("ok", connection.vendor, critical=True)


def probe_broker() -> Probe:
    if settings.CELERY_TASK_ALWAYS_EAGER:
        return Probe("eager", "no CELERY_BROKER_URL: tasks run in the web process", critical=False)
    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=settings.HEALTH_CHECK_TIMEOUT)
    except Exception as exc:  # kombu raises transport-specific errors
        return Probe("error", f"broker unreachable: {exc}", critical=True)
    return Probe("ok", _redact(settings.CELERY_BROKER_URL), critical=True)


def probe_llm() -> Probe:
    options = settings.TRANSFORM_BACKENDS.get("default", {}).get("OPTIONS", {})
    base_url = options.get("base_url", "")
    if not base_url:
        return Probe("not_configured", "TRANSFORM_BACKENDS['default'] has no base_url", critical=False)
    return _http_probe(f"{base_url.rstrip('/')}/models", base_url)


def probe_argilla() -> Probe:
    if not settings.ARGILLA_API_URL:
        return Probe("not_configured", "ARGILLA_API_URL is empty", critical=False)
    return _http_probe(f"{settings.ARGILLA_API_URL.rstrip('/')}/api/v1/status", settings.ARGILLA_API_URL)


def health_report() -> dict[str, object]:
    probes = {
        "database": probe_database(),
        "broker": probe_broker(),
        "llm": probe_llm(),
        "argilla": probe_argilla(),
    }
    if any(p.critical and p.status == "error" for p in probes.values()):
        overall = "down"
    elif any(p.status == "error" for p in probes.values()):
        overall = "degraded"
    else:
        overall = "ok"
    return {"status": overall, "checks": {name: p.as_dict() for name, p in probes.items()}}


def _http_probe(url: str, shown: str) -> Probe:
    try:
        response = requests.get(url, timeout=settings.HEALTH_CHECK_TIMEOUT)
    except requests.RequestException as exc:
        return Probe("error", f"{shown} unreachable: {exc.__class__.__name__}", critical=False)
    if response.status_code >= 400:
        return Probe("error", f"{shown} answered HTTP {response.status_code}", critical=False)
    return Probe("ok", f"{shown} (HTTP {response.status_code})", critical=False)


def _redact(url: str) -> str:
    """Drop credentials from a URL before showing it."""
    if "@" not in url:
        return url
    scheme, _, rest = url.partition("://")
    return f"{scheme}://***@{rest.split('@', 1)[1]}"
