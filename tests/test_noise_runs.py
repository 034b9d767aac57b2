"""Noise transformations as runs (issue 30): no LLM, one run per severity, the row language picks
the keyboard layout, outputs stored exactly as computed, and the same outputs in a second run."""

from __future__ import annotations

import csv
import io

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.urls import reverse

from annotation.models import StudyItem
from annotation.science.design import StudyDesign
from annotation.studies.design_services import StudyCreateRequest, study_create, study_lock
from core.errors import ShiftlabError
from core.roles import Role
from corpora.services import ImportOptions, dataset_import
from tests.support import FEW_CONTROLS_OVERRIDE, api_as, make_user, page_as, rostered
from transforms.chunk_services import transform_run_execute_inline
from transforms.keyboards import LAYOUTS
from transforms.models import TransformedItem, TransformRun
from transforms.registry import TRANSFORMATIONS, Axis
from transforms.services import TransformRunsStartRequest, transform_runs_start

pytestmark = pytest.mark.django_db

GERMAN = [
    ("de-1", "Der Zug nach Zürich fährt jeden Morgen pünktlich ab.", "Jeden Morgen fährt der Zug nach Zürich."),
    ("de-2", "Die Bäckerei öffnet um sieben Uhr.", "Um sieben Uhr macht die Bäckerei auf."),
    ("de-3", "Zwölf Boxkämpfer jagen Viktor quer über den Sylter Deich.", "Viktor wird gejagt."),
]


@pytest.fixture
def german(tmp_path):
    path = tmp_path / "de-sts.csv"
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["id", "sentence1", "sentence2", "score"])
        writer.writerows([(*row, 3.0) for row in GERMAN])
    return dataset_import(source=path, task="sts", name="de-sts", options=ImportOptions(language="de"))


def _outputs(run: TransformRun) -> dict[tuple[str, str], str]:
    return {
        (t.item.item_id, t.side): t.output_text for t in TransformedItem.objects.filter(run=run).select_related("item")
    }


def test_a_noise_kind_runs_once_per_severity_without_an_llm(german):
    runs = transform_runs_start(
        actor=None,
        request=TransformRunsStartRequest(
            project=None, dataset="de-sts", transformation="typos", severities=[5, 20], seed=4
        ),
    )
    assert [r.transformation for r in runs] == ["typos_5", "typos_20"]
    assert TRANSFORMATIONS["typos_20"].axis is Axis.NOISE
    done = [transform_run_execute_inline(run_id=r.pk) for r in runs]
    assert all(r.status == TransformRun.Status.SUCCEEDED and r.llm_calls == 0 for r in done)
    items = TransformedItem.objects.filter(run=done[1])
    assert items.count() == 6 and all(i.ok and i.error_type == "" for i in items)
    qwertz, qwerty = LAYOUTS["qwertz"].letters, LAYOUTS["qwerty"].letters
    german_only = (qwertz - qwerty) | {"y", "z"}  # ü ö ä, and y/z which swap places on QWERTZ
    changed = set()
    for item in items:
        assert item.output_text != item.source_text and item.edit_distance > 0
        for a, b in zip(item.source_text, item.output_text, strict=True):
            if a != b:
                changed.add(b.lower())
                assert b.lower() in qwertz  # only keys of the German layout are typed
    # A German keyboard's neighbours show up (z beside t and u; ü, ö, ä on the right of it).
    assert changed & german_only

    again = transform_runs_start(
        actor=None,
        request=TransformRunsStartRequest(
            project=None, dataset="de-sts", transformation="typos_20", seed=4, severities=None
        ),
    )
    # A second run with the same seed types the same typos; another seed types others.
    other = transform_runs_start(
        actor=None, request=TransformRunsStartRequest(project=None, dataset="de-sts", transformation="typos_20", seed=5)
    )
    assert _outputs(transform_run_execute_inline(run_id=again[0].pk)) == _outputs(done[1])
    assert _outputs(transform_run_execute_inline(run_id=other[0].pk)) != _outputs(done[1])


def test_severities_are_refused_where_they_do_not_apply(german):
    with pytest.raises(ShiftlabError, match="no severity 7% for typos: choose among 2, 5, 10, 20"):
        transform_runs_start(
            actor=None,
            request=TransformRunsStartRequest(project=None, dataset="de-sts", transformation="typos", severities=[7]),
        )
    with pytest.raises(ShiftlabError, match="severities apply to the noise kinds"):
        transform_runs_start(
            actor=None,
            request=TransformRunsStartRequest(
                project=None, dataset="de-sts", transformation="paraphrase", severities=[5]
            ),
        )


