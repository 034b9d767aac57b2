"""On-disk embedding cache: each unique text is encoded once per model revision and prompt.

Layout under ``settings.EMBEDDING_CACHE_DIR`` (default ``DATA_DIR/embeddings``)::

    <model-id-slug>--<revision[:16]>/     one folder per exact model (see Encoder.revision)
        <prompt>/                         "no-prompt", or "prompt-<name>" for instruction prompts
            meta.json                     model id, full revision, prompt name, dimension
            <shard>.keys.npy              sha256 of each text (64-byte ASCII rows)
            <shard>.vectors.npy           float32 rows in the same order

Shards are append-only numpy files (never pickles, never the database). Each write creates a new
shard under a random name, keys first and vectors last, each via an atomic rename: a shard exists
for readers once its vectors file does, so readers never see half a shard and concurrent writers
(Celery workers, parallel tests) never need a lock. A text that two processes encode at the same
moment lands in two shards; either copy serves.
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from django.conf import settings

from core.hashing import sha256_text
from evaluation.encoders import Encoder, EncoderError, slug

_KEY_DTYPE = "S64"


class EmbeddingStore:
    """The shards of one (model revision, prompt) folder, indexed by text hash in memory."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.lock = threading.Lock()
        self._vectors: list[np.ndarray] = []
        self._loaded: set[str] = set()
        self._index: dict[bytes, tuple[int, int]] = {}

    @property
    def dim(self) -> int | None:
        return self._vectors[0].shape[1] if self._vectors else None

    def refresh(self) -> None:
        """Index shards written since the last look (by this or any other process)."""
        if not self.directory.is_dir():
            return
        for vectors_path in sorted(self.directory.glob("*.vectors.npy")):
            shard = vectors_path.name.removesuffix(".vectors.npy")
            if shard in self._loaded:
                continue
            keys = np.load(self.directory / f"{shard}.keys.npy", allow_pickle=False)
            vectors = np.load(vectors_path, mmap_mode="r", allow_pickle=False)
            self._register(shard, keys, vectors)

    def missing(self, keys: Sequence[bytes]) -> list[bytes]:
        return [key for key in keys if key not in self._index]

    def add(self, keys: Sequence[bytes], vectors: np.ndarray, *, meta: dict) -> None:
        if self.dim is not None and vectors.shape[1] != self.dim:
            raise EncoderError(
                f"The model returned {vectors.shape[1]}-dimensional vectors but {self.directory} holds "
                f"{self.dim}-dimensional ones: the model changed without its revision changing."
            )
        self.directory.mkdir(parents=True, exist_ok=True)
        meta_path = self.directory / "meta.json"
        if not meta_path.exists():
            _atomic_write(
                meta_path, lambda handle: handle.write(json.dumps({**meta, "dim": vectors.shape[1]}).encode())
            )
        shard = f"{os.getpid()}-{uuid.uuid4().hex}"
        key_array = np.array(keys, dtype=_KEY_DTYPE)
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        _atomic_write(self.directory / f"{shard}.keys.npy", lambda handle: np.save(handle, key_array))
        _atomic_write(self.directory / f"{shard}.vectors.npy", lambda handle: np.save(handle, vectors))
        self._register(shard, key_array, vectors)

    def rows(self, keys: Sequence[bytes]) -> np.ndarray:
        """Vectors of ``keys`` in their order (every key must be cached)."""
        out = np.empty((len(keys), self.dim or 0), dtype=np.float32)
        if not keys:
            return out
        located = np.array([self._index[key] for key in keys], dtype=np.int64)
        for shard in np.unique(located[:, 0]):
            mask = located[:, 0] == shard
            out[mask] = self._vectors[shard][located[mask, 1]]
        return out

    def _register(self, shard: str, keys: np.ndarray, vectors: np.ndarray) -> None:
        number = len(self._vectors)
        self._vectors.append(vectors)
        self._loaded.add(shard)
        for row, key in enumerate(keys.tolist()):
            self._index.setdefault(key, (number, row))


_stores: dict[Path, EmbeddingStore] = {}
_stores_lock = threading.Lock()


def cache_directory(encoder: Encoder, *, prompt_name: str | None = None, root: Path | None = None) -> Path:
    root = Path(root) if root is not None else Path(settings.EMBEDDING_CACHE_DIR)
    model_folder = f"{slug(encoder.model_id)}--{encoder.revision[:16]}"
    return root / model_folder / ("no-prompt" if prompt_name is None else f"prompt-{slug(prompt_name)}")


def encode_cached(
    encoder: Encoder,
    texts: Sequence[str],
    *,
    prompt_name: str | None = None,
    batch_size: int | None = None,
    root: Path | None = None,
) -> np.ndarray:
    """Embeddings of ``texts`` in input order, encoding only texts never seen for this model
    revision and prompt. Duplicates within ``texts`` are encoded once."""
    directory = cache_directory(encoder, prompt_name=prompt_name, root=root)
    with _stores_lock:
        store = _stores.setdefault(directory, EmbeddingStore(directory))
    keys = [sha256_text(text).encode("ascii") for text in texts]
    with store.lock:
        store.refresh()
        todo = dict.fromkeys(store.missing(keys))
        if todo:
            text_of = dict(zip(keys, texts, strict=True))
            vectors = encoder.encode([text_of[key] for key in todo], batch_size=batch_size, prompt_name=prompt_name)
            if vectors.shape[0] != len(todo):
                raise EncoderError(f"{encoder.model_id} returned {vectors.shape[0]} vectors for {len(todo)} texts.")
            meta = {"model_id": encoder.model_id, "revision": encoder.revision, "prompt_name": prompt_name}
            store.add(list(todo), vectors, meta=meta)
        return store.rows(keys)


def _atomic_write(path: Path, write) -> None:
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        with temporary.open("wb") as handle:
            write(handle)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
