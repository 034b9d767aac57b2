"""Projects (issue 16) in the transforms app: runs, prompt versions, judge reports, selections and
prompt-sensitivity reports, over the API, the pages and the commands.

Two closed projects, A and B, each with one researcher member; a viewer of A; an admin. A's
objects are missing (404) for B's researcher and absent from their lists; A's viewer reads them
but may not change them (403); the admin sees everything. Runs execute deterministic
transformations (random_keywords, no LLM); a run needing an LLM is only declared.
"""

from __future__ import annotations

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.urls import reverse

from core.errors import ShiftlabError
from core.models import Membership, Project
from core.projects import default_project
from core.roles import Role
from corpora.models import Dataset
from corpora.services import dataset_import
from tests.support import api_as, keyword_run, make_user, page_as
from transforms.backends import reset_backends
from transforms.models import JudgeReport, PromptTemplate, TransformRun
from transforms.prompt_services import prompt_template_active, prompt_template_create_version
from transforms.prompts import default_prompt
from transforms.selection_services import judge_report_create_selection
from transforms.services import transform_run_create

pytestmark = pytest.mark.django_db

DEMO_STS = settings.BASE_DIR / "fixtures/sts/demo-sts.csv"


@pytest.fixture
def world(django_user_model):
    """Projects A and B, their members, a viewer of A, an admin; a dataset and a finished run of
    A, a failed judge report of A's run, and a dataset of A shared with every project."""
    a = Project.objects.create(slug="team-a", name="A")
    b = Project.objects.create(slug="team-b", name="B")
    users = {
        "alice": make_user(django_user_model, "alice", Role.RESEARCHER),
        "bob": make_user(django_user_model, "bob", Role.RESEARCHER),
        "vera": make_user(django_user_model, "vera", Role.RESEARCHER),
        "adam": make_user(django_user_model, "adam", Role.ADMIN),
    }
    Membership.objects.create(project=a, user=users["alice"], role=Membership.Role.MEMBER)
    Membership.objects.create(project=b, user=users["bob"], role=Membership.Role.OWNER)
    Membership.objects.create(project=a, user=users["vera"], role=Membership.Role.VIEWER)
    dataset_a = dataset_import(source=DEMO_STS, task="sts", name="sts-a", project=a)
    shared = dataset_import(source=DEMO_STS, task="sts", name="sts-shared", project=a)
    Dataset.objects.filter(pk=shared.pk).update(shared=True)
    shared.refresh_from_db()
    run_a = keyword_run(dataset_a, 1)
    report_a = JudgeReport.objects.create(
        kind=JudgeReport.Kind.RUN,
        project=a,
        dataset=dataset_a,
        judges=["default"],
        options={"seed": 0},
        status=JudgeReport.Status.FAILED,
        error="the judge was down",
    )
    report_a.runs.set([run_a])
    return {"a": a, "b": b, **users, "dataset_a": dataset_a, "shared": shared, "run_a": run_a, "report_a": report_a}


@pytest.fixture
def llm_identity(settings):
    """The default LLM backend with a fixed identity: an LLM run can be declared without a server."""
    settings.TRANSFORM_BACKENDS = {
        "default": {
            "BACKEND": "transforms.backends.openai_compat.OpenAICompatBackend",
            "OPTIONS": {"base_url": "http://127.0.0.1:9/v1", "model": "test-model", "identity": "test"},
        }
    }
    reset_backends()
    yield
    reset_backends()


# --- runs over the API ------------------------------------------------------------------------------


def test_a_run_is_the_dataset_projects_and_is_shown_with_its_slug(world):
    assert world["run_a"].project == world["a"]
    body = api_as(world["alice"]).get(f"/api/transform-runs/{world['run_a'].pk}/").json()
    assert body["project"] == "team-a"


@pytest.mark.parametrize("suffix", ["", "outputs/", "summary/"])
def test_another_projects_run_is_missing_over_the_api(world, suffix):
    url = f"/api/transform-runs/{world['run_a'].pk}/{suffix}"
    assert api_as(world["bob"]).get(url).status_code == 404
    for reader in ("alice", "vera", "adam"):
        assert api_as(world[reader]).get(url).status_code == 200, reader


