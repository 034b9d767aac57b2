"""Annotators belong to projects (issue 27, findings 1 and 9c).

Two closed projects, alpha and beta, with a researcher (owner) each; alma and alf are annotators on
alpha's roster only. Beta's researcher must not publish to, replace by, see or reset alpha's
annotators through pages, API or commands, and nothing reaches Argilla when they try; no
researcher ever learns or sets an annotator's Argilla password: annotators set their own on
"My Argilla account" (page and API), and Argilla then accepts it; a change to an annotator that
two projects share is audited in both; an API token dies with a password change.

Real local Argilla server; the study texts come from a random-keywords run (no LLM).
"""

from __future__ import annotations

import html
import io
from contextlib import closing
from dataclasses import dataclass

import httpx
import pytest
from django.conf import settings as django_settings
from django.core.management import CommandError, call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.argilla import client as argilla
from annotation.models import Annotator, Study
from annotation.science.design import StudyDesign
from annotation.studies.argilla_services import study_publish
from annotation.studies.design_services import StudyCreateRequest, study_create, study_lock
from core.errors import ShiftlabError
from core.models import AuditEvent, Project
from core.projects import project_create
from core.roles import Role
from core.rosters import roster_add
from core.selectors import audit_event_list
from corpora.services import dataset_import
from tests.support import FEW_CONTROLS_OVERRIDE, PASSWORD, api_as, make_user, page_as, reworded_demo_sts, rostered
from transforms.services import transform_run_create
from transforms.tasks import start_run

pytestmark = [pytest.mark.django_db, pytest.mark.services, pytest.mark.heavy]

DESIGN = StudyDesign(
    items_per_transformation=4,
    raters_per_item=2,
    batch_size=4,
    controls_per_batch=1,
    min_control_ratings=1,
    llm_judges=(),
    seed=5,
    detectability_override=FEW_CONTROLS_OVERRIDE,
)


@dataclass
class World:
    alpha: Project
    beta: Project
    ralph: object  # owner of alpha
    bea: object  # owner of beta
    alma: object  # annotator of alpha
    alf: object  # annotator of alpha
    bo: object  # annotator of beta
    bix: object  # annotator of beta
    study_a: Study
    study_b: Study


def _study(project: Project, owner, name: str, source) -> Study:
    sts = dataset_import(source=source, task="sts", name=f"{name}-sts", project=project)
    run = transform_run_create(dataset=sts, transformation="random_keywords", seed=1, limit=8, dispatch=False)
    start_run.delay(run.pk)  # eager: the run finishes here
    run.refresh_from_db()
    return study_lock(
        study=study_create(
            actor=owner,
            request=rostered(StudyCreateRequest(name=name, project=project.slug, runs=[run], design=DESIGN)),
        ),
        actor=owner,
    )


@pytest.fixture
def world(argilla_server, settings, django_user_model, tmp_path) -> World:
    settings.ARGILLA_API_URL, settings.ARGILLA_API_KEY = argilla_server.url, argilla_server.api_key
    ralph = make_user(django_user_model, "ap-ralph", Role.RESEARCHER)
    bea = make_user(django_user_model, "ap-bea", Role.RESEARCHER)
    # Their slugs are also Argilla workspaces: apart from other tests'.
    alpha = project_create(slug="ap-alpha", owner=ralph, actor=None)
    beta = project_create(slug="ap-beta", owner=bea, actor=None)
    annotators = {}
    for name, project in (("ap-alma", alpha), ("ap-alf", alpha), ("ap-bo", beta), ("ap-bix", beta)):
        annotators[name] = make_user(django_user_model, name, Role.ANNOTATOR, roster=project)
    # Each project its own texts: an annotator of both never meets one of her controls again.
    study_a = _study(alpha, ralph, "ap-study-a", django_settings.BASE_DIR / "fixtures/sts/demo-sts.csv")
    study_b = _study(beta, bea, "ap-study-b", reworded_demo_sts(tmp_path / "beta.csv", "Belmont"))
    return World(
        alpha,
        beta,
        ralph,
        bea,
        annotators["ap-alma"],
        annotators["ap-alf"],
        annotators["ap-bo"],
        annotators["ap-bix"],
        study_a,
        study_b,
    )


def _argilla_users() -> set[str]:
    with closing(argilla.client_get()) as owner:
        return set(argilla.user_roles(client=owner))


def _argilla_token(username: str, password: str) -> int:
    with httpx.Client(base_url=django_settings.ARGILLA_API_URL, trust_env=False, timeout=30) as anonymous:
        return anonymous.post("/api/v1/token", data={"username": username, "password": password}).status_code


