"""The LLM judges on every output of a study (issue 40): the cache-only lookup against
``judge_pairs``, the job on the ``llm`` queue (progress per chunk, reuse, resuming from the cache,
a backend that is down) and the judges' estimates read back, with the midpoint stand-in for an
answer that never parsed.

The judges are a rule-based backend whose answers follow from the rewritten text, so every
expected estimate is computed here from the texts alone; one test checks the lookup against the
embedded LLM (SmolLM2) as well.
"""

from __future__ import annotations

import json
import re
import uuid
from datetime import timedelta

import numpy as np
import pytest
from django.conf import settings
from django.utils import timezone

from annotation import tasks
from annotation.kinds import ItemKind
from annotation.models import JudgePopulationJob, Study
from annotation.science.design import StudyDesign
from annotation.studies.design_services import StudyCreateRequest, study_create, study_lock
from annotation.studies.judge_population_services import (
    JUDGE_POPULATION_CHUNK,
    judge_population_outputs,
    study_judge_population,
    study_judge_population_start,
)
from core.errors import ConflictError, ShiftlabError
from core.hashing import sha256_text
from core.models import AuditEvent
from core.tasks import sweep_stuck_jobs
from corpora.services import dataset_import
from tests.support import FEW_CONTROLS_OVERRIDE, celery_sender, celery_worker, eager_keyword_run, rostered, wait_for
from tests.test_job_waiting import answering, backend_config, closed_port
from transforms.backends import reset_backends
from transforms.backends.base import ChatFailure, ChatResult, LLMBackend, TransientBackendError
from transforms.judgement_services import JudgeParams, LookupStatus, cached_judge_scores, judge_pairs
from transforms.models import Judgement, TransformedItem

pytestmark = pytest.mark.django_db

REWRITE = re.compile(r"\nRewrite: (.*)\Z", re.DOTALL)


def quality_answer(model: str, rewrite: str) -> int:
    """What judge ``model`` answers to the quality prompt about ``rewrite`` (1..5)."""
    return 1 + len(rewrite) % 5 if model == "judge-one" else 5 - len(rewrite.split()) % 5


def fluency_answer(model: str, rewrite: str) -> int:
    return 1 + len(rewrite.split()) % 5 if model == "judge-one" else 2 + len(rewrite) % 4


class RuleJudge(LLMBackend):
    """A judge answering from the rewrite alone (``quality_answer``/``fluency_answer``). Texts in
    ``UNPARSEABLE`` always get an answer without a number; texts in ``FLAKY`` get one the first
    time only; texts in ``DOWN`` a transient failure (the server is down) while listed. Every
    request is recorded in ``calls``, and the ``done`` of each running job in ``progress``."""

    UNPARSEABLE: set[str] = set()
    FLAKY: set[str] = set()
    DOWN: set[str] = set()
    calls: list[tuple[str, str, str]] = []
    progress: list[int] = []

    def generate(self, requests, *, on_result=None):
        type(self).progress.extend(
            JudgePopulationJob.objects.filter(status="running").order_by("pk").values_list("done", flat=True)
        )
        return [self._answer(r.messages[-1]["content"]) for r in requests]

    def _answer(self, prompt: str) -> ChatResult | ChatFailure:
        rewrite = REWRITE.search(prompt).group(1)
        kind = "fluency" if "fluent and natural" in prompt else "quality"
        type(self).calls.append((self.model, kind, rewrite))
        if rewrite in self.DOWN:
            return ChatFailure("connection refused", transient=True)
        if rewrite in self.UNPARSEABLE:
            return ChatResult(text="It is hard to say.")
        if rewrite in self.FLAKY:
            self.FLAKY.discard(rewrite)
            return ChatResult(text="Let me think about it.")
        answer = quality_answer if kind == "quality" else fluency_answer
        return ChatResult(text=str(answer(self.model, rewrite)))

    def ping(self) -> str:
        return "rule judge"


