"""All ten transformations over a slice of STS-B through Celery with the embedded LLM, then the
same runs again (expected: zero LLM calls), then one prompt change (expected: regeneration).

Needs a running LLM server (``manage.py llm_server``), Redis and a worker started with the same
``CELERY_BROKER_URL``, ``SHIFTLAB_DATA_DIR`` and database as this script, e.g.:

    CELERY_BROKER_URL=redis://127.0.0.1:6379/3 .venv/bin/celery -A shiftlab worker --concurrency 2 &
    CELERY_BROKER_URL=redis://127.0.0.1:6379/3 .venv/bin/python benchmarks/ten_transformations.py --pairs 50

Prints, per transformation: texts, failure rate, errors by type, mean edit distance, LLM calls
and wall time of the first run; then LLM calls of the re-run; then the prompt-change check.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STSB = ROOT.parent / "shared" / "data" / "stsb-multi-mt" / "stsb-en-test.csv"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=50)
    parser.add_argument("--seed", type=int, default=1337)
    parser.add_argument("--dataset", default="stsb-en-test")
    parser.add_argument("--max-tokens", type=int, default=512, help="Generation limit per call (default 512).")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shiftlab.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.conf import settings

    from corpora.models import Dataset
    from corpora.services import ImportOptions, dataset_import
    from transforms.models import TransformRun
    from transforms.params import GenerationParams
    from transforms.prompt_services import prompt_template_active, prompt_template_create_version
    from transforms.registry import TRANSFORMATIONS
    from transforms.selectors import transform_run_summary
    from transforms.services import transform_run_create

    if settings.CELERY_TASK_ALWAYS_EAGER:
        sys.exit("Set CELERY_BROKER_URL and start a worker: this script measures runs executed by Celery workers.")
    dataset = Dataset.objects.filter(name=args.dataset).first() or dataset_import(
        source=STSB, task="sts", name=args.dataset, options=ImportOptions(columns=["sentence1", "sentence2", "score"])
    )

    def launch(names):
        runs = {
            n: transform_run_create(
                dataset=dataset,
                transformation=n,
                seed=args.seed,
                limit=args.pairs,
                params=GenerationParams(max_tokens=args.max_tokens),
            )
            for n in names
        }
        started = time.perf_counter()
        pending = set(runs)
        finished = {}
        while pending:
            time.sleep(2)
            for name in list(pending):
                run = TransformRun.objects.get(pk=runs[name].pk)
                if run.status in ("succeeded", "failed"):
                    finished[name] = (run, time.perf_counter() - started)
                    pending.discard(name)
            done = sum(TransformRun.objects.get(pk=r.pk).done for r in runs.values())
            total = sum(r.total for r in runs.values())
            print(f"\r  {done}/{total} texts, {len(finished)}/{len(runs)} runs finished", end="", flush=True)
        print()
        return finished

    print(f"{args.pairs} pairs of {dataset.name}, seed {args.seed}, model {settings.TRANSFORM_BACKENDS['default']}")
    first = launch(list(TRANSFORMATIONS))
    print(f"{'transformation':<22} {'texts':>5} {'failed':>7} {'edit':>6} {'calls':>6} {'wall s':>7}  errors by type")
    for name, (run, seconds) in first.items():
        s = transform_run_summary(run=run)
        errors = ", ".join(f"{k} {v:.0%}" for k, v in s.error_rates.items()) or "-"
        edit = f"{s.mean_edit_distance:.3f}" if s.mean_edit_distance is not None else "  n/a"
        print(f"{name:<22} {run.done:>5} {s.error_rate:>6.1%} {edit:>6} {run.llm_calls:>6} {seconds:>7.0f}  {errors}")
    second = launch(list(TRANSFORMATIONS))
    calls = {name: run.llm_calls for name, (run, _) in second.items()}
    print(f"re-run of all ten: LLM calls {sum(calls.values())} {calls}")
    active = prompt_template_active("paraphrase")
    extra = "\nAvoid reusing the original's key words where possible."
    prompt_template_create_version(key="paraphrase", system=active.system, user=active.user + extra)
    changed = launch(["paraphrase"])
    print(f"paraphrase after a prompt change: LLM calls {changed['paraphrase'][0].llm_calls}")
    prompt_template_create_version(key="paraphrase", system=active.system, user=active.user)  # restore


if __name__ == "__main__":
    main()
