"""Transformation runs end to end with the real embedded LLM (llama.cpp server + SmolLM2-135M).

SmolLM2 is tiny and often copies its input: the runs exercise error analysis and retries for
real. These tests assert the engine's behaviour (cache, calls, languages, idempotency), not the
quality of the small model's rewrites.
"""

from __future__ import annotations

import pytest
from django.conf import settings
from django.db.models import Count

from corpora.models import Dataset
from corpora.services import dataset_import
from transforms.backends import reset_backends
from transforms.chunk_services import transform_run_execute_chunk
from transforms.cleaning import clean_output
from transforms.error_checks import ErrorType
from transforms.export_services import transform_run_export
from transforms.models import Generation, TransformedItem, TransformRun
from transforms.params import GenerationParams
from transforms.prompt_services import prompt_template_active, prompt_template_create_version
from transforms.services import transform_run_create

pytestmark = pytest.mark.django_db
FAST = GenerationParams(temperature=0.7, max_tokens=48, max_attempts=2)


@pytest.fixture
def sts(db) -> Dataset:
    return dataset_import(source=settings.BASE_DIR / "fixtures/sts/demo-sts.csv", task="sts", name="demo-sts")


def run_now(dataset, transformation, *, seed=1337, limit=3, params=FAST, **kwargs) -> TransformRun:
    """Create a run and execute it in-process (eager Celery, as in the single-machine default)."""
    from transforms.tasks import start_run

    run = transform_run_create(
        dataset=dataset, transformation=transformation, seed=seed, limit=limit, params=params, dispatch=False, **kwargs
    )
    start_run.delay(run.pk)
    run.refresh_from_db()
    return run


def test_paraphrase_run_completes_and_rerun_hits_the_cache(llm_backend, sts):
    first = run_now(sts, "paraphrase")
    assert first.status == "succeeded" and first.done == first.total == 6
    assert first.llm_calls >= 6 and first.cache_hits == 0
    outputs = TransformedItem.objects.filter(run=first)
    assert outputs.count() == 6
    for out in outputs:
        assert out.attempts == len(out.attempt_errors) and 1 <= out.attempts <= 2
        if out.ok:
            assert out.output_text and out.error_type == "" and out.edit_distance is not None
        else:
            # A failure is recorded with its type and never replaced by the original text.
            assert out.error_type and out.output_text != out.source_text or out.error_type == "identical"
            # The stored text is the model's own (cleaned) last output, not a copy of the source.
            last = Generation.objects.get(key=out.generation_keys[-1])
            assert out.output_text == clean_output(last.output)
            assert out.error_type in {e.value for e in ErrorType}
    rerun = run_now(sts, "paraphrase")
    assert rerun.status == "succeeded" and rerun.llm_calls == 0 and rerun.cache_hits >= 6
    again = {(o.item_id, o.side): (o.output_text, o.ok) for o in TransformedItem.objects.filter(run=rerun)}
    assert again == {(o.item_id, o.side): (o.output_text, o.ok) for o in outputs}


def test_changing_the_prompt_or_the_temperature_misses_the_cache(llm_backend, sts):
    run_now(sts, "paraphrase", limit=2)
    active = prompt_template_active("paraphrase")
    prompt_template_create_version(key="paraphrase", system=active.system, user=active.user + " Keep it short.")
    after_prompt = run_now(sts, "paraphrase", limit=2)
    assert after_prompt.llm_calls >= 4
    hotter = transform_run_create(
        dataset=sts,
        transformation="paraphrase",
        seed=1337,
        limit=2,
        dispatch=False,
        params=GenerationParams(temperature=0.9, max_tokens=48, max_attempts=2),
    )
    from transforms.tasks import start_run

    start_run.delay(hotter.pk)
    hotter.refresh_from_db()
    assert hotter.llm_calls >= 4
    same_seed_again = run_now(sts, "paraphrase", limit=2)
    assert same_seed_again.llm_calls == 0


def test_backtranslation_makes_two_calls_through_a_pivot_other_than_the_source(llm_backend, sts):
    run = run_now(sts, "backtranslation", limit=2, languages=["en", "es", "fr", "de"])
    outputs = list(TransformedItem.objects.filter(run=run))
    assert len(outputs) == 4
    for out in outputs:
        assert out.pivot_language in {"es", "fr", "de"} and out.target_language == "en"
        steps = list(Generation.objects.filter(key__in=out.generation_keys).order_by("step"))
        assert [g.step for g in steps] == [0, 1]
        assert steps[0].language == out.pivot_language and steps[1].language == "en"
        assert steps[0].transformation == steps[1].transformation == "backtranslation"
    assert run.llm_calls == sum(2 * o.attempts for o in outputs if o.error_type != "backend_failure")


