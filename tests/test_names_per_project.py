"""Names are unique per project (issue 27, finding 9a): a researcher of project B who picks a
study, baseline or dataset name that project A uses gets it, and no message tells B that A has it.
Two projects' studies of the same name and version never meet in Argilla either: an annotator of
both gets one workspace per study."""

from __future__ import annotations

from io import StringIO

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command

from annotation.baselines.baseline_services import BaselineCreateRequest, baseline_create
from annotation.models import BaselineStudy, Study
from annotation.studies.argilla_services import annotator_workspace
from annotation.studies.design_services import StudyCreateRequest, study_create
from core.errors import ShiftlabError
from core.projects import project_create
from core.roles import Role
from corpora.selectors import dataset_get
from corpora.services import dataset_import
from evaluation.benchmark_services import benchmark_run_create_from_datasets
from tests.support import api_as, keyword_run, make_user, page_as, roster_at_least, rostered
from tests.test_projects_annotation import DESIGN

pytestmark = pytest.mark.django_db
DEMO_STS = settings.BASE_DIR / "fixtures/sts/demo-sts.csv"


@pytest.fixture
def two(django_user_model):
    rita = make_user(django_user_model, "rita-a", Role.RESEARCHER)
    bob = make_user(django_user_model, "bob-b", Role.RESEARCHER)
    a = project_create(slug="proj-a", owner=rita, actor=None)
    b = project_create(slug="proj-b", owner=bob, actor=None)
    demo_a = dataset_import(source=DEMO_STS, task="sts", name="demo-a", project=a)
    demo_b = dataset_import(source=DEMO_STS, task="sts", name="demo-b", project=b)
    run_a, run_b = keyword_run(demo_a, 1), keyword_run(demo_b, 1)
    roster_at_least(b, DESIGN.raters_per_item)  # bob's study through the API (issue 43: the roster counts)
    secret = study_create(
        actor=rita,
        request=rostered(StudyCreateRequest(name="acquisition-target", runs=[run_a], design=DESIGN, project=a.slug)),
    )
    baseline_create(
        request=BaselineCreateRequest(
            name="acquisition-humans", dataset=demo_a, task_type="sts", n_instances=3, project=a.slug
        )
    )
    return {"a": a, "b": b, "rita": rita, "bob": bob, "run_b": run_b, "demo_b": demo_b, "secret": secret}


def test_another_projects_study_name_is_free_on_the_api_and_the_page(two):
    answer = api_as(two["bob"]).post(
        "/api/studies/",
        {"name": "acquisition-target", "runs": [two["run_b"].pk], "design": DESIGN.to_dict(), "project": "proj-b"},
        format="json",
    )
    assert answer.status_code == 201, answer.content
    assert Study.objects.filter(name="acquisition-target").count() == 2
    out = StringIO()
    call_command("study", "status", "acquisition-target", "--as", "bob-b", stdout=out)
    assert "proj-b" in out.getvalue() or "acquisition-target" in out.getvalue()
    page = page_as(two["bob"]).get("/annotation/").content.decode()
    assert page.count("acquisition-target") >= 1


def test_a_name_taken_in_the_same_project_is_still_refused(two):
    run_a = two["secret"].runs.first()
    with pytest.raises(ShiftlabError, match="a study named 'acquisition-target' exists in project proj-a"):
        study_create(
            actor=None,
            request=rostered(
                StudyCreateRequest(name="acquisition-target", runs=[run_a], design=DESIGN, project=two["a"].slug)
            ),
        )


def test_another_projects_baseline_name_is_free(two):
    created = baseline_create(
        request=BaselineCreateRequest(
            name="acquisition-humans", dataset=two["demo_b"], task_type="sts", n_instances=3, project=two["b"].slug
        )
    )
    assert created.project == two["b"] and BaselineStudy.objects.filter(name="acquisition-humans").count() == 2
    with pytest.raises(ShiftlabError, match="exists in project proj-b"):
        baseline_create(
            request=BaselineCreateRequest(
                name="acquisition-humans", dataset=two["demo_b"], task_type="sts", n_instances=3, project=two["b"].slug
            )
        )


def test_an_annotator_of_two_projects_gets_one_workspace_per_study_of_the_same_name(two, django_user_model):
    anna = make_user(django_user_model, "anna", Role.ANNOTATOR)
    twin = study_create(
        actor=None,
        request=rostered(
            StudyCreateRequest(name="acquisition-target", runs=[two["run_b"]], design=DESIGN, project=two["b"].slug)
        ),
    )
    assert annotator_workspace(two["secret"], anna) != annotator_workspace(twin, anna)


def test_another_projects_dataset_name_is_free_and_each_project_uses_its_own(two):
    """B imports a dataset under A's name; each project's lookups, runs and benchmarks use their own."""
    b_copy = dataset_import(source=DEMO_STS, task="sts", name="demo-a", project=two["b"])
    with pytest.raises(ShiftlabError, match="already exists in project proj-b"):
        dataset_import(source=DEMO_STS, task="sts", name="demo-a", project=two["b"])
    upload = api_as(two["bob"]).post(
        "/api/dataset-imports/",
        {"name": "demo-a", "task": "sts", "project": "proj-b", "files": [SimpleUploadedFile("x.csv", b"a")]},
    )
    assert upload.status_code == 400 and "proj-a" not in upload.content.decode()
    assert dataset_get(name="demo-a", user=two["bob"]) == b_copy
    assert dataset_get(name="demo-a", user=two["rita"]).project == two["a"]
    run = benchmark_run_create_from_datasets(
        datasets=["demo-a"], models=["all-MiniLM-L6-v2"], limit=3, created_by=two["bob"], dispatch=False
    )
    assert run.project == two["b"] and run.plan["dataset_ids"] == {"demo-a": b_copy.pk}