def test_run_lists_show_only_readable_runs(world):
    def listed(user):
        return {r["id"] for r in api_as(user).get("/api/transform-runs/?limit=100").json()["results"]}

    run_b = keyword_run(world["shared"], 2)  # the system's run on a shared dataset: the default project's
    TransformRun.objects.filter(pk=run_b.pk).update(project=world["b"])
    assert listed(world["bob"]) == {run_b.pk}
    assert listed(world["alice"]) == listed(world["vera"]) == {world["run_a"].pk}
    assert listed(world["adam"]) == {world["run_a"].pk, run_b.pk}


def test_resume_over_the_api_needs_a_role_that_may_change(world):
    url = f"/api/transform-runs/{world['run_a'].pk}/resume/"
    assert api_as(world["bob"]).post(url).status_code == 404
    assert api_as(world["vera"]).post(url).status_code == 403
    assert api_as(world["alice"]).post(url).status_code == 202
    assert api_as(world["adam"]).post(url).status_code == 202


def test_a_run_on_another_projects_dataset_is_refused(world):
    body = {"dataset": "sts-a", "transformation": "random_keywords", "seed": 3, "limit": 3}
    assert api_as(world["bob"]).post("/api/transform-runs/", body, format="json").status_code == 404
    # The viewer reads the dataset, so the run would go into A, which they may only read.
    assert api_as(world["vera"]).post("/api/transform-runs/", body, format="json").status_code == 403
    # Naming another project than the dataset's: a clear refusal.
    wrong = api_as(world["adam"]).post("/api/transform-runs/", body | {"project": "team-b"}, format="json")
    assert wrong.status_code == 400 and "belongs to project 'team-a', not 'team-b'" in wrong.json()["detail"]
    unknown = api_as(world["alice"]).post("/api/transform-runs/", body | {"project": "team-b"}, format="json")
    assert unknown.status_code == 404 and "No project 'team-b'" in unknown.json()["project"][0]
    assert not TransformRun.objects.exclude(pk=world["run_a"].pk).exists()


def test_a_run_on_a_shared_dataset_belongs_to_the_callers_project(world):
    body = {"dataset": "sts-shared", "transformation": "random_keywords", "seed": 3, "limit": 3}
    response = api_as(world["bob"]).post("/api/transform-runs/", body, format="json")
    assert response.status_code == 202, response.content
    assert response.json()["project"] == "team-b"
    assert TransformRun.objects.get(pk=response.json()["id"]).project == world["b"]
    # The viewer of A belongs to no project they may change: the run goes into the open default one.
    response = api_as(world["vera"]).post("/api/transform-runs/", body, format="json")
    assert response.status_code == 202 and response.json()["project"] == default_project().slug


def test_prompt_sensitivity_finds_only_readable_runs(world):
    url = f"/api/transform-runs/sensitivity/?runs={world['run_a'].pk},{world['run_a'].pk + 1000}"
    refused = api_as(world["bob"]).get(url)
    assert refused.status_code == 404 and str(world["run_a"].pk) in refused.json()["runs"][0]
    assert "no transformation run(s)" in refused.json()["runs"][0]


def test_prompt_sensitivity_refuses_runs_of_two_projects(world, llm_identity):
    first = transform_run_create(dataset=world["shared"], transformation="paraphrase", seed=1, limit=2, dispatch=False)
    second = transform_run_create(
        dataset=world["shared"], transformation="paraphrase", seed=1, limit=2, dispatch=False, project=world["b"]
    )
    TransformRun.objects.filter(pk__in=[first.pk, second.pk]).update(status=TransformRun.Status.SUCCEEDED)
    response = api_as(world["adam"]).get(f"/api/transform-runs/sensitivity/?runs={first.pk},{second.pk}")
    assert response.status_code == 400 and "differ from run" in response.json()["detail"]
    assert "project" in response.json()["detail"]


# --- prompt versions ---------------------------------------------------------------------------------


