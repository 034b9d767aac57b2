"""The validated benchmark config: any edit is caught, the signature tells this server's key from
others, and a run accepts only a registered or validly signed config."""

import pytest

from annotation.configs.config_export import (
    HASH_KEY,
    SIGNATURE_KEY,
    SignatureState,
    config_acceptance,
    config_hash,
    config_render,
    config_seal,
    config_verify,
    signing_key_id,
)
from tests.support import minimal_config_body

KEY = "a-test-signing-key-of-this-deployment"
OTHER_KEY = "a-test-signing-key-of-another-deployment"


def unsigned(document: dict) -> dict:
    body = {k: v for k, v in document.items() if k not in (HASH_KEY, SIGNATURE_KEY)}
    return {**body, HASH_KEY: config_hash(body)}


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_config_verification_catches_any_one_byte_edit(fmt):
    text = config_render(config_seal(minimal_config_body(), key=KEY), fmt)
    assert config_verify(text, fmt, key=KEY).ok
    for position in range(0, len(text), max(1, len(text) // 25)):
        for replacement in ("x", " ", "9"):
            if text[position] == replacement:
                continue
            tampered = text[:position] + replacement + text[position + 1 :]
            assert not config_verify(tampered, fmt, key=KEY).ok, (position, replacement)
    assert not config_verify(text + " ", fmt, key=KEY).ok


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_an_edit_of_the_signature_alone_breaks_the_hash(fmt):
    document = config_seal(minimal_config_body(), key=KEY)
    value = document[SIGNATURE_KEY]["value"]
    document[SIGNATURE_KEY]["value"] = ("1" if value[0] != "1" else "2") + value[1:]
    verification = config_verify(config_render(document, fmt), fmt, key=KEY)
    assert not verification.ok and "content hash mismatch" in verification.problems[0]


def test_yaml_is_written_without_anchors_even_for_shared_values():
    text = config_render(config_seal(minimal_config_body(), key=KEY), "yaml")
    assert "&id" not in text and "*id" not in text
    assert config_verify(text, "yaml", key=KEY).ok


def test_signature_states():
    document = config_seal(minimal_config_body(), key=KEY)
    text = config_render(document, "json")
    assert document[SIGNATURE_KEY]["key_id"] == signing_key_id(KEY) and KEY not in text
    assert config_verify(text, "json", key=KEY).signature is SignatureState.VALID
    other = config_verify(text, "json", key=OTHER_KEY)
    assert other.ok and other.signature is SignatureState.INVALID
    assert signing_key_id(KEY) in other.signature_problem and signing_key_id(OTHER_KEY) in other.signature_problem
    absent = config_verify(config_render(unsigned(document), "json"), "json", key=KEY)
    assert absent.ok and absent.signature is SignatureState.ABSENT
    # Same key id, content changed and the hash recomputed: the signature gives it away.
    forged = {**document, "name": "forged"}
    forged[HASH_KEY] = config_hash(forged)
    wrong = config_verify(config_render(forged, "json"), "json", key=KEY)
    assert wrong.ok and wrong.signature is SignatureState.INVALID
    assert "does not match the content" in wrong.signature_problem


def test_acceptance_needs_a_registered_hash_or_a_valid_signature():
    signed = config_render(config_seal(minimal_config_body(), key=KEY), "json")
    bare = config_render(unsigned(config_seal(minimal_config_body(), key=KEY)), "json")
    assert config_acceptance(config_verify(signed, "json", key=KEY), registered=False).accepted
    assert config_acceptance(config_verify(bare, "json", key=KEY), registered=True).accepted
    # A rotated key does not lock out this deployment's own exports.
    assert config_acceptance(config_verify(signed, "json", key=OTHER_KEY), registered=True).accepted
    refused = config_acceptance(config_verify(bare, "json", key=KEY), registered=False)
    assert not refused.accepted and "not exported by this deployment" in refused.reason
    assert "carries no signature" in refused.reason and "SHIFTLAB_CONFIG_SIGNING_KEY" in refused.reason
    foreign = config_acceptance(config_verify(signed, "json", key=OTHER_KEY), registered=False)
    assert not foreign.accepted and "signature does not match this server's key" in foreign.reason
    broken = config_acceptance(config_verify(signed.replace('"ok"', '"OK"'), "json", key=KEY), registered=True)
    assert not broken.accepted and "content hash mismatch" in broken.reason
