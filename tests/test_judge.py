"""The LLM judge with the real embedded LLM (SmolLM2 on llama.cpp): caching, bounded retries of
unparseable answers, stored reports (evaluation, judged runs, generator selection), the command,
the page and the API. The tiny model is a poor judge: the
tests check the machinery, not the correlation."""

import csv
import io

import pytest
from django.conf import settings
from django.core.management import call_command
from django.urls import reverse
from scipy import stats

from core.errors import ShiftlabError
from corpora.services import dataset_import
from transforms.backends import reset_backends
from transforms.judge_services import judge_report_create_run, judge_report_execute
from transforms.judge_tables import format_value, report_tables
from transforms.judgement_services import JudgeParams, judge_pairs
from transforms.models import Generation, Judgement, JudgeReport, TransformedItem
from transforms.params import GenerationParams
from transforms.selection_services import judge_report_create_selection
from transforms.services import transform_run_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def sts(db):
    return dataset_import(source=settings.BASE_DIR / "fixtures/sts/demo-sts.csv", task="sts", name="demo-sts")


def test_judgements_are_cached_and_failures_are_kept_as_none(llm_backend):
    pairs = [("A dog runs in the park.", "A dog is running in a park."), ("The sky is blue.", "Stocks fell.")]
    first = judge_pairs(kind="similarity", pairs=pairs, params=JudgeParams(max_attempts=2))
    assert len(first) == 2
    for judgement in first:
        assert judgement.score is None or 0 <= judgement.score <= 5
        assert judgement.attempt <= 1
        if judgement.score is None:
            assert judgement.attempt == 1  # retried once with a new seed before giving up
    n_rows = Judgement.objects.count()
    again = judge_pairs(kind="similarity", pairs=pairs, params=JudgeParams(max_attempts=2))
    assert [j.pk for j in again] == [j.pk for j in first] and Judgement.objects.count() == n_rows
    other_kind = judge_pairs(kind="quality", pairs=pairs[:1], params=JudgeParams(max_attempts=1))
    assert other_kind[0].kind == "quality" and Judgement.objects.count() > n_rows


def test_judge_evaluate_command_stores_a_report_the_page_shows(llm_backend, sts, client, researcher, tmp_path):
    out = io.StringIO()
    call_command("judge", "evaluate", "--dataset", "demo-sts", "--limit", "12", "--max-attempts", "1", stdout=out)
    text = out.getvalue()
    report = JudgeReport.objects.get()
    assert f"Judge report {report.pk}" in text and "Spearman by length" in text
    for label in ("[0,5)", "[5,10)", "[10,15)", "[15,20)", "20+", "[4,5]"):
        assert label in text
    assert report.status == "succeeded" and report.done == report.total == 12
    result = report.result
    assert result["n"] == 12 and sum(b["n"] for b in result["by_length"].values()) == result["n_parsed"]
    # The stored figures are the ones the cached judgements give when recomputed independently.
    items = list(sts.items.order_by("position")[:12])
    pairs = [(i.payload["sentence1"], i.payload["sentence2"]) for i in items]
    scores = [j.score for j in judge_pairs(kind="similarity", pairs=pairs, params=JudgeParams(max_attempts=1))]
    parsed = [(float(i.gold), s) for i, s in zip(items, scores, strict=True) if s is not None]
    if len(parsed) >= 3 and len({s for _, s in parsed}) > 1:
        expected = stats.spearmanr(*zip(*parsed, strict=True)).statistic
        assert result["spearman"] == pytest.approx(expected)
    # The page shows the same numbers as the command.
    client.force_login(researcher)
    page = client.get(reverse("transforms:judge-report", args=[report.pk])).content.decode()
    overview = next(t for t in report_tables("evaluation", result) if t.key == "overview")
    for value in overview.rows[0]:
        assert format_value(value) in page
        assert format_value(value) in text
    # show --csv writes the same tables.
    path = tmp_path / "report.csv"
    call_command("judge", "show", str(report.pk), "--csv", str(path), stdout=io.StringIO())
    rows = list(csv.DictReader(path.open()))
    assert {r["table"] for r in rows} == {"overview", "spearman_by_length", "mae_by_gold"}


def _two_candidates(llm_server, settings):
    """Two backend aliases on the test server: distinct model ids keep their caches apart."""
    options = {"base_url": llm_server.base_url, "max_concurrency": 4}
    settings.TRANSFORM_BACKENDS = {
        "default": {
            "BACKEND": "transforms.backends.openai_compat.OpenAICompatBackend",
            "OPTIONS": {**options, "model": llm_server.model},
        },
        "twin": {
            "BACKEND": "transforms.backends.openai_compat.OpenAICompatBackend",
            "OPTIONS": {**options, "model": llm_server.model + "-twin"},
        },
    }
    reset_backends()


