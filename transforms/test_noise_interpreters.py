"""Noise is the same bytes under other Python versions (issue 30): the digests of
``benchmarks/noise_interpreters.py`` over texts in established scripts, every kind × severity ×
keyboard layout, were equal under CPython 3.7.16, 3.8.18, 3.9.18, 3.10.13, 3.11.2, 3.11.7, 3.12.1
and 3.13.0 (Unicode 11.0 to 15.1, Linux x86_64); this interpreter must give them too. Letters that
Unicode added in 13.0 to 15.1 are the documented exception: their digests follow the Unicode
version."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

from transforms import noise

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "noise_interpreters.py"
# Combined sha256 of the "scripts" set, equal under every interpreter named above.
SCRIPTS_ACROSS_VERSIONS = "52b42ef8b8f68f56030a28f6a5c6df3d2e5a9187729ba2ac4d00d6e851decdb9"
# The "new_letters" set under Unicode 14.0.0 (Python 3.11): 13.0 and 15.x give other digests.
NEW_LETTERS_UNICODE_14 = "f2a4f955e7ea1a58c248f968f351e8d324cb7146cc1af38fc2944ba0904c500f"


def script_module():
    spec = importlib.util.spec_from_file_location("noise_interpreters", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_established_scripts_give_the_digests_every_python_version_gave():
    script = script_module()
    here = script.case_digests(noise)
    assert script.combined(here["scripts"]) == SCRIPTS_ACROSS_VERSIONS
    if unicodedata.unidata_version == "14.0.0":
        assert script.combined(here["new_letters"]) == NEW_LETTERS_UNICODE_14
    # The standalone run (the modules loaded by path, without the project's package) gives the
    # same digests as the package's own import: what it reports for other interpreters holds here.
    done = subprocess.run([sys.executable, str(SCRIPT), "--digests"], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout)["digests"] == here


def test_the_new_letters_are_letters_words_and_cases_as_the_unicode_version_says():
    """Why the second set differs: these code points are letters only from the version that added them."""
    script = script_module()
    if unicodedata.unidata_version != "14.0.0":
        pytest.skip("the expectations below are Unicode 14.0's")
    toto, kawi = "\U0001e290", "\U00011f04"  # Toto (Unicode 14.0) and Kawi (15.0)
    assert toto.isalpha() and not kawi.isalpha()
    text = script.TEXTS["new_letters"][1]
    assert kawi in text and toto in script.TEXTS["new_letters"][0]