def test_beta_cannot_publish_to_or_list_alpha_annotators_anywhere(world: World):
    w = world
    before = _argilla_users()
    page = page_as(w.bea)
    url = reverse("annotation:study", args=[w.study_b.pk])
    # The annotators are picked on the publish step (issue 31), a page of its own.
    listing = page.get(reverse("annotation:publish", args=[w.study_b.pk])).content.decode()
    assert "ap-alma" not in listing and "ap-alf" not in listing and "ap-bo" in listing
    assert "ap-alma" in page_as(w.ralph).get(reverse("annotation:publish", args=[w.study_a.pk])).content.decode()

    answer = page.post(url, {"action": "publish", "annotators": [w.alma.pk, w.bo.pk]}, follow=True)
    # Named by id only: the page tells nobody the username behind another project's annotator.
    refusal = html.unescape(answer.content.decode())
    assert f"not on the annotator roster of project 'ap-beta': user #{w.alma.pk}" in refusal
    assert "ap-alma" not in refusal
    api = api_as(w.bea).post(
        f"/api/studies/{w.study_b.pk}/publish/", {"annotators": ["ap-alma", "ap-bo"]}, format="json"
    )
    assert api.status_code == 400 and "ap-alma" in api.json()["detail"] and "roster" in api.json()["detail"]
    # An unknown username gets the same answer: nobody learns who exists elsewhere.
    unknown = api_as(w.bea).post(f"/api/studies/{w.study_b.pk}/publish/", {"annotators": ["nobody-x"]}, format="json")
    assert unknown.status_code == 400 and "not on the annotator roster of project 'ap-beta'" in unknown.json()["detail"]
    with pytest.raises(CommandError, match="not on the annotator roster"):
        call_command("study", "publish", str(w.study_b.pk), "--annotators", "ap-alma", "--as", "ap-bea")
    with pytest.raises(ShiftlabError, match="not on the annotator roster"):
        study_publish(study=w.study_b, annotators=[w.alma], actor=None)  # not even the system

    assert not Annotator.objects.filter(study=w.study_b).exists()
    assert _argilla_users() == before  # nothing written in Argilla


def test_beta_cannot_replace_by_or_reset_alpha_annotators(world: World):
    w = world
    study_publish(study=w.study_b, annotators=[w.bo, w.bix], actor=w.bea)
    bo = Annotator.objects.get(study=w.study_b, user=w.bo)
    page = page_as(w.bea)
    url = reverse("annotation:study", args=[w.study_b.pk])
    answer = page.post(url, {"action": "replace", "annotator": bo.pk, "user": w.alma.pk, "reason": "x"}, follow=True)
    assert f"not on the annotator roster of project 'ap-beta': user #{w.alma.pk}" in html.unescape(
        answer.content.decode()
    )
    api = api_as(w.bea).post(f"/api/study-annotators/{bo.pk}/replace/", {"username": "ap-alma", "reason": "x"})
    assert api.status_code == 400 and "roster" in api.json()["detail"]
    with pytest.raises(CommandError, match="not on the annotator roster"):
        call_command(
            "study", "replace-annotator", str(w.study_b.pk), "ap-bo", "ap-alma", "--reason", "x", "--as", "ap-bea"
        )
    assert Annotator.objects.get(pk=bo.pk).status == Annotator.Status.ACTIVE
    assert "ap-alma" not in _argilla_users()

    # No researcher sets anyone's Argilla password: not on the page, nor through the API.
    bo_password = "bo-own-password-1"
    page_as(w.bo).post(
        reverse("annotation:my-argilla"),
        {"current_password": PASSWORD, "password": bo_password, "password_again": bo_password},
    )
    assert _argilla_token("ap-bo", bo_password) == 201
    page.post(url, {"action": "password", "annotator": bo.pk, "password": "researcher-chose-1"})
    assert _argilla_token("ap-bo", "researcher-chose-1") == 401 and _argilla_token("ap-bo", bo_password) == 201


