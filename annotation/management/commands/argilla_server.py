"""``manage.py argilla_server``: run the local Argilla server in the foreground until stopped."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

from django.conf import settings
from django.core.management.base import CommandError

from annotation.argilla.local_server import LocalArgillaServer
from core.commands import ShiftlabCommand

# Development only, like the default ARGILLA_API_KEY in settings: production sets its own.
DEV_OWNER_PASSWORD = "shiftlab-local-owner"
# Redis DB 1 keeps Argilla's job queues apart from Celery's (DB 0), as in docker-compose.yml.
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/1"


class Command(ShiftlabCommand):
    help = (
        "Run a local Argilla 2.8 server (annotation UI and API, SQL search instead of Elasticsearch, "
        "background worker) from .venv-argilla, with the owner account Shiftlab uses "
        "(ARGILLA_API_KEY). Needs Redis. Ctrl-C or SIGTERM stops it."
    )

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
        parser.add_argument("--port", type=int, default=6900, help="TCP port (default 6900)")
        parser.add_argument("--data-dir", type=Path, default=None, help="database and files (default DATA_DIR/argilla)")
        parser.add_argument(
            "--redis-url",
            default=os.environ.get("ARGILLA_REDIS_URL") or DEFAULT_REDIS_URL,
            help=f"Redis for Argilla's background jobs (default $ARGILLA_REDIS_URL or {DEFAULT_REDIS_URL})",
        )
        parser.add_argument("--ready-timeout", type=float, default=120.0, help="seconds to wait for start-up")

    def handle(self, *args, **options):
        if not settings.ARGILLA_API_KEY:
            raise CommandError("Set ARGILLA_API_KEY: it becomes the API key of the server's owner account.")
        password = os.environ.get("ARGILLA_OWNER_PASSWORD") or (
            DEV_OWNER_PASSWORD if settings.DEVELOPMENT_SECRETS_ALLOWED else ""
        )
        if not password:
            raise CommandError("Set ARGILLA_OWNER_PASSWORD (8+ characters) for the owner account.")
        server = LocalArgillaServer(
            data_dir=options["data_dir"] or Path(settings.DATA_DIR) / "argilla",
            redis_url=options["redis_url"],
            api_key=settings.ARGILLA_API_KEY,
            owner_password=password,
            owner_username=os.environ.get("ARGILLA_OWNER_USERNAME") or "shiftlab",
            host=options["host"],
            port=options["port"],
        )
        stop = threading.Event()
        previous = {}
        if threading.current_thread() is threading.main_thread():  # signals reach the main thread only
            previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            server.start()
            seconds = server.wait_ready(options["ready_timeout"], cancelled=stop.is_set)
            self._announce(server, seconds)
            while not stop.wait(1.0):
                if not server.running:
                    raise CommandError(f"the Argilla server exited with code {server.process.returncode}")
        finally:  # an ArgillaError goes on to ShiftlabCommand, which says it
            server.stop()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        self.stdout.write("Argilla server stopped.")

    def _announce(self, server: LocalArgillaServer, seconds: float) -> None:
        self.stdout.write(
            self.style.SUCCESS(f"Argilla ready at {server.url}/")
            + f" (started in {seconds:.1f} s, data in {server.data_dir})\n"
            f"Annotators sign in and rate there; the owner account is {server.owner_username!r}.\n"
            "Shiftlab talks to it with:\n"
            f"  ARGILLA_API_URL={server.url}\n"
            "  ARGILLA_API_KEY=<the same ARGILLA_API_KEY as this command>\n"
            "Ctrl-C stops it."
        )
        self.stdout.flush()