@pytest.fixture
def judges(settings):
    settings.TRANSFORM_BACKENDS = {
        alias: {"BACKEND": f"{__name__}.RuleJudge", "OPTIONS": {"model": f"judge-{alias}"}} for alias in ("one", "two")
    }
    reset_backends()
    RuleJudge.UNPARSEABLE, RuleJudge.FLAKY, RuleJudge.DOWN = set(), set(), set()
    RuleJudge.calls, RuleJudge.progress = [], []
    yield RuleJudge
    reset_backends()


def locked_study(*, name: str = "judged", llm_judges=("one", "two"), lock: bool = True, limit: int = 12) -> Study:
    """A study of a random-keywords run (no LLM) over the first ``limit`` demo STS pairs, judged
    by ``llm_judges``; 6 real items."""
    sts = dataset_import(source=settings.BASE_DIR / "fixtures/sts/demo-sts.csv", task="sts", name=f"sts-{name}")
    run = eager_keyword_run(sts, limit=limit)
    design = StudyDesign(
        items_per_transformation=6,
        raters_per_item=2,
        batch_size=6,
        controls_per_batch=2,
        min_control_ratings=2,
        llm_judges=llm_judges,
        seed=3,
        detectability_override=FEW_CONTROLS_OVERRIDE,
    )
    study = study_create(actor=None, request=rostered(StudyCreateRequest(name=name, runs=[run], design=design)))
    return study_lock(study=study) if lock else study


def population_pairs(study: Study) -> list[tuple[str, str]]:
    """The outputs the judges should score, found independently of the service: every successful
    output with text of the study's run, in id order."""
    outputs = TransformedItem.objects.filter(run__in=study.runs.all(), ok=True).exclude(output_text="")
    return [(o.source_text, o.output_text) for o in outputs.order_by("pk")]


def expected_estimate(question: str, rewrite: str, failing: set[str] = frozenset()) -> float:
    """Mean of both judges' answers (question and judge scales are both 1..5); 3.0, the scale's
    midpoint, where no judge's answer parsed."""
    answer = quality_answer if question == "quality" else fluency_answer
    parsed = [] if rewrite in failing else [answer("judge-one", rewrite), answer("judge-two", rewrite)]
    return sum(parsed) / len(parsed) if parsed else 3.0


def start_now(study: Study, django_capture_on_commit_callbacks, **kwargs) -> list[JudgePopulationJob]:
    """Start the judging; the eager task runs when the transaction commits."""
    with django_capture_on_commit_callbacks(execute=True):
        jobs = study_judge_population_start(study=study, **kwargs)
    return [JudgePopulationJob.objects.get(pk=job.pk) for job in jobs]


# --- the cache-only lookup ---------------------------------------------------------------------


