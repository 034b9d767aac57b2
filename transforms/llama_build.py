"""Which llama.cpp server program the embedded LLM runs: where llama.cpp's own ``llama-server``
binary lives and whether there is one that runs; else whether llama-cpp-python's server is there
(``transforms.embedded.LlamaServer`` runs the one chosen).

Adapter module (files, a subprocess), no Django: ``scripts/build_llama_server.sh``, the
``llm_server`` command, the test fixtures and the benchmarks share it.

``llama-server`` serves several requests at once (``--parallel N`` slots decoded together,
continuous batching), where llama-cpp-python's server answers one at a time. No PyPI package ships
a Linux binary, so ``scripts/build_llama_server.sh`` compiles it from the llama.cpp sources vendored
in the llama-cpp-python release pinned by ``requirements-embedded.txt``, natively for this CPU. The
binary is kept outside the checkout, in ``<cache>/<build key>/bin/llama-server``: the cache is
``SHIFTLAB_LLAMA_SERVER_CACHE``, else ``$XDG_CACHE_HOME/shiftlab/llama-server`` (``~/.cache/...``),
and the key names the sources and the CPU features (``transforms.cpu_features.build_key``), so a
second clone on the same machine (CI) reuses it and another CPU or release builds its own.
``SHIFTLAB_LLAMA_SERVER_BIN`` names a binary to use instead; ``SHIFTLAB_LLAMA_SERVER=off`` makes
the embedded LLM use llama-cpp-python's server even where the binary exists.

``python -m transforms.llama_build path|key|cflags|status`` prints the binary's path, the build key,
the extra compiler flags for this CPU (the build script asks these) or which server the embedded LLM
will run and why (the demo's status line).
"""

from __future__ import annotations

import importlib.util
import os
import platform
import re
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from transforms.cpu_features import build_key, compile_flags, read_cpu_flags

REPO_DIR = Path(__file__).resolve().parent.parent
REQUIREMENTS = REPO_DIR / "requirements-embedded.txt"
CACHE_ENV = "SHIFTLAB_LLAMA_SERVER_CACHE"
BINARY_ENV = "SHIFTLAB_LLAMA_SERVER_BIN"
CHOICE_ENV = "SHIFTLAB_LLAMA_SERVER"
BUILD_HINT = "scripts/build_llama_server.sh (make install runs it; about 5 minutes on 2 cores, once per machine)"

_PIN = re.compile(r"^llama-cpp-python(?:\[[a-z,]*\])?==([0-9][0-9a-zA-Z.]*)", re.MULTILINE)


def pinned_version(requirements: str) -> str:
    """The llama-cpp-python version pinned in the text of ``requirements-embedded.txt``."""
    match = _PIN.search(requirements)
    if match is None:
        raise ValueError("no pinned llama-cpp-python==VERSION in requirements-embedded.txt")
    return match.group(1)


def cache_root(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    if env.get(CACHE_ENV):
        return Path(env[CACHE_ENV]).expanduser()
    base = Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "shiftlab" / "llama-server"


def this_build_key() -> str:
    return build_key(pinned_version(REQUIREMENTS.read_text()), platform.machine(), read_cpu_flags())


def cached_binary(environ: Mapping[str, str] | None = None) -> Path:
    """Where the build script installs the binary for this checkout's pin and this CPU."""
    return cached_tool("llama-server", environ)


def cached_tool(name: str, environ: Mapping[str, str] | None = None) -> Path:
    """A program of the same build next to ``llama-server`` (``llama-quantize``: the tests requantise
    their model with it)."""
    return cache_root(environ) / this_build_key() / "bin" / name


@dataclass(frozen=True)
class BinaryChoice:
    """The ``llama-server`` to run (None: use llama-cpp-python's server) and a one-line reason."""

    binary: Path | None
    reason: str


def binary_version(path: Path) -> str | None:
    """The ``version: ...`` line of ``path --version``; None when it does not run."""
    try:
        proc = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:
        return None
    lines = (proc.stdout + proc.stderr).splitlines()
    return next((line.strip() for line in lines if line.startswith("version")), "version unknown")


def choose_binary(environ: Mapping[str, str] | None = None) -> BinaryChoice:
    """``SHIFTLAB_LLAMA_SERVER=off``: none; else ``SHIFTLAB_LLAMA_SERVER_BIN``, else the cached build,
    if it runs (``--version``). The reason says what was found, for the server's status line."""
    env = os.environ if environ is None else environ
    if env.get(CHOICE_ENV, "").strip().lower() in {"off", "0", "no", "false"}:
        return BinaryChoice(None, f"{CHOICE_ENV}={env[CHOICE_ENV]}")
    explicit = env.get(BINARY_ENV)
    path = Path(explicit).expanduser() if explicit else cached_binary(env)
    origin = f"{BINARY_ENV}={explicit}" if explicit else str(path)
    if not path.is_file():
        return BinaryChoice(None, f"no llama-server at {origin}; build it with {BUILD_HINT}")
    version = binary_version(path)
    if version is None:
        return BinaryChoice(None, f"llama-server at {origin} does not run ({path} --version failed); rebuild it")
    return BinaryChoice(path, f"{path} ({version})")


# --- llama-cpp-python's server, the fallback ------------------------------------------------------


def llama_cpp_available(python: str | None = None) -> bool:
    """Whether ``python`` (default: this interpreter) can import llama-cpp-python's server."""
    if python is None or Path(python) == Path(sys.executable):
        return importlib.util.find_spec("llama_cpp") is not None
    probe = subprocess.run([python, "-c", "import llama_cpp.server"], capture_output=True)
    return probe.returncode == 0


def main(argv: list[str]) -> int:
    what = argv[0] if argv else ""
    if what == "path":
        print(cached_binary())
    elif what == "quantize-path":
        print(cached_tool("llama-quantize"))
    elif what == "key":
        print(this_build_key())
    elif what == "cflags":
        print(" ".join(compile_flags(read_cpu_flags())))
    elif what == "status":
        choice = choose_binary()
        if choice.binary is not None:
            print(f"llama.cpp's llama-server, parallel slots: {choice.reason}")
        else:
            print(f"llama-cpp-python's server, one request at a time: {choice.reason}")
    else:
        print("usage: python -m transforms.llama_build path|quantize-path|key|cflags|status", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
