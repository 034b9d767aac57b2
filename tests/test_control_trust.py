"""Controls an adversary could exploit (issue 27, items 3 and 4): drawn from another project, shown
twice to one annotator, a real item of an earlier study coming back as a control, expected answers
taken from a single careless rater, sentences among keyword lists, and a lock that went ahead with
detectable controls. Random-keyword runs (no LLM) over the demo datasets, real database."""

import json
from datetime import UTC, datetime
from io import StringIO

import pytest
from django.conf import settings
from django.core.management import call_command

from annotation.configs.config_schema import config_read
from annotation.export_services import BenchmarkConfigExportRequest, benchmark_config_export
from annotation.kinds import ItemKind
from annotation.models import Annotator, Approval, Assignment, GateResult, Rating, Study
from annotation.science.design import StudyDesign
from annotation.studies.assignment_services import study_assign
from annotation.studies.control_pool import control_pool_read
from annotation.studies.design_services import (
    StudyCreateRequest,
    StudyReviseRequest,
    study_create,
    study_lock,
    study_revise,
)
from core.errors import ShiftlabError
from core.models import AuditEvent, Project
from core.roles import Role
from corpora.services import dataset_import, dataset_trust_for_controls
from tests.support import FEW_CONTROLS_OVERRIDE, eager_keyword_run, make_user, page_as, rostered

pytestmark = pytest.mark.django_db
FIXTURES = settings.BASE_DIR / "fixtures"
AT = datetime(2026, 1, 1, tzinfo=UTC)
# Studies of 4 items have 1 or 2 easy positives: too few to estimate their detectability, which
# these tests do not measure (issue 39: such a lock needs the recorded override).
FEW = FEW_CONTROLS_OVERRIDE

# Easy positives that any reader tells from keyword lists: whole sentences.
SENTENCES = [
    ("The museum is closed on Mondays for cleaning.", "On Mondays the museum does not open, as it is cleaned."),
    ("Heavy rain flooded the road to the harbour.", "The road to the harbour was flooded by heavy rain."),
    ("She left her keys at the office yesterday.", "Yesterday she forgot her keys at work."),
    ("The bakery opens at six every morning.", "Every morning the bakery opens its doors at six."),
    ("Our train was delayed by an hour.", "The train we took arrived an hour late."),
    ("He repaired the old bicycle in his garage.", "In his garage he fixed the old bike."),
    ("The children planted tomatoes in the garden.", "Tomatoes were planted in the garden by the kids."),
]


def demo_sts(project=None, name="demo-sts"):
    return dataset_import(source=FIXTURES / "sts/demo-sts.csv", task="sts", name=name, project=project)


def paraphrase_pairs(project=None):
    return dataset_import(
        source=FIXTURES / "pair_classification/demo-paraphrase-pairs.jsonl",
        task="pair_classification",
        name="demo-paraphrase-pairs",
        project=project,
    )


def draft(name, run, **design):
    values = {"items_per_transformation": 6, "batch_size": 3, "controls_per_batch": 2, "llm_judges": (), "seed": 3}
    return study_create(
        actor=None,
        request=rostered(StudyCreateRequest(name=name, runs=[run], design=StudyDesign(**{**values, **design}))),
    )


def pairs(study, kinds=(ItemKind.EASY_POSITIVE, ItemKind.EASY_NEGATIVE)):
    return {(i.text_a, i.text_b) for i in study.items.filter(kind__in=kinds)}


def texts(rows):
    return {t for pair in rows for t in pair}