def test_lookup_reads_what_judge_pairs_keeps_without_asking_the_judge(judges, django_assert_max_num_queries):
    pairs = [(f"Source sentence {k}.", f"rewrite number {k} " + "word " * (k % 7)) for k in range(2000)]
    flaky, unparseable, refused = pairs[3][1], pairs[5][1], pairs[8][1]
    judges.FLAKY, judges.UNPARSEABLE = {flaky}, {unparseable}
    params = JudgeParams(max_attempts=2)
    with django_assert_max_num_queries(1):  # nothing cached: one query settles every pair as missing
        before = cached_judge_scores(kind="quality", pairs=pairs, backend_alias="one", params=params)
    assert {lookup.status for lookup in before} == {LookupStatus.MISSING} and not judges.calls

    # A non-transient failure is cached (score None) and retried with the next attempt, as a parse failure is.
    judge_pairs(kind="quality", pairs=[pairs[8]], backend_alias="one", params=JudgeParams(max_attempts=1))
    Judgement.objects.filter(score__isnull=False).update(score=None, output="", failure="bad request")
    assert Judgement.objects.get().attempt == 0
    kept = judge_pairs(kind="quality", pairs=pairs, backend_alias="one", params=params)
    n_calls = len(judges.calls)
    with django_assert_max_num_queries(2):  # one query per attempt level
        after = cached_judge_scores(kind="quality", pairs=pairs, backend_alias="one", params=params)
    assert len(judges.calls) == n_calls  # the lookup never asks the judge
    assert [lookup.score for lookup in after] == [j.score for j in kept]
    assert [lookup.judgement_id for lookup in after] == [j.pk for j in kept]
    by_pair = dict(zip(pairs, after, strict=True))
    assert by_pair[pairs[5]].status == LookupStatus.FAILED and by_pair[pairs[5]].score is None
    for pair in (pairs[3], pairs[8]):  # answered on the second attempt
        assert by_pair[pair].status == LookupStatus.SCORED
        assert Judgement.objects.get(pk=by_pair[pair].judgement_id).attempt == 1
    assert by_pair[pairs[8]].score == quality_answer("judge-one", refused)
    assert sum(lookup.status == LookupStatus.SCORED for lookup in after) == 1999
    assert [lookup.score for lookup in after[:3]] == [quality_answer("judge-one", b) for _, b in pairs[:3]]
    # Another kind, seed, judge or parameters is another cache entry.
    for other in (
        dict(kind="fluency", backend_alias="one", params=params),
        dict(kind="quality", backend_alias="one", params=params, seed=1),
        dict(kind="quality", backend_alias="two", params=params),
        dict(kind="quality", backend_alias="one", params=JudgeParams(max_attempts=2, max_tokens=8)),
    ):
        assert cached_judge_scores(pairs=pairs[:2], **other)[0].status == LookupStatus.MISSING


def test_lookup_stops_where_judge_pairs_would_ask_next(judges):
    pairs = [("An original.", "a first rewrite"), ("Another original.", "a second rewrite")]
    judges.FLAKY = {"a second rewrite"}
    judge_pairs(kind="fluency", pairs=pairs, backend_alias="one", params=JudgeParams(max_attempts=1))
    one_try = cached_judge_scores(kind="fluency", pairs=pairs, backend_alias="one", params=JudgeParams(max_attempts=1))
    three = cached_judge_scores(kind="fluency", pairs=pairs, backend_alias="one")
    assert [x.status for x in one_try] == [LookupStatus.SCORED, LookupStatus.FAILED]
    # With three attempts judge_pairs would ask again: the second pair is missing, not failed.
    assert [x.status for x in three] == [LookupStatus.SCORED, LookupStatus.MISSING]
    n_calls = len(judges.calls)
    kept = judge_pairs(kind="fluency", pairs=pairs, backend_alias="one")
    assert len(judges.calls) == n_calls + 1  # only the missing attempt was asked
    assert [x.score for x in cached_judge_scores(kind="fluency", pairs=pairs, backend_alias="one")] == [
        j.score for j in kept
    ]
    assert kept[1].score == fluency_answer("judge-one", "a second rewrite")


def test_lookup_matches_the_embedded_llm_judge(llm_backend):
    pairs = [
        ("A dog runs in the park.", "A dog is running in a park."),
        ("The sky is blue.", "Stocks fell sharply today."),
        ("She reads a book.", "She is reading a novel."),
    ]
    params = JudgeParams(max_attempts=2)
    before = cached_judge_scores(kind="quality", pairs=pairs, params=params)
    assert [x.status for x in before] == [LookupStatus.MISSING] * 3
    kept = judge_pairs(kind="quality", pairs=pairs, params=params)
    after = cached_judge_scores(kind="quality", pairs=pairs, params=params)
    assert [(x.score, x.judgement_id) for x in after] == [(j.score, j.pk) for j in kept]
    assert [x.status for x in after] == [
        LookupStatus.SCORED if j.score is not None else LookupStatus.FAILED for j in kept
    ]


# --- the job and the estimates ------------------------------------------------------------------


