"""One front door per dataset import (issue 28): the page, the API and ``manage.py corpora`` call the
same service entry, so the same inputs give the same dataset in the same project, or the same
refusal.

Alice is a member of projects alpha and beta and a viewer of gamma. Each door imports the same
file (or the same MTEB task) under its own name; the datasets must match in project and content.
"""

from __future__ import annotations

import html
import io

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse

from core.models import Membership, Project
from core.roles import Role
from corpora.models import Dataset, DatasetImport
from tests.support import api_as, make_user, page_as

pytestmark = pytest.mark.django_db
CSV = b"sentence1,sentence2,score\na cat sits,a dog sits,1\nrain falls,snow falls,2\nthe sun,the moon,0.5\n"
SEVERAL = "You belong to several projects (alpha, beta): name the one to work in."
READ_ONLY = "You may only read project 'gamma': ask one of its owners to make you a member."


@pytest.fixture
def alice(django_user_model):
    user = make_user(django_user_model, "alice", Role.RESEARCHER)
    for slug, role in (("alpha", "member"), ("beta", "member"), ("gamma", "viewer")):
        Membership.objects.create(project=Project.objects.create(slug=slug), user=user, role=role)
    return user


def _page_upload(user, name: str, project: str | None):
    form = {"files": SimpleUploadedFile("pairs.csv", CSV, content_type="text/csv"), "name": name, "task": "sts"}
    return page_as(user).post(reverse("corpora:list"), {**form, "language": "en", "project": project or ""})


def _api_upload(user, name: str, project: str | None):
    body = {"files": [SimpleUploadedFile("pairs.csv", CSV, content_type="text/csv")], "name": name, "task_type": "sts"}
    return api_as(user).post("/api/dataset-imports/", {**body, **({"project": project} if project else {})})


def _command(*args: str) -> str:
    out = io.StringIO()
    call_command("corpora", "import", *args, "--as", "alice", stdout=out)
    return out.getvalue()


def _command_upload(tmp_path, name: str, project: str | None) -> str:
    path = tmp_path / "pairs.csv"
    path.write_bytes(CSV)
    return _command(str(path), "--task", "sts", "--name", name, *(["--project", project] if project else []))