def test_run_report_judges_every_successful_text(llm_backend, sts):
    from transforms.tasks import start_run

    run = transform_run_create(
        dataset=sts,
        transformation="translation",
        seed=5,
        limit=4,
        languages=["es", "fr"],
        params=GenerationParams(max_tokens=48, max_attempts=1),
        dispatch=False,
    )
    start_run.delay(run.pk)
    run.refresh_from_db()
    report = judge_report_create_run(run=run, params=JudgeParams(max_attempts=1), n_resamples=200, dispatch=False)
    report = judge_report_execute(report_id=report.pk)
    assert report.status == "succeeded", report.error
    n_ok = TransformedItem.objects.filter(run=run, ok=True).count()
    (judged,) = report.result["judges"]
    assert report.result["n_ok"] == n_ok and report.done == report.total == 2 * run.total
    for kind in ("quality", "fluency"):
        summary = judged["by_kind"][kind]
        assert summary["n"] == n_ok
        if summary["n_parsed"]:
            assert 1 <= summary["ci_low"] <= summary["hodges_lehmann"] <= summary["ci_high"] <= 5
    assert set(judged["by_language"]) <= {run.run_language}
    # The command makes the same report from the judgement cache.
    out = io.StringIO()
    n_judgements = Judgement.objects.count()
    call_command("judge", "run", "--run", str(run.pk), "--max-attempts", "1", "--resamples", "200", stdout=out)
    assert f"Run {run.pk}: translation of demo-sts" in out.getvalue() and Judgement.objects.count() == n_judgements
    assert JudgeReport.objects.latest("pk").result == report.result
    with pytest.raises(ShiftlabError, match="once it has succeeded"):
        run.status = "running"
        judge_report_create_run(run=run, dispatch=False)


def test_selection_report_crossover_with_two_candidates(llm_server, sts, settings, client, researcher):
    _two_candidates(llm_server, settings)
    report = judge_report_create_selection(
        dataset=sts,
        candidates=["default", "twin"],
        limit=3,
        seed=2,
        generation_params=GenerationParams(max_tokens=48, max_attempts=1),
        params=JudgeParams(max_attempts=1),
        n_resamples=200,
        dispatch=False,
    )
    assert report.judges == ["default", "twin"] and report.runs.count() == 2
    report = judge_report_execute(report_id=report.pk)
    assert report.status == "succeeded", report.error
    assert report.done == report.total == 6 * 2 + 6 * 2 * 2 * 2  # texts, then 2 judges x 2 kinds per text
    result = report.result
    assert [c["name"] for c in result["candidates"]] == ["default", "twin"]
    for c in result["candidates"]:
        assert c["n_texts"] == 6 and 0 <= c["error_rate"] <= 1
    for kind in ("quality", "fluency"):
        k = result["kinds"][kind]
        assert set(k["crossover"]) == {"default", "twin"}
        assert all(set(row) == {"default", "twin"} for row in k["crossover"].values())
        assert len(k["pairwise"]) == 1 and set(k["letters"]) == {"default", "twin"}
    # Re-running is served from the caches: no new generations or judgements.
    n_gen, n_judged = Generation.objects.count(), Judgement.objects.count()
    again = judge_report_execute(report_id=report.pk)
    assert (Generation.objects.count(), Judgement.objects.count()) == (n_gen, n_judged)
    assert again.result == result
    client.force_login(researcher)
    page = client.get(reverse("transforms:judge-report", args=[report.pk])).content.decode()
    assert "crossover matrix" in page and 'id="table-pairwise_quality"' in page


def test_selection_needs_two_candidates_on_the_same_texts(llm_backend, sts):
    with pytest.raises(ShiftlabError, match="at least two candidates"):
        judge_report_create_selection(dataset=sts, candidates=["default"], dispatch=False)
    with pytest.raises(ShiftlabError, match="uses no generator model"):
        judge_report_create_selection(
            dataset=sts, transformation="random_keywords", candidates=["default", "default2"], dispatch=False
        )


def test_judge_report_api_is_for_researchers(
    llm_backend, sts, api_client, annotator, researcher, django_capture_on_commit_callbacks
):
    api_client.force_authenticate(annotator)
    assert api_client.get("/api/judge-reports/").status_code == 403
    assert api_client.post("/api/judge-reports/", {"kind": "evaluation", "dataset": "demo-sts"}).status_code == 403
    api_client.force_authenticate(researcher)
    bad = api_client.post("/api/judge-reports/", {"kind": "run"}, format="json")
    assert bad.status_code == 400 and "run" in bad.json()
    with django_capture_on_commit_callbacks(execute=True):
        created = api_client.post(
            "/api/judge-reports/",
            {"kind": "evaluation", "dataset": "demo-sts", "limit": 4, "max_attempts": 1},
            format="json",
        )
    assert created.status_code == 202, created.content
    body = api_client.get(f"/api/judge-reports/{created.json()['id']}/").json()
    assert body["status"] == "succeeded" and body["result"]["n"] == 4  # eager Celery without a broker
    export = api_client.get(f"/api/judge-reports/{body['id']}/csv/")
    assert export.status_code == 200 and export["Content-Type"] == "text/csv"
    assert export.content.decode().splitlines()[0] == "table,row,column,value"
