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
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from annotation.argilla import ArgillaError
from core.local_server import LocalServer, free_port, port_in_use

REPO_DIR = Path(__file__).resolve().parents[2]
LAUNCHER = REPO_DIR / "annotation" / "argilla_local" / "launcher.py"
VENV_PYTHON = REPO_DIR / ".venv-argilla" / "bin" / "python"
INSTALL_HINT = "run `make install`, which creates .venv-argilla from requirements-argilla-server.txt"


def argilla_server_available(python: Path = VENV_PYTHON) -> bool:
    """Whether ``python`` exists and has argilla_server (found, not imported: importing it copies the
    web app into a temporary directory)."""
    if not python.is_file():
        return False
    probe = "import importlib.util, sys; sys.exit(importlib.util.find_spec('argilla_server') is None)"
    return subprocess.run([python, "-c", probe], capture_output=True, cwd="/").returncode == 0


@dataclass(eq=False)
class LocalArgillaServer(LocalServer):
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

    name: ClassVar[str] = "local Argilla server"
    error: ClassVar[type[Exception]] = ArgillaError
    stop_timeout: ClassVar[float] = 20.0  # SIGTERM: the launcher stops its worker first

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
        self._spawn(command, env=env, cwd=REPO_DIR)
        return self

    @property
    def health_url(self) -> str:
        return f"{self.url}/api/v1/status"