def test_a_file_imported_through_each_door_lands_in_the_named_project_alike(
    alice, tmp_path, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        page = _page_upload(alice, "by-page", "alpha")
        api = _api_upload(alice, "by-api", "alpha")
    assert page.status_code == 302 and api.status_code == 202
    assert "project alpha" in _command_upload(tmp_path, "by-command", "alpha")
    datasets = [Dataset.objects.get(name=f"by-{door}") for door in ("page", "api", "command")]
    assert {(d.project.slug, d.created_by, d.task_type, d.n_items, d.content_hash) for d in datasets} == {
        ("alpha", alice, "sts", 3, datasets[0].content_hash)
    }


def test_without_a_project_each_door_asks_which_of_the_callers_projects(alice, tmp_path):
    page = _page_upload(alice, "nowhere", None)
    assert page.status_code == 200 and page.context["form"].errors["project"] == [SEVERAL]
    api = _api_upload(alice, "nowhere", None)
    assert api.status_code == 400 and api.json() == {"project": [SEVERAL], "code": "project_ambiguous"}
    with pytest.raises(CommandError) as refused:
        _command_upload(tmp_path, "nowhere", None)
    assert str(refused.value) == f"Nothing was imported.\n{SEVERAL}"
    assert not Dataset.objects.filter(name="nowhere").exists()
    assert not DatasetImport.objects.filter(name="nowhere").exists()


def test_a_project_the_caller_only_reads_is_refused_by_each_door(alice, tmp_path):
    api = _api_upload(alice, "sneak", "gamma")
    assert api.status_code == 403 and api.json() == {"detail": READ_ONLY, "code": "forbidden"}
    with pytest.raises(CommandError) as refused:
        _command_upload(tmp_path, "sneak", "gamma")
    assert str(refused.value) == f"Nothing was imported.\n{READ_ONLY}"
    # The page offers only the projects the caller may change; a forged choice is refused alike.
    page = _page_upload(alice, "sneak", "gamma")
    assert page.status_code == 403 and READ_ONLY in html.unescape(page.content.decode())
    assert not Dataset.objects.filter(name="sneak").exists()
    assert not DatasetImport.objects.filter(name="sneak").exists()


def test_an_mteb_task_imported_through_each_door_lands_in_the_named_project_alike(
    alice, tmp_path, shared_data, settings
):
    from tests.test_mteb_native import stsb_copy

    stsb_copy(shared_data, tmp_path / "STSBenchmark")
    settings.MTEB_DATA_DIR = str(tmp_path)
    page = page_as(alice).post(
        reverse("corpora:list"),
        {"action": "mteb", "mteb-task_name": "STSBenchmark", "mteb-name": "mteb-page", "mteb-project": "alpha"},
    )
    assert page.status_code == 302
    api = api_as(alice).post(
        "/api/dataset-imports/", {"mteb_task": "STSBenchmark", "name": "mteb-api", "project": "alpha"}
    )
    assert api.status_code == 201
    assert "project alpha" in _command("--mteb", "STSBenchmark", "--name", "mteb-command", "--project", "alpha")
    datasets = [Dataset.objects.get(name=f"mteb-{door}") for door in ("page", "api", "command")]
    assert {(d.project.slug, d.created_by, d.task_type, d.n_items, d.content_hash) for d in datasets} == {
        ("alpha", alice, "sts", datasets[0].n_items, datasets[0].content_hash)
    }
    several = api_as(alice).post("/api/dataset-imports/", {"mteb_task": "STSBenchmark", "name": "mteb-nowhere"})
    assert several.status_code == 400 and several.json() == {"project": [SEVERAL], "code": "project_ambiguous"}
    with pytest.raises(CommandError, match="several projects"):
        _command("--mteb", "STSBenchmark", "--name", "mteb-nowhere")


# --- projects (core): the page and ``manage.py project`` call project_create ------------------------

BAD_SLUG = (
    "Project slug 'Bad Slug': use lowercase letters, digits and '-', starting with a letter or digit "
    "(at most 61; it also names the project's Argilla workspace)."
)


def _project_command(*args: str) -> None:
    call_command("project", *args, stdout=io.StringIO())


def test_a_project_made_through_each_door_is_alike_and_refused_alike(alice, admin_user_role):
    page = page_as(admin_user_role).post(reverse("projects"), {"slug": "by-page", "owner": "alice"})
    assert page.status_code == 302
    _project_command("create", "by-command", "--owner", "alice", "--as", admin_user_role.username)
    made = [Project.objects.get(slug=slug) for slug in ("by-page", "by-command")]
    assert [list(p.memberships.values_list("user__username", "role")) for p in made] == [[("alice", "owner")]] * 2
    refused = page_as(admin_user_role).post(reverse("projects"), {"slug": "Bad Slug"})
    assert refused.status_code == 200 and refused.context["form"].errors["slug"] == [BAD_SLUG]
    with pytest.raises(CommandError) as by_command:
        _project_command("create", "Bad Slug", "--as", admin_user_role.username)
    assert str(by_command.value) == BAD_SLUG
    taken = page_as(admin_user_role).post(reverse("projects"), {"slug": "alpha"})
    assert taken.context["form"].errors["slug"] == ["Project 'alpha' exists already: choose another slug."]
    with pytest.raises(CommandError, match=r"^Project 'alpha' exists already: choose another slug\.$"):
        _project_command("create", "alpha", "--as", admin_user_role.username)
    assert page_as(alice).post(reverse("projects"), {"slug": "by-alice"}).status_code == 403
    with pytest.raises(CommandError, match="Only admins create projects"):
        _project_command("create", "by-alice", "--as", "alice")
