"""Reachability probes for the services the platform depends on (used by /health/)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from urllib.parse import urlsplit

import requests

# The project's Celery app (shiftlab/__init__.py makes it current): core never imports shiftlab, a layer above.
from celery import current_app as app
from django.conf import settings
from django.core.cache import cache
from django.db import connection

from core.local_server import supervisor_state_path, supervisor_state_read


@dataclass(frozen=True)
class Probe:
    status: str  # "ok", "error", "busy" (the LLM), "eager" (no broker configured) or "not_configured"
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
    """The default LLM backend is ok only while it generates.

    ``/v1/models`` answers before a model has run a single matrix multiply (a llama.cpp server that
    crashes on every generation kept answering it between restarts), so it is not enough:
    - a server supervised by ``manage.py llm_server`` on this machine is judged by its supervisor's
      state (ready only after a warm-up generation; restarting or given up is an error with the log
      line that says why);
    - any other server (vLLM, a remote llama.cpp) must also answer a one-token generation
      (remembered for ``LLM_HEALTH_GENERATION_TTL`` seconds so /health/ polls do not load it).
    """
    options = settings.TRANSFORM_BACKENDS.get("default", {}).get("OPTIONS", {})
    base_url = options.get("base_url", "")
    if not base_url:
        return Probe("not_configured", "TRANSFORM_BACKENDS['default'] has no base_url", critical=False)
    supervised = _supervisor_state(base_url)
    if supervised is not None and supervised["state"] != "ready":
        return Probe(
            "error",
            f"{base_url} {_STATE_WORDS.get(supervised['state'], supervised['state'])}: {supervised.get('detail', '')}",
            critical=False,
        )
    reachable = _http_probe(f"{base_url.rstrip('/')}/models", base_url)
    if reachable.status != "ok":
        return reachable
    if supervised is not None:
        restarts = int(supervised.get("restarts") or 0)
        suffix = f"; restarted {restarts} time(s)" if restarts else ""
        return Probe("ok", f"{base_url} generating ({supervised.get('detail', '')}{suffix})", critical=False)
    return _generation_probe(base_url, options)


_STATE_WORDS = {
    "starting": "is starting",
    "restarting": "is crash-looping",
    "given_up": "is down (its supervisor gave up)",
}


def _supervisor_state(base_url: str) -> dict | None:
    """The state ``manage.py llm_server`` keeps for a server on this machine at ``base_url``."""
    parts = urlsplit(base_url)
    if parts.hostname not in {"127.0.0.1", "localhost", "::1"} or parts.port is None:
        return None
    state = supervisor_state_read(supervisor_state_path(settings.DATA_DIR, "llm-server", parts.port))
    return None if state is None or state.get("state") == "stopped" else state


def _generation_probe(base_url: str, options: dict) -> Probe:
    key = f"health:llm-generation:{base_url}"
    remembered = cache.get(key)
    if remembered is not None:
        return Probe(*remembered, critical=False)
    headers = {"Authorization": f"Bearer {options['api_key']}"} if options.get("api_key") else {}
    body = {
        "model": options.get("model", ""),
        "messages": [{"role": "user", "content": "Reply with the single word: ok"}],
        "max_tokens": 1,
        "temperature": 0.0,
    }
    try:
        response = requests.post(
            f"{base_url.rstrip('/')}/chat/completions",
            json=body,
            headers=headers,
            timeout=settings.HEALTH_CHECK_TIMEOUT,
        )
    except requests.Timeout:
        status, detail = (
            "busy",
            f"{base_url} answers, but a one-token generation took over {settings.HEALTH_CHECK_TIMEOUT:g} s",
        )
    except requests.RequestException as exc:
        status, detail = "error", f"{base_url} answers /models, but a generation failed: {exc.__class__.__name__}"
    else:
        if response.status_code >= 400:
            status, detail = "error", f"{base_url} answers /models, but a generation got HTTP {response.status_code}"
        else:
            status, detail = "ok", f"{base_url} generating (HTTP {response.status_code})"
    cache.set(key, (status, detail), settings.LLM_HEALTH_GENERATION_TTL)
    return Probe(status, detail, critical=False)


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
