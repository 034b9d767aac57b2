"""Control items drawn when a study is locked: where they come from, what they never reuse, the
refusal when none can be had, the pool file on the command line, and the detectability check.
Random-keyword runs (no LLM) over the demo datasets."""

import json
from datetime import UTC, datetime
from io import StringIO

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError

from annotation.kinds import ItemKind
from annotation.models import Study
from annotation.science.design import StudyDesign
from annotation.science.text_measures import is_punctuation_edit, looks_like_keywords
from annotation.studies.control_pool import control_pool_read
from annotation.studies.control_services import study_control_detectability
from annotation.studies.design_services import StudyCreateRequest, study_create, study_lock
from core.errors import ShiftlabError
from core.roles import Role
from corpora.services import dataset_import
from tests.support import FEW_CONTROLS_OVERRIDE, eager_keyword_run, make_user, rostered
from transforms.models import TransformedItem

pytestmark = pytest.mark.django_db
FIXTURES = settings.BASE_DIR / "fixtures"
AT = datetime(2026, 1, 1, tzinfo=UTC)


def demo_sts():
    return dataset_import(source=FIXTURES / "sts/demo-sts.csv", task="sts", name="demo-sts")


def draft(name, run, **design):
    # These studies have 1 to 6 easy positives: mostly too few to estimate their detectability, which
    # is not what these tests check; the lock then needs the recorded override (issue 39).
    values = {
        "items_per_transformation": 6,
        "batch_size": 3,
        "controls_per_batch": 2,
        "llm_judges": (),
        "seed": 3,
        "detectability_override": FEW_CONTROLS_OVERRIDE,
    }
    return study_create(
        actor=None,
        request=rostered(StudyCreateRequest(name=name, runs=[run], design=StudyDesign(**{**values, **design}))),
    )


