"""Runs and judge reports made with a paper's preset store exactly the paper's settings, from the
command, the API and the services; a conflicting setting is refused, naming it."""

from __future__ import annotations

import io

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError
from rest_framework.test import APIClient

from core.errors import ShiftlabError
from corpora.services import dataset_import
from evaluation.models import BenchmarkRun
from tests.support import config_text, keyword_run
from transforms.judge_services import JudgeReportCreateRequest, judge_report_create, judge_report_settings
from transforms.models import TransformRun
from transforms.services import transform_run_create, transform_run_settings

pytestmark = pytest.mark.django_db

# The papers' settings, written out here rather than read from the presets module.
PAPERS = {
    "multi-axis-paper": {"seeds": [1337, 1338, 1339], "temperature": 0.0, "top_p": 1.0},
    # The paraphrasing paper fixes seeds and the encoders' dtype, not the sampling: Shiftlab's defaults.
    "paraphrasing-paper": {"seeds": [1337, 1338, 1339, 1340, 1341, 1342], "temperature": 0.7, "top_p": 0.95},
}


@pytest.fixture
def sts(db):
    return dataset_import(source=settings.BASE_DIR / "fixtures/sts/demo-sts.csv", task="sts", name="demo-sts")


def stored(preset: str) -> list[tuple]:
    runs = TransformRun.objects.filter(preset=preset).select_related("generator").order_by("seed")
    return [(r.seed, r.generator.params["temperature"], r.generator.params["top_p"]) for r in runs]


@pytest.mark.parametrize("preset", list(PAPERS))
def test_a_run_made_with_a_preset_stores_exactly_the_papers_settings(sts, preset):
    resolved = transform_run_settings(preset=preset)
    for seed in resolved.seeds:
        transform_run_create(
            dataset=sts,
            transformation="paraphrase",
            seed=seed,
            params=resolved.params,
            limit=1,
            preset=resolved.preset,
            dispatch=False,
        )
    paper = PAPERS[preset]
    assert stored(preset) == [(seed, paper["temperature"], paper["top_p"]) for seed in paper["seeds"]]


def test_the_service_fills_an_omitted_params_from_the_preset_and_refuses_a_conflict(sts):
    run = transform_run_create(
        dataset=sts, transformation="paraphrase", seed=1338, limit=1, preset="multi-axis-paper", dispatch=False
    )
    assert (run.generator.params["temperature"], run.generator.params["top_p"]) == (0.0, 1.0)
    with pytest.raises(ShiftlabError, match="seed=\\[7\\] conflicts with preset 'multi-axis-paper'"):
        transform_run_create(
            dataset=sts, transformation="paraphrase", seed=7, limit=1, preset="multi-axis-paper", dispatch=False
        )


def test_the_transform_command_runs_every_preset_seed_and_names_a_conflict(sts):
    out = io.StringIO()
    # random_keywords: no LLM is involved (the runs are queued on commit, which this test never reaches).
    call_command(
        "transform", "--dataset=demo-sts", "--transformation=random_keywords", "--preset=multi-axis-paper", stdout=out
    )
    assert stored("multi-axis-paper") == [(seed, 0.0, 1.0) for seed in (1337, 1338, 1339)]
    assert out.getvalue().count("preset multi-axis-paper") == 3
    with pytest.raises(CommandError, match="temperature=0.7 conflicts with preset 'multi-axis-paper'"):
        call_command(
            "transform",
            "--dataset=demo-sts",
            "--transformation=random_keywords",
            "--preset=multi-axis-paper",
            "--temperature=0.7",
        )
    call_command(
        "transform",
        "--dataset=demo-sts",
        "--transformation=random_keywords",
        "--preset=paraphrasing-paper",
        "--seed=1342",
        stdout=out,
    )
    assert stored("paraphrasing-paper") == [(1342, 0.7, 0.95)]


def test_the_api_takes_a_preset(sts, researcher):
    client = APIClient()
    client.force_authenticate(researcher)
    body = {"dataset": "demo-sts", "transformation": "random_keywords", "preset": "multi-axis-paper", "limit": 1}
    runs = client.post("/api/transform-runs/", body, format="json")
    assert runs.status_code == 202
    assert [(r["seed"], r["preset"], r["params"]["temperature"], r["params"]["top_p"]) for r in runs.json()] == [
        (seed, "multi-axis-paper", 0.0, 1.0) for seed in (1337, 1338, 1339)
    ]
    one = client.post("/api/transform-runs/", {**body, "seed": 1339}, format="json")
    assert one.status_code == 202 and one.json()["seed"] == 1339 and one.json()["preset"] == "multi-axis-paper"
    conflict = client.post("/api/transform-runs/", {**body, "top_p": 0.9}, format="json")
    assert conflict.status_code == 400 and "top_p=0.9 conflicts" in conflict.json()["top_p"][0]
    unknown = client.post("/api/transform-runs/", {**body, "preset": "mteb"}, format="json")
    assert unknown.status_code == 400 and "preset" in unknown.json()


