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

from annotation.export_services import BenchmarkConfigExportRequest, benchmark_config_export
from tests.support import keywords_approved, published_keyword_study

# Issue 39 changed the inputs, not the layout: a study of 6 items (2 easy positives) locks only
# with the recorded detectability override, so its design and its exported study carry the reason
# and "too few controls to estimate detectability (2 easy positives)". These are the digests of the
# export (unchanged in layout since issue 28) with only that change applied.
BEFORE_ISSUE_28 = {
    "json": "fb7d254cf5fa7962cdb69c12fc15945719e0ca295d3fdfbd342a839a4431ec8d",
    "yaml": "fa32d5bf8b42eef0d9367adcff1a930c03b6f5b90568973f9b9f2bf1cbf47288",
}


@pytest.mark.django_db(transaction=True, reset_sequences=True)
def test_an_export_of_fixed_inputs_is_the_same_bytes_as_before(researcher, tmp_path, settings, monkeypatch):
    settings.DATA_DIR = tmp_path
    settings.EMBEDDING_CACHE_DIR = tmp_path / "embeddings"
    fixed = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)
    monkeypatch.setattr(timezone, "now", lambda: fixed)
    study = published_keyword_study(researcher=researcher, name="bytes", limit=5, items=6, batch_size=3)
    keywords_approved(study, researcher, comment="ok")
    config = benchmark_config_export(actor=researcher, request=BenchmarkConfigExportRequest(name="real"))
    digests = {fmt: hashlib.sha256(getattr(config, f"{fmt}_text").encode()).hexdigest() for fmt in BEFORE_ISSUE_28}
    assert digests == BEFORE_ISSUE_28
