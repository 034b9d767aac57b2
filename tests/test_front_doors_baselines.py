"""One front door per action (issue 28) for human baselines and benchmark config exports: the same
inputs through the page, the API (where the action has one) and the command give the same object
in the same project, or the same refusal.

A researcher (rae) belongs to projects alpha and beta and may only read gamma. Her dataset and her
approved study are in alpha. Naming no project, every door creates in alpha (the project of the
inputs, as the README says); naming gamma, every door refuses (403 in the API). Human baselines
have no API route: page and command only.
"""

from __future__ import annotations

import html
import io
import json

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.urls import reverse

from annotation.baselines.baseline_services import BaselineCreateRequest, baseline_create
from annotation.models import BaselineStudy, BenchmarkConfig, Study
from core.models import Membership, Project
from core.projects import membership_set, project_create
from core.roles import Role
from corpora.services import dataset_import
from tests.support import api_as, keyword_run, make_user, page_as
from tests.test_projects_annotation import _approved_gate

pytestmark = pytest.mark.django_db
DEMO_STS = settings.BASE_DIR / "fixtures/sts/demo-sts.csv"
READ_ONLY = "You may only read project 'gamma'"


@pytest.fixture
def rae(django_user_model):
    rae = make_user(django_user_model, "rae", Role.RESEARCHER)
    olga = make_user(django_user_model, "olga", Role.RESEARCHER)
    project_create(slug="alpha", owner=rae, actor=None)
    project_create(slug="beta", owner=rae, actor=None)
    gamma = project_create(slug="gamma", owner=olga, actor=None)
    membership_set(project=gamma, user=rae, role=Membership.Role.VIEWER, actor=None)
    return rae


@pytest.fixture
def alpha_sts(rae):
    return dataset_import(source=DEMO_STS, task="sts", name="demo-alpha", project=Project.objects.get(slug="alpha"))