def test_the_command_takes_a_kind_and_severities(german):
    out = io.StringIO()
    call_command("transform", "--dataset", "de-sts", "--transformation", "casing", "--severities", "2,10", stdout=out)
    assert "casing_2 on de-sts" in out.getvalue() and "casing_10 on de-sts" in out.getvalue()
    with pytest.raises(CommandError, match="whole percentages"):
        call_command("transform", "--dataset", "de-sts", "--transformation", "casing", "--severities", "2.5")


DEMO_STS = settings.BASE_DIR / "fixtures/sts/demo-sts.csv"


def _locked_noise_study(user_model, transformation: str):
    """A study of a seed-1 run of ``transformation`` over the demo STS pairs, locked by a researcher."""
    dataset_import(source=DEMO_STS, task="sts", name="demo-sts")
    (run,) = transform_runs_start(
        actor=None,
        request=TransformRunsStartRequest(project=None, dataset="demo-sts", transformation=transformation, seed=1),
    )
    transform_run_execute_inline(run_id=run.pk)
    rita = make_user(user_model, "rita", Role.RESEARCHER)
    design = StudyDesign(
        items_per_transformation=6,
        raters_per_item=2,
        batch_size=4,
        controls_per_batch=2,
        llm_judges=(),
        seed=3,
        detectability_override=FEW_CONTROLS_OVERRIDE,
    )
    return run, study_lock(
        study=study_create(
            actor=rita,
            request=rostered(
                StudyCreateRequest(name=f"{transformation.replace('_', '-')}-study", runs=[run], design=design)
            ),
        )
    )


def test_a_study_takes_a_noise_run_like_any_other(django_user_model):
    """Noise keeps the human gate of every transformation: a study of a typos run locks with its
    real items and controls, so a researcher can rate it and approve it for a config."""
    run, study = _locked_noise_study(django_user_model, "typos_10")
    real = StudyItem.objects.filter(study=study, kind="real")
    assert real.count() == 6
    assert all(i.transformed_item.run_id == run.pk for i in real)
    # Its controls carry the same noise (clean text would give them away): no text B is a text of
    # the dataset as written; positives expect the meaning kept and no fluency, negatives the
    # meaning lost.
    controls = list(StudyItem.objects.filter(study=study).exclude(kind="real"))
    fixture = DEMO_STS.read_text(encoding="utf-8")
    clean = {row[field] for row in csv.DictReader(io.StringIO(fixture)) for field in ("sentence1", "sentence2")}
    assert controls and not {c.text_b for c in controls} & clean
    assert {c.kind: c.expected for c in controls} == {"easy_positive": {"quality": 5}, "easy_negative": {"quality": 1}}


def test_positive_controls_of_heavy_noise_keep_the_look_and_check_nothing(django_user_model):
    """At 20% whether the meaning survives is the study's question: its easy positives are shown
    with the noise but expect no answer; its easy negatives still expect the meaning lost."""
    _, study = _locked_noise_study(django_user_model, "typos_20")
    controls = StudyItem.objects.filter(study=study).exclude(kind="real")
    positives = [c for c in controls if c.kind == "easy_positive"]
    assert positives and all(c.expected == {} and c.text_a != c.text_b for c in positives)
    assert all(c.expected == {"quality": 1} for c in controls if c.kind == "easy_negative")


def test_page_api_and_command_take_the_same_severities(german, django_user_model):
    """One front door: a noise kind at severities 2 and 10 gives the same two runs through the
    page, the API and the command, and a level that is not offered the same refusal."""
    rita = make_user(django_user_model, "rita", Role.RESEARCHER)
    body = {"dataset": "de-sts", "transformation": "ocr", "backend": "default"}
    page = page_as(rita).post(reverse("transforms:runs"), body | {"seed": 11, "severities": ["2", "10"]})
    assert page.status_code == 302, page.content
    api = api_as(rita).post("/api/transform-runs/", body | {"seed": 12, "severities": [2, 10]}, format="json")
    assert api.status_code == 202, api.content
    call_command(
        "transform",
        *("--dataset", "de-sts", "--transformation", "ocr", "--severities", "2,10", "--seed", "13"),
        "--as",
        "rita",
        stdout=io.StringIO(),
    )
    made = sorted(TransformRun.objects.filter(seed__in=[11, 12, 13]).values_list("seed", "transformation"))
    assert made == [(s, t) for s in (11, 12, 13) for t in ("ocr_10", "ocr_2")]
    refusal = "no severity 7% for ocr: choose among 2, 5, 10, 20"
    api = api_as(rita).post("/api/transform-runs/", body | {"severities": [7]}, format="json")
    assert api.status_code == 400 and refusal in str(api.json())
    page = page_as(rita).post(reverse("transforms:runs"), body | {"severities": ["7"]})
    assert page.status_code == 200 and "Select a valid choice" in page.content.decode()
    with pytest.raises(CommandError, match=refusal):
        call_command("transform", "--dataset", "de-sts", "--transformation", "ocr", "--severities", "7", "--as", "rita")
