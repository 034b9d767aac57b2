"""The validated benchmark config: canonical form, hash, signature, verification and the rule that
decides whether a run may use it (pure module; the key and the list of exports come from the caller).

A config is sealed in two steps. First it is signed: ``signature`` is an HMAC-SHA256, under the
deployment's signing key, of the canonical JSON (sorted keys, no whitespace) of everything but
``config_hash`` and ``signature``. Then it is hashed: ``config_hash`` is the sha256 of the canonical
JSON of everything but ``config_hash``, signature included. So the hash identifies the exact file
(a registered export pins its signature too), and the signature proves that a holder of the key
wrote the content. Each config is written as JSON and as YAML in one canonical layout, and
verification insists on it, so any edit, even one byte of whitespace, fails.

The hash alone proves nothing about where a config comes from: anyone can recompute it. A run
therefore accepts a config only when its content verifies and it was exported by this deployment
(its hash is registered) or it carries a valid signature under this deployment's key
(``config_acceptance``). Whatever made it acceptable, the evidence behind its approvals is then
re-checked for every study of this deployment it names
(``export_services.benchmark_config_evidence_changes``).

Shiftlab's development key is public (the demo signs with it), so its signature proves nothing:
a config signed with it is labelled "signed with the development key" wherever it is shown, never
"validated", and refused where development secrets are not allowed (production settings).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import yaml

from annotation.configs.config_schema import (
    SCHEMA,
    SIGNATURE_ALGORITHM,
    BenchmarkConfigDocument,
    ConfigError,
    Format,
    config_read,
)
from annotation.configs.config_text import config_load
from core.hashing import canonical_json, sha256_json

HASH_KEY = "config_hash"
SIGNATURE_KEY = "signature"
EXPORT_COMMAND = "`python manage.py benchmark_config export`"
DEVELOPMENT_KEY_LABEL = "signed with the development key"
DEVELOPMENT_KEY_NOTE = (
    f"{DEVELOPMENT_KEY_LABEL}: Shiftlab's public demo key, which anyone can sign with, so this config is "
    "not validated (production refuses it)"
)


def config_hash(document: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of everything but the hash (the signature included)."""
    return sha256_json({k: v for k, v in document.items() if k != HASH_KEY})


def signing_key_id(key: str) -> str:
    """A short fingerprint naming a key without revealing it."""
    return hmac.new(key.encode("utf-8"), b"shiftlab benchmark-config key id", hashlib.sha256).hexdigest()[:16]


def config_signed_with(document: dict[str, Any], *, key: str) -> bool:
    """Whether the document's signature names ``key`` (it says nothing about the signature's value:
    a config kept by a run was verified when the run was created)."""
    signature = document.get(SIGNATURE_KEY)
    return isinstance(signature, dict) and signature.get("key_id") == signing_key_id(key)


def _signed_bytes(document: dict[str, Any]) -> bytes:
    return canonical_json({k: v for k, v in document.items() if k not in (HASH_KEY, SIGNATURE_KEY)}).encode("utf-8")


def config_signature(document: dict[str, Any], *, key: str) -> dict[str, str]:
    """The signature block of ``document`` under ``key``."""
    value = hmac.new(key.encode("utf-8"), _signed_bytes(document), hashlib.sha256).hexdigest()
    return {"algorithm": SIGNATURE_ALGORITHM, "key_id": signing_key_id(key), "value": value}


def config_seal(document: dict[str, Any], *, key: str) -> dict[str, Any]:
    """The document with its schema name, its signature under ``key`` and its own hash added."""
    body = {k: v for k, v in document.items() if k not in (HASH_KEY, SIGNATURE_KEY)}
    body.setdefault("schema", SCHEMA)
    signed = {**body, SIGNATURE_KEY: config_signature(body, key=key)}
    return {**signed, HASH_KEY: config_hash(signed)}


