"""The sensitivity section of the robustness report with a real embedding model (issue 30): the
similarity drop of negated demo STS pairs is checked against the pairs read from the file,
encoded by sentence-transformers without the cache and compared with scipy's cosine; the
invariance comes from the run's paraphrase results, the summary is their harmonic mean, and the
page and the figures show it."""

from __future__ import annotations

import csv

import numpy as np
import pytest
from django.conf import settings as django_settings
from django.urls import reverse
from scipy import stats
from scipy.spatial.distance import cosine

from corpora.models import DatasetItem
from corpora.services import dataset_import
from evaluation.encoders import get_encoder
from evaluation.figures import report_figures
from evaluation.models import BenchmarkResult, BenchmarkRun
from evaluation.report_robustness import robustness_report_get
from tests.meaning_change_support import negated, negation_run
from transforms.models import TransformedItem
from transforms.services import transform_run_create

pytestmark = pytest.mark.django_db

MODEL = "all-MiniLM-L6-v2"
LIMIT = 8


def test_the_report_measures_how_far_a_model_moves_negated_pairs_apart(client, researcher, settings, tmp_path):
    settings.EMBEDDING_CACHE_DIR = tmp_path / "embeddings"
    demo = django_settings.BASE_DIR / "fixtures/sts/demo-sts.csv"
    sts = dataset_import(source=demo, task="sts", name="demo-sts")
    negations = negation_run(sts, limit=LIMIT, sides=("sentence2",))
    run = BenchmarkRun.objects.create(source=BenchmarkRun.Source.CONFIG, model_names=[MODEL], status="done")
    common = {"run": run, "model": MODEL, "model_id": MODEL, "model_revision": "r", "dataset": sts, "n_items": LIMIT}
    common["main_metric"] = "cosine_spearman"
    BenchmarkResult.objects.create(**common, transformation="original", axis="", seed=0, main_score=0.8)
    BenchmarkResult.objects.create(
        **common, transformation="paraphrase", axis="lexical", seed=1, main_score=0.72, original_main_score=0.8
    )
    BenchmarkResult.objects.create(
        **common,
        transformation="negation",
        axis="sensitivity",
        seed=1,
        main_score=0.5,
        original_main_score=0.8,
        transform_run=negations,
    )

    report = robustness_report_get(run=run)
    assert "sensitivity" not in report.notes
    [row] = report.sensitivity
    [(dataset, transformation, drop)] = row.drops

    # Independent: the first pairs of the file, encoded without the cache, scipy's cosine.
    with demo.open(newline="") as f:
        pairs = [(r["sentence1"], r["sentence2"]) for r in csv.DictReader(f)][:LIMIT]
    vectors = get_encoder(MODEL).encode([t for a, b in pairs for t in (a, b, negated(b))])
    before = np.array([1 - cosine(vectors[3 * i], vectors[3 * i + 1]) for i in range(LIMIT)])
    after = np.array([1 - cosine(vectors[3 * i], vectors[3 * i + 2]) for i in range(LIMIT)])
    assert (dataset, transformation, drop.n) == ("demo-sts", "negation", LIMIT)
    assert drop.mean_drop.estimate == pytest.approx(float(np.mean(before - after)), abs=1e-5)
    assert drop.share_dropped.estimate == pytest.approx(float(np.mean(after < before)))
    assert drop.mean_drop.low <= drop.mean_drop.estimate <= drop.mean_drop.high
    # Invariance: the paraphrase kept 0.72 / 0.8 of the score; the summary is the harmonic mean.
    assert row.invariance == pytest.approx(0.9)
    assert row.sensitivity == pytest.approx(float(np.mean(after < before)))
    assert row.summary == pytest.approx(stats.hmean([0.9, row.sensitivity]))

    assert "invariance_sensitivity" in report_figures(report)
    assert report.as_dict()["invariance_sensitivity"][0]["summary"] == pytest.approx(row.summary)
    client.force_login(researcher)
    page = client.get(reverse("evaluation:robustness", args=[run.pk])).content.decode()
    assert 'id="sensitivity-table"' in page and 'id="figure-invariance_sensitivity"' in page
    print(f"\n{MODEL} on {LIMIT} negated demo STS pairs: mean drop {drop.mean_drop}, share {drop.share_dropped}")


