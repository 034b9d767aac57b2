"""Projects (issue 16) in the evaluation app: who reads and changes which benchmark runs and
baseline studies, and which inputs a new benchmark run may take.

Two closed projects, A and B, each with one researcher member; a viewer of A; a researcher in
both (to see the "other project" refusals, which name the project, where a caller may read it);
an admin. Runs of a project a caller may not read answer 404 on every page, API route and
command; a viewer reads them and gets 403 on changes. Runs here are made from result rows
directly or left pending (their tasks are not executed): no model is loaded.
"""

from __future__ import annotations

import html
import io

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.urls import reverse

from annotation.baselines.baseline_services import BaselineCreateRequest, baseline_create
from annotation.export_services import BenchmarkConfigExportRequest, benchmark_config_export
from annotation.models import Approval, BaselineStudy, BenchmarkConfig, GateResult
from annotation.studies.design_services import StudyCreateRequest, study_create
from core.models import DEFAULT_PROJECT, Membership, Project
from core.roles import Role
from corpora.models import Dataset
from corpora.services import dataset_import
from evaluation.models import BenchmarkResult, BenchmarkRun
from tests.support import LIMIT, api_as, keyword_run, make_user, page_as, roster_at_least, rostered
from tests.test_projects_annotation import DESIGN

pytestmark = pytest.mark.django_db
DEMO_STS = settings.BASE_DIR / "fixtures/sts/demo-sts.csv"
MODEL = "all-MiniLM-L6-v2"


def finished_run(project: Project, dataset: Dataset, name: str) -> BenchmarkRun:
    """A finished datasets-only run of ``project`` with one original unit (no encoder, no Celery)."""
    run = BenchmarkRun.objects.create(
        project=project,
        name=name,
        source=BenchmarkRun.Source.DATASETS,
        model_names=["alpha"],
        status=BenchmarkRun.Status.SUCCEEDED,
        total=1,
        done=1,
        plan={"datasets": [dataset.name], "transformations": [], "units": []},
    )
    BenchmarkResult.objects.create(
        run=run,
        model="alpha",
        model_id="alpha",
        model_revision="r1",
        dataset=dataset,
        transformation="original",
        seed=0,
        main_metric="cosine_spearman",
        main_score=0.5,
        n_items=10,
    )
    return run


@pytest.fixture
def world(django_user_model, admin_user_role, tmp_path, settings):
    """Projects A and B, their members, a viewer of A, a member of both, A's and B's datasets, a
    dataset of A shared with everyone, a finished run of each project and a baseline study of A."""
    settings.DATA_DIR = tmp_path
    a = Project.objects.create(slug="team-a")
    b = Project.objects.create(slug="team-b")
    alice = make_user(django_user_model, "alice", Role.RESEARCHER)
    bob = make_user(django_user_model, "bob", Role.RESEARCHER)
    vera = make_user(django_user_model, "vera", Role.RESEARCHER)
    carl = make_user(django_user_model, "carl", Role.RESEARCHER)
    Membership.objects.create(project=a, user=alice, role=Membership.Role.MEMBER)
    Membership.objects.create(project=b, user=bob, role=Membership.Role.OWNER)
    Membership.objects.create(project=a, user=vera, role=Membership.Role.VIEWER)
    Membership.objects.create(project=a, user=carl, role=Membership.Role.MEMBER)
    Membership.objects.create(project=b, user=carl, role=Membership.Role.MEMBER)
    a_sts = dataset_import(source=DEMO_STS, task="sts", name="a-sts", created_by=alice, project=a)
    b_sts = dataset_import(source=DEMO_STS, task="sts", name="b-sts", created_by=bob, project=b)
    shared = dataset_import(source=DEMO_STS, task="sts", name="shared-sts", created_by=alice, project=a)
    Dataset.objects.filter(pk=shared.pk).update(shared=True)
    study = baseline_create(
        actor=alice,
        request=BaselineCreateRequest(name="a-humans", dataset=a_sts, task_type="sts", n_instances=4, project=a.slug),
    )
    return {
        "a": a,
        "b": b,
        "alice": alice,
        "bob": bob,
        "vera": vera,
        "carl": carl,
        "admin": admin_user_role,
        "a_sts": a_sts,
        "b_sts": b_sts,
        "a_run": finished_run(a, a_sts, "run-of-a"),
        "b_run": finished_run(b, b_sts, "run-of-b"),
        "study": study,
    }


