"""Projects (issue 16) in the corpora app: who reads and changes which datasets and import jobs.

Two closed projects, A and B, each with one researcher member; a viewer of A; an admin. Objects a
caller may not read answer 404 (their existence does not leak), changes by a read-only caller
403; every page, API route and the ``corpora`` command ask the same questions.
"""

from __future__ import annotations

import io

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse

from core.models import DEFAULT_PROJECT, AuditEvent, Membership, Project
from core.roles import Role
from corpora.models import Dataset, DatasetImport
from corpora.services import dataset_import, dataset_share_set
from tests.support import api_as, make_user, page_as

pytestmark = pytest.mark.django_db
DEMO_STS = settings.BASE_DIR / "fixtures/sts/demo-sts.csv"
CSV = b"sentence1,sentence2,score\na cat,a dog,1\nrain,snow,2\n"


@pytest.fixture
def world(django_user_model, admin_user_role):
    """Projects A and B, their members, a viewer of A, A's dataset and a finished import job of A."""
    a = Project.objects.create(slug="team-a")
    b = Project.objects.create(slug="team-b")
    alice = make_user(django_user_model, "alice", Role.RESEARCHER)
    bob = make_user(django_user_model, "bob", Role.RESEARCHER)
    vera = make_user(django_user_model, "vera", Role.RESEARCHER)
    Membership.objects.create(project=a, user=alice, role=Membership.Role.MEMBER)
    Membership.objects.create(project=b, user=bob, role=Membership.Role.OWNER)
    Membership.objects.create(project=a, user=vera, role=Membership.Role.VIEWER)
    dataset = dataset_import(source=DEMO_STS, task="sts", name="a-sts", created_by=alice, project=a)
    job = DatasetImport.objects.create(
        name="a-sts",
        task_type="sts",
        upload_dir="/nonexistent",
        project=a,
        status=DatasetImport.Status.SUCCEEDED,
        dataset=dataset,
        created_by=alice,
    )
    return {
        "a": a,
        "b": b,
        "alice": alice,
        "bob": bob,
        "vera": vera,
        "admin": admin_user_role,
        "dataset": dataset,
        "job": job,
    }


def upload(name: str = "up.csv") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, CSV, content_type="text/csv")


def command(*args: str) -> str:
    out = io.StringIO()
    call_command("corpora", *args, stdout=out)
    return out.getvalue()


# --- API ------------------------------------------------------------------------------------------


def test_api_another_projects_dataset_and_job_are_missing(world):
    client, job = api_as(world["bob"]), world["job"]
    for response in (
        client.get("/api/datasets/a-sts/"),
        client.get("/api/datasets/a-sts/items/"),
        client.delete("/api/datasets/a-sts/"),
        client.post("/api/datasets/a-sts/share/", {"shared": True}),
        client.get(f"/api/dataset-imports/{job.pk}/"),
    ):
        assert response.status_code == 404, response.content
    assert [d["name"] for d in client.get("/api/datasets/").json()["results"]] == []
    assert client.get("/api/dataset-imports/").json()["count"] == 0
    assert Dataset.objects.filter(name="a-sts", shared=False).exists()


def test_api_member_sees_project_and_shared_flag(world):
    client = api_as(world["alice"])
    listed = client.get("/api/datasets/").json()["results"]
    assert [(d["name"], d["project"], d["shared"]) for d in listed] == [("a-sts", "team-a", False)]
    assert client.get("/api/datasets/?project=team-b").json()["count"] == 0
    job = client.get(f"/api/dataset-imports/{world['job'].pk}/").json()
    assert job["project"] == "team-a" and job["dataset"] == "a-sts"