def test_a_job_scores_every_output_with_progress_per_chunk(judges, django_capture_on_commit_callbacks):
    study = locked_study()
    pairs = population_pairs(study)
    n = len(pairs)
    assert (
        n > JUDGE_POPULATION_CHUNK
        and [(o.source_text, o.output_text) for o in judge_population_outputs(study, "random_keywords")] == pairs
    )
    empty = study_judge_population(study=study, transformation="random_keywords")
    assert (empty.total, empty.missing, empty.complete, empty.scores, empty.job) == (n, 2 * n, False, {}, None)
    assert not judges.calls

    (job,) = start_now(study, django_capture_on_commit_callbacks)
    assert job.status == "succeeded", job.error
    assert job.transformation == "random_keywords" and job.judges == ["one", "two"]
    assert job.done == job.total == n * 2 * 2  # outputs x questions x judges
    assert job.result["scored"] == job.total and job.result["failed"] == 0
    # One request per output, question and judge; done moved chunk by chunk, from 0 to total.
    assert sorted(judges.calls) == sorted(
        (f"judge-{alias}", kind, b) for kind in ("quality", "fluency") for alias in ("one", "two") for _, b in pairs
    )
    sizes = [min(JUDGE_POPULATION_CHUNK, n - start) for start in range(0, n, JUDGE_POPULATION_CHUNK)] * 4
    assert judges.progress == [sum(sizes[:k]) for k in range(len(sizes))]
    assert AuditEvent.objects.filter(verb="study.judge_population.start", object_id=str(study.pk)).count() == 1

    population = study_judge_population(study=study, transformation="random_keywords")
    assert population.complete and (population.total, population.scored, population.failed) == (n, 2 * n, 0)
    assert population.judges == ("one", "two") and population.models == {"one": "judge-one", "two": "judge-two"}
    assert set(population.prompt_hashes) == {"quality", "fluency"} and population.job.status == "succeeded"
    for question in ("quality", "fluency"):
        expected = [expected_estimate(question, b) for _, b in pairs]
        np.testing.assert_allclose(population.scores[question], expected, rtol=0, atol=1e-12)
    real = list(study.items.filter(kind=ItemKind.REAL))
    assert len(real) == 6 and set(population.item_scores) == {item.pk for item in real}
    for item in real:
        assert population.item_scores[item.pk] == {q: expected_estimate(q, item.text_b) for q in ("quality", "fluency")}


def test_starting_again_reuses_the_job_and_a_new_job_asks_the_judge_nothing(judges, django_capture_on_commit_callbacks):
    study = locked_study()
    (job,) = start_now(study, django_capture_on_commit_callbacks)
    n_calls = len(judges.calls)
    assert start_now(study, django_capture_on_commit_callbacks) == [job]
    assert JudgePopulationJob.objects.count() == 1
    # A job started anew (the first deleted) finds every judgement in the cache.
    JudgePopulationJob.objects.all().delete()
    (again,) = start_now(study, django_capture_on_commit_callbacks)
    assert again.pk != job.pk and again.status == "succeeded" and again.done == again.total
    assert len(judges.calls) == n_calls and again.result == job.result


def test_an_answer_that_never_parses_gets_the_midpoint_stand_in(judges, django_capture_on_commit_callbacks):
    study = locked_study()
    pairs = population_pairs(study)
    failing = pairs[2][1]
    # Both judges fail on it: a stand-in for both questions. Only judge one fails on another: no stand-in.
    judges.UNPARSEABLE = {failing}
    (job,) = start_now(study, django_capture_on_commit_callbacks)
    n_failing = sum(b == failing for _, b in pairs)
    assert job.status == "succeeded" and job.result["failed"] == n_failing * 2 * 2
    assert sum(call[2] == failing for call in judges.calls) == n_failing * 2 * 2 * JudgeParams().max_attempts
    population = study_judge_population(study=study, transformation="random_keywords")
    assert (
        population.complete
        and population.failed == 2 * n_failing
        and population.stand_ins
        == {
            "quality": 3.0,
            "fluency": 3.0,
        }
    )
    for question in ("quality", "fluency"):
        expected = [expected_estimate(question, b, failing={failing}) for _, b in pairs]
        np.testing.assert_allclose(population.scores[question], expected, rtol=0, atol=1e-12)
    assert population.scores["quality"][2] == 3.0

    # One judge's parse failure leaves the other judge's score as the estimate: no stand-in.
    Judgement.objects.filter(model="judge-one", kind="quality").delete()
    assert not study_judge_population(study=study, transformation="random_keywords").complete
    assert pairs[0][1] != failing
    judges.UNPARSEABLE = {pairs[0][1]}
    judge_pairs(kind="quality", pairs=pairs, backend_alias="one", seed=3)
    population = study_judge_population(study=study, transformation="random_keywords")
    # Fluency still has its stand-ins; quality of the first output is judge two's answer alone, and
    # of the failing one judge one's alone.
    assert population.complete and population.failed == n_failing
    assert population.scores["quality"][0] == quality_answer("judge-two", pairs[0][1])
    assert population.scores["quality"][2] == quality_answer("judge-one", failing)


