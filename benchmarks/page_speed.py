"""Server time and SQL queries of every page a researcher, an annotator and an admin open, on a
project of realistic size (issue 41 item 4; goal: every page <= 0.3 s).

Builds, in a fresh SQLite database under its own data directory, through the services the tests
use (no LLM, no Argilla, no encoder):

- a study of --annotators annotators (default 20) and --items real items (default 500) of one
  random-keywords run over a synthetic STS dataset, 3 raters per item, 2 controls per batch of 25,
  locked (``study_lock``: items and controls drawn) and assigned (``study_assign``: every queue),
  with every assignment rated as a sync writes it (a rating and its first revision per question;
  three careless raters: a straight-liner, a fast clicker, a random one), then validated and gated
  (``study_validate``, ``study_gate``);
- a human baseline of 100 STS pairs with answers from the study's annotators;
- a finished benchmark run of --models models (5) x --datasets STS datasets (4) x 25 units
  (the original and 8 transformations x 3 seeds) with per-item scores, finalized
  (``benchmark_run_finalize``: the robustness report stored).

Then it opens every page through Django's test client, once to warm up and --repeat times
(default 5) timed, and prints per page the median server time, the SQL queries of one open
(``CaptureQueriesContext``) and PASS/FAIL against --limit (0.3 s).

    .venv/bin/python benchmarks/page_speed.py [--annotators 20] [--items 500] [--repeat 5]

Exits 1 when a page fails the limit or does not answer 200. Prints the machine's CPU count and
load; the data directory (a temporary folder) is removed at the end.
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

WORDS = (
    "river mountain teacher student engine market village doctor garden window city train museum "
    "storm harvest library kitchen bridge festival council orchestra painter forest island coffee "
    "bakery hospital airport stadium factory newspaper volcano glacier desert harbour castle"
).split()
VERBS = "visited repaired painted closed opened crossed described praised built found watched sold".split()
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
START = datetime(2026, 1, 5, 9, tzinfo=UTC)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--annotators", type=int, default=20)
    parser.add_argument("--items", type=int, default=500, help="Real items of the study.")
    parser.add_argument("--models", type=int, default=5)
    parser.add_argument("--datasets", type=int, default=4)
    parser.add_argument("--seeds", type=int, default=3, help="Seeds per transformation (3: 25 units).")
    parser.add_argument("--benchmark-items", type=int, default=200, help="Items per benchmark unit.")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--limit", type=float, default=0.3, help="Seconds a page may take.")
    parser.add_argument("--only", default="", help="Time only the pages whose name contains this.")
    args = parser.parse_args()
    data_dir = Path(tempfile.mkdtemp(prefix="shiftlab-page-speed-"))
    os.environ["SHIFTLAB_DATA_DIR"] = str(data_dir)
    os.environ.pop("DATABASE_URL", None)  # its own SQLite file, under the data directory
    os.environ.pop("CELERY_BROKER_URL", None)  # eager: tasks run in this process
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shiftlab.settings")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    try:
        call_command("migrate", verbosity=0)
        started = time.perf_counter()
        world = _world(args, data_dir)
        print(f"built in {time.perf_counter() - started:.0f} s: {world['summary']}")
        return _measure(world, args)
    finally:
        connection.close()
        shutil.rmtree(data_dir, ignore_errors=True)


def _user(username: str, role, *, superuser: bool = False):
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    from core.projects import default_project
    from core.roles import Role
    from core.rosters import roster_add

    users = get_user_model()
    if superuser:
        return users.objects.create_superuser(username, password="not-used-here")
    user = users.objects.create_user(username, password="not-used-here")
    user.groups.add(Group.objects.get(name=role))
    if role == Role.ANNOTATOR:
        roster_add(project=default_project(), user=user, actor=None)
    return user


def _sts_csv(path: Path, n: int, rng) -> Path:
    """``n`` synthetic STS pairs: about one in six a near copy with gold >= 4.5 (easy positives)."""
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["id", "sentence1", "sentence2", "score"])
        for i in range(n):
            a = rng.choice(WORDS, 3, replace=False)
            first = f"The {a[0]} near the {a[1]} {rng.choice(VERBS)} the old {a[2]} on day {i}."
            if i % 6 == 0:
                second, score = first.replace("the old", "that old"), 4.6 + 0.4 * rng.random()
            else:
                b = rng.choice(WORDS, 3, replace=False)
                second = f"A {b[0]} by the {b[1]} {rng.choice(VERBS)} a new {b[2]} in week {i % 50}."
                score = round(4.4 * rng.random(), 2)
            writer.writerow([f"p-{i:04d}", first, second, f"{score:.2f}"])
    return path


def _world(args, data_dir: Path) -> dict:
    import numpy as np

    from core.projects import default_project
    from core.roles import Role

    rng = np.random.default_rng(0)
    researcher = _user("page-researcher", Role.RESEARCHER)
    admin = _user("page-admin", None, superuser=True)
    annotators = [_user(f"page-annotator-{n:02d}", Role.ANNOTATOR) for n in range(args.annotators)]
    study, n_ratings = _study(args, data_dir, rng, researcher, annotators)
    baseline = _baseline(args, study, researcher, annotators, rng)
    run = _benchmark(args, rng, researcher)
    return {
        "researcher": researcher,
        "admin": admin,
        "annotator": annotators[0],
        "study": study,
        "baseline": baseline,
        "run": run,
        "project": default_project(),
        "summary": (
            f"study of {args.annotators} annotators, {study.items.filter(kind='real').count()} real items, "
            f"{study.items.exclude(kind='real').count()} controls, {n_ratings} ratings; "
            f"baseline of {baseline.instances.count()} pairs; benchmark run of {run.results.count()} results"
        ),
    }


def _study(args, data_dir, rng, researcher, annotators):
    import numpy as np

    from annotation.kinds import ItemKind
    from annotation.models import Assignment, Rating, RatingRevision, Study
    from annotation.science.design import StudyDesign
    from annotation.studies.assignment_services import study_assign
    from annotation.studies.design_services import StudyCreateRequest, study_create, study_lock
    from annotation.studies.gate_services import study_gate
    from annotation.studies.validation_services import study_validate
    from corpora.services import dataset_import
    from tests.support import eager_keyword_run

    source = _sts_csv(data_dir / "page-sts.csv", int(args.items * 1.3), rng)
    sts = dataset_import(source=source, task="sts", name="page-sts", created_by=researcher)
    run = eager_keyword_run(sts, limit=int(args.items * 1.1))
    design = StudyDesign(
        items_per_transformation=args.items,
        raters_per_item=3,
        batch_size=25,
        controls_per_batch=2,
        min_control_ratings=2,
        llm_judges=(),
        seed=3,
        flag_too_fast_share=0.5,
        flag_straight_line_run=15,
        flag_low_carefulness=0.4,
        detectability_override="page speed benchmark: synthetic pairs, detectability not under test",
    )
    study = study_lock(
        study=study_create(actor=researcher, request=StudyCreateRequest(name="page-study", runs=[run], design=design))
    )
    study_assign(study=study, users=annotators, actor=researcher)
    Study.objects.filter(pk=study.pk).update(published_at=START, status=Study.Status.PUBLISHED)
    study = Study.objects.get(pk=study.pk)
    questions = list(design.questions)
    truth = {}
    ratings, at = [], {}
    careless = {a: kind for a, kind in zip(annotators[-3:], ("straight", "fast", "random"), strict=False)}
    rows = Assignment.objects.filter(annotator__study=study).select_related("study_item", "annotator__user")
    for assignment in rows.order_by("annotator_id", "position"):
        item, annotator = assignment.study_item, assignment.annotator
        kind = careless.get(annotator.user)
        step = 2.0 if kind == "fast" else 20 + 30 * rng.random()
        at[annotator.pk] = at.get(annotator.pk, START) + timedelta(seconds=step)
        for q in questions:
            if item.kind != ItemKind.REAL:
                value = item.expected.get(q.name, q.high)
            elif kind == "straight":
                value = (q.low + q.high) // 2
            elif kind == "random":
                value = int(rng.integers(q.low, q.high + 1))
            else:
                # Most outputs keep their meaning: the items' true answers lean to the high end.
                scale = np.arange(q.low, q.high + 1)
                shares = np.linspace(1.0, 3.0, len(scale)) ** 1.5
                base = truth.setdefault((item.pk, q.name), int(rng.choice(scale, p=shares / shares.sum())))
                value = int(np.clip(base + rng.choice([-1, 0, 0, 0, 1]), q.low, q.high))
            ratings.append(
                Rating(
                    study_item=item, annotator=annotator, question=q.name, value=value, submitted_at=at[annotator.pk]
                )
            )
    Rating.objects.bulk_create(ratings, batch_size=2000)
    stored = Rating.objects.filter(study_item__study=study)
    RatingRevision.objects.bulk_create(
        [
            RatingRevision(rating_id=pk, value=value, status="submitted", argilla_updated_at=submitted)
            for pk, value, submitted in stored.values_list("pk", "value", "submitted_at")
        ],
        batch_size=2000,
    )
    Study.objects.filter(pk=study.pk).update(ratings_changed_at=max(at.values()), synced_at=max(at.values()))
    study = Study.objects.get(pk=study.pk)
    study_validate(study=study, actor=researcher, estimate=False)
    study_gate(study=study, actor=researcher)
    return Study.objects.get(pk=study.pk), len(ratings)


def _baseline(args, study, researcher, annotators, rng):
    from annotation.baselines.baseline_services import BaselineCreateRequest, baseline_create
    from annotation.models import BaselineAnnotator, BaselineAnswer, BaselineStudy

    baseline = baseline_create(
        actor=researcher,
        request=BaselineCreateRequest(
            name="page-baseline",
            dataset=study.runs.get().dataset,
            task_type="sts",
            n_instances=min(100, args.items),
            seed=1,
        ),
    )
    BaselineStudy.objects.filter(pk=baseline.pk).update(status=BaselineStudy.Status.PUBLISHED, published_at=START)
    instances = list(baseline.instances.order_by("position"))
    answers = []
    for user in annotators[:5]:
        BaselineAnnotator.objects.create(study=baseline, user=user, keys=[i.key for i in instances])
        baseline.annotators.add(user)
        for n, instance in enumerate(instances):
            answers.append(
                BaselineAnswer(
                    instance=instance,
                    rater=user.get_username(),
                    source=BaselineAnswer.Source.HUMAN,
                    user=user,
                    value=round(float(rng.uniform(0, 5)), 1),
                    submitted_at=START + timedelta(seconds=30 * n),
                )
            )
    BaselineAnswer.objects.bulk_create(answers)
    return BaselineStudy.objects.get(pk=baseline.pk)


def _benchmark(args, rng, researcher):
    """A finished run written as its units do (``benchmarks/report_open_speed.py``'s shape)."""
    import numpy as np

    from corpora.models import Dataset
    from evaluation.benchmark_execution import benchmark_run_finalize
    from evaluation.models import BenchmarkResult, BenchmarkRun

    models = [f"model-{m}" for m in range(args.models)]
    datasets = [
        Dataset.objects.create(
            name=f"bench-sts-{d}", task_type="sts", source="bench", source_format="jsonl", content_hash=f"{d:064d}"
        )
        for d in range(args.datasets)
    ]
    seeds = range(1, args.seeds + 1)
    units = [("original", "", 0)] + [(t, a, s) for t, a in TRANSFORMATIONS.items() for s in seeds]
    run = BenchmarkRun.objects.create(
        source="config",
        name="page-run",
        model_names=models,
        status="running",
        total=len(models) * len(datasets) * len(units),
        created_by=researcher,
    )
    ids = [str(i) for i in range(args.benchmark_items)]
    rows = []
    for m, model in enumerate(models):
        for dataset in datasets:
            gold = rng.uniform(0, 5, len(ids))
            original = gold + rng.normal(0, 1.0 + 0.1 * m, len(ids))
            for transformation, axis, seed in units:
                predicted = original if not axis else original + rng.normal(0, 0.8, len(ids))
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
                        main_score=float(np.corrcoef(gold, predicted)[0, 1]),
                        original_main_score=None if not axis else float(np.corrcoef(gold, original)[0, 1]),
                        n_items=len(ids),
                        item_scores={"kind": "spearman", "ids": ids, "values": list(predicted), "gold": list(gold)},
                        original_item_scores=None
                        if not axis
                        else {"kind": "spearman", "ids": ids, "values": list(original), "gold": list(gold)},
                    )
                )
    BenchmarkResult.objects.bulk_create(rows)
    BenchmarkRun.objects.filter(pk=run.pk).update(done=len(rows))
    benchmark_run_finalize(run_id=run.pk)
    return BenchmarkRun.objects.get(pk=run.pk)


