"""Run a local argilla-server 2.8 (web UI + API + rq worker) with the SQL search engine.

Run it with the interpreter of ``.venv-argilla`` (argilla-server's pins clash with Shiftlab's, so
it has a virtualenv of its own), by path: it imports nothing from Shiftlab::

    .venv-argilla/bin/python annotation/argilla_local/launcher.py serve --port 6900 --data-dir var/argilla

Environment (read here and by argilla-server):

``ARGILLA_REDIS_URL``        required; argilla-server will not start without Redis.
``ARGILLA_API_KEY``          API key of the owner account (created, or updated, on every start).
``ARGILLA_OWNER_PASSWORD``   the owner's UI password (at least 8 characters).
``ARGILLA_OWNER_USERNAME``   default ``shiftlab``.
``ARGILLA_DATABASE_URL``     default SQLite ``<data-dir>/argilla.db``; ``postgresql+asyncpg://...`` works too.
``ARGILLA_AUTH_SECRET_KEY``  signs UI logins; default a random key kept in ``<data-dir>/auth-secret-key``.

The ``serve`` command migrates the database (alembic: the server's own CLI is broken by a
typer/click clash), ensures the owner account, starts ``worker`` (this file again, so that the rq
jobs know the SQL engine) and serves uvicorn until SIGTERM or SIGINT, then stops the worker.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import os
import secrets
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

# Must equal sql_search.ENGINE_NAME: that module imports argilla_server, which reads its settings
# from the environment at import time, so it can only be imported once the environment is set.
ENGINE_NAME = "shiftlab-sql"
OWNER_FIRST_NAME = "Shiftlab"
MIN_PASSWORD_LENGTH = 8


class LauncherError(Exception):
    """Start-up cannot go on; the message says why and what to do."""


def _require_env(name: str, hint: str) -> str:
    value = os.environ.get(name, "")
    if not value:
        raise LauncherError(f"{name} is not set: {hint}")
    return value


def _check_redis(url: str) -> None:
    import redis

    try:
        redis.Redis.from_url(url, socket_connect_timeout=3).ping()
    except redis.RedisError as exc:
        raise LauncherError(
            f"Redis is not reachable at {url} ({exc}). argilla-server needs it: start it with "
            "scripts/services.sh redis, or point ARGILLA_REDIS_URL at a running one."
        ) from exc


def _run_tmpdir(data_dir: Path) -> Path:
    """A temporary directory for this run only.

    Every process that imports argilla_server copies its 14 MB web app into a fresh temporary
    directory and never removes it; confining each run to its own directory lets us delete them.
    Directories left by runs that were killed (their pid is gone) are removed first.
    """
    root = data_dir / "tmp"
    root.mkdir(parents=True, exist_ok=True)
    for stale in root.glob("run-*"):
        try:
            os.kill(int(stale.name.removeprefix("run-")), 0)
        except (ValueError, ProcessLookupError):
            shutil.rmtree(stale, ignore_errors=True)
        except PermissionError:  # alive, owned by someone else
            pass
    run_dir = root / f"run-{os.getpid()}"
    run_dir.mkdir()
    return run_dir


def _auth_secret_key(data_dir: Path) -> str:
    """A key kept beside the data, so that UI logins survive restarts (argilla-server would pick a
    random one per process otherwise)."""
    path = data_dir / "auth-secret-key"
    if not path.exists():
        path.touch(mode=0o600)
        path.write_text(secrets.token_urlsafe(48))
    return path.read_text().strip()


def configure_environment(data_dir: Path) -> Path:
    """Set the variables argilla-server reads at import time; return this run's temporary directory."""
    _check_redis(_require_env("ARGILLA_REDIS_URL", "e.g. redis://127.0.0.1:6379/1"))
    tmpdir = _run_tmpdir(data_dir)
    os.environ["TMPDIR"] = str(tmpdir)
    tempfile.tempdir = None  # forget a directory chosen before TMPDIR changed
    os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
    os.environ["ARGILLA_HOME_PATH"] = str(data_dir)
    os.environ["ARGILLA_SEARCH_ENGINE"] = ENGINE_NAME
    os.environ.setdefault("ARGILLA_DATABASE_URL", f"sqlite+aiosqlite:///{data_dir / 'argilla.db'}")
    # Server and worker write to the same SQLite file: wait for the lock instead of failing.
    os.environ.setdefault("ARGILLA_DATABASE_SQLITE_TIMEOUT", "30")
    os.environ.setdefault("ARGILLA_AUTH_SECRET_KEY", _auth_secret_key(data_dir))
    return tmpdir


def _sqlite_path(database_url: str) -> Path | None:
    prefix = "sqlite+aiosqlite:///"
    if not database_url.startswith(prefix):
        return None
    return Path(database_url.removeprefix(prefix).split("?", 1)[0])


def migrate() -> None:
    """Bring the database to the schema of the installed argilla-server."""
    sqlite_path = _sqlite_path(os.environ["ARGILLA_DATABASE_URL"])
    if sqlite_path is not None:
        # WAL lets the UI read while the worker or an import writes; the mode is stored in the file.
        with sqlite3.connect(sqlite_path) as connection:
            connection.execute("PRAGMA journal_mode=WAL")
    from alembic import command
    from alembic.config import Config
    from argilla_server.database import ALEMBIC_CONFIG_FILE

    command.upgrade(Config(ALEMBIC_CONFIG_FILE), "head")