def test_api_viewer_reads_but_may_not_change(world):
    client = api_as(world["vera"])
    assert client.get("/api/datasets/a-sts/").status_code == 200
    assert client.get("/api/datasets/a-sts/items/").json()["count"] == 40
    assert client.get(f"/api/dataset-imports/{world['job'].pk}/").status_code == 200
    deleted = client.delete("/api/datasets/a-sts/")
    assert deleted.status_code == 403 and "only read project 'team-a'" in deleted.json()["detail"]
    assert client.post("/api/datasets/a-sts/share/", {"shared": True}).status_code == 403
    refused = client.post(
        "/api/dataset-imports/", {"files": [upload()], "name": "v-sts", "task_type": "sts", "project": "team-a"}
    )
    assert refused.status_code == 403, refused.content
    assert Dataset.objects.filter(name="a-sts", shared=False).exists()
    assert not DatasetImport.objects.filter(name="v-sts").exists()


def test_api_admin_sees_and_changes_everything(world):
    client = api_as(world["admin"])
    assert [d["name"] for d in client.get("/api/datasets/").json()["results"]] == ["a-sts"]
    assert client.get(f"/api/dataset-imports/{world['job'].pk}/").status_code == 200
    assert client.post("/api/datasets/a-sts/share/", {"shared": True}).json()["shared"] is True
    assert client.delete("/api/datasets/a-sts/").status_code == 204