def _brute_rank(scores: list[float], index: int) -> int:
    return 1 + sum(s > scores[index] for j, s in enumerate(scores) if j != index)


def test_the_report_measures_rank_losses_on_retrieval(researcher, settings, tmp_path):
    """Both sides on the demo retrieval set: a negated relevant document (what a document-side
    run writes) against its original, and a negated query against the original query; checked
    with a brute-force ranking of embeddings made without the cache."""
    settings.EMBEDDING_CACHE_DIR = tmp_path / "embeddings"
    demo = django_settings.BASE_DIR / "fixtures/retrieval/demo-retrieval"
    dataset = dataset_import(source=demo, task="retrieval", name="demo-retrieval")
    negations = transform_run_create(dataset=dataset, transformation="negation", seed=1, limit=3, dispatch=False)
    documents = list(DatasetItem.objects.filter(dataset=dataset, kind="document").order_by("position"))
    queries = list(DatasetItem.objects.filter(dataset=dataset, kind="example").order_by("position"))
    changed_doc, changed_query = documents[0], queries[1]
    for item in (changed_doc, changed_query):
        TransformedItem.objects.create(
            run=negations,
            item=item,
            side="text",
            source_text=item.payload["text"],
            output_text=negated(item.payload["text"]),
            ok=True,
            attempts=1,
            target_language="en",
        )
    run = BenchmarkRun.objects.create(source=BenchmarkRun.Source.CONFIG, model_names=[MODEL], status="done")
    common = {"run": run, "model": MODEL, "model_id": MODEL, "model_revision": "r", "dataset": dataset, "n_items": 3}
    common["main_metric"] = "ndcg_at_10"
    BenchmarkResult.objects.create(**common, transformation="original", axis="", seed=0, main_score=0.9)
    BenchmarkResult.objects.create(
        **common, transformation="negation", axis="sensitivity", seed=1, main_score=0.8, transform_run=negations
    )
    [row] = robustness_report_get(run=run).sensitivity
    [(name, transformation, loss)] = row.rank_losses

    def text(payload):
        return f"{payload['title']} {payload['text']}".strip() if payload.get("title") else payload["text"]

    encoder = get_encoder(MODEL)
    corpus = encoder.encode([text(d.payload) for d in documents])
    expected = []
    doc_id = changed_doc.item_id
    new_doc = encoder.encode([text({**changed_doc.payload, "text": negated(changed_doc.payload["text"])})])[0]
    for query in queries:
        if query.gold.get(doc_id, 0) > 0:
            q = encoder.encode([query.payload["text"]])[0]
            scores = [1 - cosine(q, d) for d in [*corpus, new_doc]]
            expected.append(_brute_rank(scores, len(corpus)) - _brute_rank(scores, 0))
    before, after = encoder.encode([changed_query.payload["text"], negated(changed_query.payload["text"])])
    for relevant, grade in sorted(changed_query.gold.items()):
        if grade > 0:
            index = [d.item_id for d in documents].index(relevant)
            ranks = [_brute_rank([1 - cosine(q, d) for d in corpus], index) for q in (before, after)]
            expected.append(ranks[1] - ranks[0])
    assert (name, transformation, loss.n) == ("demo-retrieval", "negation", len(expected)) and len(expected) >= 2
    assert loss.mean_shift.estimate == pytest.approx(float(np.mean(expected)))
    assert loss.share_lost.estimate == pytest.approx(float(np.mean(np.array(expected) > 0)))
    assert row.invariance is None and row.summary is None  # no meaning-preserving results in this run
    print(f"\n{MODEL} on demo retrieval: rank shifts {expected}")