def test_prompt_versions_are_per_project(world, llm_identity):
    alice, bob = api_as(world["alice"]), api_as(world["bob"])
    created = alice.post(
        "/api/prompt-templates/",
        {"key": "paraphrase", "system": "Be exact.", "user": "Reword: {text}", "project": "team-a"},
        format="json",
    )
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["project"] == "team-a" and body["version"] == 2 and body["is_active"]
    # B's active paraphrase prompt is still the shipped wording, numbered in B.
    b_active = prompt_template_active("paraphrase", project=world["b"])
    assert (b_active.version, b_active.user) == (1, default_prompt("paraphrase").user)
    assert prompt_template_active("paraphrase").user == default_prompt("paraphrase").user  # the default project
    # Runs use their own project's active wording.
    run_a = transform_run_create(
        dataset=world["shared"], transformation="paraphrase", seed=1, limit=2, dispatch=False, project=world["a"]
    )
    run_b = transform_run_create(
        dataset=world["shared"], transformation="paraphrase", seed=1, limit=2, dispatch=False, project=world["b"]
    )
    assert run_a.project == world["a"] and list(run_a.prompts.values_list("pk", flat=True)) == [body["id"]]
    assert run_b.prompt_hashes == {"paraphrase": default_prompt("paraphrase").content_hash}
    assert run_b.prompts.get().project == world["b"]
    # A version of A is missing for B's researcher, in the list too.
    assert bob.get(f"/api/prompt-templates/{body['id']}/").status_code == 404
    assert bob.post(f"/api/prompt-templates/{body['id']}/activate/").status_code == 404
    listed = bob.get("/api/prompt-templates/?limit=100").json()["results"]
    assert listed and {p["project"] for p in listed} <= {"team-b", default_project().slug}


def test_activating_a_version_changes_only_its_project(world):
    v2 = prompt_template_create_version(key="paraphrase", system="S.", user="A: {text}", project=world["a"])
    b2 = prompt_template_create_version(key="paraphrase", system="S.", user="B: {text}", project=world["b"])
    v1 = PromptTemplate.objects.get(project=world["a"], key="paraphrase", version=1)
    url = f"/api/prompt-templates/{v1.pk}/activate/"
    assert api_as(world["vera"]).post(url).status_code == 403
    assert prompt_template_active("paraphrase", project=world["a"]) == v2
    response = api_as(world["alice"]).post(url)
    assert response.status_code == 200 and response.json()["is_active"] and response.json()["version"] == 1
    assert prompt_template_active("paraphrase", project=world["a"]) == v1
    assert prompt_template_active("paraphrase", project=world["b"]) == b2


def test_a_viewer_may_not_add_a_prompt_version(world):
    body = {"key": "paraphrase", "system": "S.", "user": "Reword: {text}", "project": "team-a"}
    assert api_as(world["vera"]).post("/api/prompt-templates/", body, format="json").status_code == 403
    assert api_as(world["bob"]).post("/api/prompt-templates/", body, format="json").status_code == 404  # unknown
    assert not PromptTemplate.objects.filter(user="Reword: {text}").exists()


# --- judge reports -----------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", ["", "csv/"])
def test_another_projects_judge_report_is_missing(world, suffix):
    url = f"/api/judge-reports/{world['report_a'].pk}/{suffix}"
    assert api_as(world["bob"]).get(url).status_code == 404
    expected = 200 if not suffix else 409  # no result yet: the export says so
    for reader in ("alice", "vera", "adam"):
        assert api_as(world[reader]).get(url).status_code == expected, reader


def test_judge_report_lists_and_resume(world):
    def listed(user):
        return {r["id"] for r in api_as(user).get("/api/judge-reports/?limit=100").json()["results"]}

    assert listed(world["bob"]) == set()
    assert listed(world["vera"]) == listed(world["adam"]) == {world["report_a"].pk}
    url = f"/api/judge-reports/{world['report_a'].pk}/resume/"
    assert api_as(world["bob"]).post(url).status_code == 404
    assert api_as(world["vera"]).post(url).status_code == 403
    response = api_as(world["alice"]).post(url)
    assert response.status_code == 202 and response.json()["project"] == "team-a"


