"""Augmented encoding: options, variants from the transformation cache, revision, missing
variants, the embedding cache, and use through get_encoder, `evaluate` and benchmark runs.

Variants are TransformedItem rows written here (no LLM) or random keywords (computed)."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import CommandError

from core.hashing import sha256_text
from corpora.models import Dataset, DatasetItem
from corpora.services import dataset_import
from evaluation.apps import check_encoders
from evaluation.augmented_encoder import AugmentedEncoder
from evaluation.benchmark_services import benchmark_run_create_from_config
from evaluation.embedding_cache import cache_directory, encode_cached
from evaluation.encoders import EncoderError, get_encoder
from evaluation.models import BenchmarkResult
from evaluation.report_robustness import robustness_report_get
from shiftlab.settings import _extra_encoders
from tests.support import config_text, keyword_run
from transforms.models import GeneratorConfig, TransformedItem, TransformRun
from transforms.planning import PAPER_KEYWORD_SAMPLING, random_keywords

MODEL = "all-MiniLM-L6-v2"
AUGMENTED = "evaluation.augmented_encoder.AugmentedEncoder"


class CountingEncoder:
    """A tiny deterministic model: (length, vowels, 1), optionally unit length; counts its calls."""

    def __init__(self, *, alias: str, revision: str = "r1", unit: bool = False):
        self.alias, self._revision, self.unit, self.encoded = alias, revision, unit, []

    model_id = property(lambda self: f"counting-{self.alias}")
    revision = property(lambda self: self._revision)
    prompts = property(lambda self: {})
    similarity_fn_name = property(lambda self: "cosine")

    def encode(self, texts, *, batch_size=None, prompt_name=None):
        self.encoded.extend(texts)
        rows = np.array([[len(t), sum(c in "aeiou" for c in t.lower()), 1.0] for t in texts], dtype=np.float32)
        rows = rows.reshape(len(texts), 3)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True) if self.unit and len(rows) else rows

    def close(self):
        pass


@pytest.fixture
def sts(db, tmp_path, settings) -> Dataset:
    settings.EMBEDDING_CACHE_DIR = tmp_path / "embeddings"
    settings.DATA_DIR = tmp_path
    settings.EVALUATION_ENCODERS = {
        **settings.EVALUATION_ENCODERS,
        f"counting-{tmp_path.name}": {"BACKEND": "tests.test_augmented.CountingEncoder", "OPTIONS": {}},
        f"unit-{tmp_path.name}": {"BACKEND": "tests.test_augmented.CountingEncoder", "OPTIONS": {"unit": True}},
    }
    return dataset_import(source=settings.BASE_DIR / "fixtures/sts/demo-sts.csv", task="sts", name="aug-sts")


@pytest.fixture
def counting(sts, tmp_path) -> str:
    """The alias of a fresh CountingEncoder (one per test: get_encoder caches by name)."""
    return f"counting-{tmp_path.name}"


def texts_of(dataset: Dataset, n: int | None = None) -> list[str]:
    items = DatasetItem.objects.filter(dataset=dataset, kind="example").order_by("position")[:n]
    return [item.payload[side] for item in items for side in ("sentence1", "sentence2")]


def cached_run(
    dataset, *, transformation="paraphrase", seed=1, n=None, status="succeeded", prefix="Put another way:", model="llm"
):
    """A run whose outputs are written directly: "<prefix> <text>" for the first ``n`` items."""
    generator, _ = GeneratorConfig.objects.get_or_create(
        content_hash=f"test-{model}", defaults={"backend_alias": "default", "model": model, "params": {}}
    )
    run = TransformRun.objects.create(
        dataset=dataset,
        transformation=transformation,
        generator=generator,
        seed=seed,
        status=status,
        run_hash=sha256_text(f"{transformation}-{seed}-{prefix}-{n}"),
        total=2 * (n or 40),
    )
    items = DatasetItem.objects.filter(dataset=dataset, kind="example").order_by("position")[:n]
    TransformedItem.objects.bulk_create(
        TransformedItem(
            run=run,
            item=item,
            side=side,
            source_text=item.payload[side],
            output_text=f"{prefix} {item.payload[side]}",
            ok=True,
            attempts=1,
            target_language="en",
        )
        for item in items
        for side in ("sentence1", "sentence2")
    )
    return run


def augmented(base: str, **options) -> AugmentedEncoder:
    return AugmentedEncoder(alias="aug", base=base, **options)


# --- options --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "options,message",
    [
        ({"base": "aug"}, "the alias itself"),
        ({"transformations": ["translation"]}, "keep the text's language"),
        ({"transformations": ["paraphrase", "paraphrase"]}, "distinct"),
        ({"k": 0}, "'k'"),
        ({"k": 2, "seeds": [1]}, "at least 2 seeds"),
        ({"runs": []}, "'runs'"),
        ({"pooling": "median"}, "'pooling'"),
        ({"pooling": "weighted"}, "in \\[0, 1\\]"),
        ({"pooling": "weighted", "weight": 1.5}, "in \\[0, 1\\]"),
        ({"weight": 0.5}, "weighted' only"),
        ({"pooling": "max", "weight": 0.5}, "weighted' only"),
        ({"keyword_sampling": "half"}, "'keyword_sampling'"),
        ({"missing": "skip"}, "'missing'"),
        ({"generator": "llm", "runs": [1]}, "'generator'"),
    ],
)
def test_bad_options_are_improperly_configured(settings, options, message):
    settings.EVALUATION_ENCODERS = {**settings.EVALUATION_ENCODERS, "aug": {"BACKEND": AUGMENTED, "OPTIONS": options}}
    with pytest.raises(ImproperlyConfigured, match=message):
        AugmentedEncoder(alias="aug", **options)
    assert [e.id for e in check_encoders(None)] == ["evaluation.E001"]


def test_shiftlab_encoders_adds_aliases_and_explains_bad_json(settings):
    extra = _extra_encoders(
        json.dumps(
            {
                "para": {"BACKEND": AUGMENTED, "OPTIONS": {"base": MODEL}},
                "small": {"model": "some/model", "batch_size": 8},
            }
        )
    )
    assert extra["para"] == {"BACKEND": AUGMENTED, "OPTIONS": {"base": MODEL}}
    assert extra["small"]["BACKEND"] == "evaluation.encoders.SentenceTransformerEncoder"
    assert extra["small"]["OPTIONS"]["model"] == "some/model" and extra["small"]["OPTIONS"]["batch_size"] == 8
    assert "dtype" in extra["small"]["OPTIONS"]  # the default alias's options fill the rest
    assert _extra_encoders("  ") == {}
    with pytest.raises(ImproperlyConfigured, match="not valid JSON"):
        _extra_encoders("{para: 1}")
    with pytest.raises(ImproperlyConfigured, match="must map aliases to objects"):
        _extra_encoders('["para"]')
    with pytest.raises(ImproperlyConfigured, match="move base there"):
        _extra_encoders(json.dumps({"para": {"BACKEND": AUGMENTED, "base": MODEL}}))


# --- variants, pooling, cache ---------------------------------------------------------------


def test_texts_are_pooled_with_their_cached_variants_encoded_once(sts, counting):
    cached_run(sts, n=3)
    cached_run(sts, n=3, status="running", prefix="Unfinished:")  # only succeeded runs count
    encoder = augmented(counting, missing="original")
    texts = texts_of(sts, 4)  # the 4th item has no variant
    pooled = encoder.encode(texts)
    base = get_encoder(counting)
    plain = base.encode(texts)
    variants = base.encode([f"Put another way: {t}" for t in texts[:6]])
    np.testing.assert_allclose(pooled[:6], (plain[:6] + variants) / 2, rtol=1e-6)
    np.testing.assert_allclose(pooled[6:], plain[6:], rtol=1e-6)
    assert encoder.texts_missing_variants == 2
    coverage = encoder.coverage(texts)
    assert (coverage.texts, coverage.incomplete, coverage.without_variants, coverage.variants) == (8, 2, 2, 6)
    # Originals and variants went through the base's embedding cache: encoding again encodes nothing.
    base.encoded.clear()
    encode_cached(encoder, texts)
    encode_cached(encoder, texts)
    assert base.encoded == []


def test_unit_length_base_outputs_stay_unit_length(sts, tmp_path):
    cached_run(sts, n=2)
    pooled = augmented(f"unit-{tmp_path.name}", missing="original").encode(texts_of(sts, 2))
    np.testing.assert_allclose(np.linalg.norm(pooled, axis=1), 1.0, rtol=1e-5)


def test_k_variants_per_transformation_in_seed_order_and_weighted_pooling(sts, counting):
    cached_run(sts, seed=1, n=2, prefix="First:")
    cached_run(sts, seed=2, n=2, prefix="Second:")
    cached_run(sts, seed=3, n=2, prefix="Third:")
    text = texts_of(sts, 1)[0]
    base = get_encoder(counting)
    encoder = augmented(
        counting,
        k=2,
        seeds=[3, 1, 2],
        pooling="weighted",
        weight=0.6,
        transformations=["paraphrase", "random_keywords"],
    )
    keywords = [random_keywords(text, seed=s, text_hash=sha256_text(text)) for s in (3, 1)]
    variants = base.encode([f"Third: {text}", f"First: {text}", *keywords])
    expected = 0.6 * base.encode([text])[0] + 0.4 * variants.mean(axis=0)
    np.testing.assert_allclose(encoder.encode([text])[0], expected, rtol=1e-5)
    explicit = augmented(counting, runs=[TransformRun.objects.get(seed=2).pk])
    np.testing.assert_allclose(
        explicit.encode([text])[0], (base.encode([text])[0] + base.encode([f"Second: {text}"])[0]) / 2, rtol=1e-6
    )
    cached_run(sts, seed=1, n=2, prefix="Other LLM:", model="other-llm")  # newest run of seed 1 wins...
    newest = augmented(counting).encode([text])[0]
    np.testing.assert_allclose(newest, (base.encode([text])[0] + base.encode([f"Other LLM: {text}"])[0]) / 2, rtol=1e-6)
    chosen = augmented(counting, generator="llm").encode([text])[0]  # ...unless the generator is named
    np.testing.assert_allclose(chosen, (base.encode([text])[0] + base.encode([f"First: {text}"])[0]) / 2, rtol=1e-6)


def test_missing_variants_raise_an_actionable_error(sts, counting):
    cached_run(sts, n=2)
    cached_run(sts, seed=1, status="running", prefix="Later:")
    encoder = augmented(counting)
    with pytest.raises(EncoderError) as caught:
        encoder.encode(texts_of(sts, 3))
    message = str(caught.value)
    assert "2 of 6 texts lack" in message and "paraphrase" in message
    assert "python manage.py transform --dataset <their dataset> --transformation paraphrase --seed 1" in message
    assert "is running" in message and "'missing'] = 'original'" in message
    assert encoder.encode(texts_of(sts, 2)).shape == (4, 3)
    with pytest.raises(EncoderError, match="run 999999, which does not exist"):
        augmented(counting, runs=[999999]).encode(["x"])
    unfinished = TransformRun.objects.get(status="running")
    with pytest.raises(EncoderError, match=f"run {unfinished.pk} has not succeeded"):
        augmented(counting, runs=[unfinished.pk]).encode(["x"])


def test_revision_follows_base_options_and_variant_source(sts, counting, settings, tmp_path):
    first = augmented(counting, missing="original").revision
    assert len(first) == 64 and augmented(counting, missing="original").revision == first
    assert augmented(counting).revision != first
    assert augmented(counting, missing="original", pooling="weighted", weight=0.5).revision != first
    assert (
        augmented(counting, missing="original", pooling="weighted", weight=0.75).revision
        != augmented(counting, missing="original", pooling="weighted", weight=0.5).revision
    )
    assert augmented(counting, missing="original", transformations=["random_keywords"]).revision != first
    encoder = augmented(counting, missing="original")
    run = cached_run(sts, n=2, status="running")
    assert encoder.revision == first  # an unfinished run is not a source yet
    TransformRun.objects.filter(pk=run.pk).update(status="succeeded")
    second = encoder.revision
    assert second != first
    TransformedItem.objects.filter(run=run).first().delete()
    assert encoder.revision not in (first, second)  # the run's outputs changed
    other_base = f"other-{tmp_path.name}"
    settings.EVALUATION_ENCODERS = {
        **settings.EVALUATION_ENCODERS,
        other_base: {"BACKEND": "tests.test_augmented.CountingEncoder", "OPTIONS": {"revision": "r2"}},
    }
    assert augmented(other_base, missing="original").revision != augmented(counting, missing="original").revision
    assert encoder.model_id == f"augmented:{get_encoder(counting).model_id}"
    assert cache_directory(encoder) != cache_directory(get_encoder(counting))


def test_max_pooling_variants_only_and_the_papers_keywords_through_the_encoder(sts, counting):
    cached_run(sts, n=1, prefix="Reworded:")
    text = texts_of(sts, 1)[0]
    base = get_encoder(counting)
    original, variant = base.encode([text, f"Reworded: {text}"])
    pooled = augmented(counting, pooling="max").encode([text])[0]
    np.testing.assert_allclose(pooled, np.maximum(original, variant), rtol=1e-6)
    only = augmented(counting, pooling="weighted", weight=0.0).encode([text])[0]
    np.testing.assert_allclose(only, variant, rtol=1e-6)
    paper = augmented(counting, transformations=["random_keywords"], keyword_sampling="augmentation-paper")
    keywords = random_keywords(text, seed=1, text_hash=sha256_text(text), sampling=PAPER_KEYWORD_SAMPLING)
    assert "," not in keywords
    np.testing.assert_allclose(paper.encode([text])[0], (original + base.encode([keywords])[0]) / 2, rtol=1e-6)
    default = augmented(counting, transformations=["random_keywords"])
    assert paper.revision != default.revision and "keyword_sampling" not in default.options


# --- a real model, the evaluate command and benchmark runs ---------------------------------------


@pytest.mark.heavy  # a real embedding model
def test_minilm_through_get_encoder_pools_normalised_cached_vectors(sts, settings, tmp_path):
    alias = f"minilm-para-{tmp_path.name}"
    settings.EVALUATION_ENCODERS = {
        **settings.EVALUATION_ENCODERS,
        alias: {"BACKEND": AUGMENTED, "OPTIONS": {"base": MODEL, "missing": "original"}},
    }
    cached_run(sts, n=2)
    encoder = get_encoder(alias)
    assert isinstance(encoder, AugmentedEncoder) and encoder.similarity_fn_name == "cosine"
    assert encoder.model_id == "augmented:sentence-transformers/all-MiniLM-L6-v2"
    texts = texts_of(sts, 3)
    pooled = encode_cached(encoder, texts)
    base = encode_cached(get_encoder(MODEL), [*texts, *(f"Put another way: {t}" for t in texts[:4])])
    mean = (base[:4] + base[6:]) / 2
    np.testing.assert_allclose(pooled[:4], mean / np.linalg.norm(mean, axis=1, keepdims=True), atol=1e-6)
    np.testing.assert_allclose(pooled[4:], base[4:6], atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(pooled, axis=1), 1.0, atol=1e-5)


@pytest.mark.heavy  # a real embedding model
def test_evaluate_command_scores_an_augmented_alias_and_compares_it(sts, settings, tmp_path):
    alias = f"minilm-kw-{tmp_path.name}"
    settings.EVALUATION_ENCODERS = {
        **settings.EVALUATION_ENCODERS,
        alias: {"BACKEND": AUGMENTED, "OPTIONS": {"base": MODEL, "transformations": ["random_keywords"]}},
    }
    out, err = io.StringIO(), io.StringIO()
    call_command("evaluate", "--dataset", "aug-sts", "--model", alias, stdout=out, stderr=err)
    score = float(out.getvalue())
    assert 0 < score <= 1 and "80 for 80 texts, 0 lacking" in err.getvalue()
    out = io.StringIO()
    call_command(
        "evaluate", "--dataset", "aug-sts", "--model", alias, "--baseline", MODEL, "--resamples", "200", stdout=out
    )
    text = out.getvalue()
    assert f"{alias}  {score:.4f}" in text and "difference" in text and "95% CI" in text and "40 pairs" in text
    out = io.StringIO()
    call_command(
        "evaluate",
        "--dataset",
        "aug-sts",
        "--model",
        alias,
        "--baseline",
        MODEL,
        "--resamples",
        "200",
        "--json",
        stdout=out,
    )
    document = json.loads(out.getvalue())
    result = document["result"]
    assert result["n"] == 40 and result["spearman_a"] == pytest.approx(score, abs=5e-5)
    assert result["difference"] == pytest.approx(result["spearman_a"] - result["spearman_b"])
    assert result["ci_low"] <= result["difference"] <= result["ci_high"]
    assert document["model_coverage"]["incomplete"] == 0 and document["baseline_coverage"] is None
    strict = f"minilm-para-strict-{tmp_path.name}"
    settings.EVALUATION_ENCODERS = {
        **settings.EVALUATION_ENCODERS,
        strict: {"BACKEND": AUGMENTED, "OPTIONS": {"base": MODEL}},
    }
    with pytest.raises(CommandError, match="80 of 80 texts lack some of their 1 paraphrase"):
        call_command("evaluate", "--dataset", "aug-sts", "--model", strict, stdout=io.StringIO())


@pytest.mark.heavy  # a real embedding model
def test_a_benchmark_run_and_its_report_take_the_augmented_alias_as_a_model(
    sts, settings, tmp_path, django_capture_on_commit_callbacks
):
    alias = f"minilm-bench-{tmp_path.name}"
    settings.EVALUATION_ENCODERS = {
        **settings.EVALUATION_ENCODERS,
        # Random keywords exist for any text, the transformed texts of the benchmark included.
        alias: {"BACKEND": AUGMENTED, "OPTIONS": {"base": MODEL, "transformations": ["random_keywords"]}},
    }
    config = config_text([keyword_run(sts, 1)], fmt="json")
    with django_capture_on_commit_callbacks(execute=True):
        run = benchmark_run_create_from_config(text=config, fmt="json", models=[MODEL, alias], limit=10)
    run.refresh_from_db()
    assert run.status == "succeeded" and run.done == run.total == 4, run.error
    results = {(r.model, r.transformation): r for r in BenchmarkResult.objects.filter(run=run)}
    augmented_original = results[(alias, "original")]
    assert augmented_original.model_id == "augmented:sentence-transformers/all-MiniLM-L6-v2"
    assert augmented_original.model_revision == get_encoder(alias).revision
    assert augmented_original.main_score != results[(MODEL, "original")].main_score
    report = robustness_report_get(run=run)
    assert report.models == (MODEL, alias) and set(report.aggregates) == {MODEL, alias}
    assert report.baseline == MODEL