def test_missing_judgements_leave_the_population_incomplete(judges, django_capture_on_commit_callbacks):
    study = locked_study()
    pairs = population_pairs(study)
    start_now(study, django_capture_on_commit_callbacks)
    # The judgement of one judge on one output's fluency is lost.
    lost = pairs[4][1]
    Judgement.objects.filter(model="judge-two", kind="fluency", text_b_hash=sha256_text(lost)).delete()
    population = study_judge_population(study=study, transformation="random_keywords")
    n_lost = sum(b == lost for _, b in pairs)
    assert not population.complete and population.scores == {}
    assert population.missing == n_lost and population.scored == 2 * len(pairs) - n_lost
    item = study.items.filter(kind=ItemKind.REAL).first()
    assert population.item_scores[item.pk]["quality"] == expected_estimate("quality", item.text_b)
    # A changed model for a judge alias misses the cache: nothing is complete, the fingerprint changes.
    settings.TRANSFORM_BACKENDS["two"]["OPTIONS"]["model"] = "judge-two-v2"
    reset_backends()
    changed = study_judge_population(study=study, transformation="random_keywords")
    assert changed.fingerprint() != population.fingerprint() and changed.models["two"] == "judge-two-v2"
    assert changed.missing == 2 * len(pairs) and not changed.complete


def test_the_recorded_population_is_the_one_judged(judges, django_capture_on_commit_callbacks):
    study = locked_study()
    outputs = list(TransformedItem.objects.filter(run__in=study.runs.all(), ok=True).order_by("-pk"))[:5]
    info = {**study.sample_info, "random_keywords": {**study.sample_info["random_keywords"]}}
    info["random_keywords"]["population"] = [o.pk for o in outputs]
    Study.objects.filter(pk=study.pk).update(sample_info=info)
    study.refresh_from_db()
    assert judge_population_outputs(study, "random_keywords") == outputs
    (job,) = start_now(study, django_capture_on_commit_callbacks)
    assert job.total == 5 * 4 and {c[2] for c in judges.calls} == {o.output_text for o in outputs}
    population = study_judge_population(study=study, transformation="random_keywords")
    assert population.output_ids == tuple(o.pk for o in outputs) and population.scores["quality"].shape == (5,)


def test_a_backend_that_is_down_fails_the_job_and_a_new_start_resumes_from_the_cache(
    judges, django_capture_on_commit_callbacks
):
    study = locked_study()
    pairs = population_pairs(study)
    down = pairs[-1][1]  # the last chunk of the first question and judge
    judges.DOWN = {down}
    with pytest.raises(TransientBackendError, match="connection refused"):
        start_now(study, django_capture_on_commit_callbacks)
    job = JudgePopulationJob.objects.get()
    # In-process tasks cannot wait: the job fails at once, saying what is kept and how to resume.
    assert job.status == "failed" and "connection refused" in job.error and "cached" in job.error
    done_before = len({c for c in judges.calls if c[2] != down})
    judges.DOWN, judges.calls = set(), []
    (again,) = start_now(study, django_capture_on_commit_callbacks)
    assert again.pk != job.pk and again.status == "succeeded"
    assert len(judges.calls) == 4 * len(pairs) - done_before  # only what the first job did not get