def test_judge_reports_take_inputs_of_their_project_only(world):
    run_a = world["run_a"].pk
    refused = api_as(world["bob"]).post("/api/judge-reports/", {"kind": "run", "run": run_a}, format="json")
    assert refused.status_code == 404 and f"no transformation run {run_a}" in refused.json()["run"][0]
    evaluation = {"kind": "evaluation", "dataset": "sts-a", "limit": 3}
    assert api_as(world["bob"]).post("/api/judge-reports/", evaluation, format="json").status_code == 404
    selection = {"kind": "selection", "runs": [run_a, run_a + 1000]}
    assert api_as(world["bob"]).post("/api/judge-reports/", selection, format="json").status_code == 404
    assert (
        api_as(world["vera"]).post("/api/judge-reports/", {"kind": "run", "run": run_a}, format="json").status_code
        == 403
    )
    made = api_as(world["alice"]).post("/api/judge-reports/", {"kind": "run", "run": run_a}, format="json")
    assert made.status_code == 202 and made.json()["project"] == "team-a"
    # B's researcher judges the shared dataset: the report is B's.
    shared = api_as(world["bob"]).post(
        "/api/judge-reports/", {"kind": "evaluation", "dataset": "sts-shared", "limit": 3}, format="json"
    )
    assert shared.status_code == 202 and shared.json()["project"] == "team-b"


# --- pages ---------------------------------------------------------------------------------------------


def test_pages_of_another_projects_run_and_report_are_missing(world):
    run_a, report_a = world["run_a"], world["report_a"]
    bob = page_as(world["bob"])
    assert bob.get(reverse("transforms:run", args=[run_a.pk])).status_code == 404
    assert bob.post(reverse("transforms:run", args=[run_a.pk])).status_code == 404
    assert bob.get(reverse("transforms:judge-report", args=[report_a.pk])).status_code == 404
    runs = bob.get(reverse("transforms:runs"))
    assert runs.status_code == 200 and f"#{run_a.pk}<" not in runs.content.decode()
    assert b"sts-a" not in runs.content  # nor in the dataset select of the form
    reports = bob.get(reverse("transforms:judge-reports"))
    assert f"#{report_a.pk}<" not in reports.content.decode()
    sensitivity = bob.get(reverse("transforms:sensitivity"), {"runs": f"{run_a.pk},{run_a.pk + 1}"})
    assert b"no transformation run(s)" in sensitivity.content


def test_a_viewer_reads_the_pages_but_may_not_resume(world):
    run_a = world["run_a"]
    TransformRun.objects.filter(pk=run_a.pk).update(status=TransformRun.Status.FAILED)
    vera = page_as(world["vera"])
    detail = vera.get(reverse("transforms:run", args=[run_a.pk]))
    assert detail.status_code == 200 and b"team-a" in detail.content and b"resume-form" not in detail.content
    assert vera.post(reverse("transforms:run", args=[run_a.pk])).status_code == 403
    assert TransformRun.objects.get(pk=run_a.pk).status == TransformRun.Status.FAILED
    assert vera.get(reverse("transforms:judge-report", args=[world["report_a"].pk])).status_code == 200
    listing = vera.get(reverse("transforms:runs"))
    assert f"#{run_a.pk}<" in listing.content.decode()
    alice = page_as(world["alice"])
    detail = alice.get(reverse("transforms:run", args=[run_a.pk]))
    assert b"resume-form" in detail.content
    assert alice.post(reverse("transforms:run", args=[run_a.pk])).status_code == 302


def test_the_run_form_offers_writable_projects_and_refuses_other_inputs(world):
    bob = page_as(world["bob"])
    form = {"transformation": "random_keywords", "seed": 4, "limit": 3, "backend": "default", "language_check": "on"}
    refused = bob.post(reverse("transforms:runs"), form | {"dataset": "sts-a"})
    assert refused.status_code == 200 and b"Select a valid choice" in refused.content
    made = bob.post(reverse("transforms:runs"), form | {"dataset": "sts-shared"})
    assert made.status_code == 302
    assert TransformRun.objects.get(seed=4).project == world["b"]
    # A viewer who picks the project they only read is refused (403), not shown a form error.
    vera = page_as(world["vera"])
    assert b'value="team-a"' not in vera.get(reverse("transforms:runs")).content
    assert vera.post(reverse("transforms:runs"), form | {"dataset": "sts-a", "seed": 5}).status_code == 403
    assert not TransformRun.objects.filter(seed=5).exists()


