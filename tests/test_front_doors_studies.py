"""One front door per study action (issue 28): the same inputs through the page (Django test
client), the API (APIClient) and the command (``call_command(..., "--as", user)``) give the same
object in the same project, or the same refusal.

The scene: a researcher, rex, member of projects alpha and beta and viewer of gamma; a succeeded
transformation run in alpha; two annotators on alpha's roster. No Argilla server: the actions
that reach Argilla are checked by their refusals, which come before any call to it."""

from __future__ import annotations

import html
import json
import re
from io import StringIO

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.urls import reverse

from annotation.models import Annotator, Study
from annotation.science.design import StudyDesign
from annotation.studies.design_services import StudyCreateRequest, study_create, study_lock
from core.models import Membership
from core.projects import membership_set, project_create
from core.roles import Role
from core.rosters import roster_refusal
from corpora.services import dataset_import
from tests.support import FEW_CONTROLS_OVERRIDE, api_as, keyword_run, make_user, page_as, roster_at_least

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
    "detectability_override": FEW_CONTROLS_OVERRIDE,  # 1 easy positive: too few to estimate (issue 39)
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
    assert (api.status_code, api.json()) == (403, {"detail": refusal, "code": "forbidden"})
    with pytest.raises(CommandError, match=refusal.replace("(", r"\(").replace(")", r"\)")):
        create_by_command(scene, "ro-command", "gamma")
    assert not Study.objects.exists()


def test_an_unknown_project_is_refused_alike(scene):
    refusal = "No project 'nowhere' that you belong to. Yours: alpha, beta, gamma, shiftlab."
    page = create_by_page(scene, "un-page", "nowhere")
    assert page.status_code == 200 and refusal in html.unescape(page.content.decode())
    api = create_by_api(scene, "un-api", "nowhere")
    assert (api.status_code, api.json()) == (404, {"project": [refusal], "code": "no_project"})
    with pytest.raises(CommandError, match=refusal):
        create_by_command(scene, "un-command", "nowhere")
    assert not Study.objects.exists()


# --- actions on a study: lock, revise, sync, validate, gate ----------------------------------------


def _draft(scene, name: str) -> Study:
    return study_create(
        actor=scene["rex"], request=StudyCreateRequest(project=None, name=name, runs=[scene["run"]], design=DESIGN)
    )


def _pool_file(tmp_path, study: Study):
    """A control pool file: the pairs of the study's gold controls (any well-formed pairs do)."""
    path = tmp_path / "pool.csv"
    rows = ["text_a,text_b,kind"] + [f'"{i.text_a}","{i.text_b}",{i.kind}' for i in study.items.exclude(kind="real")]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def _page_action(scene, study: Study, action: str, **fields):
    url = reverse("annotation:study", args=[study.pk])
    return page_as(scene["rex"]).post(url, {"action": action, **fields}, follow=True)


def _page_said(response) -> str:
    return html.unescape(response.content.decode())


def _command(study: Study, action: str, *args: str) -> str:
    out = StringIO()
    call_command("study", action, str(study.pk), *args, "--as", "rex", stdout=out)
    return out.getvalue()


def test_lock_draws_the_same_real_items_on_every_interface(scene):
    studies = [_draft(scene, name) for name in ("lock-page", "lock-api", "lock-command")]
    assert _page_action(scene, studies[0], "lock").status_code == 200
    assert api_as(scene["rex"]).post(f"/api/studies/{studies[1].pk}/lock/").status_code == 200
    assert _command(studies[2], "lock").startswith(f"Locked {studies[2]}")
    locked = [Study.objects.get(pk=s.pk) for s in studies]
    assert {s.status for s in locked} == {Study.Status.LOCKED}
    assert len({json.dumps(s.sample_info["random_keywords"], sort_keys=True) for s in locked}) == 1
    real = [sorted(s.items.filter(kind="real").values_list("transformed_item_id", flat=True)) for s in locked]
    assert real[0] == real[1] == real[2]


