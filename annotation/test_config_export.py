"""The validated benchmark config: any edit is caught."""

import pytest

from annotation.config_export import config_render, config_seal, config_verify


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_config_verification_catches_any_one_byte_edit(fmt):
    document = config_seal({"transformations": [{"name": "paraphrase", "mean": 4.25, "note": "déjà vu"}]})
    text = config_render(document, fmt)
    assert config_verify(text, fmt).ok
    for position in range(0, len(text), max(1, len(text) // 25)):
        for replacement in ("x", " ", "9"):
            if text[position] == replacement:
                continue
            tampered = text[:position] + replacement + text[position + 1 :]
            assert not config_verify(tampered, fmt).ok, (position, replacement)
    assert not config_verify(text + " ", fmt).ok
