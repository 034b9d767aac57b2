"""How long a researcher waits for "Validate" and "Score models" to answer (issue 41 item 2: no
action waits inside a request), against what the same work cost inside the request before.

Builds, in a fresh SQLite database under its own data directory, a published study of --items
real items (a random-keywords run over the demo STS pairs) judged by two LLM judges, and a human
baseline of 20 STS pairs. The judges and the encoder stand in for slow backends: each judge
request sleeps --judge-delay seconds, each encoded batch --encode-delay seconds (no LLM server,
no model download), so the figures are about where the wait happens, not about a model's speed.

For each action it times, in the same run:

- **before**: the work as the request used to do it (``study_validate``; ``baseline_report_build``
  with the models), on a cold judge cache / embedding cache;
- **after**: the POST through Django's test client with a broker that only queues (the page's
  answer: the job row is written, nothing runs; the page is opened once before, so that the
  first request's imports are not counted), then the job run as a worker would.

and prints the seconds and the ratio request-after / request-before.

    .venv/bin/python benchmarks/request_answer_time.py [--items 12] [--judge-delay 0.05] [--encode-delay 0.5]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from transforms.backends.base import ChatResult, LLMBackend  # noqa: E402 (pure: no Django needed)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=12, help="Real items of the study (at most 20).")
    parser.add_argument("--judge-delay", type=float, default=0.05, help="Seconds each judge request takes.")
    parser.add_argument("--encode-delay", type=float, default=0.5, help="Seconds each encoded batch takes.")
    args = parser.parse_args()
    data_dir = Path(tempfile.mkdtemp(prefix="shiftlab-request-time-"))
    os.environ["SHIFTLAB_DATA_DIR"] = str(data_dir)
    os.environ.pop("DATABASE_URL", None)
    os.environ.pop("CELERY_BROKER_URL", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shiftlab.settings")
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    SlowJudge.delay, SlowEncoder.delay = args.judge_delay, args.encode_delay
    settings.ALLOWED_HOSTS = ["*"]
    judges = {
        alias: {"BACKEND": f"{__name__}.SlowJudge", "OPTIONS": {"model": f"slow-{alias}"}} for alias in ("j1", "j2")
    }
    settings.TRANSFORM_BACKENDS = {**settings.TRANSFORM_BACKENDS, **judges}
    settings.EVALUATION_ENCODERS = {**settings.EVALUATION_ENCODERS, "slow": {"BACKEND": f"{__name__}.SlowEncoder"}}
    print(f"{os.cpu_count()} CPUs; judge request {args.judge_delay} s, encoded batch {args.encode_delay} s")
    rows = [_validate(args), _score()]
    print(f"{'action':<14} {'before (in request)':>20} {'after: request':>15} {'after: job':>11} {'ratio':>8}")
    for name, before, request, job in rows:
        print(f"{name:<14} {before:>18.3f} s {request:>13.3f} s {job:>9.3f} s {request / before:>8.3f}")
    return 0


def _quietly_queued():
    """A broker that only queues: the page's answer with workers elsewhere."""
    import evaluation.baseline_services
    import transforms.jobs

    transforms.jobs.dispatch_on_commit = lambda send, **_: None
    evaluation.baseline_services.dispatch_on_commit = lambda send, **_: None


def _researcher():
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    from core.roles import Role

    user = get_user_model().objects.create_user("bench-rita", password="not-used-here")
    user.groups.add(Group.objects.get(name=Role.RESEARCHER))
    return user


