"""Control items nobody can plant or leak (issue 39, findings 2, 3 and 10): a shared dataset of
another project supplies a project's controls only once that project's owner (or an admin) trusts
it, audited; a lock without enough controls to estimate their detectability needs the recorded
override a detectable lock needs; an annotator never gets a control holding a text they rated as a
real item. Random-keyword runs (no LLM) over the demo datasets, real database."""

import json
from io import StringIO

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from annotation.kinds import ItemKind
from annotation.models import Assignment, Study
from annotation.studies.assignment_services import study_assign
from annotation.studies.control_pool import control_pool_read
from annotation.studies.design_services import study_lock
from core.errors import ShiftlabError
from core.models import AuditEvent, Membership, Project
from core.projects import ProjectAccessError
from core.roles import Role
from corpora.models import ControlTrust
from corpora.services import dataset_import, dataset_share_set, dataset_trust_for_controls
from tests.support import eager_keyword_run, make_user, page_as
from tests.test_control_trust import SENTENCES, demo_sts, draft

pytestmark = pytest.mark.django_db
FIXTURES = settings.BASE_DIR / "fixtures"
OVERRIDE = "test study: too few items to estimate how detectable its controls are"


def gold_pairs(project, name="gold-pairs"):
    return dataset_import(
        source=FIXTURES / "pair_classification/demo-paraphrase-pairs.jsonl",
        task="pair_classification",
        name=name,
        project=project,
    )


def control_texts(study):
    return {t for i in study.items.exclude(kind=ItemKind.REAL) for t in (i.text_a, i.text_b)}


@pytest.fixture
def teams(django_user_model):
    beta, gamma = Project.objects.create(slug="beta", name="Beta"), Project.objects.create(slug="gamma", name="Gamma")
    bea = make_user(django_user_model, "bea", Role.RESEARCHER)  # beta's researcher: cannot see gamma
    gus = make_user(django_user_model, "gus", Role.RESEARCHER)  # gamma's owner
    gil = make_user(django_user_model, "gil", Role.RESEARCHER)  # gamma's member, not an owner
    Membership.objects.create(project=beta, user=bea, role=Membership.Role.OWNER)
    Membership.objects.create(project=gamma, user=gus, role=Membership.Role.OWNER)
    Membership.objects.create(project=gamma, user=gil, role=Membership.Role.MEMBER)
    return {"beta": beta, "gamma": gamma, "bea": bea, "gus": gus, "gil": gil}


def test_a_shared_dataset_supplies_another_projects_controls_only_once_that_project_trusts_it(teams):
    beta, gamma, bea, gus = teams["beta"], teams["gamma"], teams["bea"], teams["gus"]
    planted = gold_pairs(beta, name="beta-gold")
    dataset_share_set(dataset=planted, shared=True, actor=bea)  # shared on purpose, by its own project
    planted_texts = {t for item in planted.items.all() for t in item.payload.values() if isinstance(t, str)}
    # demo-sts alone has too few gold pairs for 6 easy positives: only beta's shared dataset could help.
    study = draft(
        "gamma-study", eager_keyword_run(demo_sts(project=gamma), limit=30), items_per_transformation=30, batch_size=5
    )
    with pytest.raises(ShiftlabError) as raised:
        study_lock(study=study)
    message = str(raised.value)
    assert "easy positive controls with both texts in en are needed" in message
    # Actionable: names the left-out dataset and the command that would trust it.
    assert "beta-gold of project beta" in message
    assert "manage.py corpora trust beta-gold --of beta --project gamma" in message
    study.refresh_from_db()
    assert study.status == Study.Status.DRAFT and not study.items.exists()

    # beta's researcher cannot make gamma take beta's answers; nor can a member of gamma who is no owner.
    with pytest.raises(ProjectAccessError):
        dataset_trust_for_controls(actor=bea, project=gamma, dataset=planted, trusted=True)
    with pytest.raises(ProjectAccessError):
        dataset_trust_for_controls(actor=teams["gil"], project=gamma, dataset=planted, trusted=True)
    assert not ControlTrust.objects.exists()
    with pytest.raises(ShiftlabError):
        study_lock(study=study)

    trust = dataset_trust_for_controls(actor=gus, project=gamma, dataset=planted, trusted=True)
    assert (trust.project, trust.dataset, trust.granted_by) == (gamma, planted, gus)
    study = study_lock(study=study)
    assert study.sample_info["control_sources"]["easy_positive"].get("gold:beta-gold", 0) > 0
    assert control_texts(study) & planted_texts

    granted = AuditEvent.objects.get(verb="dataset.control_trust")
    assert (granted.project, granted.actor) == (gamma, gus)
    assert granted.payload["dataset"] == "beta-gold" and granted.payload["dataset_project"] == "beta"


