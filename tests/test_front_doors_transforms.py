"""One front door per action (issue 28) in the transforms app: the page, the API and the command
start a transformation run, a judge evaluation, a judged run and a generator selection through the
same service entry, so the same inputs give the same object in the same project, or the same
refusal.

Rita is a researcher, member of projects alpha and beta and viewer of gamma. Her inputs are in
alpha: without a project named, every door puts the new object in alpha. Naming gamma, which she
may only read, every door refuses (403 on the page and in the API, the same message from the
command). The LLM backends point at a closed port with no retries: reports and runs are declared
(the command's inline execution then fails fast, after the report exists).
"""

from __future__ import annotations

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.urls import reverse

from core.models import AuditEvent, Membership, Project
from core.roles import Role
from corpora.services import dataset_import
from tests.support import api_as, keyword_run, make_user, page_as
from transforms.backends import reset_backends
from transforms.models import JudgeReport, TransformRun

pytestmark = pytest.mark.django_db

DEMO_STS = settings.BASE_DIR / "fixtures/sts/demo-sts.csv"
READ_ONLY = "may only read project 'gamma'"


@pytest.fixture
def world(django_user_model, settings):
    settings.TRANSFORM_BACKENDS = {
        alias: {
            "BACKEND": "transforms.backends.openai_compat.OpenAICompatBackend",
            "OPTIONS": {
                "base_url": "http://127.0.0.1:9/v1",
                "model": f"model-{alias}",
                "identity": alias,
                "max_retries": 0,
            },
        }
        for alias in ("default", "other")
    }
    reset_backends()
    projects = {slug: Project.objects.create(slug=slug, name=slug) for slug in ("alpha", "beta", "gamma")}
    rita = make_user(django_user_model, "rita", Role.RESEARCHER)
    for slug, role in (("alpha", "MEMBER"), ("beta", "MEMBER"), ("gamma", "VIEWER")):
        Membership.objects.create(project=projects[slug], user=rita, role=getattr(Membership.Role, role))
    dataset = dataset_import(source=DEMO_STS, task="sts", name="sts-alpha", project=projects["alpha"])
    yield {"rita": rita, "run": keyword_run(dataset, 1), **projects}
    reset_backends()


def _command(*args: str) -> str:
    """Run ``manage.py ARGS --as rita``; the refusal's message, or "" when it went through."""
    try:
        call_command(*args, "--as", "rita")
    except CommandError as exc:
        return str(exc)
    return ""


# --- transformation runs ---------------------------------------------------------------------------

RUN_FORM = {"dataset": "sts-alpha", "transformation": "random_keywords", "limit": 3, "backend": "default"}


def test_a_run_goes_into_its_datasets_project_through_every_door(world):
    page = page_as(world["rita"]).post(reverse("transforms:runs"), RUN_FORM | {"seed": 11, "language_check": "on"})
    assert page.status_code == 302, page.content
    api = api_as(world["rita"]).post("/api/transform-runs/", RUN_FORM | {"seed": 12}, format="json")
    assert api.status_code == 202, api.content
    assert _command("transform", "--dataset", "sts-alpha", "--transformation", "random_keywords", "--seed", "13") == ""
    made = {run.seed: run for run in TransformRun.objects.filter(seed__in=[11, 12, 13])}
    assert {seed: run.project.slug for seed, run in made.items()} == {11: "alpha", 12: "alpha", 13: "alpha"}
    assert made[11].run_hash != made[12].run_hash  # three runs, one per seed, each declared once


def test_a_run_in_a_project_the_caller_may_only_read_is_refused_by_every_door(world):
    body = RUN_FORM | {"seed": 21, "project": "gamma"}
    page = page_as(world["rita"]).post(reverse("transforms:runs"), body | {"language_check": "on"})
    assert page.status_code == 403
    api = api_as(world["rita"]).post("/api/transform-runs/", body, format="json")
    assert api.status_code == 403 and READ_ONLY in api.json()["detail"]
    named = ("--dataset", "sts-alpha", "--transformation", "random_keywords", "--project", "gamma")
    refused = _command("transform", *named)
    assert refused == api.json()["detail"]
    assert not TransformRun.objects.filter(project=world["gamma"]).exists()


