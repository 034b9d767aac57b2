"""An exported benchmark config is the same bytes for the same inputs, across refactors.

The scenario is fixed (the demo STS data, a seeded random-keywords run, a published study, a passed
gate, an approval, one clock reading). The sha256 values are those of the export written by the
code before the restructuring of issue 28 (commit 33c7a67), so a change of layout that changed a
byte of an export fails here. A deliberate change of the config format updates them, with its
reason in the commit.
"""

from __future__ import annotations

import datetime
import hashlib

import pytest
from django.utils import timezone

from annotation.configs.export_services import benchmark_config_export
from tests.support import keywords_approved, published_keyword_study

BEFORE_ISSUE_28 = {
    "json": "f76d11becc88eac7bdc60932c00e748a01e9aa252611be130f8b5120fbe1dee5",
    "yaml": "63d61e625815f52c45cc8f509f65cc3fc953c0a39eda9d3496774ca76401496e",
}


@pytest.mark.django_db(transaction=True, reset_sequences=True)
def test_an_export_of_fixed_inputs_is_the_same_bytes_as_before(researcher, tmp_path, settings, monkeypatch):
    settings.DATA_DIR = tmp_path
    settings.EMBEDDING_CACHE_DIR = tmp_path / "embeddings"
    fixed = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)
    monkeypatch.setattr(timezone, "now", lambda: fixed)
    study = published_keyword_study(researcher=researcher, name="bytes", limit=5, items=6, batch_size=3)
    keywords_approved(study, researcher, comment="ok")
    config = benchmark_config_export(actor=researcher, name="real")
    digests = {fmt: hashlib.sha256(getattr(config, f"{fmt}_text").encode()).hexdigest() for fmt in BEFORE_ISSUE_28}
    assert digests == BEFORE_ISSUE_28