def test_a_control_pool_for_a_locked_study_is_refused_alike(scene, tmp_path):
    study = study_lock(study=_draft(scene, "locked"), actor=scene["rex"])
    pool = _pool_file(tmp_path, study)
    refusal = f"{study} is locked: its controls are drawn; revise it to use a control pool (--control-pool)"
    with pool.open("rb") as upload:
        assert refusal in _page_said(_page_action(scene, study, "lock", control_pool=upload))
    with pool.open("rb") as upload:
        api = api_as(scene["rex"]).post(f"/api/studies/{study.pk}/lock/", {"control_pool": upload})
    assert (api.status_code, api.json()) == (409, {"detail": refusal, "code": "conflict"})
    with pytest.raises(CommandError, match=re.escape(refusal)):
        _command(study, "lock", "--control-pool", str(pool))


def test_revise_makes_the_same_new_version_on_every_interface(scene):
    study = study_lock(study=_draft(scene, "revised"), actor=scene["rex"])
    fields = {f"revise-{key}": str(value) for key, value in {**DESIGN, "seed": 5}.items() if key != "llm_judges"}
    assert _page_action(scene, study, "revise", **fields).status_code == 200
    api = api_as(scene["rex"]).post(f"/api/studies/{study.pk}/design/", {"design": {"seed": 5}}, format="json")
    assert api.status_code == 201, api.content
    assert _command(study, "revise", "--design", '{"seed": 5}').startswith("Created revised v4")
    versions = Study.objects.filter(name="revised", version__gt=1).order_by("version")
    assert [v.version for v in versions] == [2, 3, 4]
    assert {v.design_hash for v in versions} == {StudyDesign.from_dict({**study.design, "seed": 5}).content_hash}
    assert {(v.project.slug, v.previous_id) for v in versions} == {("alpha", study.pk)}


def test_sync_of_a_study_not_published_is_refused_alike(scene):
    study = study_lock(study=_draft(scene, "unpublished"), actor=scene["rex"])
    refusal = f"{study} is not published yet: publish it before syncing responses"
    assert refusal in _page_said(_page_action(scene, study, "sync"))
    api = api_as(scene["rex"]).post(f"/api/studies/{study.pk}/sync/")
    assert (api.status_code, api.json()) == (400, {"detail": refusal, "code": "invalid"})
    with pytest.raises(CommandError, match=re.escape(refusal)):
        _command(study, "sync")


@pytest.mark.parametrize("action", ["lock", "revise", "sync", "validate", "gate"])
def test_every_action_on_a_study_the_caller_may_only_read_is_refused_alike(scene, action):
    run = keyword_run(dataset_import(source=DEMO_STS, task="sts", name="demo-gamma", project=scene["gamma"]), 1)
    roster_at_least(scene["gamma"], DESIGN["raters_per_item"])
    study = study_create(
        actor=None, request=StudyCreateRequest(project="gamma", name="theirs", runs=[run], design=DESIGN)
    )
    refusal = "You may only read project 'gamma': ask one of its owners to make you a member."
    page = page_as(scene["rex"]).post(reverse("annotation:study", args=[study.pk]), {"action": action})
    assert page.status_code == 403 and refusal in _page_said(page)
    route = "design" if action == "revise" else action
    api = api_as(scene["rex"]).post(f"/api/studies/{study.pk}/{route}/", {"design": {}}, format="json")
    assert (api.status_code, api.json()) == (403, {"detail": refusal, "code": "forbidden"})
    with pytest.raises(CommandError, match=re.escape(refusal)):
        _command(study, action)
    assert Study.objects.get(pk=study.pk).status == Study.Status.DRAFT and Study.objects.count() == 1


