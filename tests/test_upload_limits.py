"""Upload limits (issue 27, finding 9b): every upload is refused by its size before it is read into
memory. The control pool upload took 100 MB and peaked at 1.45 GB (``benchmarks/control_pool_memory.py``
measures it); an API JSON body of any size was read whole."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from annotation.models import Study
from annotation.science.design import StudyDesign
from annotation.studies.design_services import StudyCreateRequest, study_create
from corpora.services import dataset_import
from tests.support import api_as, eager_keyword_run, page_as, roster_at_least, rostered
from tests.test_control_items import FIXTURES

pytestmark = pytest.mark.django_db
MB = 2**20


def pool_of(size: int) -> bytes:
    """Distinct, valid easy-negative pairs filling ``size`` bytes of JSON Lines."""
    lines, total, n = [], 0, 0
    while total < size:
        line = json.dumps(
            {"text_a": f"The cat sat on mat {n}.", "text_b": "A dog ran far away.", "kind": "easy_negative"}
        )
        lines.append(line + "\n")
        total += len(line) + 1
        n += 1
    return "".join(lines).encode()


@pytest.fixture
def draft_study(researcher):
    intents = dataset_import(source=FIXTURES / "classification/demo-intents", task="classification", name="intents")
    run = eager_keyword_run(intents, limit=20)
    design = StudyDesign(items_per_transformation=8, batch_size=4, controls_per_batch=2, llm_judges=(), seed=3)
    roster_at_least(run.project, design.raters_per_item)
    return study_create(actor=None, request=rostered(StudyCreateRequest(name="pool-limit", runs=[run], design=design)))


def test_a_control_pool_over_the_limit_is_refused_by_its_size_on_the_api_and_the_page(researcher, draft_study):
    big = pool_of(11 * MB)
    answer = api_as(researcher).post(
        f"/api/studies/{draft_study.pk}/lock/", {"control_pool": SimpleUploadedFile("pool.jsonl", big)}
    )
    assert answer.status_code == 400, answer.content[:500]
    assert "pool.jsonl: the file has 11.0 MB, more than the 10 MB a control pool may have" in answer.json()["detail"]
    page = page_as(researcher).post(
        f"/annotation/studies/{draft_study.pk}/",
        {"action": "lock", "control_pool": SimpleUploadedFile("pool.jsonl", big)},
        follow=True,
    )
    assert "more than the 10 MB a control pool may have" in page.content.decode()
    assert Study.objects.get(pk=draft_study.pk).locked_at is None


def test_an_api_json_body_over_the_limit_is_refused_without_reading_it_all(researcher, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1 * MB
    body = json.dumps({"text": "x" * (2 * MB), "format": "json"})
    answer = api_as(researcher).post("/api/benchmark-configs/verify/", body, content_type="application/json")
    assert answer.status_code == 400
    assert "The request body is over 1 MB" in answer.json()["detail"]
