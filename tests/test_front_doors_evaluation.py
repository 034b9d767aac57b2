"""One front door per evaluation action (issue 28): the benchmark page, ``POST /api/benchmark-runs/``
and ``manage.py benchmark run`` all call ``benchmark_run_start``, so the same inputs give the same
run in the same project, or the same refusal; resuming a run (API and command) calls
``benchmark_run_resume``, which checks the caller may change the run's project.

Carl is a member of projects alpha and beta and a viewer of gamma. On the code before issue 28
the page and the command refused his run on alpha's dataset ("You belong to several projects")
where the API made it in alpha; the page refused gamma with its own words ("You cannot add to
that project"); and ``--preset`` without ``--config`` was refused by the command but not by the API.
Runs are left pending (their tasks are not executed): no model is loaded.
"""

from __future__ import annotations

import html
import io
from pathlib import Path

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse

from annotation.export_services import BenchmarkConfigExportRequest, benchmark_config_export
from annotation.models import Approval, BenchmarkConfig, GateResult
from annotation.studies.design_services import StudyCreateRequest, study_create
from core.models import Membership, Project
from core.roles import Role
from corpora.services import dataset_import
from evaluation.benchmark_services import CONFIG_SOURCE_BOTH, CONFIG_SOURCE_NONE
from evaluation.models import BenchmarkRun
from tests.support import LIMIT, api_as, keyword_run, make_user, page_as, roster_at_least, rostered
from tests.test_projects_annotation import DESIGN

pytestmark = pytest.mark.django_db
DEMO_STS = settings.BASE_DIR / "fixtures/sts/demo-sts.csv"
MODEL = "all-MiniLM-L6-v2"
READ_ONLY = "You may only read project 'gamma'"


@pytest.fixture
def world(django_user_model, tmp_path, settings):
    settings.DATA_DIR = tmp_path
    alpha, beta, gamma = (Project.objects.create(slug=slug) for slug in ("alpha", "beta", "gamma"))
    carl = make_user(django_user_model, "carl", Role.RESEARCHER)
    for project, role in ((alpha, "member"), (beta, "member"), (gamma, "viewer")):
        Membership.objects.create(project=project, user=carl, role=role)
    a_sts = dataset_import(source=DEMO_STS, task="sts", name="a-sts", created_by=carl, project=alpha)
    dataset_import(source=DEMO_STS, task="sts", name="g-sts", created_by=None, project=gamma)
    return {"carl": carl, "alpha": alpha, "gamma": gamma, "a_sts": a_sts, "tmp": tmp_path}


@pytest.fixture
def alpha_config(world) -> BenchmarkConfig:
    """An exported config of alpha approving a random-keywords run of alpha's dataset."""
    roster_at_least(world["alpha"], DESIGN.raters_per_item)
    study = study_create(
        actor=world["carl"],
        request=rostered(
            StudyCreateRequest(name="a-study", runs=[keyword_run(world["a_sts"], 1)], design=DESIGN, project="alpha")
        ),
    )
    gate = GateResult.objects.create(
        study=study, transformation="random_keywords", passed=True, evidence={"state": "passed"}, evidence_hash="0" * 64
    )
    Approval.objects.create(gate_result=gate, decision="approve", comment="ok", decided_by=world["carl"])
    return benchmark_config_export(
        actor=world["carl"], request=BenchmarkConfigExportRequest(studies=[study], name="a-config")
    )


def described(run: BenchmarkRun) -> dict:
    """What makes two runs the same run (their ids and times aside)."""
    plan = run.plan
    return {
        "project": run.project.slug,
        "source": run.source,
        "models": run.model_names,
        "config_hash": run.config_hash,
        "limit": run.item_limit,
        "total": run.total,
        "datasets": plan["datasets"],
        "transformations": plan["transformations"],
        "preset": plan["preset"],
        "encoder_dtype": plan["encoder_dtype"],
    }


def by_page(user, **fields) -> dict | str:
    """The run the benchmark page starts (described), or the refusal it shows."""
    before = BenchmarkRun.objects.order_by("pk").last()
    sent = {"models": MODEL, "config": "", "project": "", **fields}
    response = page_as(user).post(reverse("evaluation:benchmarks"), sent)
    if response.status_code == 302:
        run = BenchmarkRun.objects.latest("pk")
        assert run != before
        return described(run)
    assert response.status_code == 200
    return html.unescape(response.content.decode())


def by_api(user, status: int = 201, **body) -> dict | str:
    response = api_as(user).post("/api/benchmark-runs/", {"models": [MODEL], **body}, format="json")
    assert response.status_code == status, response.content
    if status == 201:
        return described(BenchmarkRun.objects.get(pk=response.json()["id"]))
    return str(response.json())


def by_command(user, *args: str) -> dict | str:
    before = BenchmarkRun.objects.order_by("pk").last()
    try:
        call_command("benchmark", "run", "--models", MODEL, *args, "--as", user.username, stdout=io.StringIO())
    except CommandError as exc:
        return str(exc)
    run = BenchmarkRun.objects.latest("pk")
    assert run != before
    return described(run)


