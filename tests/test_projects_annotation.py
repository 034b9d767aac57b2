"""Projects (issue 16) on the annotation side: studies, their annotators, flags, gate results,
approvals, benchmark configs and baseline studies stay inside their project on every page, API
route and command. Two closed projects A and B with one researcher each, a viewer of A and an
admin; no Argilla server (locked studies, ratings, flags and gate results written directly).

B's researcher gets 404 on A's objects (GET and POST) and lists hide them; the viewer reads and
gets 403 on every change; the admin sees everything."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from io import StringIO

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.urls import reverse

from annotation.baselines.baseline_services import BaselineCreateRequest, baseline_create
from annotation.export_services import BenchmarkConfigExportRequest, benchmark_config_export
from annotation.models import (
    Annotator,
    Approval,
    BaselineStudy,
    BenchmarkConfig,
    Flag,
    GateResult,
    Rating,
    Study,
)
from annotation.science.design import StudyDesign
from annotation.studies.design_services import (
    StudyCreateRequest,
    StudyReviseRequest,
    study_create,
    study_lock,
    study_revise,
)
from core.errors import ShiftlabError
from core.models import Membership, Project
from core.projects import membership_set, project_create
from core.roles import Role
from corpora.models import Dataset
from corpora.services import dataset_import
from tests.support import FEW_CONTROLS_OVERRIDE, api_as, keyword_run, make_user, page_as, roster_at_least
from transforms.models import TransformRun

pytestmark = pytest.mark.django_db
AT = datetime(2026, 1, 1, tzinfo=UTC)
DEMO_STS = settings.BASE_DIR / "fixtures/sts/demo-sts.csv"
DESIGN = StudyDesign(
    items_per_transformation=6,
    raters_per_item=2,
    batch_size=3,
    controls_per_batch=2,
    min_control_ratings=2,
    llm_judges=(),
    seed=3,
    detectability_override=FEW_CONTROLS_OVERRIDE,
)


@dataclass
class World:
    a: Project
    b: Project
    rita: object  # member (owner) of A
    bob: object  # member (owner) of B
    vic: object  # viewer of A
    adam: object  # admin
    run_a: TransformRun
    run_b: TransformRun
    study_a: Study
    study_b: Study
    annotator: Annotator
    flag: Flag
    gate: GateResult
    config: BenchmarkConfig

    def ids(self) -> dict[str, int]:
        return {
            "study": self.study_a.pk,
            "annotator": self.annotator.pk,
            "flag": self.flag.pk,
            "gate": self.gate.pk,
            "config": self.config.pk,
        }


def _approved_gate(study: Study, actor) -> GateResult:
    gate = GateResult.objects.create(
        study=study,
        transformation="random_keywords",
        passed=True,
        evidence={"state": "passed", "reasons": [], "n_items": 6, "n_ratings": 12, "questions": {}},
        evidence_hash="0" * 64,
        created_by=actor,
    )
    Approval.objects.create(gate_result=gate, decision=Approval.Decision.APPROVE, comment="ok", decided_by=actor)
    return gate


@pytest.fixture
def world(db, django_user_model) -> World:
    rita = make_user(django_user_model, "rita-a", Role.RESEARCHER)
    bob = make_user(django_user_model, "bob-b", Role.RESEARCHER)
    vic = make_user(django_user_model, "vic-a", Role.RESEARCHER)
    adam = make_user(django_user_model, "adam", Role.ADMIN)
    a = project_create(slug="proj-a", owner=rita, actor=None)
    b = project_create(slug="proj-b", owner=bob, actor=None)
    anna = make_user(django_user_model, "anna", Role.ANNOTATOR, roster=a)
    for project in (a, b):  # the designs' raters per item (issue 43: study_create counts the roster)
        roster_at_least(project, DESIGN.raters_per_item)
    membership_set(project=a, user=vic, role=Membership.Role.VIEWER, actor=None)
    run_a = keyword_run(dataset_import(source=DEMO_STS, task="sts", name="demo-a", project=a), 1)
    run_b = keyword_run(dataset_import(source=DEMO_STS, task="sts", name="demo-b", project=b), 1)
    study_a = study_lock(
        study=study_create(
            actor=rita, request=StudyCreateRequest(name="study-a", runs=[run_a], design=DESIGN, project=a.slug)
        ),
        actor=rita,
    )
    study_b = study_create(
        actor=bob, request=StudyCreateRequest(name="study-b", runs=[run_b], design=DESIGN, project=b.slug)
    )
    annotator = Annotator.objects.create(study=study_a, user=anna)
    rating = Rating.objects.create(
        study_item=study_a.items.first(), annotator=annotator, question="quality", value=1, submitted_at=AT
    )
    flag = Flag.objects.create(rating=rating, rule="low_rating", value=1)
    gate = _approved_gate(study_a, rita)
    config = benchmark_config_export(
        actor=rita, request=BenchmarkConfigExportRequest(studies=[study_a], name="a-config")
    )
    return World(a, b, rita, bob, vic, adam, run_a, run_b, study_a, study_b, annotator, flag, gate, config)


def listed(response) -> set[int]:
    assert response.status_code == 200, response.content
    body = response.json()
    return {row["id"] for row in (body["results"] if isinstance(body, dict) else body)}


# --- API -------------------------------------------------------------------------------------------

API_READS = [
    "/api/studies/{study}/",
    "/api/studies/{study}/progress/",
    "/api/studies/{study}/items/",
    "/api/studies/{study}/annotators/",
    "/api/studies/{study}/annotator-quality/",
    "/api/study-annotators/{annotator}/",
    "/api/study-flags/{flag}/",
    "/api/gate-results/{gate}/",
    "/api/benchmark-configs/{config}/",
    "/api/benchmark-configs/{config}/download/yaml/",
]
API_CHANGES = [
    ("/api/studies/{study}/design/", {"design": {"seed": 4}}),
    ("/api/studies/{study}/lock/", {}),
    ("/api/studies/{study}/publish/", {"annotators": []}),
    ("/api/studies/{study}/sync/", {}),
    ("/api/studies/{study}/validate/", {}),
    ("/api/studies/{study}/gate/", {}),
    ("/api/study-annotators/{annotator}/reject/", {"reason": "careless"}),
    ("/api/study-annotators/{annotator}/replace/", {"username": "anna", "reason": "left"}),
    ("/api/study-flags/{flag}/review/", {"decision": "dismissed"}),
    ("/api/study-flags/{flag}/translate/", {}),
    ("/api/gate-results/{gate}/decide/", {"decision": "reject", "comment": "no"}),
    ("/api/benchmark-configs/", {"studies": ["{study}"]}),
]


def _fill(value, ids: dict[str, int]):
    if isinstance(value, str):
        return int(value.format(**ids)) if value.startswith("{") else value.format(**ids)
    if isinstance(value, list):
        return [_fill(v, ids) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, ids) for k, v in value.items()}
    return value


@pytest.mark.parametrize("url", API_READS)
def test_api_reads_answer_404_outside_the_project_and_200_to_a_viewer_and_an_admin(world, url):
    url = url.format(**world.ids())
    assert api_as(world.bob).get(url).status_code == 404
    assert api_as(world.vic).get(url).status_code == 200
    assert api_as(world.adam).get(url).status_code == 200
    assert api_as(world.rita).get(url).status_code == 200


@pytest.mark.parametrize(("url", "body"), API_CHANGES)
def test_api_changes_answer_404_outside_the_project_and_403_to_a_viewer(world, url, body):
    ids = world.ids()
    url, body = url.format(**ids), _fill(body, ids)
    assert api_as(world.bob).post(url, body, format="json").status_code == 404
    response = api_as(world.vic).post(url, body, format="json")
    assert response.status_code == 403, response.content
    assert "only read project 'proj-a'" in response.json()["detail"]
    world.study_a.refresh_from_db()
    assert world.study_a.design_hash == DESIGN.content_hash and world.study_a.published_at is None
    assert Flag.objects.get(pk=world.flag.pk).status == Flag.Status.OPEN
    assert Annotator.objects.get(pk=world.annotator.pk).status == Annotator.Status.ACTIVE
    assert BenchmarkConfig.objects.count() == 1


@pytest.mark.parametrize(
    "url", ["/api/studies/", "/api/study-flags/?status=all", "/api/gate-results/", "/api/benchmark-configs/"]
)
def test_api_lists_hold_only_readable_objects(world, url):
    gate_b = _approved_gate(world.study_b, world.bob)
    config_b = benchmark_config_export(actor=world.bob, request=BenchmarkConfigExportRequest(studies=[world.study_b]))
    mine = {
        "/api/studies/": (world.study_a.pk, world.study_b.pk),
        "/api/study-flags/?status=all": (world.flag.pk, None),
        "/api/gate-results/": (world.gate.pk, gate_b.pk),
        "/api/benchmark-configs/": (world.config.pk, config_b.pk),
    }
    of_a, of_b = mine[url]
    assert of_a not in listed(api_as(world.bob).get(url))
    assert of_a in listed(api_as(world.vic).get(url))
    if of_b is not None:
        assert of_b in listed(api_as(world.bob).get(url)) and of_b not in listed(api_as(world.vic).get(url))
        assert {of_a, of_b} <= listed(api_as(world.adam).get(url))


def test_a_study_created_through_the_api_lives_in_its_project_and_its_workspace(world):
    body = {"name": "fresh", "runs": [world.run_a.pk], "design": DESIGN.to_dict()}
    created = api_as(world.rita).post("/api/studies/", body, format="json")
    assert created.status_code == 201, created.content
    assert (created.json()["project"], created.json()["workspace"]) == ("proj-a", "proj-a")
    # B's researcher cannot even see A's run; naming A is refused as unknown; the viewer may not write.
    refused = api_as(world.bob).post("/api/studies/", {**body, "name": "theirs"}, format="json")
    assert refused.status_code == 404 and "no transformation runs" in str(refused.json()["runs"])
    refused = api_as(world.bob).post("/api/studies/", {**body, "name": "theirs", "project": "proj-a"}, format="json")
    assert refused.status_code == 404 and "No project 'proj-a'" in str(refused.json()["project"])
    assert (
        api_as(world.vic).post("/api/studies/", {**body, "name": "v", "project": "proj-a"}, format="json").status_code
        == 403
    )


def test_a_study_in_b_with_runs_of_a_is_refused_with_a_clear_message(world):
    body = {"name": "mixed", "project": "proj-b", "runs": [world.run_a.pk], "design": DESIGN.to_dict()}
    refused = api_as(world.adam).post("/api/studies/", body, format="json")
    assert refused.status_code == 400
    assert "belongs to project 'proj-a', not 'proj-b'" in refused.json()["detail"]
    assert "the study's runs must be in the same project" in refused.json()["detail"]
    with pytest.raises(ShiftlabError, match="the study's runs must be in the same project"):
        study_create(
            actor=None,
            request=StudyCreateRequest(
                name="mixed", runs=[world.run_a, world.run_b], design=DESIGN, project=world.b.slug
            ),
        )
    with pytest.raises(ShiftlabError, match="the study's runs must be in the same project"):
        study_revise(request=StudyReviseRequest(study=world.study_b, runs=[world.run_a]))
    assert not Study.objects.filter(name="mixed").exists()


def test_a_new_version_keeps_its_project_and_workspace(world):
    revised = study_revise(
        actor=world.rita, request=StudyReviseRequest(study=world.study_a, design=DESIGN.revised(seed=9))
    )
    assert (revised.project, revised.workspace, revised.version) == (world.a, "proj-a", 2)
    default = study_create(
        actor=None,
        request=StudyCreateRequest(
            name="plain", runs=[keyword_run(Dataset.objects.get(name="demo-a"), 2)], design=DESIGN
        ),
    )
    assert (default.project, default.workspace) == (world.a, "proj-a")  # no project named: the runs'


def test_a_config_export_across_two_projects_is_refused(world):
    _approved_gate(world.study_b, world.bob)
    with pytest.raises(ShiftlabError, match=r"several projects \(proj-a, proj-b\)"):
        benchmark_config_export(
            actor=None, request=BenchmarkConfigExportRequest(studies=[world.study_a, world.study_b])
        )
    refused = api_as(world.adam).post("/api/benchmark-configs/", {"name": "all"}, format="json")
    assert refused.status_code == 400 and "several projects" in refused.json()["detail"]
    made = api_as(world.adam).post("/api/benchmark-configs/", {"project": "proj-b"}, format="json")
    assert made.status_code == 201 and made.json()["project"] == "proj-b"
    # Without a choice, a researcher exports the one project they may change that has approvals.
    made = api_as(world.rita).post("/api/benchmark-configs/", {"name": "mine"}, format="json")
    assert made.status_code == 201 and made.json()["project"] == "proj-a"
    assert world.config.project == world.a


# --- pages -----------------------------------------------------------------------------------------

PAGE_READS = ["annotation:study", "annotation:publish", "annotation:review", "annotation:gate", "annotation:annotators"]
PAGE_CHANGES = [
    ("annotation:study", {"action": "lock"}),
    ("annotation:study", {"action": "sync"}),
    ("annotation:study", {"action": "validate"}),
    ("annotation:study", {"action": "gate"}),
    ("annotation:study", {"action": "publish"}),
    ("annotation:publish", {"action": "lock"}),
    ("annotation:publish", {"action": "publish"}),
    ("annotation:study", {"action": "revise", "revise-seed": "4"}),
    ("annotation:study", {"action": "reject", "annotator": "{annotator}", "reason": "careless"}),
    ("annotation:study", {"action": "replace", "annotator": "{annotator}", "reason": "left"}),
    ("annotation:review", {"flag": "{flag}", "decision": "dismissed"}),
    ("annotation:review", {"flag": "{flag}", "action": "translate"}),
    ("annotation:gate", {"gate_result": "{gate}", "decision": "reject", "comment": "no"}),
]


@pytest.mark.parametrize("name", PAGE_READS)
def test_pages_answer_404_outside_the_project_and_200_to_a_viewer(world, name):
    url = reverse(name, args=[world.study_a.pk])
    assert page_as(world.bob).get(url).status_code == 404
    assert page_as(world.vic).get(url).status_code == 200
    assert page_as(world.adam).get(url).status_code == 200


@pytest.mark.parametrize(("name", "data"), PAGE_CHANGES)
def test_page_changes_answer_404_outside_the_project_and_403_to_a_viewer(world, name, data):
    url, data = reverse(name, args=[world.study_a.pk]), _fill(data, world.ids())
    assert page_as(world.bob).post(url, data).status_code == 404
    assert page_as(world.vic).post(url, data).status_code == 403
    assert Study.objects.filter(name="study-a").count() == 1
    assert Flag.objects.get(pk=world.flag.pk).status == Flag.Status.OPEN
    assert not Approval.objects.filter(decision=Approval.Decision.REJECT).exists()


def test_the_study_list_shows_readable_studies_and_offers_writable_projects(world):
    url = reverse("annotation:studies")
    html = page_as(world.bob).get(url).content.decode()
    assert "study-b" in html and "study-a" not in html and 'value="proj-a"' not in html
    html = page_as(world.vic).get(url).content.decode()
    assert "study-a" in html and 'value="proj-a"' not in html  # a viewer creates nothing in A
    html = page_as(world.adam).get(url).content.decode()
    assert "study-a" in html and "study-b" in html


def test_a_study_created_on_the_page_goes_into_the_chosen_project(world):
    fields = {k: v for k, v in DESIGN.to_dict().items() if not isinstance(v, list | tuple | dict)}
    body = {**fields, "raters_per_item": 1, "name": "paged", "project": "proj-a", "runs": [world.run_a.pk]}
    response = page_as(world.rita).post(reverse("annotation:studies"), body)
    study = Study.objects.get(name="paged")
    assert response.status_code == 302 and (study.project, study.workspace) == (world.a, "proj-a")
    # B's researcher is offered neither A nor A's runs.
    html = page_as(world.bob).post(reverse("annotation:studies"), {**body, "name": "other"}).content.decode()
    assert "Select a valid choice" in html and not Study.objects.filter(name="other").exists()


def test_the_export_page_keeps_to_the_callers_projects(world):
    download = reverse("annotation:export-download", args=[world.config.pk, "yaml"])
    assert page_as(world.bob).get(download).status_code == 404
    assert page_as(world.vic).get(download).status_code == 200
    assert world.config.config_hash[:16] not in page_as(world.bob).get(reverse("annotation:exports")).content.decode()
    assert page_as(world.bob).post(reverse("annotation:exports"), {"project": "proj-a"}).status_code == 404
    assert page_as(world.vic).post(reverse("annotation:exports"), {"project": "proj-a"}).status_code == 403
    response = page_as(world.rita).post(reverse("annotation:exports"), {"project": "proj-a", "name": "again"})
    assert response.status_code == 302 and BenchmarkConfig.objects.get(name="again").project == world.a


# --- commands --------------------------------------------------------------------------------------


def test_commands_act_as_the_named_user(world):
    with pytest.raises(CommandError, match="no study 'study-a'"):
        call_command("study", "status", "study-a", "--as", "bob-b", stdout=StringIO())
    out = StringIO()
    call_command("study", "status", "study-a", "--as", "vic-a", stdout=out)
    assert "study-a v1" in out.getvalue()
    with pytest.raises(CommandError, match="only read project 'proj-a'"):
        call_command("study", "gate", "study-a", "--as", "vic-a")
    with pytest.raises(CommandError, match="no flag"):
        call_command("study", "review", str(world.flag.pk), "dismissed", "--as", "bob-b")
    with pytest.raises(CommandError, match="no transformation runs"):
        call_command("study", "create", "cli-b", "--runs", str(world.run_a.pk), "--as", "bob-b")
    roster_at_least(world.a, StudyDesign().raters_per_item)  # the default design's raters (issue 43)
    out = StringIO()
    call_command(
        "study",
        "create",
        "cli-a",
        "--runs",
        str(world.run_a.pk),
        "--as",
        "rita-a",
        "--project",
        "proj-a",
        "--design",
        '{"items_per_transformation": 6}',
        stdout=out,
    )
    assert Study.objects.get(name="cli-a").workspace == "proj-a" and "in project proj-a" in out.getvalue()
    with pytest.raises(CommandError, match="no studies"):
        call_command("benchmark_config", "export", "--out", "x.json", "--study", str(world.study_a.pk), "--as", "bob-b")
    with pytest.raises(CommandError, match="several projects"):
        _approved_gate(world.study_b, world.bob)
        call_command("benchmark_config", "export", "--out", "x.json")


def test_baselines_keep_to_their_project(world, tmp_path):
    demo_a, demo_b = Dataset.objects.get(name="demo-a"), Dataset.objects.get(name="demo-b")
    with pytest.raises(ShiftlabError, match="the baseline's dataset must be in the same project"):
        baseline_create(
            request=BaselineCreateRequest(
                name="bl-mixed", dataset=demo_a, task_type="sts", n_instances=3, project=world.b.slug
            )
        )
    study = baseline_create(
        request=BaselineCreateRequest(name="bl-a", dataset=demo_a, task_type="sts", n_instances=3, project=world.a.slug)
    )
    assert (study.project, study.workspace) == (world.a, "proj-a")
    demo_a.shared = True
    demo_a.save(update_fields=["shared"])
    shared = baseline_create(
        request=BaselineCreateRequest(
            name="bl-shared", dataset=demo_a, task_type="sts", n_instances=3, project=world.b.slug
        )
    )
    assert shared.workspace == "proj-b"
    with pytest.raises(CommandError, match="no dataset 'demo-b'"):
        call_command("baseline", "create", "bl-x", "--dataset", "demo-b", "--task", "sts", "-n", "3", "--as", "rita-a")
    with pytest.raises(CommandError, match="no baseline study 'bl-a'"):
        call_command("baseline", "status", "bl-a", "--as", "bob-b")
    with pytest.raises(CommandError, match="only read project 'proj-a'"):
        call_command("baseline", "close", "bl-a", "--as", "vic-a")
    out = StringIO()
    call_command("baseline", "status", "--as", "bob-b", stdout=out)
    assert "bl-shared" in out.getvalue() and "bl-a " not in out.getvalue()
    call_command(
        "baseline", "create", "bl-cli", "--dataset", "demo-b", "--task", "sts", "-n", "3", "--as", "bob-b", stdout=out
    )
    created = BaselineStudy.objects.get(name="bl-cli")
    assert (created.project, created.workspace, demo_b.project) == (world.b, "proj-b", world.b)


def test_a_researcher_of_two_projects_gets_the_runs_project_without_naming_one(world):
    """Several projects are no reason to ask when the runs say which (core.projects.project_for_new)."""
    membership_set(project=world.b, user=world.rita, role="member", actor=None)
    body = {"name": "by-runs", "runs": [world.run_a.pk], "design": DESIGN.to_dict()}
    created = api_as(world.rita).post("/api/studies/", body, format="json")
    assert created.status_code == 201, created.content
    assert created.json()["project"] == "proj-a"