def test_revoking_trust_or_unsharing_stops_the_dataset_supplying_controls(teams):
    beta, gamma, bea, gus = teams["beta"], teams["gamma"], teams["bea"], teams["gus"]
    planted = gold_pairs(beta, name="beta-gold")
    dataset_share_set(dataset=planted, shared=True, actor=bea)
    run = eager_keyword_run(demo_sts(project=gamma), limit=30)
    design = {"items_per_transformation": 30, "batch_size": 5}
    dataset_trust_for_controls(actor=gus, project=gamma, dataset=planted, trusted=True)
    assert dataset_trust_for_controls(actor=None, project=gamma, dataset=planted, trusted=False) is None  # the system
    assert not ControlTrust.objects.exists()
    revoked = AuditEvent.objects.get(verb="dataset.control_trust.revoke")
    assert revoked.project == gamma and revoked.actor is None
    with pytest.raises(ShiftlabError):
        study_lock(study=draft("after-revoke", run, **design))
    # Trusted again, then unshared by its own project: no longer a source either.
    dataset_trust_for_controls(actor=gus, project=gamma, dataset=planted, trusted=True)
    dataset_share_set(dataset=planted, shared=False, actor=bea)
    with pytest.raises(ShiftlabError):
        study_lock(study=draft("after-unshare", run, **design))
    assert AuditEvent.objects.filter(verb="dataset.control_trust").count() == 2
    # A dataset that is not shared cannot be trusted at all; a project's own needs no trust.
    with pytest.raises(ShiftlabError, match="is not shared"):
        dataset_trust_for_controls(actor=gus, project=gamma, dataset=gold_pairs(beta, name="closed"), trusted=True)
    with pytest.raises(ShiftlabError, match="own datasets supply its controls"):
        dataset_trust_for_controls(actor=gus, project=gamma, dataset=gold_pairs(gamma), trusted=True)


def test_the_trust_command(teams):
    planted = gold_pairs(teams["beta"], name="beta-gold")
    dataset_share_set(dataset=planted, shared=True, actor=teams["bea"])

    def command(*args):
        out = StringIO()
        call_command("corpora", "trust", *args, stdout=out)
        return out.getvalue()

    with pytest.raises(CommandError, match="No project 'gamma'"):
        command("beta-gold", "--project", "gamma", "--as", "bea")  # bea cannot even see gamma
    with pytest.raises(CommandError, match="Only admins and owners of 'gamma'"):
        command("beta-gold", "--project", "gamma", "--as", "gil")
    assert "gamma may draw control items" in command("beta-gold", "--project", "gamma", "--as", "gus")
    assert ControlTrust.objects.filter(project=teams["gamma"], dataset=planted).exists()
    assert "no longer draws" in command("beta-gold", "--project", "gamma", "--revoke", "--as", "gus")
    assert not ControlTrust.objects.exists()
    with pytest.raises(CommandError, match="No shared dataset named 'nothing'"):
        command("nothing", "--project", "gamma", "--as", "gus")
    verbs = list(AuditEvent.objects.filter(project=teams["gamma"]).values_list("verb", flat=True).order_by("pk"))
    assert verbs == ["dataset.control_trust", "dataset.control_trust.revoke"]


def test_an_owner_trusts_a_shared_dataset_from_the_project_page(teams):
    planted = gold_pairs(teams["beta"], name="beta-gold")
    dataset_share_set(dataset=planted, shared=True, actor=teams["bea"])
    trust = {"action": "control_trust", "trusted": "1", "dataset": planted.pk}
    page = page_as(teams["gus"]).get("/projects/gamma/").content.decode()
    assert "Control sources" in page and "Trust for controls" in page and "beta-gold" in page
    assert page_as(teams["gil"]).post("/projects/gamma/", trust).status_code == 403  # a member, no owner
    assert page_as(teams["bea"]).post("/projects/gamma/", trust).status_code == 404  # cannot see gamma
    assert not ControlTrust.objects.exists()
    response = page_as(teams["gus"]).post("/projects/gamma/", trust, follow=True)
    assert "gamma now draws control items from beta-gold of beta" in response.content.decode()
    assert ControlTrust.objects.get().granted_by == teams["gus"]
    page = page_as(teams["gil"]).get("/projects/gamma/").content.decode()
    assert "beta-gold" in page and "gus" in page and "Stop trusting" not in page  # members read who trusted it
    page_as(teams["gus"]).post("/projects/gamma/", {**trust, "trusted": "0"})
    assert not ControlTrust.objects.exists()
    verbs = list(AuditEvent.objects.filter(project=teams["gamma"]).values_list("verb", flat=True).order_by("pk"))
    assert verbs == ["dataset.control_trust", "dataset.control_trust.revoke"]


