"""The local Argilla server as a child process: ``annotation/argilla_local/launcher.py`` run by the
interpreter of ``.venv-argilla``.

No Django imports, so that ``manage.py argilla_server`` and the test fixture share it. The launcher
migrates the database, ensures the owner account (username, password and API key given here),
serves the UI and API on ``host:port`` and runs the background worker; ``wait_ready`` polls
``GET /api/v1/status``, which needs no authentication.
"""

from __future__ import annotations

import os
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from annotation.argilla import ArgillaError
from transforms.embedded import _parent_death_signal, free_port, port_in_use

REPO_DIR = Path(__file__).resolve().parents[2]
LAUNCHER = REPO_DIR / "annotation" / "argilla_local" / "launcher.py"
VENV_PYTHON = REPO_DIR / ".venv-argilla" / "bin" / "python"
INSTALL_HINT = "run `make install`, which creates .venv-argilla from requirements-argilla-server.txt"

# Requests to our own server never go through an HTTP proxy from the environment.
_LOCAL = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def argilla_server_available(python: Path = VENV_PYTHON) -> bool:
    """Whether ``python`` exists and has argilla_server (found, not imported: importing it copies the
    web app into a temporary directory)."""
    if not python.is_file():
        return False
    probe = "import importlib.util, sys; sys.exit(importlib.util.find_spec('argilla_server') is None)"
    return subprocess.run([python, "-c", probe], capture_output=True, cwd="/").returncode == 0


@dataclass
class LocalArgillaServer:
    """One run of the launcher. ``port=None`` picks a free port at start.

    Output goes to ``log_path`` (appended), or to this process's stdout and stderr when it is None.
    Use as a context manager (start, wait until ready, stop) or call the methods yourself.
    """

    data_dir: Path
    redis_url: str
    api_key: str
    owner_password: str
    owner_username: str = "shiftlab"
    host: str = "127.0.0.1"
    port: int | None = None
    log_path: Path | None = None
    python: Path = VENV_PYTHON
    process: subprocess.Popen | None = field(default=None, init=False, repr=False)
    started_at: float | None = field(default=None, init=False, repr=False)

    @property
    def url(self) -> str:
        if self.port is None:
            raise ArgillaError("the local Argilla server has no port yet: call start() first")
        return f"http://{self.host}:{self.port}"

    def start(self) -> LocalArgillaServer:
        if not argilla_server_available(self.python):
            raise ArgillaError(f"argilla-server is not installed for {self.python}: {INSTALL_HINT}")
        if self.port is None:
            self.port = free_port(self.host)
        elif port_in_use(self.port, self.host):
            raise ArgillaError(f"port {self.port} on {self.host} is already in use; pick another port")
        command = [str(self.python), str(LAUNCHER), "serve", "--host", self.host, "--port", str(self.port)]
        command += ["--data-dir", str(Path(self.data_dir).resolve())]
        env = {
            **os.environ,
            "ARGILLA_REDIS_URL": self.redis_url,
            "ARGILLA_API_KEY": self.api_key,
            "ARGILLA_OWNER_USERNAME": self.owner_username,
            "ARGILLA_OWNER_PASSWORD": self.owner_password,
        }
        output = None
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            output = open(self.log_path, "ab")  # the child keeps its own copy; ours is closed below
        try:
            self.process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT if output else None,
                env=env,
                cwd=REPO_DIR,
                start_new_session=True,  # Ctrl-C reaches the supervisor, which stops the server itself
                preexec_fn=_parent_death_signal(),
            )
        finally:
            if output is not None:
                output.close()
        self.started_at = time.monotonic()
        return self

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def ping(self, timeout: float = 2.0) -> bool:
        try:
            with _LOCAL.open(f"{self.url}/api/v1/status", timeout=timeout) as response:
                return response.status == 200
        except (OSError, urllib.error.URLError):
            return False

    def wait_ready(self, timeout: float = 120.0, *, cancelled: Callable[[], bool] | None = None) -> float:
        """Block until the server answers; return the seconds since ``start``.

        Raises ``ArgillaError`` with the end of the log when the launcher exits (for instance
        because Redis is down), ``timeout`` passes or ``cancelled()`` turns true (the process is
        left running in the last two cases: call ``stop``).
        """
        if self.process is None or self.started_at is None:
            raise ArgillaError("call start() before wait_ready()")
        deadline = time.monotonic() + timeout
        while True:
            code = self.process.poll()
            if code is not None:
                raise ArgillaError(f"the local Argilla server exited with code {code} while starting{self._log_hint()}")
            if self.ping():
                return time.monotonic() - self.started_at
            if cancelled is not None and cancelled():
                raise ArgillaError("start-up of the local Argilla server was cancelled")
            if time.monotonic() >= deadline:
                raise ArgillaError(f"the local Argilla server was not ready after {timeout:.0f} s{self._log_hint()}")
            time.sleep(0.25)

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM (the launcher then stops its worker), SIGKILL after ``timeout``; return the exit code."""
        process = self.process
        if process is None:
            return None
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        return process.returncode

    def _log_hint(self) -> str:
        if self.log_path is None:
            return " (see its output above)"
        try:
            tail = self.log_path.read_text(errors="replace").splitlines()[-15:]
        except OSError as exc:
            return f"; its log {self.log_path} is unreadable: {exc}"
        return f"; end of {self.log_path}:\n" + "\n".join(tail)

    def __enter__(self) -> LocalArgillaServer:
        self.start()
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