def test_publishing_returns_no_password_and_annotators_set_their_own(world: World, django_capture_on_commit_callbacks):
    w = world
    with django_capture_on_commit_callbacks(execute=True):  # the publish job runs when the request commits
        answer = api_as(w.ralph).post(
            f"/api/studies/{w.study_a.pk}/publish/", {"annotators": ["ap-alma", "ap-alf"]}, format="json"
        )
    assert answer.status_code == 202, answer.content
    [job] = api_as(w.ralph).get(f"/api/studies/{w.study_a.pk}/jobs/").json()
    assert job["status"] == "succeeded", job["error"]
    # The accounts created now, by name only (one may exist from an earlier test: Argilla outlives it).
    created = job["result"]["new_accounts"]
    assert isinstance(created, list) and set(created) <= {"ap-alma", "ap-alf"}, created
    assert {"ap-alma", "ap-alf"} <= _argilla_users()

    # alma, signed in to Shiftlab as herself, chooses her Argilla password; Argilla accepts it.
    mine = page_as(w.alma)
    page = mine.get(reverse("annotation:my-argilla"))
    assert page.status_code == 200 and "ap-alma" in page.content.decode()
    wrong = mine.post(
        reverse("annotation:my-argilla"),
        {"current_password": "not-my-password", "password": "alma-chose-this-1", "password_again": "alma-chose-this-1"},
    )
    assert "Your Shiftlab password is not right" in wrong.content.decode()
    assert _argilla_token("ap-alma", "alma-chose-this-1") == 401
    done = mine.post(
        reverse("annotation:my-argilla"),
        {"current_password": PASSWORD, "password": "alma-chose-this-1", "password_again": "alma-chose-this-1"},
        follow=True,
    )
    assert "Your Argilla password is set" in done.content.decode()
    assert _argilla_token("ap-alma", "alma-chose-this-1") == 201
    # The API does the same; a researcher has no such account to set.
    api = api_as(w.alf).post(
        "/api/me/argilla-password/", {"current_password": PASSWORD, "password": "alf-chose-this-1"}, format="json"
    )
    assert api.status_code == 200, api.content
    assert _argilla_token("ap-alf", "alf-chose-this-1") == 201
    assert api_as(w.ralph).post("/api/me/argilla-password/", {}, format="json").status_code == 403
    assert page_as(w.ralph).get(reverse("annotation:my-argilla")).status_code == 403
    # Audited in alpha, without the password.
    events = AuditEvent.objects.filter(verb="annotator.argilla_password.set", project=w.alpha)
    assert {e.payload["annotator"] for e in events} == {"ap-alma", "ap-alf"}
    assert not any("chose-this" in str(e.payload) for e in AuditEvent.objects.all())


def test_operators_set_an_annotator_password_by_command_audited(world: World, monkeypatch):
    w = world
    study_publish(study=w.study_a, annotators=[w.alma, w.alf], actor=w.ralph)
    monkeypatch.setattr("sys.stdin", io.StringIO("operator-set-pass-1\n"))
    out = io.StringIO()
    call_command("argilla_password", "ap-alma", stdout=out)
    assert _argilla_token("ap-alma", "operator-set-pass-1") == 201
    assert AuditEvent.objects.filter(verb="annotator.argilla_password.set", project=w.alpha).exists()
    with pytest.raises(CommandError, match="not an annotator"):
        call_command("argilla_password", "ap-ralph", stdout=out)


def test_a_shared_annotator_changed_by_beta_stays_in_betas_audit_log(world: World):
    """What beta does with an annotator it shares with alpha is beta's business (issue 39, finding 8)."""
    w = world
    study_publish(study=w.study_a, annotators=[w.alma, w.alf], actor=w.ralph)
    # beta cannot pull alma in by username; an admin can.
    with pytest.raises(ShiftlabError, match="Only admins"):
        roster_add(project=w.beta, user=w.alma, actor=w.bea)
    roster_add(project=w.beta, user=w.alma, actor=None)
    study_publish(study=w.study_b, annotators=[w.alma, w.bo], actor=w.bea)
    alpha_log = audit_event_list(user=w.ralph)
    assert not any(e.payload.get("in_project") == "ap-beta" for e in alpha_log)
    assert ("annotator.publish", "ap-alma", "ap-alpha") in {
        (e.verb, e.payload.get("annotator"), e.payload.get("in_project")) for e in alpha_log
    }
    # ...only in beta's own log; alf, whom beta never touched, appears in beta's log for nothing.
    beta_log = {(e.verb, e.payload.get("annotator"), e.payload.get("in_project")) for e in audit_event_list(user=w.bea)}
    assert ("annotator.roster.add", "ap-alma", "ap-beta") in beta_log
    assert ("annotator.publish", "ap-alma", "ap-beta") in beta_log
    assert not any(e.payload.get("annotator") == "ap-alf" for e in audit_event_list(user=w.bea))


def test_an_api_token_stops_working_after_a_password_change(world: World):
    w = world
    token = APIClient().post("/api/auth/token/", {"username": "ap-ralph", "password": PASSWORD}).json()["token"]
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    assert api.get("/api/projects/").status_code == 200
    changed = page_as(w.ralph).post(
        reverse("password_change"),
        {"old_password": PASSWORD, "new_password1": "a-new-pass-phrase-9", "new_password2": "a-new-pass-phrase-9"},
    )
    assert changed.status_code == 302
    assert api.get("/api/projects/").status_code == 401
    # A password set elsewhere (admin site, changepassword, a reset) revokes it too.
    token = APIClient().post("/api/auth/token/", {"username": "ap-ralph", "password": "a-new-pass-phrase-9"}).json()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token['token']}")
    assert api.get("/api/projects/").status_code == 200
    w.ralph.refresh_from_db()
    w.ralph.set_password("third-pass-phrase-7")
    w.ralph.save()
    assert api.get("/api/projects/").status_code == 401


