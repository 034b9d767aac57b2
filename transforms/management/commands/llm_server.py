"""``manage.py llm_server``: fetch an embedded model and serve it with llama.cpp until stopped.

The server is llama.cpp's own ``llama-server`` with parallel slots when its binary is built
(``scripts/build_llama_server.sh``, ``transforms.llama_build``), else llama-cpp-python's server, which
answers one request at a time; the first lines printed say which, and why.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import CommandError

from core.commands import ShiftlabCommand
from core.local_server import supervisor_state_path, supervisor_state_write
from transforms.cpu_features import default_slots, memory_available
from transforms.embedded import (
    DEFAULT_MODEL,
    EMBEDDED_MODELS,
    INSTALL_HINT,
    LlamaServer,
    LlamaServerError,
    default_models_dir,
    ensure_model,
    exit_description,
    llama_cpp_available,
    port_in_use,
)
from transforms.llama_build import CHOICE_ENV, BinaryChoice, choose_binary

SERVERS = ("auto", "llama-server", "llama-cpp-python")


def server_choice(requested: str, environ: dict[str, str] | None = None) -> BinaryChoice:
    """The ``llama-server`` binary to run for ``--server requested`` (None: llama-cpp-python's server).

    ``auto`` takes the built binary when it runs and falls back otherwise; ``llama-server`` insists on
    it (a CommandError says why there is none); ``llama-cpp-python`` never uses it."""
    if requested == "llama-cpp-python":
        return BinaryChoice(None, "--server llama-cpp-python")
    env = dict(os.environ if environ is None else environ)
    if requested == "llama-server":
        env.pop(CHOICE_ENV, None)
        choice = choose_binary(env)
        if choice.binary is None:
            raise CommandError(f"--server llama-server: {choice.reason}")
        return choice
    return choose_binary(env)


def slots_wanted(option: int | None, setting: int) -> tuple[int, str]:
    """Parallel slots and where the number comes from: ``--parallel``, else the setting
    (``SHIFTLAB_LLM_PARALLEL``), else the default (``cpu_features.default_slots``)."""
    if option:
        return option, "--parallel"
    if setting:
        return setting, "SHIFTLAB_LLM_PARALLEL"
    available = memory_available()
    if available is None:
        return default_slots(None), "default; memory available unknown"
    return default_slots(available), f"default for {available / 1024**3:.0f} GiB of memory available"


class Command(ShiftlabCommand):
    help = (
        "Download (once) and verify an embedded GGUF model, then serve it with llama.cpp's "
        "OpenAI-compatible server, restarting it if it dies. Ctrl-C or SIGTERM stops it. "
        f"Models: {', '.join(sorted(EMBEDDED_MODELS))}."
    )

    # A crash within QUICK_CRASH_S of a start counts as quick; MAX_QUICK_CRASHES in a row end the command.
    QUICK_CRASH_S = 60.0
    MAX_QUICK_CRASHES = 5
    BACKOFF_FIRST_S = 1.0
    BACKOFF_MAX_S = 30.0

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.stop_event = threading.Event()
        self.server: LlamaServer | None = None
        self.restarts = 0
        self.announced = False
        self.binary_choice = BinaryChoice(None, "")
        self.fallback_reason = ""

    def add_arguments(self, parser):
        parser.add_argument("--model", default=DEFAULT_MODEL, help=f"model name (default {DEFAULT_MODEL})")
        parser.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
        parser.add_argument("--port", type=int, default=8081, help="TCP port (default 8081)")
        parser.add_argument(
            "--models-dir",
            type=Path,
            default=None,
            help="model cache (default $SHIFTLAB_MODELS_DIR, else ~/.cache/shiftlab/models)",
        )
        parser.add_argument("--download-only", action="store_true", help="fetch and verify the model, then exit")
        parser.add_argument("--n-ctx", type=int, default=4096, help="context window in tokens (default 4096)")
        parser.add_argument(
            "--n-threads",
            type=int,
            default=None,
            help="CPU threads (default SHIFTLAB_LLM_THREADS, else all cores but one)",
        )
        parser.add_argument(
            "--server",
            choices=SERVERS,
            default="auto",
            help="llama.cpp's llama-server (parallel slots; built by scripts/build_llama_server.sh) or "
            "llama-cpp-python's server (one request at a time); auto: llama-server when built, else "
            f"llama-cpp-python (also when {CHOICE_ENV}=off)",
        )
        parser.add_argument(
            "--parallel",
            type=int,
            default=None,
            help="llama-server's parallel slots, requests decoded together (default SHIFTLAB_LLM_PARALLEL, "
            "else 32 with 16 GiB of memory available, 16 with 6 GiB, 4 below; a container's limit counts); each "
            "slot holds --n-ctx tokens",
        )
        parser.add_argument("--log-file", type=Path, default=None, help="server log (default DATA_DIR/log/...)")
        parser.add_argument("--ready-timeout", type=float, default=300.0, help="seconds to wait for start-up")
        parser.add_argument(
            "--state-file",
            type=Path,
            default=None,
            help="where the server's state is kept for /health/ (default DATA_DIR/run/llm-server-PORT.json)",
        )

    def say(self, message: str) -> None:
        self.stdout.write(message)
        self.stdout.flush()

    def handle(self, *args, **options):
        name = options["model"]
        models_dir = options["models_dir"] or default_models_dir()
        previous = self._install_signal_handlers(self._interrupt)
        try:
            path = ensure_model(name, models_dir=models_dir, progress=self.say)
        except KeyboardInterrupt:
            raise CommandError(f"{name}: download interrupted; partial files were removed") from None
        finally:
            self._restore_signal_handlers(previous)
        if options["download_only"]:
            self.say(self.style.SUCCESS(f"{name}: {path} (SHA-256 verified)"))
            return

        if options["parallel"] is not None and options["parallel"] < 1:
            raise CommandError("--parallel must be at least 1")
        self.binary_choice = server_choice(options["server"])
        if self.binary_choice.binary is None:
            self._fall_back(self.binary_choice.reason)
        n_threads = options["n_threads"] or int(getattr(settings, "EMBEDDED_LLM_THREADS", 0) or 0) or None
        if n_threads is not None and n_threads < 1:
            raise CommandError("--n-threads must be at least 1")
        slots, slots_origin = slots_wanted(options["parallel"], int(getattr(settings, "EMBEDDED_LLM_PARALLEL", 0) or 0))
        host, port = options["host"], options["port"]
        if port_in_use(port, host):
            raise CommandError(f"port {port} on {host} is already in use; pick another with --port")
        log_file = options["log_file"] or Path(settings.DATA_DIR) / "log" / f"llama-cpp-{port}.log"
        self.state_file = options["state_file"] or supervisor_state_path(settings.DATA_DIR, "llm-server", port)

        def make_server() -> LlamaServer:
            return LlamaServer(
                path,
                model_alias=name,
                host=host,
                port=port,
                n_ctx=options["n_ctx"],
                n_threads=n_threads,
                log_path=log_file,
                binary=self.binary_choice.binary,
                slots=slots if self.binary_choice.binary is not None else 1,
            )

        if self.binary_choice.binary is not None:
            threads = make_server().threads
            self.say(
                f"Serving with llama.cpp's llama-server, {slots} parallel slots ({slots_origin}), "
                f"{threads} CPU thread{'s' if threads != 1 else ''}: {self.binary_choice.reason}"
            )

        previous = self._install_signal_handlers(self._request_stop)
        try:
            self._supervise(make_server, options["ready_timeout"])
        except CommandError as exc:
            self._state("given_up", str(exc).splitlines()[0])
            raise
        finally:
            if self.server is not None:
                self.server.stop()
            self._restore_signal_handlers(previous)
        self._state("stopped", "the supervisor was stopped")
        self.say("Embedded LLM server stopped.")

    def _fall_back(self, reason: str) -> None:
        """Use llama-cpp-python's server from now on, and say why."""
        if not llama_cpp_available():
            raise CommandError(
                f"no server to run: {reason}; and llama-cpp-python is not installed in this environment; {INSTALL_HINT}"
            )
        self.binary_choice = BinaryChoice(None, reason)
        self.fallback_reason = reason
        self.say(f"Serving with llama-cpp-python's server, one request at a time: {reason}")

    def _state(self, state: str, detail: str, **extra) -> None:
        """Record what the server is doing for /health/ and the demo's status lines."""
        server = self.server
        base_url = server.base_url if server is not None and server.port else ""
        if server is not None:
            extra = {"server": server.kind, "slots": server.slots if server.binary else 1, **extra}
        supervisor_state_write(
            self.state_file, state=state, detail=detail, restarts=self.restarts, base_url=base_url, **extra
        )

    def _request_stop(self, signum, frame) -> None:
        self.stop_event.set()

    def _interrupt(self, signum, frame) -> None:
        raise KeyboardInterrupt  # unwinds the download: pip is killed, temporary files are removed

    def _install_signal_handlers(self, handler) -> dict:
        """Route SIGINT, SIGTERM and SIGHUP to ``handler``; return the previous handlers."""
        if threading.current_thread() is not threading.main_thread():
            return {}  # e.g. call_command from a test thread: the caller sets stop_event instead
        previous = {}
        for signum in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)):
            if signum is not None:
                previous[signum] = signal.signal(signum, handler)
        return previous

    @staticmethod
    def _restore_signal_handlers(previous: dict) -> None:
        for signum, handler in previous.items():
            signal.signal(signum, handler)

    def _supervise(self, make_server, ready_timeout: float) -> None:
        quick_crashes = 0
        while not self.stop_event.is_set():
            server = self.server = make_server()
            self._state("starting", "loading the model, then a warm-up generation")
            try:
                server.start()
                seconds = server.wait_ready(ready_timeout, cancelled=self.stop_event.is_set)
            except LlamaServerError as exc:
                server.stop()
                if self.stop_event.is_set():
                    return
                if server.binary is not None and not self.announced and llama_cpp_available():
                    # llama-server never came up here (a binary built for another CPU, an option this
                    # build lacks): serve with llama-cpp-python's server, where someone installed it
                    # (make install no longer does), instead of crash-looping.
                    self._fall_back(f"llama-server did not start ({str(exc).splitlines()[0]}; log {server.log_path})")
                    continue
                failure = str(exc)
            else:
                why = f" ({self.fallback_reason})" if server.binary is None and self.fallback_reason else ""
                self._state(
                    "ready", f"answered a warm-up generation {seconds:.1f} s after starting; {server.describe()}{why}"
                )
                self._announce(server, seconds)
                while not self.stop_event.wait(1.0):
                    if not server.running:
                        break
                if self.stop_event.is_set():
                    return
                failure = f"llama.cpp server crashed ({exit_description(server.process.returncode)})"
                server.stop()  # reaps it and removes what it leaves behind (its slot directory)

            uptime = time.monotonic() - (server.started_at or time.monotonic())
            quick_crashes = quick_crashes + 1 if uptime < self.QUICK_CRASH_S else 0
            if quick_crashes >= self.MAX_QUICK_CRASHES:
                raise CommandError(
                    f"giving up: the server crashed {quick_crashes} times in a row within "
                    f"{self.QUICK_CRASH_S:.0f} s of starting; last log line: {last_log_line(server.log_tail(40))}\n"
                    f"Last failure: {failure}\n"
                    f"End of {server.log_path}:\n{server.log_tail()}"
                )
            delay = min(self.BACKOFF_FIRST_S * 2 ** max(quick_crashes - 1, 0), self.BACKOFF_MAX_S)
            why = last_log_line(server.log_tail(40))
            self._state(
                "restarting",
                f"{failure.splitlines()[0]} after {uptime:.0f} s; restart {quick_crashes} of "
                f"{self.MAX_QUICK_CRASHES} in {delay:.0f} s. Last log line: {why}",
                log=str(server.log_path),
            )
            self.stderr.write(
                f"{failure.splitlines()[0]} (after {uptime:.0f} s); restarting in {delay:.0f} s "
                f"[{quick_crashes}/{self.MAX_QUICK_CRASHES}]; last log line: {why}; log: {server.log_path}"
            )
            self.restarts += 1
            self.stop_event.wait(delay)

    def _announce(self, server: LlamaServer, seconds: float) -> None:
        if self.announced:
            self.say(
                f"Embedded LLM server restarted on {server.base_url} (pid {server.process.pid}, {server.describe()})."
            )
            return
        self.announced = True
        self.say(
            self.style.SUCCESS(f"Embedded LLM {server.model_alias} ready at {server.base_url}")
            + f" (started in {seconds:.1f} s, pid {server.process.pid}, log {server.log_path})\n"
            f"Server: {server.describe()}\n"
            "Point Shiftlab at it with:\n"
            f"  SHIFTLAB_LLM_BASE_URL={server.base_url}\n"
            f"  SHIFTLAB_LLM_MODEL={server.model_alias}\n"
            "Ctrl-C stops it."
        )


def last_log_line(tail: str) -> str:
    """The line of a server log that most likely says why it stopped: the last one that is not
    blank, not one of our own headers and not an HTTP access line."""
    for line in reversed(tail.splitlines()):
        text = line.strip()
        if text and not text.startswith("===") and "HTTP/1.1" not in text:
            return text[:300]
    return "(the log is empty)"