def _pages(world) -> list[tuple[str, str, str]]:
    """(who, page, url) of every page a researcher, an annotator and an admin open."""
    from django.urls import reverse

    study, run, baseline = world["study"], world["run"], world["baseline"]
    transform_run = study.runs.get()
    project = world["project"].slug
    researcher = [
        ("home", reverse("home")),
        ("projects", reverse("projects")),
        ("project", reverse("project", args=[project])),
        ("datasets", reverse("corpora:list")),
        ("dataset", reverse("corpora:detail", args=[transform_run.dataset.name])),
        ("transform runs", reverse("transforms:runs")),
        ("transform run", reverse("transforms:run", args=[transform_run.pk])),
        ("studies", reverse("annotation:studies")),
        ("study", reverse("annotation:study", args=[study.pk])),
        ("study publish step", reverse("annotation:publish", args=[study.pk])),
        ("study annotators", reverse("annotation:annotators", args=[study.pk])),
        ("study review queue", reverse("annotation:review", args=[study.pk])),
        ("study gate", reverse("annotation:gate", args=[study.pk])),
        ("exports", reverse("annotation:exports")),
        ("benchmarks", reverse("evaluation:benchmarks")),
        ("benchmark", reverse("evaluation:benchmark", args=[run.pk])),
        ("benchmark report", reverse("evaluation:robustness", args=[run.pk])),
        ("baselines", reverse("evaluation:baselines")),
        ("baseline", reverse("evaluation:baseline", args=[baseline.pk])),
    ]
    annotator = [("home", reverse("home")), ("my Argilla account", reverse("annotation:my-argilla"))]
    admin = [
        ("home", reverse("home")),
        ("audit log", reverse("audit-log")),
        ("projects", reverse("projects")),
        ("project", reverse("project", args=[project])),
        ("study annotators", reverse("annotation:annotators", args=[study.pk])),
        ("admin index", reverse("admin:index")),
        ("admin ratings", reverse("admin:annotation_rating_changelist")),
        ("admin annotators", reverse("admin:annotation_annotator_changelist")),
    ]
    return [
        *(("researcher", *p) for p in researcher),
        *(("annotator", *p) for p in annotator),
        *(("admin", *p) for p in admin),
    ]


