"""Where the embedding cache's shards live (``evaluation.embedding_cache``): files addressed by
slash-separated paths under one root, on a local or shared filesystem (written through a
temporary file renamed in place) or in object storage through fsspec (one PUT per file)."""

from __future__ import annotations

import io
import os
import posixpath
import uuid
from pathlib import Path
from typing import Protocol

import numpy as np
from django.conf import settings

from evaluation.encoders import EncoderError


class Storage(Protocol):
    """Where shards live: files addressed by slash-separated paths under one root."""

    root: str

    def join(self, *parts: str) -> str: ...
    def list(self, directory: str) -> list[str]:
        """Names (not paths) directly under ``directory``; empty when it does not exist."""

    def read(self, path: str) -> bytes: ...
    def write(self, path: str, data: bytes) -> None:
        """Make ``path`` hold ``data``, all of it or nothing, for every reader at once."""

    def delete(self, path: str) -> None: ...
    def load_array(self, path: str, *, mmap: bool) -> np.ndarray: ...


class LocalStorage:
    """A directory of this host, or of a filesystem every host mounts."""

    def __init__(self, root: str):
        self.root = os.path.abspath(root)

    def join(self, *parts: str) -> str:
        return os.path.join(*parts)

    def list(self, directory: str) -> list[str]:
        try:
            return os.listdir(directory)
        except FileNotFoundError:
            return []

    def read(self, path: str) -> bytes:
        return Path(path).read_bytes()

    def write(self, path: str, data: bytes) -> None:
        # A hidden temporary name in the same directory, then an atomic rename over the target.
        os.makedirs(os.path.dirname(path), exist_ok=True)
        temporary = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.{uuid.uuid4().hex}.tmp")
        try:
            with open(temporary, "wb") as handle:
                handle.write(data)
            os.replace(temporary, path)
        finally:
            if os.path.exists(temporary):
                os.unlink(temporary)

    def delete(self, path: str) -> None:
        Path(path).unlink(missing_ok=True)

    def load_array(self, path: str, *, mmap: bool) -> np.ndarray:
        # A memory map stays valid after compaction removes the file, and pages in only what is read.
        return np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)


class FsspecStorage:
    """Object storage (or any fsspec filesystem): every write is one PUT of the whole file."""

    def __init__(self, url: str):
        import fsspec

        try:
            self.fs, self.root = fsspec.core.url_to_fs(url)
        except (ImportError, ValueError) as exc:
            raise EncoderError(
                f"The embedding cache URL {url!r} cannot be opened ({exc}): install the fsspec package of "
                f"its protocol (s3fs for s3://, gcsfs for gs://) or use a filesystem path."
            ) from None

    def join(self, *parts: str) -> str:
        return posixpath.join(*parts)

    def list(self, directory: str) -> list[str]:
        self.fs.invalidate_cache(directory)  # listings are cached by fsspec; other hosts write
        try:
            entries = self.fs.ls(directory, detail=False)
        except FileNotFoundError:
            return []
        return [posixpath.basename(entry.rstrip("/")) for entry in entries]

    def read(self, path: str) -> bytes:
        return self.fs.cat_file(path)

    def write(self, path: str, data: bytes) -> None:
        self.fs.pipe_file(path, data)

    def delete(self, path: str) -> None:
        try:
            self.fs.rm_file(path)
        except FileNotFoundError:
            pass

    def load_array(self, path: str, *, mmap: bool) -> np.ndarray:
        return np.load(io.BytesIO(self.read(path)), allow_pickle=False)


def cache_storage(root: str | Path | None = None) -> Storage:
    """The storage of ``root``, else of the configured cache URL or directory."""
    if root is None:
        root = settings.EMBEDDING_CACHE_URL or settings.EMBEDDING_CACHE_DIR
    text = str(root)
    if text.startswith("file://"):
        return LocalStorage(text.removeprefix("file://"))
    return FsspecStorage(text) if "://" in text else LocalStorage(text)
