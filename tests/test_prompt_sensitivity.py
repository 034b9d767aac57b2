"""The prompt-sensitivity report on real runs: paraphrases of the same texts by the embedded LLM
(SmolLM2 on llama.cpp) under two prompt versions, judged by the same model, with benchmark Δ rows
of two models. Every figure is recomputed here from the runs' outputs, the judgement cache and the
Δ values written below; the page, the API, the command and a browser screenshot show them."""

from __future__ import annotations

import io
import json
import os
import shutil

import numpy as np
import pytest
from django.conf import settings
from django.core.management import call_command
from django.urls import reverse
from statsmodels.stats.contingency_tables import cochrans_q

from core.errors import ShiftlabError
from corpora.services import dataset_import
from evaluation.models import BenchmarkResult, BenchmarkRun
from tests.browser_support import DOC_SCREENSHOTS, SCREENSHOTS, TIMEOUT_MS, chromium_browser, expect, log_in
from transforms.judge_services import judge_report_create_run, judge_report_execute
from transforms.judgement_services import JudgeParams, judge_pairs
from transforms.models import TransformedItem, TransformRun
from transforms.params import GenerationParams
from transforms.prompt_services import prompt_template_create_version
from transforms.sensitivity_services import prompt_sensitivity_report
from transforms.services import transform_run_create
from transforms.tasks import start_run

PARAMS = GenerationParams(max_tokens=48, max_attempts=1)
JUDGE = JudgeParams(max_attempts=1)
SECOND_WORDING = (
    "You rewrite texts for a study. Give only the rewritten text.",
    "Say the text below again in {language} with other words. Keep its meaning, names and numbers; a question "
    "stays a question.\n\nText: {text}",
)
# Benchmark Δ (transformed minus original main score) of two encoders on each version's run.
DELTAS = {1: {"enc-a": -0.020, "enc-b": -0.050}, 2: {"enc-a": -0.060, "enc-b": -0.070}}


def _run(dataset, *, seed: int = 11) -> TransformRun:
    run = transform_run_create(
        dataset=dataset, transformation="paraphrase", seed=seed, limit=2, params=PARAMS, dispatch=False
    )
    start_run.delay(run.pk)  # eager Celery: runs here
    run.refresh_from_db()
    assert run.status == "succeeded", run.error
    report = judge_report_create_run(run=run, params=JUDGE, n_resamples=200, dispatch=False)
    assert judge_report_execute(report_id=report.pk).status == "succeeded"
    return run


def _benchmark(run: TransformRun, version: int) -> None:
    bench = BenchmarkRun.objects.create(name=f"v{version}", source=BenchmarkRun.Source.CONFIG)
    for model, delta in DELTAS[version].items():
        BenchmarkResult.objects.create(
            run=bench,
            model=model,
            model_id=model,
            model_revision="r1",
            dataset=run.dataset,
            transformation=run.transformation,
            axis="lexical",
            seed=run.seed,
            transform_run=run,
            main_metric="cosine_spearman",
            main_score=0.8 + delta,
            original_main_score=0.8,
            n_items=2,
        )


def make_versions() -> list[TransformRun]:
    sts = dataset_import(source=settings.BASE_DIR / "fixtures/sts/demo-sts.csv", task="sts", name="demo-sts")
    first = _run(sts)
    prompt_template_create_version(key="paraphrase", system=SECOND_WORDING[0], user=SECOND_WORDING[1])
    second = _run(sts)
    for version, run in enumerate((first, second), start=1):
        _benchmark(run, version)
    return [first, second]


def _expected(run: TransformRun) -> dict:
    texts = list(TransformedItem.objects.filter(run=run).order_by("item__position", "side"))
    ok = [t for t in texts if t.ok]
    expected = {
        "n": len(texts),
        "error_rate": 1 - len(ok) / len(texts),
        "failed": {(t.item_id, t.side): int(not t.ok) for t in texts},
        "edit_median": float(np.median([t.edit_distance for t in ok])) if ok else None,
    }
    for kind in ("quality", "fluency"):
        judged = judge_pairs(kind=kind, pairs=[(t.source_text, t.output_text) for t in ok], params=JUDGE)
        scores = [j.score for j in judged if j.score is not None]
        expected[kind] = float(np.mean(scores)) if scores else None
    return expected


