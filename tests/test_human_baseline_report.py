"""Human baselines read against models: the report service, the command and the pages, on
BaselineStudy/Instance/Answer rows written directly and the packaged all-MiniLM-L6-v2.

Every expected score is computed independently of the code under test: scipy's Spearman on the
same numbers, and the benchmark's own ``dataset_evaluate`` for the model.
"""

from __future__ import annotations

import json
from io import StringIO

import numpy as np
import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils import timezone
from scipy import stats

from annotation.models import BaselineAnswer, BaselineInstance, BaselineStudy
from core.hashing import sha256_text
from corpora.models import Dataset, DatasetItem
from evaluation.baseline_services import baseline_report_build
from evaluation.encoders import get_encoder
from evaluation.services import dataset_evaluate

pytestmark = pytest.mark.django_db
MODEL = "all-MiniLM-L6-v2"

PAIRS = [
    ("A man is playing a guitar.", "A person plays a guitar.", 4.6),
    ("A woman is slicing an onion.", "Someone is cutting an onion.", 4.2),
    ("The cat sleeps on the sofa.", "A dog runs in the park.", 0.4),
    ("Two children are swimming.", "Kids swim in a pool.", 3.8),
    ("The stock market fell today.", "Shares dropped sharply on Monday.", 3.0),
    ("A chef is cooking pasta.", "The train arrives at noon.", 0.1),
    ("He reads a book in bed.", "A man is reading before sleep.", 3.4),
    ("The sun is setting over the sea.", "Sunset on the ocean.", 4.0),
    ("She bought a new car.", "A girl is painting a fence.", 0.6),
    ("A bird sings in the tree.", "A bird is sitting on a branch and singing.", 3.6),
]
HUMANS = {
    "anna": [5, 4, 0, 4, 3, 0, 3, 4, 1, 4],
    "ben": [4, 5, 1, 3, 2, 0, 4, 4, 0, 3],
    "carl": [5, 4, 1, 4, 4, 1, 2, 5, 0, None],
}
LLM = [5, 4, 0, 3, 3, 0, 3, 4, 1, None]  # the last reply did not parse


@pytest.fixture
def sts_study():
    dataset = Dataset.objects.create(
        name="hb-sts",
        task_type="sts",
        languages=["en"],
        splits={"test": len(PAIRS)},
        source="test",
        source_format="jsonl",
        content_hash="0" * 64,
        n_items=len(PAIRS),
    )
    study = BaselineStudy.objects.create(
        name="hb-sts-study",
        dataset=dataset,
        task_type="sts",
        split="test",
        n_instances=len(PAIRS),
        instructions="Rate 0-5.",
    )
    now = timezone.now()
    for k, (s1, s2, gold) in enumerate(PAIRS):
        item = DatasetItem.objects.create(
            dataset=dataset,
            split="test",
            item_id=f"p{k}",
            position=k,
            language="en",
            payload={"sentence1": s1, "sentence2": s2},
            gold=gold,
            content_hash=sha256_text(s1 + s2),
        )
        instance = BaselineInstance.objects.create(
            study=study, key=f"sts-{k:04d}", position=k, item=item, texts=[s1, s2], gold=gold
        )
        for rater, values in HUMANS.items():
            if values[k] is not None:
                BaselineAnswer.objects.create(
                    instance=instance, rater=rater, source="human", value=values[k], submitted_at=now
                )
        BaselineAnswer.objects.create(
            instance=instance,
            rater="llm:qwen",
            source="llm",
            value=LLM[k],
            valid=LLM[k] is not None,
            raw="?" if LLM[k] is None else str(LLM[k]),
            submitted_at=now,
        )
    return study


def _rows(report):
    return {row.name: row for row in report.rows}


@pytest.mark.heavy  # a real embedding model
def test_report_scores_humans_llms_and_minilm_with_the_benchmark_evaluator(sts_study):
    report = baseline_report_build(study=sts_study, models=[MODEL])
    rows = _rows(report)
    gold = [g for _, _, g in PAIRS]
    for rater, values in HUMANS.items():
        kept = [(v, g) for v, g in zip(values, gold, strict=True) if v is not None]
        assert rows[rater].score == pytest.approx(stats.spearmanr(*zip(*kept, strict=True)).statistic)
    means = [np.mean([v[k] for v in HUMANS.values() if v[k] is not None]) for k in range(len(PAIRS))]
    humans = rows["humans (pooled)"]
    assert humans.kind == "humans" and humans.score == pytest.approx(stats.spearmanr(means, gold).statistic)
    assert humans.ci_method == "fisher_z" and humans.ci_low < humans.score < humans.ci_high
    assert rows["llm:qwen"].score == pytest.approx(stats.spearmanr(LLM[:9], gold[:9]).statistic)
    assert rows["llm:qwen"].n_answers == 9 and rows["llm:qwen"].n_invalid == 1
    # The model: the same number the benchmark computes on these pairs (the dataset holds exactly them).
    benchmark = dataset_evaluate(dataset=sts_study.dataset, encoder_alias_or_model=MODEL, split="test")
    minilm = rows[MODEL]
    assert minilm.kind == "model" and minilm.score == pytest.approx(benchmark.main_score, abs=1e-6)
    assert minilm.model_id == get_encoder(MODEL).model_id
    expected = "above" if minilm.score > humans.ci_high else "below" if minilm.score < humans.ci_low else "inside"
    assert minilm.against_humans == expected and rows["anna"].against_humans is None
    scores = [row.score for row in report.rows]
    assert scores == sorted(scores, reverse=True)
    assert {a.measure for a in report.agreement} == {"mean_pairwise_spearman", "mean_pairwise_kendall_tau"}
    assert report.n_human_answers == 29 and report.n_llm_answers == 9 and report.unit == "sentence pair"
    json.dumps(report.to_dict())  # JSON-able as it is