def test_api_upload_goes_into_the_chosen_project(world, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = api_as(world["bob"]).post(
            "/api/dataset-imports/", {"files": [upload()], "name": "b-sts", "task_type": "sts", "project": "team-b"}
        )
    assert response.status_code == 202, response.content
    assert response.json()["project"] == "team-b"
    job = DatasetImport.objects.get(name="b-sts")
    assert job.status == DatasetImport.Status.SUCCEEDED, job.error
    # The worker's dataset inherits the job's project.
    assert job.project == world["b"] and job.dataset.project == world["b"]
    assert api_as(world["alice"]).get("/api/datasets/b-sts/").status_code == 404


def test_api_upload_without_project_takes_the_callers_one_project(world, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = api_as(world["alice"]).post(
            "/api/dataset-imports/", {"files": [upload()], "name": "mine", "task_type": "sts"}
        )
    assert response.status_code == 202 and response.json()["project"] == "team-a"
    assert Dataset.objects.get(name="mine").project == world["a"]


def test_api_upload_refused_into_a_project_not_the_callers(world):
    client = api_as(world["bob"])
    response = client.post(
        "/api/dataset-imports/", {"files": [upload()], "name": "sneak", "task_type": "sts", "project": "team-a"}
    )
    assert response.status_code == 404
    assert "No project 'team-a' that you belong to" in response.json()["project"][0]
    mteb = client.post("/api/dataset-imports/", {"mteb_task": "STSBenchmark", "project": "team-a"})
    assert mteb.status_code == 404 and "team-a" in mteb.json()["project"][0]
    assert not DatasetImport.objects.filter(name="sneak").exists()


def test_api_upload_with_several_projects_asks_which(world, django_user_model):
    Membership.objects.create(project=world["b"], user=world["alice"], role=Membership.Role.MEMBER)
    response = api_as(world["alice"]).post(
        "/api/dataset-imports/", {"files": [upload()], "name": "x", "task_type": "sts"}
    )
    assert response.status_code == 400
    assert "several projects (team-a, team-b)" in response.json()["project"][0]


def test_shared_dataset_is_readable_by_other_projects_but_not_changeable(world):
    alice, bob = api_as(world["alice"]), api_as(world["bob"])
    assert alice.post("/api/datasets/a-sts/share/", {"shared": True}).json()["shared"] is True
    event = AuditEvent.objects.get(verb="dataset.share")
    assert event.actor == world["alice"] and event.object_repr == "a-sts"
    assert bob.get("/api/datasets/a-sts/").json()["shared"] is True
    assert bob.get("/api/datasets/a-sts/items/").json()["count"] == 40
    assert [d["name"] for d in bob.get("/api/datasets/").json()["results"]] == ["a-sts"]
    assert bob.delete("/api/datasets/a-sts/").status_code == 403
    assert bob.post("/api/datasets/a-sts/share/", {"shared": False}).status_code == 403
    # The import job is not shared with the dataset.
    assert bob.get(f"/api/dataset-imports/{world['job'].pk}/").status_code == 404
    assert alice.post("/api/datasets/a-sts/share/", {"shared": False}).json()["shared"] is False
    assert AuditEvent.objects.filter(verb="dataset.unshare").count() == 1
    assert bob.get("/api/datasets/a-sts/").status_code == 404


def test_share_service_records_only_changes(world):
    dataset = world["dataset"]
    dataset_share_set(dataset=dataset, shared=False, actor=world["alice"])
    assert not AuditEvent.objects.filter(verb__startswith="dataset.").exclude(verb="dataset.import").exists()
    dataset_share_set(dataset=dataset, shared=True, actor=None)  # the system may
    assert Dataset.objects.get(pk=dataset.pk).shared


# --- pages ----------------------------------------------------------------------------------------


def test_pages_another_projects_dataset_and_job_are_missing(world):
    client, job = page_as(world["bob"]), world["job"]
    for response in (
        client.get(reverse("corpora:detail", args=["a-sts"])),
        client.get(reverse("corpora:delete", args=["a-sts"])),
        client.post(reverse("corpora:delete", args=["a-sts"])),
        client.post(reverse("corpora:share", args=["a-sts"]), {"shared": "1"}),
        client.get(reverse("corpora:import", args=[job.pk])),
        client.get(reverse("corpora:list") + f"?again={job.pk}"),
    ):
        assert response.status_code == 404
    listing = client.get(reverse("corpora:list")).content.decode()
    assert "a-sts" not in listing
    assert Dataset.objects.filter(name="a-sts", shared=False).exists()


def test_pages_viewer_reads_but_may_not_change(world):
    client = page_as(world["vera"])
    detail = client.get(reverse("corpora:detail", args=["a-sts"])).content.decode()
    assert "team-a" in detail and "Delete this dataset" not in detail and "share-form" not in detail
    assert client.get(reverse("corpora:import", args=[world["job"].pk])).status_code == 200
    assert client.get(reverse("corpora:delete", args=["a-sts"])).status_code == 403
    assert client.post(reverse("corpora:delete", args=["a-sts"])).status_code == 403
    assert client.post(reverse("corpora:share", args=["a-sts"]), {"shared": "1"}).status_code == 403
    assert Dataset.objects.filter(name="a-sts", shared=False).exists()


def test_pages_member_and_admin_share_and_delete(world):
    alice = page_as(world["alice"])
    detail = alice.get(reverse("corpora:detail", args=["a-sts"])).content.decode()
    assert "Share with every project" in detail and "Delete this dataset" in detail
    alice.post(reverse("corpora:share", args=["a-sts"]), {"shared": "1"})
    assert Dataset.objects.get(name="a-sts").shared
    assert "Stop sharing" in alice.get(reverse("corpora:detail", args=["a-sts"])).content.decode()
    admin = page_as(world["admin"])
    assert "a-sts" in admin.get(reverse("corpora:list")).content.decode()
    assert admin.post(reverse("corpora:delete", args=["a-sts"])).status_code == 302
    assert not Dataset.objects.filter(name="a-sts").exists()


def test_pages_shared_dataset_readable_but_not_deletable_by_another_project(world):
    dataset_share_set(dataset=world["dataset"], shared=True, actor=world["alice"])
    client = page_as(world["bob"])
    assert "a-sts" in client.get(reverse("corpora:list")).content.decode()
    detail = client.get(reverse("corpora:detail", args=["a-sts"])).content.decode()
    assert "shared" in detail and "Delete this dataset" not in detail and "share-form" not in detail
    assert client.post(reverse("corpora:delete", args=["a-sts"])).status_code == 403
    assert client.post(reverse("corpora:share", args=["a-sts"]), {"shared": "0"}).status_code == 403
    assert Dataset.objects.get(name="a-sts").shared


def test_page_upload_offers_the_writable_projects_and_imports_into_the_chosen_one(
    world, django_capture_on_commit_callbacks
):
    client = page_as(world["alice"])
    form = client.get(reverse("corpora:list")).context["form"]
    assert [slug for slug, _ in form.fields["project"].widget.choices if slug] == ["shiftlab", "team-a"]
    assert form.fields["project"].initial == "team-a"
    with django_capture_on_commit_callbacks(execute=True):
        client.post(
            reverse("corpora:list"),
            {"files": upload(), "name": "page-sts", "task": "sts", "language": "en", "project": DEFAULT_PROJECT},
        )
    assert Dataset.objects.get(name="page-sts").project.slug == DEFAULT_PROJECT


def test_page_upload_refused_into_a_project_not_the_callers(world):
    response = page_as(world["bob"]).post(
        reverse("corpora:list"),
        {"files": upload(), "name": "sneak", "task": "sts", "language": "en", "project": "team-a"},
    )
    assert response.status_code == 200  # as the API says it: a project bob cannot see is unknown to him
    assert "No project &#x27;team-a&#x27; that you belong to" in response.content.decode()
    assert not DatasetImport.objects.filter(name="sneak").exists()


def test_page_mteb_form_refuses_a_project_not_the_callers(world):
    response = page_as(world["bob"]).post(
        reverse("corpora:list"), {"action": "mteb", "mteb-task_name": "STSBenchmark", "mteb-project": "team-a"}
    )
    assert response.status_code == 200
    assert "No project 'team-a' that you belong to" in response.context["mteb_form"].errors["project"][0]


# --- the command ----------------------------------------------------------------------------------


def test_command_as_user_sees_only_their_projects(world):
    assert "a-sts" in command("list", "--as", "alice")
    assert "a-sts" in command("list")  # the system sees all
    assert "a-sts" not in command("list", "--as", "bob")
    with pytest.raises(CommandError, match="No dataset named 'a-sts'"):
        command("show", "a-sts", "--as", "bob")
    with pytest.raises(CommandError, match="No dataset named 'a-sts'"):
        command("delete", "a-sts", "--as", "bob")
    with pytest.raises(CommandError, match="only read project 'team-a'"):
        command("delete", "a-sts", "--as", "vera")
    with pytest.raises(CommandError, match="No user 'nobody'"):
        command("list", "--as", "nobody")
    assert Dataset.objects.filter(name="a-sts").exists()


def test_command_import_goes_into_the_project(world):
    args = ["import", str(DEMO_STS), "--task", "sts"]
    with pytest.raises(CommandError, match="No project 'team-a' that you belong to"):
        command(*args, "--name", "sneak", "--as", "bob", "--project", "team-a")
    with pytest.raises(CommandError, match="only read project 'team-a'"):
        command(*args, "--name", "sneak", "--as", "vera", "--project", "team-a")
    assert "project team-a" in command(*args, "--name", "by-alice", "--as", "alice")
    by_alice = Dataset.objects.get(name="by-alice")
    assert by_alice.project == world["a"] and by_alice.created_by == world["alice"]
    command(*args, "--name", "by-system", "--project", "team-b")
    assert Dataset.objects.get(name="by-system").project == world["b"]
    command(*args, "--name", "default")
    assert Dataset.objects.get(name="default").project.slug == DEFAULT_PROJECT
    assert not Dataset.objects.filter(name="sneak").exists()


def test_command_share(world):
    with pytest.raises(CommandError, match="No dataset named"):
        command("share", "a-sts", "--as", "bob")
    with pytest.raises(CommandError, match="only read"):
        command("share", "a-sts", "--as", "vera")
    assert "is shared" in command("share", "a-sts", "--as", "alice")
    assert "a-sts" in command("show", "a-sts", "--as", "bob")
    with pytest.raises(CommandError, match="only read project 'team-a'"):
        command("share", "a-sts", "--off", "--as", "bob")
    with pytest.raises(CommandError, match="only read project 'team-a'"):
        command("delete", "a-sts", "--as", "bob")
    assert "is not shared" in command("share", "a-sts", "--off")
    assert not Dataset.objects.get(name="a-sts").shared