async def ensure_owner(username: str, password: str, api_key: str) -> str:
    """Create the owner account, or bring its API key and password in line; return what was done."""
    from argilla_server.contexts.accounts import hash_password, verify_password
    from argilla_server.database import AsyncSessionLocal
    from argilla_server.enums import UserRole
    from argilla_server.models import User

    # accounts.create_user would ignore the API key, so the model is used directly.
    async with AsyncSessionLocal() as db:
        user = await User.get_by(db, username=username)
        if user is None:
            user = User(
                first_name=OWNER_FIRST_NAME,
                username=username,
                role=UserRole.owner,
                api_key=api_key,
                password_hash=hash_password(password),
            )
            action = "created"
        elif (
            user.api_key != api_key or user.role != UserRole.owner or not verify_password(password, user.password_hash)
        ):
            user.api_key, user.role, user.password_hash = api_key, UserRole.owner, hash_password(password)
            action = "updated"
        else:
            return "unchanged"
        db.add(user)
        await db.commit()
        return action


def _die_with_parent() -> Callable[[], None] | None:
    """A pre-exec hook asking Linux to SIGTERM the child when the launcher dies, even by SIGKILL."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux
        return None

    def hook() -> None:
        prctl(1, int(signal.SIGTERM))  # 1 = PR_SET_PDEATHSIG

    return hook


# Argilla sends no framing headers: without these another site could show its pages in a frame and
# trick a signed-in annotator into clicks (issue 39, finding 9). The compose file's nginx sets the same.
FRAME_HEADERS = ((b"x-frame-options", b"DENY"), (b"content-security-policy", b"frame-ancestors 'none'"))


class DenyFraming:
    """ASGI middleware: every HTTP response of ``app`` says it may not be framed (X-Frame-Options and
    a Content-Security-Policy of ``frame-ancestors 'none'``, sent beside any policy of its own)."""

    def __init__(self, app: Callable) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_denying_frames(message: dict) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {bytes(name).lower() for name, _ in headers}
                # A second Content-Security-Policy adds to the app's; X-Frame-Options only where it has none.
                headers += [(n, v) for n, v in FRAME_HEADERS if n == b"content-security-policy" or n not in present]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_denying_frames)


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def serve(host: str, port: int, data_dir: Path) -> int:
    # uvicorn re-raises the SIGTERM it handled once it has shut down; with the default handler that
    # would end the process at once, skipping the clean-up below.
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    data_dir.mkdir(parents=True, exist_ok=True)
    api_key = _require_env("ARGILLA_API_KEY", "set the owner's API key (Shiftlab reads the same variable)")
    password = _require_env("ARGILLA_OWNER_PASSWORD", f"set the owner's password ({MIN_PASSWORD_LENGTH}+ characters)")
    if len(password) < MIN_PASSWORD_LENGTH:
        raise LauncherError(f"ARGILLA_OWNER_PASSWORD must have at least {MIN_PASSWORD_LENGTH} characters")
    username = os.environ.get("ARGILLA_OWNER_USERNAME") or "shiftlab"
    tmpdir = configure_environment(data_dir)
    worker = None
    try:
        migrate()
        print(f"argilla owner {username!r}: {asyncio.run(ensure_owner(username, password, api_key))}", flush=True)

        import sql_search  # noqa: F401  (registers the engine before the app looks it up)
        import uvicorn
        from argilla_server import app

        worker = subprocess.Popen(
            [sys.executable, __file__, "worker"], stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent()
        )
        # uvicorn turns SIGTERM and SIGINT into a graceful shutdown, after which the worker is stopped.
        uvicorn.Server(uvicorn.Config(DenyFraming(app), host=host, port=port, log_level="info")).run()
        return 0
    finally:
        if worker is not None and worker.poll() is None:
            worker.terminate()
            try:
                worker.wait(timeout=15)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()
        shutil.rmtree(tmpdir, ignore_errors=True)


def work() -> int:
    """The rq worker for argilla-server's background jobs (record status updates, webhooks, hub)."""
    import sql_search  # noqa: F401  (the jobs look the search engine up by name)
    from argilla_server.jobs.queues import DEFAULT_QUEUE, HIGH_QUEUE, REDIS_CONNECTION
    from rq import Worker

    Worker([HIGH_QUEUE, DEFAULT_QUEUE], connection=REDIS_CONNECTION).work()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    commands = parser.add_subparsers(dest="command", required=True)
    serve_parser = commands.add_parser("serve", help="migrate, ensure the owner, run the server and its worker")
    serve_parser.add_argument("--host", default="127.0.0.1")
    serve_parser.add_argument("--port", type=int, default=6900)
    serve_parser.add_argument("--data-dir", type=Path, default=Path("var/argilla"))
    commands.add_parser("worker", help="internal: the rq worker started by serve")
    args = parser.parse_args(argv)
    try:
        if args.command == "serve":
            return serve(args.host, args.port, args.data_dir.resolve())
        return work()
    except LauncherError as exc:
        print(f"argilla launcher: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
