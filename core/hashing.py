"""Content hashes used across apps: one canonical way to hash texts and JSON documents."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace, so equal documents hash equally."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def sha256_json(value: Any) -> str:
    return sha256_text(canonical_json(value))


def sha256_of_hashes(hashes: Iterable[str]) -> str:
    """Order-sensitive digest of a sequence of hex digests."""
    digest = hashlib.sha256()
    for value in hashes:
        digest.update(value.encode("ascii"))
        digest.update(b"\n")
    return digest.hexdigest()