def test_publishing_to_or_handing_over_to_someone_off_the_roster_is_refused_alike(scene, django_user_model):
    """The page names annotators by id and says "user #id"; the API and the command name them by
    username and refuse an unknown name as they refuse another project's annotator."""
    make_user(django_user_model, "olaf", Role.ANNOTATOR)  # on the default project's roster only
    study = study_lock(study=_draft(scene, "roster"), actor=scene["rex"])
    refusal = roster_refusal(scene["alpha"], ["ghost", "olaf"])
    api = api_as(scene["rex"]).post(
        f"/api/studies/{study.pk}/publish/", {"annotators": ["anna", "ghost", "olaf"]}, format="json"
    )
    assert (api.status_code, api.json()) == (400, {"detail": refusal, "code": "invalid"})
    with pytest.raises(CommandError, match=re.escape(refusal)):
        _command(study, "publish", "--annotators", "anna", "ghost", "olaf")
    leaver = Annotator.objects.create(study=study, user=django_user_model.objects.get(username="anna"))
    refusal = roster_refusal(scene["alpha"], ["ghost"])
    api = api_as(scene["rex"]).post(
        f"/api/study-annotators/{leaver.pk}/replace/", {"username": "ghost", "reason": "left"}, format="json"
    )
    assert (api.status_code, api.json()) == (400, {"detail": refusal, "code": "invalid"})
    with pytest.raises(CommandError, match=re.escape(refusal)):
        _command(study, "replace-annotator", "anna", "ghost", "--reason", "left")
    assert Study.objects.get(pk=study.pk).published_at is None and study.annotators.count() == 1


# --- the rules ``study_create`` and ``study_revise`` check for every door (issue 43) ----------------


def _refused_alike(scene, name: str, design: dict) -> tuple[str, str, str]:
    """What the page, the API and the command say to the same refused study (none is made)."""
    fields = _page_fields(name, scene["run"]) | {key: str(value) for key, value in design.items()}
    page = page_as(scene["rex"]).post(reverse("annotation:studies"), fields)
    assert page.status_code == 200
    body = {"name": name, "runs": [scene["run"].pk], "design": DESIGN | design}
    api = api_as(scene["rex"]).post("/api/studies/", body, format="json")
    assert api.status_code == 400, api.content
    args = ["study", "create", name, "--runs", str(scene["run"].pk), "--design", json.dumps(DESIGN | design)]
    with pytest.raises(CommandError) as refused:
        call_command(*args, "--as", "rex", stdout=StringIO())
    assert not Study.objects.exists()
    return _page_said(page), json.dumps(api.json(), ensure_ascii=False), str(refused.value)


def test_more_raters_per_item_than_the_projects_annotators_is_refused_alike(scene):
    """Before issue 43 only the page counted the annotators (it passed ``count_annotators``); the
    API and the command made the study and refused it only at publish."""
    refusal = "each item needs 3 different raters, but there are only 2 annotator accounts"
    page, api, command = _refused_alike(scene, "three-raters", {"raters_per_item": 3})
    assert refusal in page and refusal in api and refusal in command


def test_a_study_name_off_the_pattern_is_refused_alike(scene):
    refusal = "invalid study name 'Not_A_Name': Use lowercase letters, digits and '-', starting with a letter or digit."
    page, api, command = _refused_alike(scene, "Not_A_Name", {})
    assert refusal in page and refusal in command
    assert refusal in api and '"name"' in api  # on the name input


def test_a_revision_with_more_raters_than_annotators_is_refused_alike(scene):
    study = study_lock(study=_draft(scene, "revised-raters"), actor=scene["rex"])
    refusal = "each item needs 3 different raters, but there are only 2 annotator accounts"
    changed = {**DESIGN, "raters_per_item": 3}
    fields = {f"revise-{key}": str(value) for key, value in changed.items() if key != "llm_judges"}
    assert refusal in _page_said(_page_action(scene, study, "revise", **fields))
    api = api_as(scene["rex"]).post(
        f"/api/studies/{study.pk}/design/", {"design": {"raters_per_item": 3}}, format="json"
    )
    assert api.status_code == 400 and refusal in json.dumps(api.json())
    with pytest.raises(CommandError, match=re.escape(refusal)):
        _command(study, "revise", "--design", '{"raters_per_item": 3}')
    assert Study.objects.filter(name="revised-raters").count() == 1
