"""Generator selection pooled over two paraphrase-like transformations with judged similarity as a
criterion, on the embedded LLM (SmolLM2 as both candidates and judge): the pooled scores are
recomputed here from the judgement cache, and the page shows the pooled and top-k tables."""

from __future__ import annotations

import numpy as np
import pytest
from django.conf import settings
from django.urls import reverse

from core.errors import ShiftlabError
from corpora.services import dataset_import
from transforms.backends import reset_backends
from transforms.judge_services import JudgeReportCreateRequest, judge_report_create, judge_report_execute
from transforms.judgement_services import JudgeParams, judge_pairs
from transforms.models import TransformedItem
from transforms.params import GenerationParams
from transforms.selection_services import judge_report_create_selection

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_candidates(llm_server, settings):
    """Two backend aliases on the test server: distinct model ids keep their caches apart."""
    options = {"base_url": llm_server.base_url, "max_concurrency": 4}
    settings.TRANSFORM_BACKENDS = {
        "default": {
            "BACKEND": "transforms.backends.openai_compat.OpenAICompatBackend",
            "OPTIONS": {**options, "model": llm_server.model},
        },
        "twin": {
            "BACKEND": "transforms.backends.openai_compat.OpenAICompatBackend",
            "OPTIONS": {**options, "model": llm_server.model + "-twin"},
        },
    }
    reset_backends()
    yield
    reset_backends()


def _mean_score(run, kind: str, seed: int) -> float | None:
    ok = TransformedItem.objects.filter(run=run, ok=True).order_by("item__position", "side")
    judged = judge_pairs(
        kind=kind, pairs=[(t.source_text, t.output_text) for t in ok], seed=seed, params=JudgeParams(max_attempts=1)
    )
    scores = [j.score for j in judged if j.score is not None]
    return float(np.mean(scores)) if scores else None


def test_pooled_selection_with_judged_similarity(two_candidates, client, researcher):
    sts = dataset_import(source=settings.BASE_DIR / "fixtures/sts/demo-sts.csv", task="sts", name="demo-sts")
    report = judge_report_create_selection(
        dataset=sts,
        transformations=["paraphrase", "style_change"],
        candidates=["default", "twin"],
        judges=["default"],
        criteria=["similarity", "quality"],
        top_k=1,
        limit=1,
        seed=4,
        generation_params=GenerationParams(max_tokens=48, max_attempts=1),
        params=JudgeParams(max_attempts=1),
        n_resamples=200,
        dispatch=False,
    )
    assert report.options["criteria"] == ["similarity", "quality"] and report.runs.count() == 4
    report = judge_report_execute(report_id=report.pk)
    assert report.status == "succeeded", report.error
    result = report.result
    assert report.done == report.total == 8 + 8 * 2  # texts, then one judge x two kinds per text
    assert result["transformations"] == ["paraphrase", "style_change"]
    assert set(result["by_transformation"]["style_change"]) == {"similarity", "quality"}
    runs = {(r.transformation, r.generator.backend_alias): r for r in report.runs.select_related("generator")}
    for kind in ("similarity", "quality"):
        pooled = result["pooled"][kind]
        for candidate in ("default", "twin"):
            means = [_mean_score(runs[(t, candidate)], kind, seed=4) for t in ("paraphrase", "style_change")]
            for t, mean in zip(("paraphrase", "style_change"), means, strict=True):
                assert pooled["by_transformation"][t][candidate] == pytest.approx(mean)
            expected = None if None in means else float(np.mean(means))
            assert pooled["overall"][candidate]["mean"] == pytest.approx(expected)
        assert set(pooled["top_k"]) == {"paraphrase", "style_change", "pooled"}
        assert all(len(members) <= 1 for members in pooled["top_k"].values())
    client.force_login(researcher)
    page = client.get(reverse("transforms:judge-report", args=[report.pk])).content.decode()
    for key in ("pooled_similarity", "top_k_similarity", "crossings_quality", "crossover_style_change_similarity"):
        assert f'id="table-{key}"' in page


def test_similarity_criterion_is_refused_for_translation(two_candidates):
    sts = dataset_import(source=settings.BASE_DIR / "fixtures/sts/demo-sts.csv", task="sts", name="demo-sts")
    with pytest.raises(ShiftlabError, match="translation change length or language"):
        judge_report_create(
            dispatch=False,
            request=JudgeReportCreateRequest(
                kind="selection",
                dataset=sts.name,
                transformations=["paraphrase", "translation"],
                candidates=["default", "twin"],
                criteria=["similarity"],
            ),
        )