def test_report_without_models_or_answers(sts_study):
    BaselineAnswer.objects.filter(source="human").delete()
    report = baseline_report_build(study=sts_study)
    assert [row.kind for row in report.rows] == ["llm"] and report.rows[0].against_humans is None
    empty = BaselineStudy.objects.create(
        name="empty", dataset=sts_study.dataset, task_type="sts", n_instances=3, instructions="-"
    )
    with pytest.raises(Exception, match="no instances yet"):
        baseline_report_build(study=empty)


@pytest.mark.heavy  # a real embedding model
@pytest.mark.django_db(transaction=True)  # real commits: the command's scoring job is queued when it commits
def test_command_prints_the_table_and_json(sts_study):
    out = StringIO()
    call_command("baseline_report", sts_study.name, "--models", MODEL, stdout=out)
    text = out.getvalue()
    assert "humans (pooled)" in text and MODEL in text and "llm:qwen" in text and "mean_pairwise_spearman" in text
    out = StringIO()
    call_command("baseline_report", str(sts_study.pk), "--json", stdout=out)
    document = json.loads(out.getvalue())
    assert document["task_type"] == "sts" and document["rows"][0]["kind"] in {"humans", "human", "llm"}
    with pytest.raises(CommandError, match="No baseline study 'nope'"):
        call_command("baseline_report", "nope")


@pytest.mark.heavy  # a real embedding model
def test_pages_are_for_researchers_and_rank_models_on_request(
    sts_study, client, researcher, annotator, django_capture_on_commit_callbacks
):
    list_url, detail_url = reverse("evaluation:baselines"), reverse("evaluation:baseline", args=[sts_study.pk])
    assert client.get(detail_url).status_code == 302  # to the login page
    client.force_login(annotator)
    assert client.get(list_url).status_code == 403 and client.get(detail_url).status_code == 403
    client.force_login(researcher)
    page = client.get(list_url)
    assert page.status_code == 200 and sts_study.name in page.content.decode()
    page = client.get(detail_url).content.decode()
    assert (
        "humans (pooled)" in page
        and "Unit of observation: one sentence pair" in page
        and MODEL not in page.split('id="baseline-ranking"')[1].split("</table>")[0]
    )
    with django_capture_on_commit_callbacks(execute=True):  # no broker: the scoring job runs in the request
        client.post(detail_url, {"action": "score", "models": MODEL})
    page = client.get(detail_url).content.decode()
    ranking = page.split('id="baseline-ranking"')[1].split("</table>")[0]
    assert MODEL in ranking and ("outside:" in ranking or "inside" in ranking)
    assert (
        "agreement: mean Spearman correlation between two raters" in ranking
    )  # beside the pooled human score, in words
    with django_capture_on_commit_callbacks(execute=True):
        client.post(detail_url, {"action": "score", "models": "no-such/model-anywhere"})
    page = client.get(detail_url).content.decode()
    assert "Scoring no-such/model-anywhere stopped:" in page and 'class="errorlist"' in page
    assert "humans (pooled)" in page


TRAIN = [
    ("I love this film", "pos"),
    ("What a wonderful day", "pos"),
    ("Great food and kind staff", "pos"),
    ("This is terrible", "neg"),
    ("I hate waiting in line", "neg"),
    ("The worst service ever", "neg"),
    ("The meeting is at ten", "neu"),
    ("The box is on the table", "neu"),
    ("It rains a lot", "neu"),
]
TEST = [
    ("An amazing concert", "pos"),
    ("A horrible mess", "neg"),
    ("The bus leaves at noon", "neu"),
    ("I really enjoyed it", "pos"),
    ("Awful, never again", "neg"),
    ("The door is blue", "neu"),
]


@pytest.mark.heavy  # a real embedding model
def test_classification_models_fit_on_the_train_split_as_the_benchmark_does():
    dataset = Dataset.objects.create(
        name="hb-cls",
        task_type="classification",
        languages=["en"],
        splits={"train": len(TRAIN), "test": len(TEST)},
        source="test",
        source_format="jsonl",
        content_hash="1" * 64,
        n_items=15,
    )
    for split, rows in (("train", TRAIN), ("test", TEST)):
        for k, (text, label) in enumerate(rows):
            DatasetItem.objects.create(
                dataset=dataset,
                split=split,
                item_id=f"{split}{k}",
                position=k,
                language="en",
                payload={"text": text},
                gold=label,
                content_hash=sha256_text(text),
            )
    study = BaselineStudy.objects.create(
        name="hb-cls-study",
        dataset=dataset,
        task_type="classification",
        split="test",
        n_instances=len(TEST),
        instructions="Label it.",
    )
    for k, (text, label) in enumerate(TEST):
        instance = BaselineInstance.objects.create(
            study=study, key=f"cls-{k:04d}", position=k, texts=[text], gold=label
        )
        BaselineAnswer.objects.create(
            instance=instance, rater="anna", source="human", value=label if k else "neu", submitted_at=timezone.now()
        )
    rows = _rows(baseline_report_build(study=study, models=[MODEL]))
    assert rows["anna"].score == pytest.approx(5 / 6) and rows["anna"].ci_method == "wilson"
    benchmark = dataset_evaluate(dataset=dataset, encoder_alias_or_model=MODEL, split="test")
    assert rows[MODEL].score == pytest.approx(benchmark.main_score) and rows[MODEL].metrics["n_experiments"] == 10
    study.split = "train"
    with pytest.raises(Exception, match="fitted on the 'train' split"):
        baseline_report_build(study=study, models=[MODEL])