def _validate(args) -> tuple[str, float, float, float]:
    from django.conf import settings
    from django.test import Client
    from django.urls import reverse
    from django.utils import timezone

    from annotation.models import Study, StudyItem, StudyJob
    from annotation.science.design import StudyDesign
    from annotation.studies.design_services import StudyCreateRequest, study_create, study_lock
    from annotation.studies.validation_job_services import study_validation_run
    from annotation.studies.validation_services import study_validate
    from corpora.services import dataset_import
    from tests.support import roster_at_least
    from transforms.models import Judgement
    from transforms.services import transform_run_create
    from transforms.tasks import start_run

    sts = dataset_import(source=settings.BASE_DIR / "fixtures/sts/demo-sts.csv", task="sts", name="bench-sts")
    run = transform_run_create(dataset=sts, transformation="random_keywords", seed=1, limit=20, dispatch=False)
    start_run.delay(run.pk)
    design = StudyDesign(
        items_per_transformation=args.items,
        raters_per_item=2,
        batch_size=args.items,
        controls_per_batch=2,
        min_control_ratings=2,
        llm_judges=("j1", "j2"),
        seed=3,
        detectability_override="benchmark of a few items",
    )
    roster_at_least(run.project, design.raters_per_item)  # a design needs its raters on the roster (issue 43)
    study = study_lock(
        study=study_create(actor=None, request=StudyCreateRequest(name="bench", runs=[run], design=design))
    )
    Study.objects.filter(pk=study.pk).update(published_at=timezone.now())
    started = time.perf_counter()
    study_validate(study=study)  # what the request did before
    before = time.perf_counter() - started
    Judgement.objects.all().delete()  # cold again
    StudyItem.objects.filter(study=study).update(llm_estimates={})
    _quietly_queued()
    client = Client()
    client.force_login(_researcher())
    client.get(reverse("annotation:study", args=[study.pk]))  # warm: the first request imports the views
    started = time.perf_counter()
    answer = client.post(reverse("annotation:study", args=[study.pk]), {"action": "validate"})
    request = time.perf_counter() - started
    assert answer.status_code == 302, answer.status_code
    job = StudyJob.objects.get()
    started = time.perf_counter()
    job = study_validation_run(job_id=job.pk)
    work = time.perf_counter() - started
    assert job.status == "succeeded", job.error
    return "Validate", before, request, work


def _score() -> tuple[str, float, float, float]:
    from django.conf import settings
    from django.test import Client
    from django.urls import reverse

    from annotation.baselines.baseline_services import BaselineCreateRequest, baseline_create
    from corpora.services import dataset_import
    from evaluation.baseline_services import baseline_report_build, baseline_score_job_run
    from evaluation.models import BaselineScoreJob

    sts = dataset_import(source=settings.BASE_DIR / "fixtures/sts/demo-sts.csv", task="sts", name="bench-pairs")
    study = baseline_create(
        actor=None, request=BaselineCreateRequest(name="bench-b", dataset=sts, task_type="sts", n_instances=20, seed=1)
    )
    started = time.perf_counter()
    baseline_report_build(study=study, models=["slow"])  # what the request did before
    before = time.perf_counter() - started
    SlowEncoder.revision_tag += 1  # a new revision: a cold embedding cache again
    client = Client()
    client.force_login(_researcher_again())
    client.get(reverse("evaluation:baseline", args=[study.pk]))  # warm, as for Validate
    started = time.perf_counter()
    answer = client.post(reverse("evaluation:baseline", args=[study.pk]), {"action": "score", "models": "slow"})
    request = time.perf_counter() - started
    assert answer.status_code == 302, answer.status_code
    job = BaselineScoreJob.objects.get()
    started = time.perf_counter()
    job = baseline_score_job_run(job_id=job.pk)
    work = time.perf_counter() - started
    assert job.status == "succeeded", job.error
    return "Score models", before, request, work


def _researcher_again():
    from django.contrib.auth import get_user_model

    return get_user_model().objects.get(username="bench-rita")


class SlowJudge(LLMBackend):
    """A judge that answers 3 after ``delay`` seconds per request (a busy LLM server)."""

    delay = 0.05

    def generate(self, requests, *, on_result=None):
        time.sleep(self.delay * len(requests))
        return [ChatResult(text="3") for _ in requests]

    def ping(self) -> str:
        return "slow judge"


class SlowEncoder:
    """A model that takes ``delay`` seconds per encoded batch (a cold model on a busy machine)."""

    delay = 0.5
    revision_tag = 1

    def __init__(self, *, alias: str):
        self.alias = alias

    model_id = property(lambda self: "slow-encoder")
    revision = property(lambda self: f"r{self.revision_tag}")
    prompts = property(lambda self: {})
    similarity_fn_name = property(lambda self: "cosine")

    def encode(self, texts, *, batch_size=None, prompt_name=None):
        import numpy as np

        time.sleep(self.delay)
        return np.array([[len(t), sum(c in "aeiou" for c in t), 1.0] for t in texts], dtype=np.float32).reshape(
            len(texts), 3
        )

    def close(self):
        pass


if __name__ == "__main__":
    sys.exit(main())