def test_judge_reports_take_a_preset(sts, researcher):
    settings_ = judge_report_settings(preset="multi-axis-paper")
    assert (settings_.seed, settings_.params.temperature, settings_.preset) == (1337, 0.0, "multi-axis-paper")
    assert (settings_.generation_params.temperature, settings_.generation_params.top_p) == (0.0, 1.0)
    report = judge_report_create(
        dispatch=False,
        request=JudgeReportCreateRequest(kind="evaluation", dataset="demo-sts", preset="paraphrasing-paper"),
    )
    assert report.options["preset"] == "paraphrasing-paper" and report.options["seed"] == 1337
    plain = judge_report_create(dispatch=False, request=JudgeReportCreateRequest(kind="evaluation", dataset="demo-sts"))
    assert "preset" not in plain.options and plain.options["seed"] == 0
    with pytest.raises(ShiftlabError, match="seed=\\[3\\] conflicts with preset 'paraphrasing-paper'"):
        judge_report_create(
            dispatch=False,
            request=JudgeReportCreateRequest(
                kind="evaluation", dataset="demo-sts", preset="paraphrasing-paper", seed=3
            ),
        )
    client = APIClient()
    client.force_authenticate(researcher)
    body = {"kind": "evaluation", "dataset": "demo-sts", "preset": "multi-axis-paper", "temperature": 0.5}
    conflict = client.post("/api/judge-reports/", body, format="json")
    assert conflict.status_code == 400 and "temperature=0.5 conflicts" in conflict.json()["temperature"][0]


def test_the_benchmark_command_takes_a_preset_for_seeds_and_statistics_units(db):
    with pytest.raises(CommandError, match="baseline_compare='delta' conflicts with preset 'paraphrasing-paper'"):
        call_command("benchmark", "report", "1", "--preset=paraphrasing-paper", "--baseline-compare=delta")
    # Without a config a preset sets the encoders' dtype only, as through the API (issue 28): the
    # refusal is about the dataset, not the preset.
    with pytest.raises(CommandError, match="no dataset named 'x'"):
        call_command("benchmark", "run", "--dataset=x", "--preset=multi-axis-paper")


def test_a_benchmark_run_with_a_preset_plans_the_papers_seeds(sts, tmp_path):
    runs = [keyword_run(sts, seed) for seed in (1337, 1338, 1339, 7)]
    config = tmp_path / "config.yaml"
    config.write_text(config_text(runs), encoding="utf-8")
    out = io.StringIO()
    call_command("benchmark", "run", f"--config={config}", "--preset=multi-axis-paper", stdout=out)
    (planned,) = BenchmarkRun.objects.get().plan["transformations"]
    assert planned["transformation"] == "random_keywords" and planned["seeds"] == [1337, 1338, 1339]
    with pytest.raises(CommandError, match="seed=\\[7\\] conflicts with preset 'multi-axis-paper'"):
        call_command("benchmark", "run", f"--config={config}", "--preset=multi-axis-paper", "--seeds", "7")


def test_the_paraphrasing_papers_encoders_run_in_bfloat16(sts, tmp_path, researcher):
    """The preset's encoder dtype is stored with the run and is the dtype every unit loads its
    model in (its vectors are cached apart from float32 ones: the dtype is in the revision)."""
    from evaluation.benchmark_services import benchmark_run_create_from_config
    from evaluation.encoders import get_encoder

    runs = [keyword_run(sts, seed) for seed in range(1337, 1343)]
    text = config_text(runs)
    run = benchmark_run_create_from_config(
        text=text, fmt="yaml", models=["all-MiniLM-L6-v2"], preset="paraphrasing-paper", dispatch=False
    )
    assert (run.plan["preset"], run.plan["encoder_dtype"]) == ("paraphrasing-paper", "bfloat16")
    encoder = get_encoder("all-MiniLM-L6-v2", run.plan["encoder_dtype"])
    assert encoder.dtype == "bfloat16" and encoder.revision != get_encoder("all-MiniLM-L6-v2").revision
    with pytest.raises(ShiftlabError, match="preset paraphrasing-paper loads encoders in bfloat16, but encoder_dtype"):
        benchmark_run_create_from_config(
            text=text, fmt="yaml", models=["all-MiniLM-L6-v2"], preset="paraphrasing-paper", encoder_dtype="float16"
        )
    client = APIClient()
    client.force_authenticate(researcher)
    body = {"models": ["all-MiniLM-L6-v2"], "config_text": text, "preset": "paraphrasing-paper"}
    wrong = client.post("/api/benchmark-runs/", {**body, "seeds": [7]}, format="json")
    assert wrong.status_code == 400 and "conflicts with preset 'paraphrasing-paper'" in wrong.json()["detail"]
    created = client.post("/api/benchmark-runs/", body, format="json")
    assert created.status_code == 201, created.content
    plan = BenchmarkRun.objects.get(pk=created.json()["id"]).plan
    assert plan["encoder_dtype"] == "bfloat16" and plan["transformations"][0]["seeds"] == list(range(1337, 1343))
