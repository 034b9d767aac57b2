"""Projects (teams): the rules of core.projects, the Projects page, API and command, the audit log
cut to the caller's projects, and the migration that puts existing data into the default project."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from core.errors import ShiftlabError
from core.models import AuditEvent, Membership, Project
from core.projects import (
    ProjectAccessError,
    default_project,
    membership_set,
    project_create,
    project_require_same,
    project_require_write,
    project_resolve,
    projects_readable,
    projects_writable,
    scoped,
)
from core.roles import Role
from core.services import audit_record
from corpora.models import Dataset
from tests.support import make_user, page_as

pytestmark = pytest.mark.django_db


@pytest.fixture
def team(django_user_model):
    """Projects A and B (closed), each with a researcher; a viewer and an owner of A; an admin;
    an annotator."""
    users = {
        name: make_user(django_user_model, name, role)
        for name, role in (
            ("ann", Role.RESEARCHER),
            ("bob", Role.RESEARCHER),
            ("vic", Role.RESEARCHER),
            ("olga", Role.RESEARCHER),
            ("ada", Role.ADMIN),
            ("rater", Role.ANNOTATOR),
        )
    }
    a = project_create(slug="alpha", owner=users["olga"], actor=None)
    b = project_create(slug="beta", owner=None, actor=None)
    membership_set(project=a, user=users["ann"], role="member", actor=None)
    membership_set(project=a, user=users["vic"], role="viewer", actor=None)
    membership_set(project=b, user=users["bob"], role="member", actor=None)
    return {"a": a, "b": b, **users}


def _dataset(name: str, project: Project, **fields) -> Dataset:
    return Dataset.objects.create(
        name=name, task_type="sts", source="test", source_format="csv", content_hash=name, project=project, **fields
    )


def test_readers_and_writers_of_each_project(team):
    default = default_project()
    slugs = lambda qs: sorted(qs.values_list("slug", flat=True))  # noqa: E731
    assert slugs(projects_readable(team["ann"])) == ["alpha", "shiftlab"]
    assert slugs(projects_writable(team["ann"])) == ["alpha", "shiftlab"]
    assert slugs(projects_readable(team["vic"])) == ["alpha", "shiftlab"]
    assert slugs(projects_writable(team["vic"])) == ["shiftlab"]  # a viewer of alpha; the default is open
    assert slugs(projects_readable(team["bob"])) == ["beta", "shiftlab"]
    assert slugs(projects_readable(team["ada"])) == ["alpha", "beta", "shiftlab"]
    assert slugs(projects_readable(team["rater"])) == []  # annotators work in Argilla
    assert default.open and slugs(projects_readable(None)) == ["alpha", "beta", "shiftlab"]


def test_scoped_hides_other_projects_and_shows_shared_datasets_read_only(team):
    mine, theirs = _dataset("a-data", team["a"]), _dataset("b-data", team["b"])
    _dataset("b-shared", team["b"], shared=True)
    names = lambda user, **kw: sorted(scoped(Dataset.objects.all(), user, **kw).values_list("name", flat=True))  # noqa: E731
    assert names(team["ann"]) == ["a-data", "b-shared"]
    assert names(team["ann"], write=True) == ["a-data"]
    assert names(team["bob"]) == ["b-data", "b-shared"]
    assert names(team["vic"], write=True) == []
    assert names(team["rater"]) == []
    assert names(team["ada"], write=True) == ["a-data", "b-data", "b-shared"]
    readable = scoped(Dataset.objects.all(), team["ann"])
    assert mine in readable and theirs not in readable


def test_a_new_object_goes_into_the_callers_own_project_or_the_one_named(team):
    assert project_resolve(team["ann"]) == team["a"]
    assert project_resolve(team["bob"], "beta") == team["b"]
    assert project_resolve(team["bob"], "shiftlab") == default_project()
    with pytest.raises(ShiftlabError, match="No project 'alpha' that you belong to"):
        project_resolve(team["bob"], "alpha")
    with pytest.raises(ProjectAccessError, match="only read project 'alpha'"):
        project_resolve(team["vic"], "alpha")
    membership_set(project=team["b"], user=team["ann"], role="member", actor=None)
    with pytest.raises(ShiftlabError, match=r"several projects \(alpha, beta\)"):
        project_resolve(team["ann"])
    assert project_resolve(None) == default_project()


def test_inputs_of_another_project_are_refused_shared_datasets_are_not(team):
    other, shared = _dataset("b-data", team["b"]), _dataset("b-shared", team["b"], shared=True)
    project_require_same(team["a"], shared, role="the run's dataset")
    with pytest.raises(ShiftlabError, match="b-data belongs to project 'beta', not 'alpha'"):
        project_require_same(team["a"], other, role="the run's dataset")
    with pytest.raises(ProjectAccessError):
        project_require_write(team["vic"], team["a"])


def test_members_are_managed_by_owners_and_admins_only(team):
    with pytest.raises(ProjectAccessError, match="Only admins and owners"):
        membership_set(project=team["a"], user=team["bob"], role="member", actor=team["ann"])
    membership_set(project=team["a"], user=team["bob"], role="viewer", actor=team["olga"])
    assert Membership.objects.get(project=team["a"], user=team["bob"]).role == "viewer"
    with pytest.raises(ShiftlabError, match="not a researcher"):
        membership_set(project=team["a"], user=team["rater"], role="member", actor=team["ada"])
    with pytest.raises(ProjectAccessError, match="Only admins create projects"):
        project_create(slug="gamma", owner=team["ann"], actor=team["ann"])
    with pytest.raises(ShiftlabError, match="use lowercase letters, digits"):
        project_create(slug="bad slug!", owner=None, actor=None)
    assert AuditEvent.objects.get(verb="project.member", actor=team["olga"]).project == team["a"]


def test_projects_page_lists_only_the_callers_projects_and_owners_manage_members(team):
    page = page_as(team["bob"]).get("/projects/").content.decode()
    assert "beta" in page and "alpha" not in page
    assert page_as(team["bob"]).get("/projects/alpha/").status_code == 404
    assert page_as(team["ann"]).get("/projects/alpha/").status_code == 200
    # A member is no owner: adding members is refused and changes nothing.
    refused = page_as(team["ann"]).post("/projects/alpha/", {"username": "bob", "role": "owner"})
    assert refused.status_code == 403 and not Membership.objects.filter(user=team["bob"], project=team["a"]).exists()
    added = page_as(team["olga"]).post("/projects/alpha/", {"username": "bob", "role": "viewer"})
    assert added.status_code == 302 and Membership.objects.get(user=team["bob"], project=team["a"]).role == "viewer"
    # Only admins create projects.
    assert page_as(team["ann"]).post("/projects/", {"slug": "gamma"}).status_code == 403
    made = page_as(team["ada"]).post("/projects/", {"slug": "gamma", "owner": "ann"})
    assert made.status_code == 302 and Membership.objects.get(project__slug="gamma").user == team["ann"]


def test_projects_api_answers_the_callers_projects_and_role(team):
    client = page_as(team["vic"])
    body = client.get("/api/projects/").json()
    rows = body["results"] if isinstance(body, dict) else body
    assert {r["slug"]: r["role"] for r in rows} == {"alpha": "viewer", "shiftlab": "open"}
    assert client.get("/api/projects/beta/").status_code == 404
    assert page_as(team["rater"]).get("/api/projects/").status_code == 403


def test_project_command_creates_lists_and_manages_members(team, capsys):
    call_command("project", "create", "gamma", "--owner", "bob", "--name", "Gamma team")
    call_command("project", "member", "gamma", "ann", "--role", "viewer", "--as", "bob")
    with pytest.raises(CommandError, match="Only admins and owners"):
        call_command("project", "member", "gamma", "vic", "--as", "ann")
    with pytest.raises(CommandError, match="Only admins create projects"):
        call_command("project", "create", "delta", "--as", "bob")
    call_command("project", "list", "--as", "ann")
    out = capsys.readouterr().out
    assert "gamma [viewer]: ann (viewer), bob (owner)" in out and "beta" not in out
    call_command("project", "remove", "gamma", "ann", "--as", "ada")
    assert not Membership.objects.filter(project__slug="gamma", user=team["ann"]).exists()


def test_audit_log_shows_a_researcher_only_their_projects_events(team):
    audit_record(actor=team["ann"], verb="dataset.import", obj=_dataset("a-secret", team["a"]))
    audit_record(actor=team["bob"], verb="dataset.import", obj=_dataset("b-secret", team["b"]))
    assert AuditEvent.objects.get(object_repr="a-secret").project == team["a"]
    bob_log = page_as(team["bob"]).get("/audit/").content.decode()
    assert "b-secret" in bob_log and "a-secret" not in bob_log
    assert "a-secret" not in page_as(team["bob"]).get("/").content.decode()
    admin_log = page_as(team["ada"]).get("/audit/").content.decode()
    assert "a-secret" in admin_log and "b-secret" in admin_log


BEFORE = [
    ("core", "0001_initial"),
    ("corpora", "0004_import_attempts"),
    ("transforms", "0004_run_preset_identity_language_check"),
    ("annotation", "0007_flag_rules"),
    ("evaluation", "0001_initial"),
]


@pytest.mark.django_db(transaction=True)
def test_the_migration_puts_existing_data_into_the_open_default_project():
    """Rows made before projects (historical models) are in the default project afterwards, the
    study keeps its Argilla workspace, and every researcher can still use them."""
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes()
    executor.migrate(BEFORE)
    try:
        old = MigrationExecutor(connection).loader.project_state(BEFORE).apps
        dataset = old.get_model("corpora", "Dataset").objects.create(
            name="old-data", task_type="sts", source="x", source_format="csv", content_hash="h"
        )
        study = old.get_model("annotation", "Study").objects.create(
            name="old-study", project="team-ws", design={}, design_hash="d"
        )
        prompt = old.get_model("transforms", "PromptTemplate").objects.create(
            key="paraphrase", version=1, system="s", user="u", content_hash="c", is_active=True
        )
    finally:
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(latest)
    from annotation.models import Study
    from transforms.models import PromptTemplate

    default = Project.objects.get(slug="shiftlab")
    assert default.open
    assert Dataset.objects.get(pk=dataset.pk).project == default
    migrated = Study.objects.get(pk=study.pk)
    assert migrated.project == default and migrated.workspace == "team-ws"
    assert PromptTemplate.objects.get(pk=prompt.pk).project == default