def test_controls_come_only_from_the_studys_own_project_or_shared_datasets_it_trusts():
    alpha = Project.objects.create(slug="alpha", name="Alpha")
    beta = Project.objects.create(slug="beta", name="Beta")
    closed = paraphrase_pairs(project=alpha)  # alpha's, not shared
    alpha_texts = {t for item in closed.items.all() for t in item.payload.values() if isinstance(t, str)}
    run = eager_keyword_run(demo_sts(project=beta), limit=30)
    # demo-sts alone has too few gold pairs for 6 easy positives: only alpha's dataset could help.
    study = draft("beta-study", run, items_per_transformation=30, batch_size=5)
    assert study.project == beta
    with pytest.raises(ShiftlabError) as raised:
        study_lock(study=study)
    assert "easy positive controls with both texts in en are needed" in str(raised.value)
    assert "demo-paraphrase-pairs" not in str(raised.value)
    study.refresh_from_db()
    assert not study.items.exists() and not texts(pairs(study)) & alpha_texts

    closed.shared = True  # shared on purpose: every project may read it, but not yet take controls from it
    closed.save(update_fields=["shared"])
    with pytest.raises(ShiftlabError) as raised:
        study_lock(study=study)
    assert "demo-paraphrase-pairs of project alpha" in str(raised.value)  # now readable, so named
    assert "manage.py corpora trust demo-paraphrase-pairs --of alpha --project beta" in str(raised.value)
    dataset_trust_for_controls(actor=None, project=beta, dataset=closed, trusted=True)  # beta chose it
    study = study_lock(study=study)
    assert study.sample_info["control_sources"]["easy_positive"].get("gold:demo-paraphrase-pairs", 0) > 0


def test_a_control_is_never_shown_twice_to_one_annotator_across_studies(django_user_model):
    ann = make_user(django_user_model, "ann", Role.ANNOTATOR)
    run = eager_keyword_run(demo_sts(), limit=8)
    design = {
        "items_per_transformation": 4,
        "batch_size": 4,
        "controls_per_batch": 2,
        "raters_per_item": 1,
        "detectability_override": FEW,
    }
    first = study_lock(study=draft("first", run, **design))
    study_assign(study=first, users=[ann], actor=None)
    # A revision of the same study (same design and seed) used to draw the very same controls.
    second = study_lock(study=study_revise(request=StudyReviseRequest(study=first)))
    study_assign(study=second, users=[ann], actor=None)

    def seen(study):
        rows = Assignment.objects.filter(annotator__study=study, annotator__user=ann).exclude(
            study_item__kind=ItemKind.REAL
        )
        return {(a.study_item.text_a, a.study_item.text_b) for a in rows.select_related("study_item")}

    assert seen(first) and seen(second)
    assert not texts(seen(first)) & texts(seen(second))


def test_assignment_skips_controls_an_annotator_met_in_another_study(django_user_model):
    """Even when a study holds controls an annotator met elsewhere, that annotator does not get them."""
    ann = make_user(django_user_model, "ann", Role.ANNOTATOR)
    bob = make_user(django_user_model, "bob", Role.ANNOTATOR)
    paraphrase_pairs()  # enough gold pairs for 8 controls
    run = eager_keyword_run(demo_sts(), limit=8)
    design = {
        "items_per_transformation": 4,
        "batch_size": 4,
        "controls_per_batch": 2,
        "raters_per_item": 1,
        "detectability_override": FEW,
    }
    first = study_lock(study=draft("one", run, **design))
    study_assign(study=first, users=[ann], actor=None)
    met = {
        a.study_item.kind: (a.study_item.text_a, a.study_item.text_b)
        for a in Assignment.objects.filter(annotator__study=first).select_related("study_item")
        if a.study_item.kind != ItemKind.REAL
    }
    # A second study with 8 controls (batches of one item); ann and bob each need 4. Half of them
    # are planted copies of what ann met in the first study.
    second = study_lock(study=draft("two", run, **{**design, "batch_size": 1}))
    planted = []
    for kind in (ItemKind.EASY_POSITIVE, ItemKind.EASY_NEGATIVE):
        for item in second.items.filter(kind=kind).order_by("position")[:2]:
            text_a, text_b = met[kind]
            second.items.filter(pk=item.pk).update(text_a=text_a, text_b=text_b)
            planted.append(item.pk)
    study_assign(study=second, users=[ann, bob], actor=None)
    mine = set(
        Assignment.objects.filter(annotator__study=second, annotator__user=ann).values_list("study_item_id", flat=True)
    )
    assert not mine & set(planted)
    controls = set(second.items.exclude(kind=ItemKind.REAL).values_list("pk", flat=True))
    assert len(mine & controls) == 4  # still the full share: two batches, two controls each


