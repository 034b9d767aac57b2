"""How close a benchmark run comes to the encoding floor.

1 model x 1 dataset x the 8 benchmark transformations x 3 seeds (+ the original). The
transformations are generated first with the embedded SmolLM2 (not timed). Then, with a fresh
embedding cache, the whole benchmark run is timed (plan, Celery tasks in eager mode, database,
cache, scoring, result files) and compared with the floor: encoding the unique texts the run
needs, once, with the same (already loaded) encoder. Goal: ratio <= 1.3.

    .venv/bin/python benchmarks/benchmark_run_floor.py --pairs 12

Uses its own data directory (default /tmp/shiftlab-benchmark-floor; SHIFTLAB_DATA_DIR overrides).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCHMARK_TRANSFORMATIONS = (
    "paraphrase",
    "backtranslation",
    "style_change",
    "expansion",
    "summarization",
    "summarized_expansion",
    "translation",
    "cross_translation",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=12, help="First N pairs of demo-sts (default 12).")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--max-tokens", type=int, default=48)
    args = parser.parse_args()
    os.environ.setdefault("SHIFTLAB_DATA_DIR", "/tmp/shiftlab-benchmark-floor")
    os.environ.pop("CELERY_BROKER_URL", None)  # eager: one process, nothing but the pipeline is measured
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shiftlab.settings")
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
    from evaluation.models import BenchmarkRun
    from tests.llm_fixtures import models_dir
    from tests.support import config_text
    from transforms.backends import reset_backends
    from transforms.embedded import TEST_MODEL, LlamaServer, ensure_model
    from transforms.models import TransformedItem
    from transforms.services import GenerationParams, transform_run_create

    dataset = Dataset.objects.filter(name="demo-sts").first() or dataset_import(
        source=ROOT / "fixtures/sts/demo-sts.csv", task="sts", name="demo-sts"
    )
    params = GenerationParams(max_tokens=args.max_tokens, max_attempts=1)
    path = ensure_model(TEST_MODEL, models_dir=models_dir())
    started = time.perf_counter()
    with LlamaServer(path, model_alias=TEST_MODEL, n_ctx=2048) as server:
        settings.TRANSFORM_BACKENDS = {
            "default": {
                "BACKEND": "transforms.backends.openai_compat.OpenAICompatBackend",
                "OPTIONS": {"base_url": server.base_url, "model": TEST_MODEL, "max_concurrency": 4},
            }
        }
        reset_backends()
        runs = [
            transform_run_create(dataset=dataset, transformation=name, seed=seed, limit=args.pairs, params=params)
            for name in BENCHMARK_TRANSFORMATIONS
            for seed in args.seeds
        ]
    print(f"generated {len(runs)} transformation runs in {time.perf_counter() - started:.0f} s (not timed below)")

    # The unique texts the run encodes: the originals, and the outputs of items whose every field succeeded.
    items = list(DatasetItem.objects.filter(dataset=dataset, kind="example").order_by("position")[: args.pairs])
    texts = {item.payload[side] for item in items for side in ("sentence1", "sentence2")}
    for run in runs:
        outputs = list(TransformedItem.objects.filter(run=run))
        failed = {o.item_id for o in outputs if not o.ok}
        texts |= {o.output_text for o in outputs if o.item_id not in failed}
    encoder = get_encoder(args.model)
    encoder.encode(["warm-up: load the model before timing"], batch_size=None, prompt_name=None)

    settings.EMBEDDING_CACHE_DIR = Path(tempfile.mkdtemp(prefix="embeddings-"))
    started = time.perf_counter()
    run = benchmark_run_create_from_config(text=config_text(runs), fmt="yaml", models=[args.model], limit=args.pairs)
    benchmark_s = time.perf_counter() - started
    run = BenchmarkRun.objects.get(pk=run.pk)

    started = time.perf_counter()
    encoder.encode(sorted(texts), batch_size=None, prompt_name=None)
    floor_s = time.perf_counter() - started

    print(
        f"benchmark run {run.pk} {run.status}: {run.done}/{run.total} units"
        + (f" ({run.n_failed} failed: too few items left, see below)" if run.n_failed else "")
    )
    print(f"unique texts: {len(texts)}")
    print(f"benchmark run: {benchmark_s:.2f} s")
    print(f"floor (encode the unique texts once): {floor_s:.2f} s")
    print(f"ratio: {benchmark_s / floor_s:.2f} (goal <= 1.3)")
    if run.error:
        print(run.error)


if __name__ == "__main__":
    main()