def _measure(world, args) -> int:
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    clients = {}
    for who in ("researcher", "annotator", "admin"):
        clients[who] = Client(HTTP_HOST="localhost")
        clients[who].force_login(world[who])
    failed = 0
    print(
        f"CPUs: {os.cpu_count()}, load average {os.getloadavg()[0]:.1f}; limit {args.limit:.2f} s; "
        f"median of {args.repeat} opens after one warm-up (cpu s: this process's CPU time, less moved by "
        "other work on the machine than the wall-clock median)"
    )
    print(f"{'who':<11}{'page':<22}{'median s':>9}{'max s':>8}{'cpu s':>8}{'queries':>9}  verdict")
    for who, name, url in _pages(world):
        if args.only and args.only not in name:
            continue
        client = clients[who]
        with CaptureQueriesContext(connection) as queries:
            response = client.get(url)
        n_queries = len(queries)  # now: the next request empties the connection's log
        seconds, cpu = [], []
        for _ in range(args.repeat):
            started, started_cpu = time.perf_counter(), time.process_time()
            response = client.get(url)
            seconds.append(time.perf_counter() - started)
            cpu.append(time.process_time() - started_cpu)
        median = statistics.median(seconds)
        ok = response.status_code == 200 and median <= args.limit
        failed += not ok
        verdict = "PASS" if ok else ("FAIL" if response.status_code == 200 else f"FAIL ({response.status_code})")
        figures = f"{median:>9.3f}{max(seconds):>8.3f}{statistics.median(cpu):>8.3f}{n_queries:>9}"
        print(f"{who:<11}{name:<22}{figures}  {verdict}")
    print(f"{failed} page(s) over {args.limit:.2f} s or not 200" if failed else "every page within the limit")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