def test_a_job_whose_task_was_lost_is_resumed_by_the_sweeper(judges, django_capture_on_commit_callbacks):
    study = locked_study()
    with django_capture_on_commit_callbacks(execute=False):  # queued, never run: the message was lost
        (job,) = study_judge_population_start(study=study)
    long_ago = timezone.now() - timedelta(minutes=settings.SHIFTLAB_STUCK_JOB_MINUTES + 5)
    JudgePopulationJob.objects.filter(pk=job.pk).update(created_at=long_ago)
    with django_capture_on_commit_callbacks(execute=True):
        swept = sweep_stuck_jobs()
    assert swept["resumed"] == {"judges on every output": [job.pk]}
    job.refresh_from_db()
    assert job.status == "succeeded" and job.done == job.total == 4 * len(population_pairs(study))


def test_refusals_name_what_to_do(judges, django_capture_on_commit_callbacks):
    draft = locked_study(name="draft", lock=False)
    with pytest.raises(ConflictError, match="is not locked: lock it first"):
        study_judge_population_start(study=draft)
    unjudged = locked_study(name="unjudged", llm_judges=())
    with pytest.raises(ShiftlabError, match="names no LLM judge") as refused:
        study_judge_population_start(study=unjudged)
    assert refused.value.field == "llm_judges"
    gone = locked_study(name="gone")
    del settings.TRANSFORM_BACKENDS["two"]
    reset_backends()
    with pytest.raises(ShiftlabError, match="No LLM backend 'two'"):
        study_judge_population_start(study=gone)
    assert not JudgePopulationJob.objects.exists() and not judges.calls
    assert tasks.judge_population.name in settings.SHIFTLAB_QUEUE_TASKS["llm"]


# --- through a real broker and worker -----------------------------------------------------------


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_on_a_real_worker_the_job_waits_for_its_judge_then_completes(redis_url, tmp_path, settings):
    port = closed_port()  # nothing listens there yet: the judge's server is down
    # No retries inside the backend: a refused request fails at once and the task's policy takes over.
    stub = backend_config("judge", port)
    settings.TRANSFORM_BACKENDS = {
        **settings.TRANSFORM_BACKENDS,
        "stub": {"BACKEND": "transforms.backends.openai_compat.OpenAICompatBackend", "OPTIONS": stub},
    }
    reset_backends()
    study = locked_study(llm_judges=("stub",), limit=4)
    queue, log_path = f"shiftlab-judged-{uuid.uuid4().hex[:8]}", tmp_path / "worker.log"
    env = {"SHIFTLAB_LLM_BACKENDS": json.dumps({"stub": stub})}
    with (
        celery_sender(broker_url=redis_url, queue=queue),
        celery_worker(redis_url=redis_url, queue=queue, log_path=log_path, env=env),
    ):
        (job,) = study_judge_population_start(study=study)

        def waits() -> bool:
            return (JudgePopulationJob.objects.get(pk=job.pk).waiting or {}).get("retry") == 1

        wait_for(waits, 60, "the job's first wait to be recorded", log_path)
        state = study_judge_population(study=study, transformation="random_keywords").job
        assert state.status == "running" and state.waiting.startswith("Waiting for the LLM backend 'stub' since ")
        with answering(port, "4"):
            wait_for(
                lambda: JudgePopulationJob.objects.get(pk=job.pk).status == "succeeded",
                60,
                "the job to succeed once the judge answers",
                log_path,
            )
    job.refresh_from_db()
    assert job.waiting is None and job.done == job.total == 2 * len(population_pairs(study))
    population = study_judge_population(study=study, transformation="random_keywords")
    assert population.complete and population.job.waiting is None
    for question in ("quality", "fluency"):
        np.testing.assert_array_equal(population.scores[question], np.full(population.total, 4.0))