def test_the_judge_page_forms_are_scoped(world):
    vera = page_as(world["vera"])
    body = {"kind": "run", "run": world["run_a"].pk, "judges": ["default"]}
    # The run select offers only runs the caller may change; a viewer who posts one she reads is
    # refused (403) as the API and the command refuse her.
    assert f'value="{world["run_a"].pk}"'.encode() not in vera.get(reverse("transforms:judge-reports")).content
    assert vera.post(reverse("transforms:judge-reports"), body).status_code == 403
    alice = page_as(world["alice"])
    response = alice.post(reverse("transforms:judge-reports"), body)
    assert response.status_code == 302
    assert JudgeReport.objects.latest("pk").project == world["a"]


# --- commands -------------------------------------------------------------------------------------------


def test_transform_command_acts_as_a_user(world, tmp_path):
    run_a = world["run_a"].pk
    with pytest.raises(CommandError, match=f"No run {run_a}"):
        call_command("transform", "--as", "bob", "--run", str(run_a), "--export", str(tmp_path / "out.csv"))
    with pytest.raises(CommandError, match="may only read project 'team-a'"):
        call_command("transform", "--as", "vera", "--run", str(run_a), "--resume")
    with pytest.raises(CommandError, match="No dataset named 'sts-a'"):
        call_command("transform", "--as", "bob", "--dataset", "sts-a", "--transformation", "random_keywords")
    with pytest.raises(CommandError, match="No user 'nobody'"):
        call_command("transform", "--as", "nobody", "--run", str(run_a))
    call_command(
        "transform", "--as", "bob", "--dataset", "sts-shared", "--transformation", "random_keywords", "--seed", "7"
    )
    assert TransformRun.objects.get(seed=7).project == world["b"]
    # Without --as: the system, which sees every project; the run goes into the dataset's.
    call_command("transform", "--dataset", "sts-a", "--transformation", "random_keywords", "--seed", "8")
    assert TransformRun.objects.get(seed=8).project == world["a"]
    with pytest.raises(CommandError, match="belongs to project 'team-a', not 'team-b'"):
        call_command(
            "transform",
            "--dataset",
            "sts-a",
            "--transformation",
            "random_keywords",
            "--seed",
            "9",
            "--project",
            "team-b",
        )
    call_command(
        "transform",
        "--dataset",
        "sts-shared",
        "--transformation",
        "random_keywords",
        "--seed",
        "9",
        "--project",
        "team-b",
    )
    assert TransformRun.objects.get(seed=9).project == world["b"]


def test_judge_command_acts_as_a_user(world):
    run_a, report_a = world["run_a"].pk, world["report_a"].pk
    with pytest.raises(CommandError, match=f"No judge report {report_a}"):
        call_command("judge", "show", str(report_a), "--as", "bob")
    with pytest.raises(CommandError, match=f"no transformation run {run_a}"):
        call_command("judge", "run", "--run", str(run_a), "--as", "bob")
    with pytest.raises(CommandError, match="may only read project 'team-a'"):
        call_command("judge", "run", "--run", str(run_a), "--as", "vera")
    with pytest.raises(CommandError, match="No dataset named 'sts-a'"):
        call_command("judge", "evaluate", "--dataset", "sts-a", "--as", "bob")
    with pytest.raises(CommandError, match="no transformation run"):
        call_command("judge", "sensitivity", "--run", str(run_a), "--run", str(run_a + 1000), "--as", "bob")
    with pytest.raises(CommandError, match="no result yet"):
        call_command("judge", "show", str(report_a), "--as", "vera")  # found: A's viewer reads it


def test_a_selections_candidate_runs_go_into_the_reports_project(world, settings, llm_identity):
    settings.TRANSFORM_BACKENDS = {
        alias: {
            "BACKEND": "transforms.backends.openai_compat.OpenAICompatBackend",
            "OPTIONS": {"base_url": "http://127.0.0.1:9/v1", "model": f"model-{alias}", "identity": alias},
        }
        for alias in ("default", "other")
    }
    reset_backends()
    report = judge_report_create_selection(
        dataset=world["shared"], candidates=["default", "other"], limit=2, project=world["b"], dispatch=False
    )
    assert report.project == world["b"]
    assert {run.project for run in report.runs.all()} == {world["b"]} and report.runs.count() == 2
    with pytest.raises(ShiftlabError, match="the candidates' runs must be in the same project"):
        judge_report_create_selection(runs=list(report.runs.all()), project=world["a"], dispatch=False)