@pytest.fixture
def a_config(world) -> BenchmarkConfig:
    """An exported config of A approving a random-keywords run of A's dataset (a real export: a run
    re-checks the gate result and approval it names)."""
    roster_at_least(world["a"], DESIGN.raters_per_item)
    study = study_create(
        actor=None,
        request=rostered(
            StudyCreateRequest(
                name="a-study", runs=[keyword_run(world["a_sts"], 1)], design=DESIGN, project=world["a"].slug
            )
        ),
    )
    gate = GateResult.objects.create(
        study=study, transformation="random_keywords", passed=True, evidence={"state": "passed"}, evidence_hash="0" * 64
    )
    Approval.objects.create(gate_result=gate, decision="approve", comment="ok", decided_by=world["alice"])
    return benchmark_config_export(
        actor=world["alice"], request=BenchmarkConfigExportRequest(studies=[study], name="a-config")
    )


def command(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def run_reads(run: BenchmarkRun) -> list[str]:
    """Every page and API route that reads one run."""
    return [
        reverse("evaluation:benchmark", args=[run.pk]),
        reverse("evaluation:robustness", args=[run.pk]),
        reverse("evaluation:robustness-export", args=[run.pk, "robustness.csv"]),
        reverse("evaluation:robustness-export", args=[run.pk, "robustness-ranks.tex"]),
        f"/api/benchmark-runs/{run.pk}/",
        f"/api/benchmark-runs/{run.pk}/results/",
        f"/api/benchmark-runs/{run.pk}/report/",
        f"/api/benchmark-runs/{run.pk}/robustness/",
    ]


def get(user, url: str):
    return (api_as(user) if url.startswith("/api/") else page_as(user)).get(url)


# --- reading and changing existing runs ----------------------------------------------------------


def test_another_projects_runs_are_not_found_anywhere(world):
    bob, a_run = world["bob"], world["a_run"]
    for url in run_reads(a_run):
        assert get(bob, url).status_code == 404, url
    assert api_as(bob).post(f"/api/benchmark-runs/{a_run.pk}/resume/").status_code == 404
    assert [r["id"] for r in api_as(bob).get("/api/benchmark-runs/").json()["results"]] == [world["b_run"].pk]
    listed = page_as(bob).get(reverse("evaluation:benchmarks")).content.decode()
    assert "run-of-b" in listed and "run-of-a" not in listed
    for url in run_reads(world["b_run"]):
        assert get(bob, url).status_code == 200, url


def test_a_viewer_reads_runs_but_may_not_resume_them(world):
    vera, a_run = world["vera"], world["a_run"]
    for url in run_reads(a_run):
        assert get(vera, url).status_code == 200, url
    assert api_as(vera).get(f"/api/benchmark-runs/{a_run.pk}/").json()["project"] == "team-a"
    resumed = api_as(vera).post(f"/api/benchmark-runs/{a_run.pk}/resume/")
    assert resumed.status_code == 403 and "may only read project 'team-a'" in resumed.json()["detail"]
    assert BenchmarkRun.objects.get(pk=a_run.pk).status == BenchmarkRun.Status.SUCCEEDED
    assert get(vera, f"/api/benchmark-runs/{world['b_run'].pk}/").status_code == 404


def test_members_resume_their_runs_and_admins_see_everything(world):
    a_run = world["a_run"]
    assert api_as(world["alice"]).post(f"/api/benchmark-runs/{a_run.pk}/resume/").status_code == 202
    admin = world["admin"]
    listed = {r["id"] for r in api_as(admin).get("/api/benchmark-runs/").json()["results"]}
    assert {a_run.pk, world["b_run"].pk} <= listed
    for url in run_reads(world["b_run"]):
        assert get(admin, url).status_code == 200, url
    assert api_as(admin).post(f"/api/benchmark-runs/{world['b_run'].pk}/resume/").status_code == 202


# --- creating runs: the project and its inputs ---------------------------------------------------


def post_run(user, **body):
    return api_as(user).post("/api/benchmark-runs/", {"models": [MODEL], **body}, format="json")


def test_a_run_goes_into_the_callers_project_and_takes_only_its_datasets(world):
    created = post_run(world["bob"], datasets=["b-sts"])
    assert created.status_code == 201, created.content
    assert created.json()["project"] == "team-b"
    # A's dataset does not exist for bob; for carl (in both) it is of the wrong project.
    refused = post_run(world["bob"], datasets=["a-sts"])
    assert refused.status_code == 404 and "no dataset named 'a-sts'" in refused.json()["datasets"][0]
    refused = post_run(world["carl"], datasets=["a-sts"], project="team-b")
    assert refused.status_code == 400
    assert "a-sts belongs to project 'team-a', not 'team-b'" in refused.json()["detail"]
    # carl is in two projects: the datasets say which; with only a shared dataset he names one.
    by_inputs = post_run(world["carl"], datasets=["b-sts"])
    assert by_inputs.status_code == 201 and by_inputs.json()["project"] == "team-b"
    several = post_run(world["carl"], datasets=["shared-sts"])
    assert several.status_code == 400 and "several projects" in several.json()["project"][0]
    assert BenchmarkRun.objects.filter(project=world["b"]).count() == 3


def test_a_shared_dataset_may_be_benchmarked_in_any_project(world):
    created = post_run(world["bob"], datasets=["shared-sts"])
    assert created.status_code == 201, created.content
    assert BenchmarkRun.objects.get(pk=created.json()["id"]).project == world["b"]


def test_a_viewer_may_not_start_runs_in_the_project(world):
    refused = post_run(world["vera"], datasets=["a-sts"], project="team-a")
    assert refused.status_code == 403
    assert post_run(world["bob"], datasets=["b-sts"], project="team-a").status_code == 404  # not his: unknown
    assert not BenchmarkRun.objects.filter(status=BenchmarkRun.Status.PENDING).exists()


def test_a_run_from_a_config_needs_the_config_of_its_project(world, a_config):
    bob, carl = world["bob"], world["carl"]
    assert post_run(bob, config_id=a_config.pk).status_code == 404
    uploaded = post_run(bob, config_text=a_config.json_text, config_format="json")
    assert uploaded.status_code == 400 and "exported in a project you do not belong to" in uploaded.json()["detail"]
    other = post_run(carl, config_id=a_config.pk, project="team-b", limit=LIMIT)
    assert other.status_code == 400
    assert "belongs to project 'team-a', not 'team-b'" in other.json()["detail"]
    created = post_run(world["alice"], config_id=a_config.pk, limit=LIMIT)
    assert created.status_code == 201, created.content
    run = BenchmarkRun.objects.get(pk=created.json()["id"])
    assert run.project == world["a"]
    # The transformation run the config approved (A's) is the one the run uses.
    assert set(run.plan["transform_runs"].values()) == {a_config.document["transformations"][0]["runs"][0]["run_id"]}


def test_a_config_naming_another_projects_transformation_runs_is_refused(world, a_config):
    document = dict(a_config.document)
    copied = BenchmarkConfig.objects.create(
        project=world["b"],
        name="b-copy",
        document=document,
        config_hash="f" * 64,
        json_text=a_config.json_text,
        yaml_text="",
    )
    a_config.delete()  # the text's hash now finds B's row only
    BenchmarkConfig.objects.filter(pk=copied.pk).update(config_hash=document["config_hash"])
    refused = post_run(world["bob"], config_id=copied.pk, limit=LIMIT)
    assert refused.status_code == 400
    assert "names transformation runs of another project" in refused.json()["detail"]


# --- pages ---------------------------------------------------------------------------------------


def test_the_benchmark_form_offers_only_the_callers_projects_configs_and_datasets(world, a_config):
    form = page_as(world["bob"]).get(reverse("evaluation:benchmarks")).content.decode()
    assert 'value="team-b"' in form and 'value="team-a"' not in form
    assert 'value="b-sts"' in form and 'value="shared-sts"' in form and 'value="a-sts"' not in form
    assert f'<option value="{a_config.pk}"' not in form
    url = reverse("evaluation:benchmarks")
    created = page_as(world["bob"]).post(url, {"models": MODEL, "datasets": ["shared-sts"], "project": "team-b"})
    assert created.status_code == 302
    assert BenchmarkRun.objects.latest("pk").project == world["b"]
    refused = page_as(world["carl"]).post(url, {"models": MODEL, "datasets": ["a-sts"], "project": "team-b"})
    assert "belongs to project 'team-a', not 'team-b'" in html.unescape(refused.content.decode())
    # A viewer is offered no project to add to; naming one anyway is refused with 403, as every page,
    # the API and the command refuse a change to a project the caller may only read (issue 43).
    viewer = page_as(world["vera"]).post(url, {"models": MODEL, "datasets": ["a-sts"], "project": "team-a"})
    assert viewer.status_code == 403
    assert BenchmarkRun.objects.filter(project=world["a"]).count() == 1


def test_baseline_pages_show_a_project_only_to_its_readers(world):
    study, url = world["study"], reverse("evaluation:baseline", args=[world["study"].pk])
    assert page_as(world["bob"]).get(url).status_code == 404
    assert "a-humans" not in page_as(world["bob"]).get(reverse("evaluation:baselines")).content.decode()
    viewer = page_as(world["vera"])
    shown = viewer.get(url)
    assert shown.status_code == 200 and 'id="llm-annotate-form"' not in shown.content.decode()
    assert "a-humans" in viewer.get(reverse("evaluation:baselines")).content.decode()
    assert viewer.post(url, {"action": "llm-annotate", "backend": "default"}).status_code == 403
    assert page_as(world["alice"]).post(url, {"action": "llm-annotate", "backend": "nope"}).status_code == 200
    assert page_as(world["admin"]).get(url).status_code == 200
    assert study.name in page_as(world["admin"]).get(reverse("evaluation:baselines")).content.decode()


def test_a_baseline_study_is_declared_in_a_project_on_a_readable_dataset(world):
    url = reverse("evaluation:baselines")
    sent = {"name": "b-humans", "dataset": "shared-sts", "n_instances": "3", "seed": "0", "split": "test"}
    assert page_as(world["bob"]).post(url, {**sent, "project": "team-b"}).status_code == 302
    study = BaselineStudy.objects.get(name="b-humans")
    assert study.project == world["b"] and study.workspace == "team-b"
    refused = page_as(world["bob"]).post(url, {**sent, "name": "x", "dataset": "a-sts", "project": "team-b"})
    assert refused.status_code == 200 and not BaselineStudy.objects.filter(name="x").exists()
    foreign = page_as(world["vera"]).post(url, {**sent, "name": "y", "project": "team-a"})
    assert foreign.status_code == 403 and "only read project &#x27;team-a&#x27;" in foreign.content.decode()
    assert not BaselineStudy.objects.filter(name="y").exists()


# --- commands ------------------------------------------------------------------------------------


def test_benchmark_command_acts_as_the_user_it_names(world, tmp_path):
    a_run = str(world["a_run"].pk)
    for action in ("status", "results", "resume"):
        with pytest.raises(CommandError, match=f"no benchmark run {a_run}"):
            command("benchmark", action, a_run, "--as", "bob")
    with pytest.raises(CommandError, match=f"no benchmark run {a_run}"):
        command("benchmark", "report", a_run, "--as", "bob", "--out", str(tmp_path / "r"))
    with pytest.raises(CommandError, match=f"no benchmark run {a_run}"):
        command("benchmark", "export", a_run, "--as", "bob", "--format", "mteb", "--out", str(tmp_path / "m"))
    assert "units" in command("benchmark", "status", a_run, "--as", "vera")
    assert "alpha" in command("benchmark", "results", a_run, "--as", "vera")
    for args in (("resume",), ("report", "--out", str(tmp_path / "v")), ("export", "--format", "mteb")):
        extra = ("--out", str(tmp_path / "mv")) if args[0] == "export" else ()
        with pytest.raises(CommandError, match="may only read project 'team-a'"):
            command("benchmark", args[0], a_run, *args[1:], *extra, "--as", "vera")
    assert "resumed" in command("benchmark", "resume", a_run, "--as", "alice")
    assert "units" in command("benchmark", "status", a_run)  # the system reads every run
    with pytest.raises(CommandError, match="No user 'nobody'"):
        command("benchmark", "status", a_run, "--as", "nobody")


def test_benchmark_run_command_creates_in_the_named_project(world):
    out = command("benchmark", "run", "--dataset", "shared-sts", "--models", MODEL, "--as", "bob")
    assert "in project team-b" in out
    with pytest.raises(CommandError, match="no dataset named 'a-sts'"):
        command("benchmark", "run", "--dataset", "a-sts", "--models", MODEL, "--as", "bob")
    with pytest.raises(CommandError, match="may only read project 'team-a'"):
        command("benchmark", "run", "--dataset", "a-sts", "--models", MODEL, "--as", "vera", "--project", "team-a")
    # The system sees every dataset; unless told otherwise its run goes where its inputs are, as
    # through the API (issue 28: one front door), and a project it names must hold them.
    assert "in project team-a" in command("benchmark", "run", "--dataset", "a-sts", "--models", MODEL)
    with pytest.raises(CommandError, match=f"a-sts belongs to project 'team-a', not '{DEFAULT_PROJECT}'"):
        command("benchmark", "run", "--dataset", "a-sts", "--models", MODEL, "--project", DEFAULT_PROJECT)
    out = command("benchmark", "run", "--dataset", "a-sts", "--models", MODEL, "--project", "team-a")
    assert "in project team-a" in out


def test_evaluation_commands_find_only_readable_datasets_and_studies(world):
    with pytest.raises(CommandError, match="No dataset named 'a-sts'"):
        command("evaluate", "--dataset", "a-sts", "--as", "bob")
    with pytest.raises(CommandError, match="no dataset 'a-sts'"):
        command("protocol", "a-sts", "--as", "bob")
    assert "the defaults" in command("protocol", "a-sts", "--as", "vera")
    with pytest.raises(CommandError, match="may only read project 'team-a'"):
        command("protocol", "a-sts", "--reset", "--as", "vera")
    assert "the defaults" in command("protocol", "a-sts", "--reset", "--as", "alice")
    with pytest.raises(CommandError, match="No baseline study 'a-humans'"):
        command("baseline_report", "a-humans", "--as", "bob")
    assert "a-humans" in command("baseline_report", "a-humans", "--as", "vera")