def test_real_items_of_an_earlier_study_never_become_controls(django_user_model, tmp_path):
    sts = demo_sts()
    earlier = study_lock(
        study=draft("earlier", eager_keyword_run(sts, limit=8), items_per_transformation=4, detectability_override=FEW)
    )
    rita = make_user(django_user_model, "rita", Role.RESEARCHER)
    raters = [
        Annotator.objects.create(
            study=earlier, user=make_user(django_user_model, n, Role.ANNOTATOR), control_status="passed"
        )
        for n in ("ann", "bob", "cid")
    ]
    real = list(earlier.items.filter(kind=ItemKind.REAL).order_by("position"))
    for item in real:
        for rater in raters:
            for question in ("quality", "fluency"):
                Rating.objects.create(study_item=item, annotator=rater, question=question, value=5, submitted_at=AT)
    result = GateResult.objects.create(
        study=earlier, transformation="random_keywords", passed=True, evidence={}, evidence_hash="0" * 64
    )
    Approval.objects.create(gate_result=result, decision="approve", comment="ok", decided_by=rita)
    # The researcher's pool names one of those real pairs too: it is refused as a control.
    pool = tmp_path / "pool.jsonl"
    pool.write_text(json.dumps({"text_a": real[0].text_a, "text_b": real[0].text_b, "kind": "easy_positive"}) + "\n")
    later = study_lock(
        study=draft(
            "later",
            eager_keyword_run(sts, limit=20, seed=2),
            items_per_transformation=4,
            batch_size=2,
            detectability_override=FEW,
        ),
        control_pool=control_pool_read(pool),
    )
    earlier_real = {(i.text_a, i.text_b) for i in real}
    assert not pairs(later) & earlier_real
    assert not {t for i in real for t in (i.text_b,)} & texts(pairs(later))
    assert "validated" not in json.dumps(later.sample_info["control_sources"])


def test_a_single_careless_raters_answers_never_become_expected_answers(django_user_model):
    sts = demo_sts()
    pilot = study_lock(
        study=draft(
            "pilot",
            eager_keyword_run(sts, limit=8),
            items_per_transformation=4,
            raters_per_item=1,
            detectability_override=FEW,
        )
    )
    rita = make_user(django_user_model, "rita", Role.RESEARCHER)
    careless = Annotator.objects.create(
        study=pilot, user=make_user(django_user_model, "careless", Role.ANNOTATOR), control_status="passed"
    )
    rated = list(pilot.items.filter(kind=ItemKind.REAL))
    for item in rated:  # fluency 5 for "A, child, with": one rater, no one to agree with
        for question in ("quality", "fluency"):
            Rating.objects.create(study_item=item, annotator=careless, question=question, value=5, submitted_at=AT)
    result = GateResult.objects.create(
        study=pilot, transformation="random_keywords", passed=True, evidence={}, evidence_hash="0" * 64
    )
    Approval.objects.create(gate_result=result, decision="approve", comment="ok", decided_by=rita)
    later = study_lock(
        study=draft(
            "after-pilot",
            eager_keyword_run(sts, limit=20, seed=2),
            items_per_transformation=4,
            batch_size=2,
            detectability_override=FEW,
        )
    )
    assert not pairs(later) & {(i.text_a, i.text_b) for i in rated}
    for control in later.items.filter(kind=ItemKind.EASY_POSITIVE):
        assert "fluency" not in control.expected  # a keyword list has no fluency to expect


def test_keyword_study_controls_are_keyword_lists_like_its_real_items():
    paraphrase_pairs()
    study = study_lock(
        study=draft("keywords", eager_keyword_run(demo_sts(), limit=30), items_per_transformation=30, batch_size=5)
    )
    real = list(study.items.filter(kind=ItemKind.REAL))
    assert all("," in r.text_b and not r.text_b.rstrip().endswith(".") for r in real)
    controls = list(study.items.exclude(kind=ItemKind.REAL))
    assert controls
    for control in controls:
        assert "," in control.text_b, control.text_b
        assert not control.text_b.rstrip().endswith((".", "!", "?")), control.text_b
    auc = study.sample_info["detectability_by_transformation"]["random_keywords"]["easy_positive"]["auc"]
    assert auc is not None and auc <= 0.75


