"""How close a benchmark run comes to the encoding floor.

1 model x 1 dataset x the 8 benchmark transformations x 3 seeds (+ the original). The
transformations are generated first with the embedded SmolLM2 (not timed). Then, with a fresh
embedding cache, the whole benchmark run is timed (plan, Celery tasks in eager mode, database,
cache, scoring, result files) and compared with the floor: encoding the unique texts the run
needs, once, with the same (already loaded) encoder. Goal: ratio <= 1.3.

    .venv/bin/python benchmarks/benchmark_run_floor.py --pairs 12

At the realistic size (STS-B test, 1,379 pairs, 8 transformations x 3 seeds, about 66,000
rewrites) the embedded CPU LLM cannot generate the rewrites in reasonable time, so
``--stand-in`` writes them with a deterministic stand-in backend (each answer is its input's words
in a seeded order; the language check is off): the rewrites are not timed either way, and the
timed run does the same work on them (plan, tasks, cache, encoding, scoring). ``--broker URL``
runs the timed benchmark through that Redis broker and a real Celery worker started here:

    .venv/bin/python benchmarks/benchmark_run_floor.py --stsb --stand-in --broker redis://127.0.0.1:6379/14

Uses its own data directory (default /tmp/shiftlab-benchmark-floor; SHIFTLAB_DATA_DIR overrides).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from transforms.backends.base import ChatResult, LLMBackend  # noqa: E402 (needs ROOT on the path)

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
    parser.add_argument("--stsb", action="store_true", help="The whole STS-B English test set (../shared/data).")
    parser.add_argument("--stand-in", action="store_true", help="Rewrites from a stand-in backend, not the LLM.")
    parser.add_argument("--broker", help="Time the run through this Redis broker and a Celery worker.")
    args = parser.parse_args()
    os.environ.setdefault("SHIFTLAB_DATA_DIR", "/tmp/shiftlab-benchmark-floor")
    if args.broker:
        os.environ["CELERY_BROKER_URL"] = args.broker
    else:
        os.environ.pop("CELERY_BROKER_URL", None)  # eager: one process, nothing but the pipeline is measured
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shiftlab.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from corpora.models import DatasetItem
    from corpora.services import dataset_import
    from evaluation.benchmark_services import benchmark_run_create_from_config
    from evaluation.encoders import get_encoder
    from evaluation.models import BenchmarkRun
    from tests.llm_fixtures import models_dir
    from tests.support import config_text
    from transforms.backends import reset_backends
    from transforms.chunk_services import transform_run_execute_inline
    from transforms.embedded import TEST_MODEL, LlamaServer, ensure_model
    from transforms.models import TransformedItem
    from transforms.params import GenerationParams
    from transforms.services import transform_run_create

    dataset = _dataset(args, dataset_import)
    limit = None if args.stsb else args.pairs
    params = GenerationParams(max_tokens=args.max_tokens, max_attempts=1)
    started = time.perf_counter()
    if args.stand_in:
        settings.TRANSFORM_BACKENDS = {
            "default": {"BACKEND": f"{StandInBackend.__module__}.StandInBackend", "OPTIONS": {"model": "stand-in"}}
        }
        reset_backends()
        runs = []
        for name in BENCHMARK_TRANSFORMATIONS:
            for seed in args.seeds:
                run = transform_run_create(
                    dataset=dataset,
                    transformation=name,
                    seed=seed,
                    limit=limit,
                    params=params,
                    language_check=False,
                    dispatch=False,
                )
                runs.append(transform_run_execute_inline(run_id=run.pk))
    else:
        path = ensure_model(TEST_MODEL, models_dir=models_dir())
        with LlamaServer(path, model_alias=TEST_MODEL, n_ctx=2048) as server:
            settings.TRANSFORM_BACKENDS = {
                "default": {
                    "BACKEND": "transforms.backends.openai_compat.OpenAICompatBackend",
                    "OPTIONS": {"base_url": server.base_url, "model": TEST_MODEL, "max_concurrency": 4},
                }
            }
            reset_backends()
            runs = [
                transform_run_create(dataset=dataset, transformation=name, seed=seed, limit=limit, params=params)
                for name in BENCHMARK_TRANSFORMATIONS
                for seed in args.seeds
            ]
    print(f"generated {len(runs)} transformation runs in {time.perf_counter() - started:.0f} s (not timed below)")

    # The unique texts the run encodes: the originals, and the outputs of items whose every field succeeded.
    items = list(DatasetItem.objects.filter(dataset=dataset, kind="example").order_by("position")[:limit])
    texts = {item.payload[side] for item in items for side in ("sentence1", "sentence2")}
    for run in runs:
        outputs = list(TransformedItem.objects.filter(run=run))
        failed = {o.item_id for o in outputs if not o.ok}
        texts |= {o.output_text for o in outputs if o.item_id not in failed}
    encoder = get_encoder(args.model)
    encoder.encode(["warm-up: load the model before timing"], batch_size=None, prompt_name=None)

    settings.EMBEDDING_CACHE_DIR = Path(tempfile.mkdtemp(prefix="embeddings-"))
    worker = _worker(settings.EMBEDDING_CACHE_DIR) if args.broker else None
    try:
        started = time.perf_counter()
        run = benchmark_run_create_from_config(text=config_text(runs), fmt="yaml", models=[args.model], limit=limit)
        while (run := BenchmarkRun.objects.get(pk=run.pk)).status not in ("succeeded", "failed", "cancelled"):
            time.sleep(0.2)
        benchmark_s = time.perf_counter() - started
    finally:
        if worker is not None:
            worker.terminate()
            worker.wait(timeout=60)

    started = time.perf_counter()
    encoder.encode(sorted(texts), batch_size=None, prompt_name=None)
    floor_s = time.perf_counter() - started

    print(
        f"benchmark run {run.pk} {run.status}: {run.done}/{run.total} units"
        + (f" ({run.n_failed} failed: too few items left, see below)" if run.n_failed else "")
    )
    where = f"; through the broker {args.broker} and one Celery worker" if args.broker else ""
    print(f"unique texts: {len(texts)}{where}")
    print(f"benchmark run: {benchmark_s:.2f} s")
    print(f"floor (encode the unique texts once): {floor_s:.2f} s")
    print(f"ratio run/floor = {benchmark_s / floor_s:.2f}")
    if run.error:
        print(run.error)


class StandInBackend(LLMBackend):
    """Answers every rewrite request with its input's words in an order drawn from the request's
    seed and prompt (never the input itself): real-sized, deterministic texts at no generation cost."""

    def _generate(self, requests, on_result):
        import random

        results = []
        for index, request in enumerate(requests):
            text = request.messages[-1]["content"].rsplit("Text: ", 1)[-1]
            words = text.split()
            shuffled = words[:]
            # The seed and the whole prompt (which names the transformation) choose the order, so
            # each transformation and seed gets its own text, as an LLM's rewrites would be.
            prompt = json.dumps([request.seed, request.messages])
            random.Random(hashlib.sha256(prompt.encode()).hexdigest()).shuffle(shuffled)
            if shuffled == words:
                shuffled.append("indeed")
            result = ChatResult(text=" ".join(shuffled), completion_tokens=len(shuffled), finish_reason="stop")
            results.append(result)
            if on_result:
                on_result(index, result)
        return results

    def ping(self) -> str:
        return "stand-in"


def _dataset(args, dataset_import):
    """STS-B test (``--stsb``, a headerless CSV) or the demo STS fixture, imported once."""
    from corpora.models import Dataset
    from corpora.services import ImportOptions

    name = "stsb-en-test" if args.stsb else "demo-sts"
    if found := Dataset.objects.filter(name=name).first():
        return found
    if not args.stsb:
        return dataset_import(source=ROOT / "fixtures/sts/demo-sts.csv", task="sts", name=name)
    source = ROOT.parent / "shared/data/stsb-multi-mt/stsb-en-test.csv"
    options = ImportOptions(columns=["sentence1", "sentence2", "score"])
    return dataset_import(source=source, task="sts", name=name, options=options)


def _worker(cache_dir: Path) -> subprocess.Popen:
    """One Celery worker on every queue, with this process's settings and embedding cache."""
    env = {**os.environ, "SHIFTLAB_EMBEDDING_CACHE_DIR": str(cache_dir)}
    command = [sys.executable, "-m", "celery", "-A", "shiftlab", "worker", "-Q", "default,llm,encode"]
    command += ["--concurrency", "1", "--loglevel", "WARNING"]
    return subprocess.Popen(command, cwd=ROOT, env=env)


if __name__ == "__main__":
    main()
