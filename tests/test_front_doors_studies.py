"""One front door per study action (issue 28): the same inputs through the page (Django test
client), the API (APIClient) and the command (``call_command(..., "--as", user)``) give the same
object in the same project, or the same refusal.

The scene: a researcher, rex, member of projects alpha and beta and viewer of gamma; a succeeded
transformation run in alpha; two annotators on alpha's roster. No Argilla server: the actions
that reach Argilla are checked by their refusals, which come before any call to it."""

from __future__ import annotations

import html
import json
from io import StringIO

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.urls import reverse

from annotation.models import Study
from annotation.studies.design import StudyDesign
from core.models import Membership
from core.projects import membership_set, project_create
from core.roles import Role
from corpora.services import dataset_import
from tests.support import api_as, keyword_run, make_user, page_as

pytestmark = pytest.mark.django_db
DEMO_STS = settings.BASE_DIR / "fixtures/sts/demo-sts.csv"

# The study builder posts every design field; the API and the command get the same values as JSON.
DESIGN = {
    "kind": "rewrite",
    "items_per_transformation": 5,
    "raters_per_item": 2,
    "batch_size": 5,
    "controls_per_batch": 2,
    "min_control_ratings": 2,
    "control_margin": 1,
    "llm_flag_deviation": 2.0,
    "low_rating_max": 2,
    "max_confirmed_flags": 3,
    "min_seconds_per_item": 3.0,
    "flag_too_fast_share": 0.0,
    "flag_straight_line_run": 0,
    "flag_low_competence": 0.0,
    "acceptance_threshold": 3.0,
    "adaptive_alpha": 0.05,
    "adaptive_min_items": 10,
    "batches_released": 0,
    "seed": 0,
    "llm_judges": [],
}


@pytest.fixture
def scene(django_user_model):
    owner = make_user(django_user_model, "olga", Role.RESEARCHER)
    rex = make_user(django_user_model, "rex", Role.RESEARCHER)
    alpha, beta, gamma = (project_create(slug=slug, owner=owner, actor=None) for slug in ("alpha", "beta", "gamma"))
    for project, role in ((alpha, Membership.Role.MEMBER), (beta, Membership.Role.MEMBER), (gamma, "viewer")):
        membership_set(project=project, user=rex, role=role, actor=None)
    for name in ("anna", "ben"):
        make_user(django_user_model, name, Role.ANNOTATOR, roster=alpha)
    run = keyword_run(dataset_import(source=DEMO_STS, task="sts", name="demo-alpha", project=alpha), 1)
    return {"rex": rex, "alpha": alpha, "gamma": gamma, "run": run}


def _page_fields(name: str, run, project: str = "") -> dict:
    design = {key: str(value) for key, value in DESIGN.items() if key != "llm_judges"}
    return {**design, "name": name, "project": project, "runs": [run.pk], "action": "create"}


def create_by_page(scene, name: str, project: str = ""):
    return page_as(scene["rex"]).post(reverse("annotation:studies"), _page_fields(name, scene["run"], project))


def create_by_api(scene, name: str, project: str = ""):
    body = {"name": name, "runs": [scene["run"].pk], "design": DESIGN, **({"project": project} if project else {})}
    return api_as(scene["rex"]).post("/api/studies/", body, format="json")


def create_by_command(scene, name: str, project: str = "") -> str:
    out = StringIO()
    args = ["study", "create", name, "--runs", str(scene["run"].pk), "--design", json.dumps(DESIGN), "--as", "rex"]
    call_command(*args, *(["--project", project] if project else []), stdout=out)
    return out.getvalue()


def test_without_a_project_named_all_three_create_the_study_in_the_runs_project(scene):
    page = create_by_page(scene, "by-page")
    assert page.status_code == 302, page.content.decode()[:2000]
    api = create_by_api(scene, "by-api")
    assert api.status_code == 201, api.content
    said = create_by_command(scene, "by-command")
    studies = {s.name: s for s in Study.objects.filter(name__startswith="by-")}
    assert said.startswith(f"Created {studies['by-command']} (id {studies['by-command'].pk}) in project alpha")
    assert sorted(studies) == ["by-api", "by-command", "by-page"]
    assert {s.project.slug for s in studies.values()} == {"alpha"}
    assert {s.workspace for s in studies.values()} == {"alpha"}
    assert len({s.design_hash for s in studies.values()}) == 1
    assert StudyDesign.from_dict(studies["by-api"].design).llm_judges == ()
    assert {tuple(s.runs.values_list("pk", flat=True)) for s in studies.values()} == {(scene["run"].pk,)}
    assert {s.created_by for s in studies.values()} == {scene["rex"]}


def test_a_project_the_caller_may_only_read_is_refused_alike(scene):
    refusal = "You may only read project 'gamma': ask one of its owners to make you a member."
    page = create_by_page(scene, "ro-page", "gamma")
    assert page.status_code == 403 and refusal in html.unescape(page.content.decode())
    api = create_by_api(scene, "ro-api", "gamma")
    assert (api.status_code, api.json()) == (403, {"detail": refusal})
    with pytest.raises(CommandError, match=refusal.replace("(", r"\(").replace(")", r"\)")):
        create_by_command(scene, "ro-command", "gamma")
    assert not Study.objects.exists()


def test_an_unknown_project_is_refused_alike(scene):
    refusal = "No project 'nowhere' that you belong to. Yours: alpha, beta, gamma, shiftlab."
    page = create_by_page(scene, "un-page", "nowhere")
    assert page.status_code == 200 and refusal in html.unescape(page.content.decode())
    api = create_by_api(scene, "un-api", "nowhere")
    assert (api.status_code, api.json()) == (400, {"project": [refusal]})
    with pytest.raises(CommandError, match=refusal):
        create_by_command(scene, "un-command", "nowhere")
    assert not Study.objects.exists()