def test_lock_is_refused_when_controls_are_detectable_and_an_override_is_recorded(django_user_model, tmp_path):
    rita = make_user(django_user_model, "rita", Role.RESEARCHER)
    sentences = SENTENCES
    pool = tmp_path / "pool.jsonl"
    pool.write_text(
        "".join(json.dumps({"text_a": a, "text_b": b, "kind": "easy_positive"}) + "\n" for a, b in sentences)
    )
    run = eager_keyword_run(demo_sts(), limit=30)
    design = {"items_per_transformation": 24, "batch_size": 4, "controls_per_batch": 2}
    study = draft("detectable", run, **design)
    with pytest.raises(ShiftlabError) as raised:
        study_lock(study=study, control_pool=control_pool_read(pool), actor=rita)
    message = str(raised.value)
    assert "random_keywords" in message and "0.75" in message
    assert "detectability_override" in message and "control pool" in message
    study.refresh_from_db()
    assert study.status == Study.Status.DRAFT and not study.items.exists()

    override = "pilot: the keyword controls are being built, ratings of this study are not used for a gate yet"
    study = draft("detectable-ok", run, **design, detectability_override=override)
    study = study_lock(study=study, control_pool=control_pool_read(pool), actor=rita)
    assert study.status == Study.Status.LOCKED
    assert study.design["detectability_override"] == override
    recorded = study.sample_info["detectability_override"]
    assert recorded["reason"] == override and recorded["over_limit"]["random_keywords"] > 0.75
    entry = AuditEvent.objects.get(verb="study.lock", object_id=str(study.pk))
    assert entry.payload["sample"]["detectability_override"]["reason"] == override
    out = StringIO()
    call_command("study", "status", "detectable-ok", stdout=out)
    assert "Random keywords: easy positives" in out.getvalue()
    assert "locked with detectable controls" in out.getvalue() and override in out.getvalue()
    page = page_as(rita).get(f"/annotation/studies/{study.pk}/").content.decode()
    assert "locked with detectable controls" in page and "Random keywords: easy positives" in page

    result = GateResult.objects.create(
        study=study, transformation="random_keywords", passed=True, evidence={}, evidence_hash="0" * 64
    )
    Approval.objects.create(gate_result=result, decision="approve", comment="ok", decided_by=rita)
    config = benchmark_config_export(actor=rita, request=BenchmarkConfigExportRequest(studies=[study]))
    exported = config.document["transformations"][0]["study"]
    assert exported["detectability_override"]["reason"] == override
    assert exported["detectability_override"]["over_limit"]["random_keywords"] > 0.75
    read = config_read(config.document)
    assert read.transformations[0].study.detectability_override["reason"] == override


def test_the_design_form_takes_the_detectability_limit_and_an_override():
    from annotation.forms import StudyDesignForm

    base = StudyDesign(llm_judges=())
    form = StudyDesignForm(base=base)
    assert form.fields["detectability_limit"].initial == 0.75
    data = {name: value for name, value in base.to_dict().items() if name != "llm_judges"}
    data.update(detectability_limit="0.7", detectability_override="pilot with a hand-made pool, checked by eye")
    form = StudyDesignForm(data=data, base=base)
    assert form.is_valid(), form.errors
    design = form.design()
    assert (design.detectability_limit, design.detectability_override) == (0.7, data["detectability_override"])
    assert design.to_dict()["detectability_override"] == data["detectability_override"]
    # Left at their defaults the new fields stay out of the design's dict, so older designs keep their hash.
    assert "detectability_limit" not in base.to_dict() and "detectability_override" not in base.to_dict()
    form = StudyDesignForm(data={**data, "detectability_override": "because"}, base=base)
    assert not form.is_valid() and "at least 10 characters" in str(form.errors["detectability_override"])
