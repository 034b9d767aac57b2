"""Forms offer only what their action accepts for this user and project (issue 42).

The benchmark form listed every dataset its user could read, another project's included, and the
run was refused after submit. Now each create form's choices are what its service accepts in the
project the form is shown for (its preselected one): the datasets of the benchmark form, the transformation run form
and the baseline form, and the runs of the study form. Each test tries every candidate through the
service itself and compares the accepted ones with the offered ones.

Carl is a member of alpha and beta and a viewer of gamma; delta shares a dataset with everyone.
"""

from __future__ import annotations

import pytest
from django.conf import settings
from django.db import transaction

from annotation.baselines.baseline_services import BaselineCreateRequest, baseline_create
from annotation.forms import StudyCreateForm
from annotation.studies.design_services import StudyCreateRequest, study_create
from core.errors import ShiftlabError
from core.models import Membership, Project
from core.roles import Role
from corpora.models import Dataset
from corpora.services import dataset_import
from evaluation.benchmark_services import BenchmarkRunStartRequest, benchmark_run_start
from evaluation.forms import BaselineCreateForm, BenchmarkRunForm
from tests.support import LIMIT, keyword_run, make_user, rostered
from tests.test_projects_annotation import DESIGN
from transforms.forms import TransformRunForm
from transforms.models import TransformRun
from transforms.services import TransformRunsStartRequest, transform_runs_start

pytestmark = pytest.mark.django_db
DEMO_STS = settings.BASE_DIR / "fixtures/sts/demo-sts.csv"
MODEL = "all-MiniLM-L6-v2"
PROJECTS = ("alpha", "beta", None)  # None: the form's empty choice, "the inputs' project, else your own"


@pytest.fixture
def carl(django_user_model, tmp_path, settings):
    settings.DATA_DIR = tmp_path
    alpha, beta, gamma, delta = (Project.objects.create(slug=s) for s in ("alpha", "beta", "gamma", "delta"))
    carl = make_user(django_user_model, "carl", Role.RESEARCHER)
    for project, role in ((alpha, "member"), (beta, "member"), (gamma, "viewer")):
        Membership.objects.create(project=project, user=carl, role=role)
    for name, project in (("a-sts", alpha), ("b-sts", beta), ("g-sts", gamma), ("d-sts", delta)):
        dataset_import(source=DEMO_STS, task="sts", name=name, created_by=None, project=project)
    Dataset.objects.filter(name="d-sts").update(shared=True)
    # a classification dataset without a training split: a benchmark cannot score it
    Dataset.objects.create(
        name="a-cls", task_type="classification", project=alpha, splits={"test": 4}, content_hash="c" * 64
    )
    return carl


def accepts(start) -> bool:
    """Whether the service takes the input (nothing it makes is kept)."""
    try:
        with transaction.atomic():
            start()
            raise _Undo
    except _Undo:
        return True
    except ShiftlabError:
        return False


class _Undo(Exception):
    pass


def readable_names(*, benchmark: bool = False) -> set[str]:
    """The datasets to try: with ``benchmark``, the item-less classification one too, which only
    a benchmark refuses for its splits (the other services refuse it for having no items)."""
    names = set(Dataset.objects.values_list("name", flat=True))
    return names if benchmark else names - {"a-cls"}


@pytest.mark.parametrize("project", PROJECTS)
def test_the_benchmark_form_offers_the_datasets_a_run_accepts(carl, project):
    offered = {
        d.name for d in BenchmarkRunForm(initial={"project": project or ""}, user=carl).fields["datasets"].queryset
    }
    accepted = {
        name
        for name in readable_names(benchmark=True)
        if accepts(
            lambda name=name: benchmark_run_start(
                actor=carl,
                request=BenchmarkRunStartRequest(project=project, models=[MODEL], datasets=[name], limit=LIMIT),
            )
        )
    }
    assert offered == accepted
    assert "a-cls" not in offered and "g-sts" not in offered
    assert ("d-sts" in offered) is (project is not None)  # a shared dataset needs a project: carl has two


def test_a_form_filled_in_for_one_project_lists_whose_each_dataset_is(carl):
    Membership.objects.filter(user=carl, project__slug="beta").delete()  # alpha is now his one project
    form = BenchmarkRunForm(user=carl)
    assert form.fields["project"].initial == "alpha"
    labels = [label for _, label in form.fields["datasets"].choices]
    assert labels == ["a-sts, project alpha", "d-sts, shared"]


@pytest.mark.parametrize("project", PROJECTS)
def test_the_transformation_run_form_offers_the_datasets_a_run_accepts(carl, project):
    form = TransformRunForm(initial={"project": project or ""}, user=carl)
    offered = {d.name for d in form.fields["dataset"].queryset} - {"a-cls"}
    accepted = {
        name
        for name in readable_names()
        if accepts(
            lambda name=name: transform_runs_start(
                actor=carl,
                request=TransformRunsStartRequest(
                    project=project, dataset=name, transformation="random_keywords", limit=LIMIT
                ),
            )
        )
    }
    assert offered == accepted


@pytest.mark.parametrize("project", PROJECTS)
def test_the_baseline_form_offers_the_datasets_a_baseline_accepts(carl, project):
    form = BaselineCreateForm(initial={"project": project or ""}, user=carl)
    offered = {d.name for d in form.fields["dataset"].queryset} - {"a-cls"}
    accepted = {
        name
        for name in readable_names()
        if accepts(
            lambda name=name: baseline_create(
                actor=carl, request=BaselineCreateRequest(project=project, name="humans", dataset=name, n_instances=3)
            )
        )
    }
    assert offered == accepted


@pytest.mark.parametrize("project", PROJECTS)
def test_the_study_form_offers_the_runs_a_study_accepts(carl, project):
    for name in ("a-sts", "b-sts", "g-sts"):
        keyword_run(Dataset.objects.get(name=name), 1)
    offered = set(StudyCreateForm(initial={"project": project or ""}, user=carl).fields["runs"].queryset)
    accepted = {
        run
        for run in TransformRun.objects.all()
        if accepts(
            lambda run=run: study_create(
                actor=carl,
                request=rostered(StudyCreateRequest(name="check", runs=[run], design=DESIGN, project=project)),
            )
        )
    }
    assert offered == accepted and len(accepted) == (2 if project is None else 1)


def test_a_project_the_caller_may_only_read_is_left_to_the_service_to_refuse(carl):
    """A posted project the select does not offer does not cut the choices: the service refuses
    the project itself, in the words of the API and the command."""
    form = BenchmarkRunForm(data={"project": "gamma", "datasets": ["g-sts"], "models": [MODEL]}, user=carl)
    assert form.is_valid(), form.errors