def test_cross_translation_draws_languages_per_text_reproducibly(llm_backend, sts):
    first = run_now(sts, "cross_translation", limit=6, seed=11)
    second = run_now(sts, "cross_translation", limit=6, seed=11)

    def by_text(run):
        return {o.source_text: o.target_language for o in TransformedItem.objects.filter(run=run)}

    assert by_text(first) == by_text(second)
    assert set(by_text(first).values()) <= {"es", "fr", "de", "tr", "ar"}
    assert len(set(by_text(first).values())) >= 2  # 12 texts, five languages: one language only is ~1e-8
    assert second.llm_calls == 0


def test_translation_uses_one_language_for_the_run(llm_backend, sts):
    run = run_now(sts, "translation", limit=3, seed=5)
    assert run.run_language in {"es", "fr", "de", "tr", "ar"}
    assert set(TransformedItem.objects.filter(run=run).values_list("target_language", flat=True)) == {run.run_language}


def test_random_keywords_need_no_llm(db, sts, settings):
    unreachable = {"base_url": "http://127.0.0.1:9/v1", "model": "none"}
    settings.TRANSFORM_BACKENDS = {
        "default": {"BACKEND": "transforms.backends.openai_compat.OpenAICompatBackend", "OPTIONS": unreachable}
    }
    reset_backends()
    run = run_now(sts, "random_keywords", limit=5)
    assert run.status == "succeeded" and run.llm_calls == 0
    for out in TransformedItem.objects.filter(run=run):
        assert len(out.output_text.split(", ")) >= 3 or len(out.source_text.split()) < 3


def test_chunk_delivered_twice_adds_nothing_twice(llm_backend, sts):
    run = transform_run_create(dataset=sts, transformation="paraphrase", seed=99, limit=2, params=FAST, dispatch=False)
    ids = list(sts.items.order_by("position").values_list("pk", flat=True)[:2])
    assert transform_run_execute_chunk(run_id=run.pk, item_ids=ids) == 4
    assert transform_run_execute_chunk(run_id=run.pk, item_ids=ids) == 0
    per_side = TransformedItem.objects.filter(run=run).values("item", "side").annotate(n=Count("id"))
    assert {row["n"] for row in per_side} == {1} and len(per_side) == 4


def test_export_writes_a_file_the_importer_reads(sts, tmp_path):
    """A deterministic transformation (every item succeeds): the file holds exactly the rewritten
    pairs with their gold scores, and the importer reads them back unchanged."""
    run = run_now(sts, "random_keywords", limit=6)
    result = transform_run_export(run=run, path=tmp_path / "out.csv")
    assert (result.n_items, result.n_skipped) == (6, 0)
    expected = {}
    for out in TransformedItem.objects.filter(run=run).select_related("item"):
        expected.setdefault(out.item.item_id, {"gold": out.item.gold})[out.side] = out.output_text
    exported = dataset_import(source=result.path, task="sts", name="exported")
    assert exported.n_items == 6
    back = {
        i.item_id: {"gold": i.gold, **{k: i.payload[k] for k in ("sentence1", "sentence2")}}
        for i in exported.items.all()
    }
    assert back == expected


def test_a_document_side_run_is_not_exported_as_a_dataset(sts, tmp_path):
    """A run that rewrote a benchmark's documents or reranking candidates holds no rewritten items of
    its own: exporting it would write the originals under a transformed name."""
    from core.errors import ShiftlabError

    run = run_now(sts, "random_keywords", limit=2)
    run.item_scope = "candidates"
    with pytest.raises(ShiftlabError, match="export a run of its queries or items instead"):
        transform_run_export(run=run, path=tmp_path / "out.csv")
    assert not (tmp_path / "out.csv").exists()


def test_export_leaves_out_exactly_the_items_with_a_failed_text(llm_backend, sts, tmp_path):
    run = run_now(sts, "paraphrase", limit=4)
    result = transform_run_export(run=run, path=tmp_path / "out.csv")
    failed = set(TransformedItem.objects.filter(run=run, ok=False).values_list("item_id", flat=True))
    assert result.n_skipped == len(failed) and result.n_items == 4 - len(failed)
    if result.n_items:
        exported = dataset_import(source=result.path, task="sts", name="exported")
        assert exported.n_items == result.n_items


def test_identical_texts_are_generated_once_per_run(llm_backend, tmp_path):
    path = tmp_path / "dupes.csv"
    path.write_text(
        "sentence1,sentence2,score\n"
        "A man is playing a guitar.,A man is playing a guitar.,5\n"
        "A man is playing a guitar.,A woman is slicing onions.,0\n"
        "A woman is slicing onions.,A man is playing a guitar.,0\n",
        encoding="utf-8",
    )
    dataset = dataset_import(source=path, task="sts", name="dupes")
    run = run_now(dataset, "paraphrase", limit=3, params=GenerationParams(max_tokens=48, max_attempts=1))
    assert run.done == 6 and run.llm_calls == 2
    outputs = {}
    for out in TransformedItem.objects.filter(run=run):
        outputs.setdefault(out.source_text, set()).add(out.output_text)
    assert all(len(texts) == 1 for texts in outputs.values())
