"""The LLM judge with the real embedded LLM (SmolLM2 on llama.cpp): caching, bounded retries of
unparseable answers, and evaluation against STS gold scores. The tiny model is a poor judge: the
tests check the machinery, not the correlation."""

import io

import pytest
from django.conf import settings
from django.core.management import call_command

from datasets.services import dataset_import
from transforms.judge_services import JudgeParams, judge_evaluate, judge_pairs
from transforms.models import Judgement

pytestmark = pytest.mark.django_db


@pytest.fixture
def sts(db):
    return dataset_import(source=settings.BASE_DIR / "fixtures/sts/demo-sts.csv", task="sts", name="demo-sts")


def test_judgements_are_cached_and_failures_are_kept_as_none(llm_backend):
    pairs = [("A dog runs in the park.", "A dog is running in a park."), ("The sky is blue.", "Stocks fell.")]
    first = judge_pairs(kind="similarity", pairs=pairs, params=JudgeParams(max_attempts=2))
    assert len(first) == 2
    for judgement in first:
        assert judgement.score is None or 0 <= judgement.score <= 5
        assert judgement.attempt <= 1
        if judgement.score is None:
            assert judgement.attempt == 1  # retried once with a new seed before giving up
    n_rows = Judgement.objects.count()
    again = judge_pairs(kind="similarity", pairs=pairs, params=JudgeParams(max_attempts=2))
    assert [j.pk for j in again] == [j.pk for j in first] and Judgement.objects.count() == n_rows
    other_kind = judge_pairs(kind="quality", pairs=pairs[:1], params=JudgeParams(max_attempts=1))
    assert other_kind[0].kind == "quality" and Judgement.objects.count() > n_rows


def test_judge_evaluate_command_prints_overall_and_per_bin_figures(llm_backend, sts):
    out = io.StringIO()
    call_command("judge", "evaluate", "--dataset", "demo-sts", "--limit", "12", "--max-attempts", "1", stdout=out)
    text = out.getvalue()
    assert "Judge on demo-sts: 12 pairs" in text and "Spearman overall" in text
    for label in ("[0,5)", "[5,10)", "[10,15)", "[15,20)", "20+", "[4,5]"):
        assert label in text
    result = judge_evaluate(dataset=sts, limit=12, params=JudgeParams(max_attempts=1))
    assert result.n == 12 and sum(b.n for b in result.by_length.values()) == result.n_parsed
