"""Retrieval robustness through Shiftlab against ``mteb`` run once per query variant.

SciFact (../shared/data/scifact) with all-MiniLM-L6-v2: the original test queries plus 3 query
transformations x 3 seeds (``random_keywords``, and the LLM transformations ``paraphrase`` and
``keywords``, generated once with the embedded LLM and kept in this script's database under
var/benchmarks/, so later runs reuse them).

- Shiftlab: one benchmark run over the 10 query variants (plan, unit tasks in eager mode,
  embedding cache, scoring, result files) with an empty embedding cache: the corpus and each
  distinct query text are encoded once.
- mteb: ``mteb.evaluate`` with the sentence-transformers model on a retrieval task holding the
  same corpus and one variant's queries (the queries Shiftlab scored: an output that failed is
  left out on both sides), once per variant, as the papers' reference code effectively does.

Both models are loaded before timing. nDCG@10 must agree to 1e-4 for every variant.

    .venv/bin/python benchmarks/retrieval_robustness_vs_mteb.py [--queries N] [--docs K]

``--queries N`` keeps the first N test queries (by id) and ``--docs K`` the documents they judge
plus the first K others (default: all 300 queries and 5,183 documents). Last line:
``ratio mteb/shiftlab = X.XX; scores equal: yes|no``.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCIFACT = ROOT.parent / "shared" / "data" / "scifact"
LLM_TRANSFORMATIONS = ("paraphrase", "keywords")
TRANSFORMATIONS = ("random_keywords", *LLM_TRANSFORMATIONS)
TOLERANCE = 1e-4


def scifact_subset(folder: Path, *, queries: int | None, docs: int | None) -> Path:
    """A BEIR folder with the first ``queries`` judged test queries and the documents they judge
    plus the first ``docs`` others (the whole of SciFact when both are None)."""
    if queries is None and docs is None:
        return SCIFACT
    with (SCIFACT / "qrels/test.tsv").open(encoding="utf-8", newline="") as handle:
        qrels = [row for row in csv.DictReader(handle, delimiter="\t")]
    kept_queries = sorted({row["query-id"] for row in qrels})[:queries]
    qrels = [row for row in qrels if row["query-id"] in kept_queries]
    judged = {row["corpus-id"] for row in qrels}
    corpus = [json.loads(line) for line in (SCIFACT / "corpus.jsonl").open(encoding="utf-8")]
    others = [doc for doc in corpus if doc["_id"] not in judged][:docs]
    kept_docs = [doc for doc in corpus if doc["_id"] in judged] + others
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    with (folder / "corpus.jsonl").open("w", encoding="utf-8") as handle:
        handle.writelines(json.dumps(doc) + "\n" for doc in kept_docs)
    wanted = set(kept_queries)
    with (folder / "queries.jsonl").open("w", encoding="utf-8") as handle:
        for line in (SCIFACT / "queries.jsonl").open(encoding="utf-8"):
            if json.loads(line)["_id"] in wanted:
                handle.write(line)
    with (folder / "qrels/test.tsv").open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["query-id", "corpus-id", "score"], delimiter="\t")
        writer.writeheader()
        writer.writerows(qrels)
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, help="First N judged test queries (default all 300).")
    parser.add_argument("--docs", type=int, help="Documents besides the judged ones (default all).")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-tokens", type=int, default=64)
    args = parser.parse_args()
    if not SCIFACT.is_dir():
        sys.exit(f"SciFact not found at {SCIFACT}")
    data_dir = ROOT / "var" / "benchmarks" / "retrieval-robustness"
    os.environ.setdefault("SHIFTLAB_DATA_DIR", str(data_dir))
    os.environ.pop("CELERY_BROKER_URL", None)  # eager: the pipeline alone is measured
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shiftlab.settings")
    os.environ.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from corpora.models import Dataset, DatasetItem
    from corpora.services import dataset_import
    from evaluation.benchmark_services import benchmark_run_create_from_config
    from evaluation.encoders import get_encoder
    from evaluation.models import BenchmarkResult, BenchmarkRun
    from tests.llm_fixtures import models_dir
    from tests.support import config_text
    from transforms.backends import reset_backends
    from transforms.embedded import TEST_MODEL, LlamaServer, ensure_model
    from transforms.models import TransformedItem, TransformRun
    from transforms.params import GenerationParams
    from transforms.services import transform_run_create

    name = f"scifact-q{args.queries or 'all'}-d{args.docs if args.docs is not None else 'all'}"
    dataset = Dataset.objects.filter(name=name).first()
    if dataset is None:
        source = scifact_subset(Path(tempfile.mkdtemp(prefix="scifact-")), queries=args.queries, docs=args.docs)
        dataset = dataset_import(source=source, task="retrieval", name=name)

    # Transformation runs: made once, then found again by (dataset, transformation, seed).
    params = GenerationParams(max_tokens=args.max_tokens, max_attempts=1)
    runs, to_make = [], []
    for transformation in TRANSFORMATIONS:
        for seed in args.seeds:
            found = TransformRun.objects.filter(
                dataset=dataset, transformation=transformation, seed=seed, status="succeeded"
            ).first()
            if found:
                runs.append(found)
            else:
                to_make.append((transformation, seed))
    if to_make:
        started = time.perf_counter()
        with LlamaServer(ensure_model(TEST_MODEL, models_dir=models_dir()), model_alias=TEST_MODEL) as server:
            settings.TRANSFORM_BACKENDS = {
                "default": {
                    "BACKEND": "transforms.backends.openai_compat.OpenAICompatBackend",
                    "OPTIONS": {"base_url": server.base_url, "model": TEST_MODEL, "max_concurrency": 2},
                }
            }
            reset_backends()
            for transformation, seed in to_make:
                run = transform_run_create(dataset=dataset, transformation=transformation, seed=seed, params=params)
                runs.append(TransformRun.objects.get(pk=run.pk))
        print(f"generated {len(to_make)} transformation runs in {time.perf_counter() - started:.0f} s (not timed)")

    encoder = get_encoder(args.model)
    encoder.encode(["warm-up: load the model before timing"], batch_size=args.batch_size)
    settings.EMBEDDING_CACHE_DIR = Path(tempfile.mkdtemp(prefix="embeddings-"))
    settings.EMBEDDING_CACHE_URL = ""
    started = time.perf_counter()
    run = benchmark_run_create_from_config(text=config_text(runs), fmt="yaml", models=[args.model])
    shiftlab_s = time.perf_counter() - started
    run = BenchmarkRun.objects.get(pk=run.pk)
    if run.status != "succeeded":
        sys.exit(f"benchmark run {run.pk} {run.status}: {run.error}")

    # The same data in mteb's layout, one query set per variant.
    examples = list(DatasetItem.objects.filter(dataset=dataset, kind="example", split="test").order_by("position"))
    corpus = {
        doc.item_id: {"title": doc.payload.get("title") or "", "text": doc.payload.get("text") or ""}
        for doc in DatasetItem.objects.filter(dataset=dataset, kind="document")
    }
    qrels = {item.item_id: {doc: int(grade) for doc, grade in item.gold.items()} for item in examples}
    variants = {("original", None): {item.item_id: item.payload["text"] for item in examples}}
    for transform_run in runs:
        outputs = TransformedItem.objects.filter(run=transform_run, ok=True).select_related("item")
        variants[(transform_run.transformation, transform_run.seed)] = {o.item.item_id: o.output_text for o in outputs}
    shiftlab_scores = {
        (r.transformation, r.seed if r.transformation != "original" else None): r.main_score
        for r in BenchmarkResult.objects.filter(run=run)
    }

    import mteb
    from mteb.abstasks.retrieval import AbsTaskRetrieval
    from sentence_transformers import SentenceTransformer

    from tests.mteb_reference import retrieval_data, task_metadata

    model = SentenceTransformer(str(encoder.model_path), device="cpu", local_files_only=True)
    model.encode(["warm-up"], show_progress_bar=False)
    mteb_scores, mteb_s = {}, 0.0
    for variant, queries in variants.items():

        class LocalSciFact(AbsTaskRetrieval):
            metadata = task_metadata("LocalSciFact", "Retrieval", "ndcg_at_10")

            def load_data(self, num_proc=None, _queries=queries, **kwargs):
                self.dataset = retrieval_data(corpus, _queries, {q: qrels[q] for q in _queries})
                self.data_loaded = True

        started = time.perf_counter()
        results = mteb.evaluate(
            model, LocalSciFact(), cache=None, show_progress_bar=False, encode_kwargs={"batch_size": args.batch_size}
        )
        mteb_s += time.perf_counter() - started
        mteb_scores[variant] = float(results.task_results[0].scores["test"][0]["main_score"])

    print(f"model: {encoder.model_id}; data: {name}, {len(examples)} queries, {len(corpus)} documents")
    print(f"{'variant':<24} {'queries':>7} {'shiftlab':>10} {'mteb':>10}")
    equal = True
    for variant, queries in variants.items():
        ours, theirs = shiftlab_scores.get(variant), mteb_scores[variant]
        equal &= ours is not None and abs(ours - theirs) <= TOLERANCE
        label = variant[0] if variant[1] is None else f"{variant[0]} seed {variant[1]}"
        print(f"{label:<24} {len(queries):>7} {ours if ours is not None else float('nan'):>10.5f} {theirs:>10.5f}")
    print(f"shiftlab benchmark run (cold embedding cache): {shiftlab_s:.1f} s")
    print(f"mteb, {len(variants)} runs: {mteb_s:.1f} s")
    print(f"ratio mteb/shiftlab = {mteb_s / shiftlab_s:.2f}; scores equal: {'yes' if equal else 'no'}")


if __name__ == "__main__":
    main()