def test_too_few_controls_to_estimate_detectability_need_the_recorded_override(django_user_model, tmp_path):
    rita = make_user(django_user_model, "rita", Role.RESEARCHER)
    pool = tmp_path / "pool.jsonl"
    rows = [{"text_a": a, "text_b": b, "kind": "easy_positive"} for a, b in SENTENCES]
    pool.write_text("".join(json.dumps(row) + "\n" for row in rows))
    run = eager_keyword_run(demo_sts(), limit=30)
    design = {"items_per_transformation": 8, "batch_size": 2, "controls_per_batch": 2}  # 8 controls, 4 positives
    study = draft("few", run, **design)
    with pytest.raises(ShiftlabError) as raised:
        study_lock(study=study, control_pool=control_pool_read(pool), actor=rita)
    message = str(raised.value)
    assert "random_keywords: too few controls to estimate detectability (4 easy positives)" in message
    assert "detectability_override" in message
    study.refresh_from_db()
    assert study.status == Study.Status.DRAFT and not study.items.exists()

    study = study_lock(
        study=draft("few-ok", run, **design, detectability_override=OVERRIDE),
        control_pool=control_pool_read(pool),
        actor=rita,
    )
    assert study.status == Study.Status.LOCKED
    assert study.items.filter(kind=ItemKind.EASY_POSITIVE).count() == 4
    recorded = study.sample_info["detectability_override"]
    assert recorded["reason"] == OVERRIDE and recorded["over_limit"] == {}
    assert recorded["too_few"] == {"random_keywords": "too few controls to estimate detectability (4 easy positives)"}
    entry = AuditEvent.objects.get(verb="study.lock", object_id=str(study.pk))
    assert entry.payload["sample"]["detectability_override"]["too_few"] == recorded["too_few"]
    out = StringIO()
    call_command("study", "status", "few-ok", stdout=out)
    assert "locked without a detectability estimate" in out.getvalue() and OVERRIDE in out.getvalue()


def test_a_study_without_controls_has_nothing_to_detect():
    run = eager_keyword_run(demo_sts(), limit=8)
    study = study_lock(
        study=draft("none", run, items_per_transformation=4, controls_per_batch=0, min_control_ratings=0)
    )
    assert study.status == Study.Status.LOCKED and "detectability_override" not in study.sample_info


def _rated_for_real(django_user_model):
    """ann is assigned every real item of a first study; returns ann and those texts."""
    ann = make_user(django_user_model, "ann", Role.ANNOTATOR)
    run = eager_keyword_run(demo_sts(), limit=8)
    first = study_lock(
        study=draft(
            "first", run, items_per_transformation=4, batch_size=4, raters_per_item=1, detectability_override=OVERRIDE
        )
    )
    study_assign(study=first, users=[ann], actor=None)
    real = first.items.filter(kind=ItemKind.REAL).order_by("position")
    assert set(
        Assignment.objects.filter(annotator__user=ann, study_item__kind=ItemKind.REAL).values_list(
            "study_item_id", flat=True
        )
    ) == {i.pk for i in real}
    return ann, run.dataset, [(i.text_a, i.text_b) for i in real]


def _plant(study, seen, count):
    """Put texts the annotator rated for real into ``count`` controls of ``study``, changed only in
    case and spacing, on either side."""
    planted = []
    for n, item in enumerate(study.items.exclude(kind=ItemKind.REAL).order_by("position")[:count]):
        text_a, text_b = seen[n % len(seen)]
        if n % 2:
            study.items.filter(pk=item.pk).update(text_b=f"  {text_b.upper()} ")
        else:
            study.items.filter(pk=item.pk).update(text_a=text_a.replace(" ", "  ").lower())
        planted.append(item.pk)
    return planted


def test_an_annotator_never_gets_a_control_with_a_text_they_rated_as_a_real_item(django_user_model):
    ann, sts, seen = _rated_for_real(django_user_model)
    bob = make_user(django_user_model, "bob", Role.ANNOTATOR)
    # 8 real items in batches of one with one control each: 8 controls, ann and bob need 4 each.
    second = study_lock(
        study=draft(
            "second",
            eager_keyword_run(sts, limit=20, seed=2),
            items_per_transformation=8,
            batch_size=1,
            controls_per_batch=1,
            raters_per_item=1,
            detectability_override=OVERRIDE,
        )
    )
    planted = _plant(second, seen, 4)
    study_assign(study=second, users=[ann, bob], actor=None)
    mine = set(
        Assignment.objects.filter(annotator__study=second, annotator__user=ann).values_list("study_item_id", flat=True)
    )
    assert not mine & set(planted)
    controls = set(second.items.exclude(kind=ItemKind.REAL).values_list("pk", flat=True))
    assert len(mine & controls) == 4  # still the full share


def test_assignment_refuses_when_only_controls_with_seen_texts_are_left(django_user_model):
    ann, sts, seen = _rated_for_real(django_user_model)
    second = study_lock(
        study=draft(
            "second",
            eager_keyword_run(sts, limit=20, seed=2),
            items_per_transformation=4,
            batch_size=4,
            raters_per_item=1,
            detectability_override=OVERRIDE,
        )
    )
    _plant(second, seen, 1)  # ann needs both controls; one holds a text she rated
    with pytest.raises(ShiftlabError) as raised:
        study_assign(study=second, users=[ann], actor=None)
    assert "as real items they rated" in str(raised.value)
    assert not Assignment.objects.filter(annotator__study=second).exists()