def test_only_admins_fill_a_roster_and_owners_take_annotators_off(django_user_model):
    owner = make_user(django_user_model, "ap-owner", Role.RESEARCHER)
    admin = make_user(django_user_model, "ap-admin", Role.ADMIN)
    project = project_create(slug="ap-roster", owner=owner, actor=None)
    other = project_create(slug="ap-other", owner=admin, actor=None)
    ana = make_user(django_user_model, "ap-ana", Role.ANNOTATOR, roster=other)
    url = reverse("project", args=[project.slug])
    page = page_as(owner).get(url).content.decode()
    # An owner invites new annotators with a link (issue 42) but cannot add an existing one by name.
    assert "No annotators yet: invite them below" in page and "Make an invitation link" in page
    assert "Add to the roster" not in page
    refused = page_as(owner).post(url, {"action": "roster", "roster-annotator": "ap-ana"})
    assert refused.status_code == 403 and not project.roster.exists()
    with pytest.raises(CommandError, match="Only admins"):
        call_command("project", "annotator", "ap-roster", "ap-ana", "--as", "ap-owner")
    added = page_as(admin).post(url, {"action": "roster", "roster-annotator": "ap-ana"})
    assert added.status_code == 302 and list(project.roster.values_list("user__username", flat=True)) == ["ap-ana"]
    assert "ap-ana" in page_as(owner).get(url).content.decode()
    assert api_as(owner).get(f"/api/projects/{project.slug}/").json()["annotators"] == ["ap-ana"]
    removed = page_as(owner).post(url, {"action": "roster", "remove": ana.pk})
    assert removed.status_code == 302 and not project.roster.exists()
    # Both changes are in this project's log only, not in that of the project that keeps her.
    verbs = {(e.verb, e.payload.get("in_project")) for e in AuditEvent.objects.filter(project=project)}
    assert {("annotator.roster.add", "ap-roster"), ("annotator.roster.remove", "ap-roster")} <= verbs
    assert not AuditEvent.objects.filter(project=other, payload__in_project="ap-roster").exists()


ROSTERS_BEFORE = [("annotation", "0010_names_per_project"), ("core", "0004_project_annotators")]


@pytest.mark.django_db(transaction=True)
def test_the_migration_puts_past_annotators_on_their_projects_rosters(django_user_model):
    """Annotators already published to a project's studies or baseline studies stay usable there;
    an annotator never published to is on no roster."""
    published = make_user(django_user_model, "ap-past", Role.ANNOTATOR)
    baseline_only = make_user(django_user_model, "ap-past-baseline", Role.ANNOTATOR)
    idle = make_user(django_user_model, "ap-idle", Role.ANNOTATOR)
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes()
    executor.migrate(ROSTERS_BEFORE)
    try:
        # Every other app as it is now: only the roster migration is undone.
        before = [n for n in latest if n[0] not in ("annotation", "core")] + ROSTERS_BEFORE
        old = MigrationExecutor(connection).loader.project_state(before).apps
        old.get_model("core", "ProjectAnnotator").objects.all().delete()
        project = old.get_model("core", "Project").objects.create(slug="ap-past-project")
        study = old.get_model("annotation", "Study").objects.create(
            name="ap-past-study", project_id=project.pk, design={}, design_hash="d"
        )
        old.get_model("annotation", "Annotator").objects.create(study=study, user_id=published.pk)
        dataset = old.get_model("corpora", "Dataset").objects.create(
            name="ap-past-data",
            task_type="sts",
            source="x",
            source_format="csv",
            content_hash="h",
            project_id=project.pk,
        )
        baseline = old.get_model("annotation", "BaselineStudy").objects.create(
            name="ap-past-baseline",
            dataset=dataset,
            task_type="sts",
            n_instances=1,
            instructions="i",
            project_id=project.pk,
        )
        baseline.annotators.add(baseline_only.pk)
        project_pk = project.pk
    finally:
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(latest)
    on_roster = set(Project.objects.get(pk=project_pk).roster.values_list("user__username", flat=True))
    assert on_roster == {"ap-past", "ap-past-baseline"}
    assert not idle.rosters.filter(project_id=project_pk).exists()