def write_pool(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_controls_are_fresh_rewrites_and_unrelated_texts_never_seen_elsewhere_in_the_study():
    study = study_lock(study=draft("fresh", eager_keyword_run(demo_sts(), limit=8)))
    items = list(study.items.all())
    real = [i for i in items if i.kind == ItemKind.REAL]
    controls = [i for i in items if i.kind != ItemKind.REAL]
    assert len(controls) == 2 * -(-len(real) // 3) == 4
    assert sorted(c.kind for c in controls) == ["easy_negative"] * 2 + ["easy_positive"] * 2
    texts = [t for i in items for t in (i.text_a, i.text_b)]
    control_texts = [t for c in controls for t in (c.text_a, c.text_b)]
    assert all(texts.count(t) == 1 for t in control_texts)
    for c in controls:
        assert (c.language_a, c.language_b) == ("en", "en")
        # Shaped like the real items (keyword lists); a keyword list has no fluency to expect.
        assert looks_like_keywords(c.text_b), c.text_b
        if c.kind == ItemKind.EASY_POSITIVE:
            assert not is_punctuation_edit(c.text_a, c.text_b) and c.expected == {"quality": 5}
        else:
            assert c.expected == {"quality": 1}
    # Positives are demo-sts gold pairs (≥ 4.5 of 5); negatives pair held-back texts of the run.
    assert study.sample_info["control_sources"] == {
        "easy_negative": {"held_back:" + str(study.runs.get().pk): 2},
        "easy_positive": {"gold:demo-sts": 2},
    }
    # A second study of the project draws controls the first did not use while there are any.
    again = study_lock(study=draft("fresh-twin", study.runs.get()))
    reused = {t for c in again.items.exclude(kind=ItemKind.REAL) for t in (c.text_a, c.text_b)} & set(control_texts)
    assert len(reused) < len(control_texts)


def test_lock_refuses_without_positives_says_what_is_missing_and_writes_nothing(tmp_path):
    intents = dataset_import(source=FIXTURES / "classification/demo-intents", task="classification", name="intents")
    study = draft("no-gold", eager_keyword_run(intents, limit=20), items_per_transformation=8, batch_size=4)
    with pytest.raises(ShiftlabError) as raised:
        study_lock(study=study)
    message = str(raised.value)
    assert "2 easy positive controls with both texts in en are needed" in message
    assert "0 found (no source had any)" in message
    assert "--control-pool FILE" in message and "study lock no-gold@1" in message
    study.refresh_from_db()
    assert (study.status, study.locked_at, study.items.count()) == (Study.Status.DRAFT, None, 0)

    pool = write_pool(
        tmp_path / "pool.jsonl",
        [
            {
                "text_a": "I would like to close my account.",
                "text_b": "Please shut down my account.",
                "kind": "easy_positive",
            },
            {
                "text_a": "How do I change my PIN?",
                "text_b": "What is the way to set a new PIN?",
                "kind": "easy_positive",
            },
        ],
    )
    study = study_lock(study=study, control_pool=control_pool_read(pool))
    positives = study.items.filter(kind=ItemKind.EASY_POSITIVE)
    assert sorted(p.text_a for p in positives) == ["How do I change my PIN?", "I would like to close my account."]
    assert study.sample_info["control_sources"]["easy_positive"] == {"pool": 2}


def test_translation_studies_need_positives_in_their_language_pair(tmp_path):
    run = eager_keyword_run(demo_sts(), limit=8)
    # Pretend the run translated into German: real items become en→de.
    TransformedItem.objects.filter(run=run).update(target_language="de")
    study = draft("to-german", run)
    with pytest.raises(ShiftlabError, match="2 easy positive controls with text A in en and text B in de"):
        study_lock(study=study)
    pool = write_pool(
        tmp_path / "pool.jsonl",
        [
            {
                "text_a": f"The meeting starts at {h} o'clock.",
                "text_b": f"Die Besprechung beginnt um {h} Uhr.",
                "kind": "easy_positive",
                "language_a": "en",
                "language_b": "de",
            }
            for h in (9, 10, 11)
        ]
        + [{"text_a": "It is sunny.", "text_b": "The weather is fine and bright.", "kind": "easy_positive"}],
    )
    study = study_lock(study=study, control_pool=control_pool_read(pool))
    controls = study.items.exclude(kind=ItemKind.REAL)
    assert {(c.kind, c.language_a, c.language_b) for c in controls} == {
        ("easy_positive", "en", "de"),
        ("easy_negative", "en", "de"),
    }
    assert "It is sunny." not in {c.text_a for c in controls}  # a same-language pair does not fit


def test_command_locks_with_a_pool_and_status_prints_the_detectability(tmp_path):
    intents = dataset_import(source=FIXTURES / "classification/demo-intents", task="classification", name="intents")
    draft("cli", eager_keyword_run(intents, limit=20), items_per_transformation=8, batch_size=4)
    bad = write_pool(tmp_path / "bad.jsonl", [{"text_a": "Hi there.", "text_b": "hi there", "kind": "easy_positive"}])
    with pytest.raises(CommandError, match="line 1: text_b differs from text_a only in punctuation"):
        call_command("study", "lock", "cli", "--control-pool", str(bad))
    pool = write_pool(
        tmp_path / "pool.jsonl",
        [
            {"text_a": f"Where is branch number {k}?", "text_b": f"How do I find branch {k}?", "kind": "easy_positive"}
            for k in range(3)
        ],
    )
    out = StringIO()
    call_command("study", "lock", "cli", "--control-pool", str(pool), stdout=out)
    assert '"easy_positive": {"pool": 2}' in out.getvalue()
    with pytest.raises(CommandError, match="is locked: its controls are drawn"):
        call_command("study", "lock", "cli", "--control-pool", str(pool))
    out = StringIO()
    call_command("study", "status", "cli", stdout=out)
    assert (
        "Controls detectability (cross-validated AUC, 0.5 = indistinguishable): all n/a (needs at least 5 controls"
        in out.getvalue()
    )


def test_detectability_of_a_locked_study():
    # The study's own dataset has too few gold pairs left: the other English pair dataset helps.
    dataset_import(
        source=FIXTURES / "pair_classification/demo-paraphrase-pairs.jsonl",
        task="pair_classification",
        name="demo-paraphrase-pairs",
    )
    study = study_lock(
        study=draft("bigger", eager_keyword_run(demo_sts(), limit=30), items_per_transformation=30, batch_size=5)
    )
    # Keyword lists keep every content word of their text: demo-paraphrase-pairs has such short texts.
    assert study.sample_info["control_sources"]["easy_positive"] == {"gold:demo-paraphrase-pairs": 6}
    result = study_control_detectability(study=study)
    assert (result.all.n_controls, result.easy_positive.n_controls, result.all.n_real) == (12, 6, 30)
    assert result.all.auc is not None and 0 <= result.all.auc <= 1
    assert result == study_control_detectability(study=study)
    # Stored at lock; a study locked before that gets the same figures computed from its items.
    assert "detectability" in study.sample_info
    Study.objects.filter(pk=study.pk).update(
        sample_info={k: v for k, v in study.sample_info.items() if k != "detectability"}
    )
    assert study_control_detectability(study=Study.objects.get(pk=study.pk)) == result


def test_the_page_and_the_api_lock_with_an_uploaded_pool_and_show_the_refusal_without_one(client, django_user_model):
    from django.core.files.uploadedfile import SimpleUploadedFile
    from rest_framework.test import APIClient

    rita = make_user(django_user_model, "rita", Role.RESEARCHER)
    client.force_login(rita)
    intents = dataset_import(source=FIXTURES / "classification/demo-intents", task="classification", name="intents")
    run = eager_keyword_run(intents, limit=20)
    study = draft("page-pool", run, items_per_transformation=8, batch_size=4)
    refused = client.post(f"/annotation/studies/{study.pk}/", {"action": "lock"}, follow=True).content.decode()
    assert "easy positive controls with both texts in en are needed" in refused
    bad = SimpleUploadedFile("pool.jsonl", b'{"text_a": "a", "text_b": "", "kind": "easy_positive"}\n')
    answer = client.post(f"/annotation/studies/{study.pk}/", {"action": "lock", "control_pool": bad}, follow=True)
    assert "pool.jsonl" in answer.content.decode() and Study.objects.get(pk=study.pk).locked_at is None
    rows = [
        {
            "text_a": "I would like to close my account.",
            "text_b": "Please shut down my account.",
            "kind": "easy_positive",
        },
        {"text_a": "How do I change my PIN?", "text_b": "What is the way to set a new PIN?", "kind": "easy_positive"},
    ]
    good = "".join(json.dumps(r) + "\n" for r in rows).encode()
    client.post(
        f"/annotation/studies/{study.pk}/",
        {"action": "lock", "control_pool": SimpleUploadedFile("pool.jsonl", good)},
    )
    assert Study.objects.get(pk=study.pk).sample_info["control_sources"]["easy_positive"] == {"pool": 2}

    api = APIClient()
    api.force_authenticate(rita)
    other = draft("api-pool", run, items_per_transformation=8, batch_size=4)
    assert api.post(f"/api/studies/{other.pk}/lock/").status_code == 400
    locked = api.post(
        f"/api/studies/{other.pk}/lock/",
        {
            "control_pool": SimpleUploadedFile(
                "pool.csv",
                b"text_a,text_b,kind\n"
                + b"".join(f'"{r["text_a"]}","{r["text_b"]}",easy_positive\n'.encode() for r in rows),
            )
        },
        format="multipart",
    )
    assert locked.status_code == 200, locked.content
    assert Study.objects.get(pk=other.pk).sample_info["control_sources"]["easy_positive"] == {"pool": 2}


def test_the_same_seed_draws_the_same_study_whatever_the_row_ids(django_user_model):
    """Two projects, the same dataset file, the same run and design: the same items and controls,
    in the same order, although the second project's rows have other ids (a sample once sorted
    row ids as text, so "10" came before "9" and another database drew another study)."""
    from core.projects import project_create

    owner = make_user(django_user_model, "rita", Role.RESEARCHER)
    drawn = []
    for slug in ("seed-a", "seed-b"):
        project = project_create(slug=slug, owner=owner, actor=None)
        sts = dataset_import(source=FIXTURES / "sts/demo-sts.csv", task="sts", name="demo-sts", project=project)
        run = eager_keyword_run(sts, limit=40)
        design = StudyDesign(
            items_per_transformation=12,
            batch_size=4,
            controls_per_batch=1,
            llm_judges=(),
            seed=3,
            detectability_override=FEW_CONTROLS_OVERRIDE,
        )
        study = study_lock(
            study=study_create(
                actor=None,
                request=rostered(StudyCreateRequest(name="same", project=project.slug, runs=[run], design=design)),
            )
        )
        drawn.append([(i.kind, i.text_a, i.text_b) for i in study.items.order_by("position")])
    assert drawn[0] == drawn[1]
