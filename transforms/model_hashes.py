"""SHA-256 of model files, remembered in a sidecar file (``NAME.sha256``) while the file is unchanged
(same size and modification time), so a 1 GB model is hashed once, not at every start."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path

_CHUNK = 4 * 1024 * 1024


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def file_sha256(path: Path) -> str:
    """The SHA-256 of a model file: from its sidecar when the file is unchanged since the hash was
    recorded, else computed (and recorded)."""
    path = Path(path)
    known = read_sidecar(path)
    if known is not None:
        return known
    digest = sha256_file(path)
    with contextlib.suppress(OSError):  # a read-only model folder: the hash is just not remembered
        write_sidecar(path, digest)
    return digest


def sidecar_path(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def read_sidecar(path: Path) -> str | None:
    """The hash recorded for ``path`` if the file has not changed since it was recorded."""
    try:
        record = json.loads(sidecar_path(path).read_text())
        stat = path.stat()
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict):
        return None
    if record.get("size") != stat.st_size or record.get("mtime_ns") != stat.st_mtime_ns:
        return None
    value = record.get("sha256")
    return value if isinstance(value, str) else None


def write_sidecar(path: Path, sha256: str) -> None:
    stat = path.stat()
    record = {"sha256": sha256, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "file": path.name}
    tmp = sidecar_path(path).with_suffix(".sha256.tmp")
    tmp.write_text(json.dumps(record, indent=1) + "\n")
    os.replace(tmp, sidecar_path(path))
