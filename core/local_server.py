"""Supervising a local server process (the embedded LLM, the local Argilla): start it with its
output in a log, wait until its health URL answers, stop it. No Django imports, so management
commands, test fixtures and benchmark scripts share it.
"""

from __future__ import annotations

import ctypes
import ipaddress
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, ClassVar

# Requests to our own servers never go through an HTTP proxy from the environment.
LOCAL_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago (the usual bind-to-0 trick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable from this machine only (``localhost``, 127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def available_cpus() -> int:
    """CPUs this process may use (respects affinity masks, unlike ``os.cpu_count``)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def parent_death_signal() -> Callable[[], None] | None:
    """Linux only: a pre-exec hook asking the kernel to SIGTERM the child when its parent dies.

    The C function is looked up here, in the parent, so that the forked child only makes one
    system call (no imports or locks between fork and exec). Linux ties the signal to the thread
    that forked, so only start servers from threads that outlive them.
    """
    if sys.platform != "linux":
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None

    def hook() -> None:  # pragma: no cover - runs in the child
        prctl(1, int(signal.SIGTERM))  # 1 = PR_SET_PDEATHSIG

    return hook


class LocalServer:
    """Base of a supervised server. Subclasses set ``name`` and ``error`` (the exception type
    their callers expect), provide ``health_url`` (answers 200 once ready) and call ``_spawn``
    from their ``start``; they carry ``process``, ``started_at`` and ``log_path`` attributes."""

    name: ClassVar[str] = "local server"
    error: ClassVar[type[Exception]] = RuntimeError
    stop_timeout: ClassVar[float] = 10.0
    process: subprocess.Popen | None
    started_at: float | None
    log_path: Path | None

    @property
    def health_url(self) -> str:
        raise NotImplementedError

    def _spawn(
        self,
        command: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: Path | None = None,
        die_with_parent: bool = True,
        header: bool = False,
    ) -> None:
        """Start ``command`` in its own session (Ctrl-C reaches the supervisor, which stops the
        server itself), output appended to ``log_path`` (or inherited when it is None)."""
        output: IO[bytes] | None = None
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            output = open(self.log_path, "ab")  # the child keeps its own copy; ours is closed below
            if header:
                output.write(f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(command)}\n".encode())
                output.flush()
        try:
            self.process = subprocess.Popen(
                list(command),
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT if output else None,
                env=dict(env),
                cwd=cwd,
                start_new_session=True,
                preexec_fn=parent_death_signal() if die_with_parent else None,
            )
        finally:
            if output is not None:
                output.close()
        self.started_at = time.monotonic()

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def ping(self, timeout: float = 2.0) -> bool:
        """Whether the health URL answers 200 right now."""
        try:
            with LOCAL_OPENER.open(self.health_url, timeout=timeout) as response:
                return response.status == 200
        except (OSError, urllib.error.URLError):
            return False

    def wait_ready(self, timeout: float = 120.0, *, cancelled: Callable[[], bool] | None = None) -> float:
        """Block until the server answers; return the seconds since ``start``.

        Raises ``self.error`` with the end of the log when the process exits, ``timeout`` passes or
        ``cancelled()`` turns true (the process is left running in the last two cases: call
        ``stop``).
        """
        if self.process is None or self.started_at is None:
            raise self.error("call start() before wait_ready()")
        deadline = time.monotonic() + timeout
        delay = 0.1
        while True:
            code = self.process.poll()
            if code is not None:
                raise self.error(f"the {self.name} exited with code {code} while starting{self._log_hint()}")
            if self.ping(timeout=min(2.0, max(0.1, deadline - time.monotonic()))):
                return time.monotonic() - self.started_at
            if cancelled is not None and cancelled():
                raise self.error(f"start-up of the {self.name} was cancelled")
            if time.monotonic() >= deadline:
                raise self.error(
                    f"the {self.name} was not ready after {timeout:.0f} s on {self.health_url}{self._log_hint()}"
                )
            time.sleep(delay)
            delay = min(delay * 1.5, 1.0)

    def stop(self, timeout: float | None = None) -> int | None:
        """SIGTERM, then SIGKILL after ``timeout`` seconds; return the exit code (None if never started)."""
        process = self.process
        if process is None:
            return None
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(self.stop_timeout if timeout is None else timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        return process.returncode

    def log_tail(self, lines: int = 20) -> str:
        if self.log_path is None:
            return "(no log: output went to the terminal)"
        try:
            with open(self.log_path, "rb") as handle:
                handle.seek(0, os.SEEK_END)
                handle.seek(max(0, handle.tell() - 64 * 1024))
                text = handle.read().decode("utf-8", "replace")
        except OSError as exc:
            return f"(log {self.log_path} unreadable: {exc})"
        return "\n".join(text.splitlines()[-lines:])

    def _log_hint(self) -> str:
        if self.log_path is None:
            return " (see its output above)"
        return f"; end of {self.log_path}:\n{self.log_tail(15)}"

    def __enter__(self):
        self.start()
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def start(self):
        raise NotImplementedError


# --- Supervisor state ---------------------------------------------------------------------------
# A supervisor (``manage.py llm_server``) writes what its server is doing to a small JSON file, so
# that other processes on the machine (the web server's /health/, the demo's status lines) can tell
# "answering" from "crash-looping" without sending it work. States: starting, ready, restarting,
# given_up, stopped.


def supervisor_state_path(data_dir: Path, name: str, port: int) -> Path:
    """Where the supervisor of server ``name`` on ``port`` keeps its state."""
    return Path(data_dir) / "run" / f"{name}-{port}.json"


def supervisor_state_write(path: Path, *, state: str, detail: str, **extra: object) -> None:
    """Replace the state file atomically; records this process's pid and the time."""
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"state": state, "detail": detail, "pid": os.getpid(), "at": time.time(), **extra}
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(record) + "\n")
    os.replace(tmp, path)


def supervisor_state_read(path: Path) -> dict | None:
    """The recorded state, or None when there is none or its supervisor no longer runs (a state left
    behind by a killed supervisor says nothing about the server now)."""
    try:
        record = json.loads(Path(path).read_text())
        pid = int(record["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if record.get("state") not in {"stopped", "given_up"} and not _pid_alive(pid):
        return None
    return record


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True
