"""How long the robustness report page takes to open, computed on the spot versus stored when
the run ended (issue 31; goal: <= 1 s once the run has ended).

A synthetic finished run is written straight to the database (no encoder, no LLM): M models x D
STS datasets x the 8 benchmark transformations x S seeds, each unit with per-item scores of N
items (what the rank intervals read). Then it times, with Django's test client as a logged-in
researcher:

1. computing the report and its figures, what every first open of the page did before;
2. finishing the run (``benchmark_run_finalize``: eager Celery computes and stores the report);
3. opening the report page afterwards (median of --repeat opens) and the run page.

    .venv/bin/python benchmarks/report_open_speed.py --models 3 --datasets 3 --seeds 3 --items 200

Uses its own data directory and SQLite database (default /tmp/shiftlab-report-speed;
SHIFTLAB_DATA_DIR overrides). Prints the figures and the machine's CPU count.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TRANSFORMATIONS = {
    "paraphrase": "lexical",
    "backtranslation": "lexical",
    "style_change": "lexical",
    "expansion": "length",
    "summarization": "length",
    "summarized_expansion": "length",
    "translation": "language",
    "cross_translation": "language",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=3)
    parser.add_argument("--datasets", type=int, default=3)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--items", type=int, default=200, help="Items per unit (per-item scores).")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    data_dir = Path(os.environ.setdefault("SHIFTLAB_DATA_DIR", "/tmp/shiftlab-report-speed"))
    (data_dir / "shiftlab.sqlite3").unlink(missing_ok=True)
    os.environ.pop("DATABASE_URL", None)  # its own SQLite file, under the data directory
    os.environ.pop("CELERY_BROKER_URL", None)  # eager: the report task runs in this process
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shiftlab.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    run, user = _world(args)
    _measure(run, user, args)


def _world(args):
    import numpy as np
    from django.contrib.auth.models import Group

    from core.roles import Role
    from corpora.models import Dataset
    from evaluation.models import BenchmarkResult, BenchmarkRun

    rng = np.random.default_rng(0)
    user = (
        __import__("django.contrib.auth", fromlist=["get_user_model"])
        .get_user_model()
        .objects.create_user("timer", password="not-used-here")
    )
    user.groups.add(Group.objects.get(name=Role.RESEARCHER))
    models = [f"model-{m}" for m in range(args.models)]
    datasets = [
        Dataset.objects.create(
            name=f"sts-{d}", task_type="sts", source="bench", source_format="jsonl", content_hash=f"{d:064d}"
        )
        for d in range(args.datasets)
    ]
    seeds = list(range(1, args.seeds + 1))
    units = [("original", "", 0)] + [(t, a, s) for t, a in TRANSFORMATIONS.items() for s in seeds]
    run = BenchmarkRun.objects.create(
        source="config", model_names=models, status="running", total=len(models) * len(datasets) * len(units)
    )
    ids = [str(i) for i in range(args.items)]
    rows = []
    for m, model in enumerate(models):
        for dataset in datasets:
            gold = rng.uniform(0, 5, args.items)
            original = gold + rng.normal(0, 1.0 + 0.1 * m, args.items)
            for transformation, axis, seed in units:
                predicted = original if not axis else original + rng.normal(0, 0.8, args.items)
                score = float(np.corrcoef(gold, predicted)[0, 1])
                rows.append(
                    BenchmarkResult(
                        run=run,
                        model=model,
                        model_id=model,
                        model_revision="r",
                        dataset=dataset,
                        transformation=transformation,
                        axis=axis,
                        seed=seed,
                        main_metric="cosine_spearman",
                        main_score=score,
                        original_main_score=None if not axis else float(np.corrcoef(gold, original)[0, 1]),
                        n_items=args.items,
                        item_scores={"kind": "spearman", "ids": ids, "values": list(predicted), "gold": list(gold)},
                        original_item_scores=None
                        if not axis
                        else {"kind": "spearman", "ids": ids, "values": list(original), "gold": list(gold)},
                    )
                )
    BenchmarkResult.objects.bulk_create(rows)
    print(f"run: {len(models)} models x {len(datasets)} datasets x {len(units)} units = {len(rows)} results")
    return run, user


def _measure(run, user, args) -> None:
    from django.test import Client
    from django.urls import reverse

    from evaluation.benchmark_execution import benchmark_run_finalize
    from evaluation.figures import report_figures
    from evaluation.models import StoredRobustnessReport
    from evaluation.report_robustness import robustness_report_get

    started = time.perf_counter()
    report_figures(robustness_report_get(run=run))
    on_the_spot = time.perf_counter() - started
    started = time.perf_counter()
    benchmark_run_finalize(run_id=run.pk)
    at_the_end = time.perf_counter() - started
    assert StoredRobustnessReport.objects.filter(run=run).exists(), "the report was not stored"
    client = Client(HTTP_HOST="localhost")
    client.force_login(user)
    timings = {}
    for name in ("evaluation:robustness", "evaluation:benchmark"):
        url = reverse(name, args=[run.pk])
        seconds = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            response = client.get(url)
            seconds.append(time.perf_counter() - started)
            assert response.status_code == 200, response.status_code
        timings[name] = seconds
    print(f"CPUs: {os.cpu_count()}")
    print(f"report computed on the spot (every first open before): {on_the_spot:.2f} s")
    print(f"finishing the run, report computed and stored: {at_the_end:.2f} s")
    for name, seconds in timings.items():
        print(f"{name} page: median {statistics.median(seconds):.3f} s, max {max(seconds):.3f} s ({args.repeat} opens)")


if __name__ == "__main__":
    main()