@pytest.mark.services
@pytest.mark.django_db(transaction=True)  # the browser reads the runs through the live server
def test_report_numbers_page_api_command_and_browser(llm_backend, client, researcher, researcher_client, live_server):
    runs = make_versions()
    first, second = runs
    assert first.prompt_hashes != second.prompt_hashes
    result = prompt_sensitivity_report(run_ids=[r.pk for r in runs], n_resamples=200)
    report = result.report
    assert [v.label for v in report.versions] == ["paraphrase v1", "paraphrase v2"]
    expected = [_expected(r) for r in runs]
    for version, exp, deltas in zip(report.versions, expected, DELTAS.values(), strict=True):
        assert version.n_texts == exp["n"] == 4  # two pairs, both sentences
        assert version.error_rate.value == pytest.approx(exp["error_rate"])
        assert version.edit_distance.median == pytest.approx(exp["edit_median"])
        for kind in ("quality", "fluency"):
            value = version.judge[kind].value if kind in version.judge else None
            assert value == pytest.approx(exp[kind])
        assert version.benchmark_delta.value == pytest.approx(np.mean(list(deltas.values())))
    spreads = {s.metric: s for s in report.spreads}
    table = np.array([[exp["failed"][key] for exp in expected] for key in sorted(expected[0]["failed"])])
    error = spreads["error rate"]
    assert error.n_blocks == 4
    if table.any() and (table.sum(axis=1) % 2).any():  # some text fails under one version only
        reference = cochrans_q(table)
        assert error.statistic == pytest.approx(reference.statistic) and error.p_value == pytest.approx(
            reference.pvalue
        )
    else:
        assert (error.statistic, error.p_value) == (0.0, 1.0)
    delta = spreads["benchmark Δ (mean)"]
    assert delta.n_blocks == 2 and delta.spread == pytest.approx(0.03)

    # The page: table, figure (no inline style under the CSP) and the same numbers.
    client.force_login(researcher)
    page = client.get(reverse("transforms:sensitivity"), {"runs": f"{first.pk},{second.pk}"}).content.decode()
    assert 'id="table-versions"' in page and 'id="table-spread"' in page and "<svg" in page
    assert "style=" not in page.split('id="figure-sensitivity"')[1].split("</figure>")[0]
    assert f"{report.versions[0].benchmark_delta.value:.3f}" in page and "paraphrase v2" in page
    # The API and the command give the same report.
    body = researcher_client.get("/api/transform-runs/sensitivity/", {"runs": f"{first.pk},{second.pk}"}).json()
    assert body["report"]["versions"][1]["error_rate"]["value"] == pytest.approx(report.versions[1].error_rate.value)
    out = io.StringIO()
    call_command("judge", "sensitivity", "--run", str(first.pk), "--run", str(second.pk), "--json", stdout=out)
    assert json.loads(out.getvalue())["report"]["spreads"] == body["report"]["spreads"]
    _screenshot(live_server.url, researcher.username, runs)


def _screenshot(base_url: str, username: str, runs: list[TransformRun]) -> None:
    """The page in Chromium under the site's CSP; its screenshot goes to var/screenshots/ (with
    SHIFTLAB_UPDATE_SCREENSHOTS=1 also to docs/screenshots/)."""
    with chromium_browser() as browser:
        context = browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-US")
        context.set_default_timeout(TIMEOUT_MS)
        page = context.new_page()
        log_in(page, base_url, username)
        violations = []
        page.on("console", lambda m: violations.append(m.text) if "Content Security Policy" in m.text else None)
        response = page.goto(f"{base_url}{reverse('transforms:sensitivity')}?runs={runs[0].pk},{runs[1].pk}")
        assert response is not None and response.status == 200
        expect(page.locator("#table-versions tr")).to_have_count(3)
        expect(page.locator("#figure-sensitivity svg")).to_have_count(1)
        assert not violations, violations
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        shot = SCREENSHOTS / "prompt-sensitivity.png"
        page.screenshot(path=str(shot), full_page=True)
        context.close()
    if os.environ.get("SHIFTLAB_UPDATE_SCREENSHOTS") == "1":
        DOC_SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, DOC_SCREENSHOTS / "prompt-sensitivity.png")


@pytest.mark.django_db
def test_runs_that_differ_in_more_than_the_prompt_are_refused(llm_backend, client, researcher, researcher_client):
    # Refusals come before any output is read: the runs are declared, never executed.
    sts = dataset_import(source=settings.BASE_DIR / "fixtures/sts/demo-sts.csv", task="sts", name="demo-sts")

    def declared(seed=11):
        run = transform_run_create(dataset=sts, transformation="paraphrase", seed=seed, limit=2, dispatch=False)
        TransformRun.objects.filter(pk=run.pk).update(status="succeeded")
        run.refresh_from_db()
        return run

    first, other_seed = declared(), declared(seed=99)
    with pytest.raises(ShiftlabError, match=rf"runs \[{other_seed.pk}\] differ from run {first.pk} in their seed"):
        prompt_sensitivity_report(run_ids=[first.pk, other_seed.pk])
    prompt_template_create_version(key="paraphrase", system=SECOND_WORDING[0], user=SECOND_WORDING[1])
    second, same_prompt = declared(), declared()
    with pytest.raises(ShiftlabError, match=f"runs {second.pk} and {same_prompt.pk} used the same prompt versions"):
        prompt_sensitivity_report(run_ids=[first.pk, second.pk, same_prompt.pk])
    pending = declared()
    TransformRun.objects.filter(pk=pending.pk).update(status="running")
    with pytest.raises(ShiftlabError, match=rf"runs #{pending.pk} \(running\) have not succeeded"):
        prompt_sensitivity_report(run_ids=[first.pk, pending.pk])
    with pytest.raises(ShiftlabError, match="at least two runs"):
        prompt_sensitivity_report(run_ids=[first.pk])
    client.force_login(researcher)
    page = client.get(reverse("transforms:sensitivity"), {"runs": f"{first.pk},x"}).content.decode()
    assert "run ids separated by commas" in page
    bad = researcher_client.get(
        "/api/transform-runs/sensitivity/", {"runs": f"{first.pk},{second.pk},{same_prompt.pk}"}
    )
    assert bad.status_code == 400 and "same prompt versions" in bad.json()["detail"]