def test_a_missing_dataset_is_the_same_refusal_through_every_door(world):
    api = api_as(world["rita"]).post("/api/transform-runs/", RUN_FORM | {"dataset": "nope"}, format="json")
    assert api.status_code == 404
    refused = _command("transform", "--dataset", "nope", "--transformation", "random_keywords")
    assert refused == api.json()["dataset"][0] == "No dataset named 'nope'. See: python manage.py corpora list"
    assert api.json()["code"] == "not_found"


# --- judge reports -----------------------------------------------------------------------------------


def _reports_by_door(world, page_body: dict, api_body: dict, command: tuple[str, ...]) -> list[JudgeReport]:
    """The reports the page, the API and the command make of the same inputs (the command's
    inline execution fails at the closed port, after its report exists)."""
    made = []
    page = page_as(world["rita"]).post(reverse("transforms:judge-reports"), page_body)
    assert page.status_code == 302, page.content
    made.append(JudgeReport.objects.latest("pk"))
    api = api_as(world["rita"]).post("/api/judge-reports/", api_body, format="json")
    assert api.status_code == 202, api.content
    made.append(JudgeReport.objects.get(pk=api.json()["id"]))
    assert "failed" in _command(*command)
    made.append(JudgeReport.objects.latest("pk"))
    assert len({report.pk for report in made}) == 3
    return made


def test_a_judge_evaluation_goes_into_its_datasets_project_through_every_door(world):
    made = _reports_by_door(
        world,
        {"kind": "evaluation", "dataset": "sts-alpha", "judges": "default", "limit": 3},
        {"kind": "evaluation", "dataset": "sts-alpha", "limit": 3},
        ("judge", "evaluate", "--dataset", "sts-alpha", "--limit", "3"),
    )
    assert {(r.kind, r.project.slug, r.options["limit"]) for r in made} == {("evaluation", "alpha", 3)}


def test_a_judged_run_goes_into_the_runs_project_through_every_door(world):
    run = world["run"].pk
    made = _reports_by_door(
        world,
        {"kind": "run", "run": run, "judges": ["default"]},
        {"kind": "run", "run": run},
        ("judge", "run", "--run", str(run)),
    )
    assert {(r.kind, r.project.slug, tuple(r.runs.values_list("pk", flat=True))) for r in made} == {
        ("run", "alpha", (run,))
    }


def test_a_selection_and_its_candidate_runs_go_into_the_datasets_project_through_every_door(world):
    inputs = {"kind": "selection", "dataset": "sts-alpha", "candidates": ["default", "other"], "limit": 2}
    made = _reports_by_door(
        world,
        inputs | {"transformation": "paraphrase"},
        inputs,
        ("judge", "select", "--dataset", "sts-alpha", "--candidate", "default", "--candidate", "other", "--limit", "2"),
    )
    for report in made:
        assert report.project.slug == "alpha"
        assert {run.project.slug for run in report.runs.all()} == {"alpha"} and report.runs.count() == 2