class _NoAliasDumper(yaml.SafeDumper):
    """Writes a value shared by two places (a dataset listed in a run and at the top) out twice:
    readers refuse anchors and aliases, and the rendering must not depend on object identity."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def config_render(document: dict[str, Any], fmt: Format) -> str:
    if fmt == "json":
        return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"
    if fmt == "yaml":
        return yaml.dump(
            document,
            Dumper=_NoAliasDumper,
            sort_keys=True,
            allow_unicode=True,
            default_flow_style=False,
            width=100,
        )
    raise ConfigError("", f"unknown format {fmt!r}: use json or yaml")


def format_of(filename: str) -> Format:
    lower = filename.lower()
    if lower.endswith(".json"):
        return "json"
    if lower.endswith((".yaml", ".yml")):
        return "yaml"
    raise ConfigError("", f"cannot tell the format of {filename!r}: name it *.json, *.yaml or *.yml")


class SignatureState(StrEnum):
    VALID = "valid"
    ABSENT = "absent"
    INVALID = "invalid"


@dataclass(frozen=True)
class Verification:
    """What a config file's text proves on its own and under this deployment's key.

    ``ok``: the content verifies: it parses, has the config's shape, its hash matches its content
    and the text is the canonical rendering (``problems`` says what failed otherwise).
    ``signature``: valid, absent, or invalid (``signature_problem`` says why); only checked when
    the content verifies, else absent. ``development_key``: the signature is a valid one under
    Shiftlab's public development key (whatever this server's key is).
    """

    declared_hash: str | None
    computed_hash: str | None
    problems: tuple[str, ...]
    signature: SignatureState
    signature_problem: str
    document: dict[str, Any] | None
    config: BenchmarkConfigDocument | None
    development_key: bool = False

    @property
    def ok(self) -> bool:
        return not self.problems


def config_verify(text: str, fmt: Format, *, key: str, development_key: str = "") -> Verification:
    """Check a rendered config: it parses safely, has the config's shape (typed), its hash matches
    its content, the text is exactly the canonical rendering, whether its signature is valid
    under ``key``, and whether it is a valid one under the public ``development_key``."""
    try:
        document = config_load(text, fmt)
    except ConfigError as exc:
        return Verification(None, None, (str(exc),), SignatureState.ABSENT, "", None, None)
    declared = document.get(HASH_KEY)
    declared = declared if isinstance(declared, str) else None
    computed = config_hash(document)
    problems = []
    config = None
    try:
        config = config_read(document)
    except ConfigError as exc:
        problems.append(f"not a well-formed benchmark config: {exc}")
    if declared != computed:
        problems.append(
            f"content hash mismatch: the file declares {declared}, its content hashes to {computed} "
            "(it was edited after export)"
        )
    if config_render(document, fmt) != text:
        problems.append("the file is not in canonical form: it was edited after export")
    if problems:
        return Verification(declared, computed, tuple(problems), SignatureState.ABSENT, "", document, None)
    state, why = _signature_state(document, config, key=key)
    development = bool(development_key) and _signature_state(document, config, key=development_key)[0] is (
        SignatureState.VALID
    )
    return Verification(declared, computed, (), state, why, document, config, development)


def _signature_state(
    document: dict[str, Any], config: BenchmarkConfigDocument, *, key: str
) -> tuple[SignatureState, str]:
    if config.signature is None:
        return SignatureState.ABSENT, ""
    ours = signing_key_id(key)
    if config.signature.key_id != ours:
        return SignatureState.INVALID, (
            f"it was signed with key {config.signature.key_id}, and this server's key is {ours}"
        )
    expected = config_signature(document, key=key)["value"]
    if not hmac.compare_digest(expected, config.signature.value):
        return SignatureState.INVALID, (
            "it names this server's key but does not match the content (the content was changed after it was signed)"
        )
    return SignatureState.VALID, ""


@dataclass(frozen=True)
class Acceptance:
    accepted: bool
    reason: str  # why it is refused, or on what ground it is accepted


def config_acceptance(verification: Verification, *, registered: bool, development_allowed: bool = True) -> Acceptance:
    """Whether a benchmark run may use a config: its content verifies, and it was exported here
    (``registered``: its hash is one of this deployment's exports) or carries a valid signature
    under this deployment's key. A config signed with the public development key is accepted
    only where ``development_allowed`` (the demo), and then says so."""
    if not verification.ok:
        return Acceptance(
            False,
            "its content does not verify: " + "; ".join(verification.problems) + ". Use the file exactly as "
            f"{EXPORT_COMMAND} wrote it",
        )
    if verification.development_key and not development_allowed:
        return Acceptance(
            False,
            "it is signed with Shiftlab's public development key, which anyone can sign with, so its signature "
            "proves nothing: production refuses it. Export the config again on a deployment that has its own "
            "SHIFTLAB_CONFIG_SIGNING_KEY",
        )
    note = f" ({DEVELOPMENT_KEY_NOTE})" if verification.development_key else ""
    if registered:
        return Acceptance(True, f"exported by this deployment{note}")
    if verification.signature is SignatureState.VALID:
        return Acceptance(True, f"signed with this deployment's key{note}")
    not_here = f"it was not exported by this deployment (no export has hash {verification.declared_hash})"
    if verification.signature is SignatureState.ABSENT:
        why = f"{not_here} and it carries no signature"
    else:
        why = f"{not_here} and its signature does not match this server's key: {verification.signature_problem}"
    return Acceptance(
        False,
        f"{why}. Export the config on this deployment with {EXPORT_COMMAND}, or use a file exported by a "
        "deployment that shares this server's SHIFTLAB_CONFIG_SIGNING_KEY",
    )
