"""The validated benchmark config: its canonical form, its hash, and verification (pure module).

The document is plain JSON data. Its ``config_hash`` is the sha256 of the canonical JSON of
everything else (sorted keys, no whitespace). It is written as JSON and as YAML in one canonical
layout each, so verification can insist on both: the declared hash must match the content, and
the file must be byte for byte the canonical rendering of what it contains. Any edit, even one
byte of whitespace, therefore fails verification.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

import yaml

from core.hashing import sha256_json

SCHEMA = "shiftlab.benchmark-config/1"
HASH_KEY = "config_hash"
Format = Literal["json", "yaml"]


def config_hash(document: dict[str, Any]) -> str:
    return sha256_json({k: v for k, v in document.items() if k != HASH_KEY})


def config_seal(document: dict[str, Any]) -> dict[str, Any]:
    """The document with its schema name and its own hash added."""
    body = {k: v for k, v in document.items() if k != HASH_KEY}
    body.setdefault("schema", SCHEMA)
    return {**body, HASH_KEY: config_hash(body)}


def config_render(document: dict[str, Any], fmt: Format) -> str:
    if fmt == "json":
        return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"
    if fmt == "yaml":
        return yaml.safe_dump(document, sort_keys=True, allow_unicode=True, default_flow_style=False, width=100)
    raise ValueError(f"unknown format {fmt!r}: use json or yaml")


def format_of(filename: str) -> Format:
    lower = filename.lower()
    if lower.endswith(".json"):
        return "json"
    if lower.endswith((".yaml", ".yml")):
        return "yaml"
    raise ValueError(f"cannot tell the format of {filename!r}: name it *.json, *.yaml or *.yml")


@dataclass(frozen=True)
class Verification:
    ok: bool
    declared_hash: str | None
    computed_hash: str | None
    problems: tuple[str, ...]
    document: dict[str, Any] | None


def config_verify(text: str, fmt: Format) -> Verification:
    """Check a rendered config: it parses, carries the schema, its hash matches its content, and
    the text is exactly the canonical rendering (so edits outside the data are caught too)."""
    try:
        document = json.loads(text) if fmt == "json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        return Verification(False, None, None, (f"the file does not parse as {fmt}: {exc}",), None)
    if not isinstance(document, dict):
        return Verification(False, None, None, ("the file does not hold a benchmark config mapping",), None)
    problems = []
    declared = document.get(HASH_KEY)
    computed = config_hash(document)
    if document.get("schema") != SCHEMA:
        problems.append(f"schema is {document.get('schema')!r}, expected {SCHEMA!r}")
    if declared != computed:
        problems.append(f"content hash mismatch: the file declares {declared}, its content hashes to {computed}")
    if config_render(document, fmt) != text:
        problems.append("the file is not in canonical form: it was edited after export")
    return Verification(not problems, declared, computed, tuple(problems), document)