@pytest.mark.parametrize(
    ("page_body", "api_body", "command"),
    [
        (
            {"kind": "evaluation", "dataset": "sts-alpha", "judges": "default"},
            {"kind": "evaluation", "dataset": "sts-alpha"},
            ("judge", "evaluate", "--dataset", "sts-alpha"),
        ),
        (
            {"kind": "selection", "dataset": "sts-alpha", "transformation": "paraphrase"},
            {"kind": "selection", "dataset": "sts-alpha"},
            ("judge", "select", "--dataset", "sts-alpha"),
        ),
    ],
    ids=["evaluation", "selection"],
)
def test_a_report_in_a_project_the_caller_may_only_read_is_refused_by_every_door(world, page_body, api_body, command):
    candidates = {"candidates": ["default", "other"]} if api_body["kind"] == "selection" else {}
    page = page_as(world["rita"]).post(
        reverse("transforms:judge-reports"), page_body | candidates | {"project": "gamma"}
    )
    assert page.status_code == 403
    api = api_as(world["rita"]).post("/api/judge-reports/", api_body | candidates | {"project": "gamma"}, format="json")
    assert api.status_code == 403 and READ_ONLY in api.json()["detail"]
    flags = [f for alias in candidates.get("candidates", []) for f in ("--candidate", alias)]
    assert _command(*command, *flags, "--project", "gamma") == api.json()["detail"]
    assert not JudgeReport.objects.filter(project=world["gamma"]).exists()
    assert not TransformRun.objects.filter(project=world["gamma"]).exists()


def test_a_judged_run_of_a_project_the_caller_may_only_read_is_refused_by_every_door(world):
    """The report goes into the run's project, which the page has no field for: a run of gamma."""
    gamma = dataset_import(source=DEMO_STS, task="sts", name="sts-gamma", project=world["gamma"])
    run = keyword_run(gamma, 2).pk
    page = page_as(world["rita"]).post(
        reverse("transforms:judge-reports"), {"kind": "run", "run": run, "judges": ["default"]}
    )
    assert page.status_code == 403
    api = api_as(world["rita"]).post("/api/judge-reports/", {"kind": "run", "run": run}, format="json")
    assert api.status_code == 403 and READ_ONLY in api.json()["detail"]
    assert _command("judge", "run", "--run", str(run)) == api.json()["detail"]
    assert not JudgeReport.objects.filter(project=world["gamma"]).exists()


def test_a_judged_run_named_into_a_project_the_caller_may_only_read_is_refused_alike(world):
    run = world["run"].pk
    body = {"kind": "run", "run": run, "project": "gamma"}
    api = api_as(world["rita"]).post("/api/judge-reports/", body, format="json")
    assert api.status_code == 403
    assert _command("judge", "run", "--run", str(run), "--project", "gamma") == api.json()["detail"]


def test_resuming_a_run_the_caller_may_only_read_is_refused_by_every_door(world):
    """Before issue 43 each door checked write access itself; now ``transform_run_resume`` does,
    as ``benchmark_run_resume`` does, and the sweeper (the system) resumes any run."""
    gamma = dataset_import(source=DEMO_STS, task="sts", name="sts-gamma", project=world["gamma"])
    run = keyword_run(gamma, 3)
    TransformRun.objects.filter(pk=run.pk).update(status=TransformRun.Status.FAILED, error="lost")
    page = page_as(world["rita"]).post(reverse("transforms:run", args=[run.pk]))
    assert page.status_code == 403
    api = api_as(world["rita"]).post(f"/api/transform-runs/{run.pk}/resume/")
    assert api.status_code == 403 and READ_ONLY in api.json()["detail"]
    assert _command("transform", "--run", str(run.pk), "--resume") == api.json()["detail"]
    assert TransformRun.objects.get(pk=run.pk).status == TransformRun.Status.FAILED
    assert not AuditEvent.objects.filter(verb="transform.run.resume").exists()


def test_resuming_a_judge_report_the_caller_may_only_read_is_refused(world):
    gamma = dataset_import(source=DEMO_STS, task="sts", name="sts-gamma", project=world["gamma"])
    report = JudgeReport.objects.create(
        project=world["gamma"], kind=JudgeReport.Kind.EVALUATION, dataset=gamma, status=JudgeReport.Status.FAILED
    )
    api = api_as(world["rita"]).post(f"/api/judge-reports/{report.pk}/resume/")
    assert api.status_code == 403 and READ_ONLY in api.json()["detail"]
    assert JudgeReport.objects.get(pk=report.pk).status == JudgeReport.Status.FAILED