def test_a_run_on_one_projects_datasets_goes_into_that_project_through_every_door(world):
    carl = world["carl"]
    page = by_page(carl, datasets=["a-sts"], limit=str(LIMIT))
    api = by_api(carl, datasets=["a-sts"], limit=LIMIT)
    command = by_command(carl, "--dataset", "a-sts", "--limit", str(LIMIT))
    assert page == api == command
    assert api["project"] == "alpha" and api["source"] == "datasets"


def test_a_run_from_a_config_goes_into_the_configs_project_through_every_door(world, alpha_config):
    carl, path = world["carl"], Path(world["tmp"]) / "a-config.json"
    path.write_text(alpha_config.json_text, encoding="utf-8")
    page = by_page(carl, config=str(alpha_config.pk), limit=str(LIMIT))
    api = by_api(carl, config_id=alpha_config.pk, limit=LIMIT)
    command = by_command(carl, "--config", str(path), "--limit", str(LIMIT))
    assert page == api == command
    assert api["project"] == "alpha" and api["source"] == "config" and api["transformations"]


def test_a_project_the_caller_may_only_read_is_refused_alike(world):
    carl = world["carl"]
    sent = {"models": MODEL, "config": "", "datasets": ["g-sts"], "project": "gamma"}
    refused = page_as(carl).post(reverse("evaluation:benchmarks"), sent)
    assert refused.status_code == 403  # as every page answers a forbidden change (core.pages.refusals)
    page = html.unescape(refused.content.decode())
    api = by_api(carl, status=403, datasets=["g-sts"], project="gamma")
    command = by_command(carl, "--dataset", "g-sts", "--project", "gamma")
    for refusal in (page, api, command):
        assert READ_ONLY in refusal
    assert not BenchmarkRun.objects.exists()


def test_an_unknown_project_is_refused_alike_by_the_api_and_the_command(world):
    api = by_api(world["carl"], status=404, datasets=["a-sts"], project="delta")
    command = by_command(world["carl"], "--dataset", "a-sts", "--project", "delta")
    assert api.startswith("{'project': [") and "No project 'delta' that you belong to" in api
    assert "No project 'delta' that you belong to" in command


def test_seeds_without_a_config_are_refused_alike(world):
    api = by_api(world["carl"], status=400, datasets=["a-sts"], seeds=[1])
    command = by_command(world["carl"], "--dataset", "a-sts", "--seeds", "1")
    refusal = "seeds and transformations need a config"
    assert refusal in api and refusal in command


def test_a_preset_without_a_config_sets_the_encoders_dtype_through_every_door_that_takes_one(world):
    api = by_api(world["carl"], datasets=["a-sts"], preset="paraphrasing-paper")
    command = by_command(world["carl"], "--dataset", "a-sts", "--preset", "paraphrasing-paper")
    assert api == command
    assert (api["preset"], api["encoder_dtype"]) == ("paraphrasing-paper", "bfloat16")


def test_resuming_a_run_the_caller_may_only_read_is_refused_alike(world):
    run = BenchmarkRun.objects.create(project=world["gamma"], name="g", model_names=[MODEL], total=1, plan={})
    page = page_as(world["carl"]).post(reverse("evaluation:benchmark-resume", args=[run.pk]))
    assert page.status_code == 403 and READ_ONLY in html.unescape(page.content.decode())
    refused = api_as(world["carl"]).post(f"/api/benchmark-runs/{run.pk}/resume/")
    assert refused.status_code == 403 and READ_ONLY in refused.json()["detail"]
    with pytest.raises(CommandError, match=READ_ONLY):
        call_command("benchmark", "resume", str(run.pk), "--as", "carl", stdout=io.StringIO())
    assert BenchmarkRun.objects.get(pk=run.pk).status == run.status


def test_a_run_without_a_config_or_datasets_is_refused_alike(world):
    """Which source a run has is decided in ``benchmark_run_start``, with one wording (issue 43:
    the service, the serializer, the form and the command each had their own)."""
    refusal = CONFIG_SOURCE_NONE
    page = by_page(world["carl"])
    api = by_api(world["carl"], status=400)
    command = by_command(world["carl"])
    assert refusal in page and refusal in api and refusal in command
    assert not BenchmarkRun.objects.exists()


def test_a_stored_config_and_a_config_text_together_are_refused_alike(world, alpha_config):
    upload = SimpleUploadedFile("a-config.json", alpha_config.json_text.encode(), content_type="application/json")
    page = by_page(world["carl"], config=str(alpha_config.pk), config_file=upload)
    api = by_api(world["carl"], status=400, config_id=alpha_config.pk, config_text=alpha_config.json_text)
    assert CONFIG_SOURCE_BOTH in page and CONFIG_SOURCE_BOTH in api
    assert not BenchmarkRun.objects.exists()