def command(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


# --- human baseline creation ------------------------------------------------------------------------


BASELINE = {"dataset": "demo-alpha", "n_instances": "4", "seed": "2", "split": "test"}


def baseline_by_page(rae, name: str, project: str = ""):
    return page_as(rae).post(reverse("evaluation:baselines"), {**BASELINE, "name": name, "project": project})


def baseline_by_command(name: str, *extra: str) -> str:
    return command(
        "baseline", "create", name, "--dataset", "demo-alpha", "--task", "sts", "-n", "4", "--seed", "2", *extra
    )


def test_a_baseline_goes_into_its_datasets_project_through_every_door(rae, alpha_sts):
    response = baseline_by_page(rae, "by-page")
    assert response.status_code == 302, response.content.decode()
    baseline_by_command("by-command", "--as", "rae")
    by_page, by_command = (BaselineStudy.objects.get(name=name) for name in ("by-page", "by-command"))
    assert by_page.project.slug == by_command.project.slug == "alpha"
    assert by_page.created_by == by_command.created_by == rae
    rows = lambda s: [(i.key, i.item_id, i.texts) for i in s.instances.order_by("position")]  # noqa: E731
    assert rows(by_page) == rows(by_command) and len(rows(by_page)) == 4
    assert by_page.options == by_command.options and by_page.instructions == by_command.instructions


def test_a_baseline_in_a_read_only_project_is_refused_by_every_door(rae, alpha_sts):
    with pytest.raises(CommandError, match=READ_ONLY):
        baseline_by_command("by-command", "--project", "gamma", "--as", "rae")
    # The page offers only the projects the caller may change; a forged choice is refused alike.
    response = baseline_by_page(rae, "by-page", "gamma")
    assert response.status_code == 403 and READ_ONLY in html.unescape(response.content.decode())
    assert not BaselineStudy.objects.exists()


def test_a_baseline_refusal_reads_the_same_on_page_and_command(rae, alpha_sts):
    baseline_by_command("taken", "--as", "rae")
    message = "a baseline study named 'taken' exists in project alpha: choose another name"
    with pytest.raises(CommandError, match=message):
        baseline_by_command("taken", "--as", "rae")
    response = baseline_by_page(rae, "taken")
    assert response.context["form"].errors["name"] == [message]
    assert BaselineStudy.objects.count() == 1


# --- benchmark config export -------------------------------------------------------------------------


@pytest.fixture
def approved(rae, alpha_sts) -> Study:
    """A locked study of alpha with one approved transformation (no Argilla: rows written directly)."""
    run = keyword_run(alpha_sts, 1)
    study = Study.objects.create(
        name="study-alpha", project=run.project, workspace="alpha", design={}, design_hash="d" * 64, status="locked"
    )
    study.runs.add(run)
    _approved_gate(study, rae)
    return study


def export_by_page(rae, name: str, project: str = ""):
    return page_as(rae).post(reverse("annotation:exports"), {"name": name, "project": project})


def export_by_api(rae, name: str, **extra):
    return api_as(rae).post("/api/benchmark-configs/", {"name": name, **extra}, format="json")


def export_by_command(tmp_path, name: str, *extra: str) -> str:
    return command("benchmark_config", "export", "--out", str(tmp_path / f"{name}.json"), "--name", name, *extra)


def test_a_config_is_exported_in_its_studies_project_through_every_door(rae, approved, tmp_path):
    assert export_by_page(rae, "by-page").status_code == 302
    assert export_by_api(rae, "by-api").status_code == 201
    export_by_command(tmp_path, "by-command", "--as", "rae")
    configs = {c.name: c for c in BenchmarkConfig.objects.all()}
    assert {c.project.slug for c in configs.values()} == {"alpha"} and len(configs) == 3
    entries = {
        name: [(t["transformation"], t["study"]["name"], t["gate"]["id"]) for t in c.document["transformations"]]
        for name, c in configs.items()
    }
    assert entries["by-page"] == entries["by-api"] == entries["by-command"]
    written = json.loads((tmp_path / "by-command.json").read_text())
    assert written["config_hash"] == configs["by-command"].config_hash


def test_a_config_of_a_read_only_project_is_refused_alike_by_every_door(rae, approved, tmp_path):
    refused = export_by_api(rae, "by-api", project="gamma")
    assert refused.status_code == 403 and refused.json()["detail"].startswith(READ_ONLY)
    page = export_by_page(rae, "by-page", "gamma")
    assert page.status_code == 403 and READ_ONLY in html.unescape(page.content.decode())
    with pytest.raises(CommandError, match=READ_ONLY):
        export_by_command(tmp_path, "by-command", "--project", "gamma", "--as", "rae")
    assert not BenchmarkConfig.objects.exists()


def test_named_studies_are_refused_alike_when_the_caller_cannot_see_them(rae, approved, tmp_path):
    missing = approved.pk + 100
    refused = export_by_api(rae, "by-api", studies=[missing])
    assert refused.status_code == 404 and refused.json() == {"detail": f"no studies [{missing}]", "code": "not_found"}
    with pytest.raises(CommandError, match=rf"no studies \[{missing}\]"):
        export_by_command(tmp_path, "by-command", "--study", str(missing), "--as", "rae")
    assert export_by_api(rae, "by-api", studies=[approved.pk]).status_code == 201


def test_changing_a_baseline_of_a_read_only_project_is_refused_by_every_door(rae):
    gamma = Project.objects.get(slug="gamma")
    dataset_import(source=DEMO_STS, task="sts", name="demo-gamma", project=gamma)
    olga = gamma.memberships.get(role=Membership.Role.OWNER).user
    study = baseline_create(
        actor=olga, request=BaselineCreateRequest(name="olgas", dataset="demo-gamma", n_instances=2)
    )
    assert study.project == gamma
    page = page_as(rae).post(reverse("evaluation:baseline", args=[study.pk]), {"action": "llm-annotate"})
    assert page.status_code == 403
    for action in ("llm-annotate", "publish", "sync", "close"):
        with pytest.raises(CommandError, match=READ_ONLY):
            command("baseline", action, "olgas", "--as", "rae")
    assert not study.instances.filter(answers__isnull=False).exists()
