"""Every language a dataset may come in: names in prompts, the language check and its opt-out,
pivots through English, and Swahili/Amharic runs through the embedded LLM end to end."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from core.errors import ShiftlabError
from corpora.models import Dataset
from corpora.services import ImportOptions, dataset_import
from transforms.backends import get_backend
from transforms.chunk_services import transform_run_execute_inline
from transforms.language_id import detect_language
from transforms.languages import can_check_language, language_name
from transforms.models import Generation, TransformedItem, TransformRun
from transforms.params import GenerationParams
from transforms.selectors import transform_run_summary
from transforms.services import transform_run_create

pytestmark = pytest.mark.django_db

# The English names the prompts use, written out here (CLDR's names, as any reference gives them).
STSB_MULTI_NAMES = {
    "en": "English",
    "de": "German",
    "es": "Spanish",
    "fr": "French",
    "it": "Italian",
    "ja": "Japanese",
    "nl": "Dutch",
    "pl": "Polish",
    "pt": "Portuguese",
    "ru": "Russian",
    "zh": "Chinese",
}
STS17_NAMES = {"ar": "Arabic", "tr": "Turkish"}
ALL_BENCHMARK = [*STSB_MULTI_NAMES, *STS17_NAMES]

# Synthetic sentences written for this test (everyday scenes), four per language.
SWAHILI = [
    "Watoto wanacheza mpira uwanjani leo asubuhi.",
    "Mama anapika chakula kitamu jikoni kwa familia yote.",
    "Mvua kubwa ilinyesha usiku wote katika kijiji chetu.",
    "Mwalimu anasoma kitabu kipya darasani kwa wanafunzi.",
]
AMHARIC = [
    "ልጆቹ በሜዳው ላይ ኳስ ይጫወታሉ።",
    "እናቴ በኩሽና ውስጥ ለቤተሰቡ ምግብ ታበስላለች።",
    "ትናንት ማታ በመንደራችን ከባድ ዝናብ ዘነበ።",
    "መምህሩ ለተማሪዎቹ አዲስ መጽሐፍ ያነባል።",
]
# Hawaiian: a language py3langid does not know, so its outputs cannot be checked.
HAWAIIAN = ["Ua ua nui i ka pō i ko mākou kauhale.", "Hele nā keiki i ke kahakai i kēia lā."]


def sts_dataset(name: str, language: str, sentences: list[str], tmp_path: Path) -> Dataset:
    """An STS dataset pairing consecutive sentences, all in ``language``."""
    path = tmp_path / f"{name}.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["sentence1", "sentence2", "score"])
        for i in range(0, len(sentences) - 1, 2):
            writer.writerow([sentences[i], sentences[i + 1], 2.5])
    return dataset_import(source=path, task="sts", name=name, options=ImportOptions(language=language))


def benchmark_sentences(shared_data: Path, language: str, n: int) -> list[str]:
    """The first ``n`` sentences of STS-B multi-mt (``../shared/data``) or, for ar and tr, STS17."""
    if language in STS17_NAMES:
        track = {"ar": "track1.ar-ar", "tr": "track6.tr-en"}[language]
        path = shared_data / "sts17" / "STS2017.eval.v1.1" / f"STS.input.{track}.txt"
        column = 0 if language == "ar" else 1  # tr-en: sentence2 is the Turkish one
        lines = path.read_text(encoding="utf-8").splitlines()
        return [line.split("\t")[column] for line in lines[:n]]
    path = shared_data / "stsb-multi-mt" / f"stsb-{language}-test.csv"
    with path.open(encoding="utf-8", newline="") as handle:
        return [row[0] for _, row in zip(range(n), csv.reader(handle), strict=False)]


def test_every_language_of_stsb_multi_and_sts17_is_named_checked_and_accepted_by_every_plan(shared_data, tmp_path):
    found = sorted(p.name.split("-")[1] for p in (shared_data / "stsb-multi-mt").glob("stsb-*-test.csv"))
    assert found == sorted(STSB_MULTI_NAMES)  # the test covers exactly the data's languages
    for code in ALL_BENCHMARK:
        assert language_name(code) == {**STSB_MULTI_NAMES, **STS17_NAMES}[code]
        assert can_check_language(code)
        sentences = benchmark_sentences(shared_data, code, 20)
        # The check works on real text: the identifier, restricted to the benchmark's languages as
        # runs restrict it, recognises nearly every sentence of the language.
        detected = [detect_language(s, candidates=ALL_BENCHMARK) for s in sentences]
        assert sum(d == code for d in detected) >= 17, (code, detected)
        dataset = sts_dataset(f"bench-{code}", code, sentences[:4], tmp_path)
        for transformation in ("paraphrase", "backtranslation", "translation"):
            run = transform_run_create(dataset=dataset, transformation=transformation, seed=1, dispatch=False)
            assert run.language_check and run.unchecked_languages == []
            assert run.run_language != code


def test_a_language_the_identifier_cannot_check_is_refused_with_the_way_out(tmp_path):
    hawaiian = sts_dataset("hawaiian", "haw", HAWAIIAN, tmp_path)
    with pytest.raises(ShiftlabError, match=r"cannot check outputs in haw \(Hawaiian\).*--no-language-check"):
        transform_run_create(dataset=hawaiian, transformation="paraphrase", seed=1, dispatch=False)
    english = sts_dataset("english", "en", ["A dog runs.", "A cat sleeps."], tmp_path)
    with pytest.raises(ShiftlabError, match=r"mi \(Māori\)"):
        transform_run_create(dataset=english, transformation="translation", seed=1, languages=["mi"], dispatch=False)
    assert not TransformRun.objects.exists()


def test_without_the_language_check_the_run_completes_and_its_error_analysis_says_so(tmp_path):
    hawaiian = sts_dataset("hawaiian", "haw", HAWAIIAN, tmp_path)
    run = transform_run_create(
        dataset=hawaiian, transformation="random_keywords", seed=3, language_check=False, dispatch=False
    )
    run = transform_run_execute_inline(run_id=run.pk)
    assert run.status == "succeeded" and run.done == run.total == 2
    summary = transform_run_summary(run=run)
    assert summary.language_check == "skipped" and summary.unchecked_languages == ("haw",)
    assert "wrong_language" not in summary.error_rates
    # A run whose languages can all be checked says so too.
    english = sts_dataset("english", "en", ["A dog runs in the park.", "A cat sleeps on the sofa."], tmp_path)
    checked = transform_run_execute_inline(
        run_id=transform_run_create(dataset=english, transformation="random_keywords", seed=3, dispatch=False).pk
    )
    assert transform_run_summary(run=checked).language_check == "applied"


@pytest.mark.django_db(transaction=True)  # the command's run starts on commit (eager Celery)
def test_the_command_and_the_api_take_the_opt_out(tmp_path, researcher):
    sts_dataset("hawaiian", "haw", HAWAIIAN, tmp_path)
    out = io.StringIO()
    call_command(
        "transform",
        "--dataset=hawaiian",
        "--transformation=random_keywords",
        "--no-language-check",
        "--wait",
        stdout=out,
    )
    assert "language check skipped" in out.getvalue() and "languages it cannot check: haw" in out.getvalue()
    client = APIClient()
    client.force_authenticate(researcher)
    body = {"dataset": "hawaiian", "transformation": "random_keywords", "seed": 9}
    refused = client.post("/api/transform-runs/", body, format="json")
    assert refused.status_code == 400 and "haw (Hawaiian)" in refused.json()["detail"]
    accepted = client.post("/api/transform-runs/", {**body, "language_check": False}, format="json")
    assert accepted.status_code == 202
    assert accepted.json()["language_check"] is False and accepted.json()["unchecked_languages"] == ["haw"]


def test_language_codes_are_normalised_and_unknown_ones_refused(tmp_path):
    english = sts_dataset("english", "en", ["A dog runs.", "A cat sleeps."], tmp_path)
    run = transform_run_create(
        dataset=english, transformation="translation", seed=1, languages=["deu", "fra", "de"], dispatch=False
    )
    assert run.languages == ["de", "fr"] and run.run_language in {"de", "fr"}
    with pytest.raises(ShiftlabError, match="--languages: 'xx' is not a language code"):
        transform_run_create(dataset=english, transformation="translation", seed=1, languages=["xx"], dispatch=False)
    # A dataset imported as "swa" is Swahili: "sw" is never a translation target for it.
    swahili = sts_dataset("swahili", "swa", SWAHILI, tmp_path)
    for seed in range(5):
        run = transform_run_create(
            dataset=swahili, transformation="translation", seed=seed, languages=["sw", "fr"], dispatch=False
        )
        assert run.run_language == "fr"
    unknown = sts_dataset("unknown", "xx", ["Blah blah.", "Bleh bleh."], tmp_path)
    with pytest.raises(ShiftlabError, match="dataset unknown has texts in 'xx'.*re-import it"):
        transform_run_create(dataset=unknown, transformation="paraphrase", seed=1, dispatch=False)


def test_backtranslation_of_non_english_texts_may_pivot_through_english(tmp_path):
    swahili = sts_dataset("swahili", "swa", SWAHILI, tmp_path)  # an ISO 639-3 code on import
    english = sts_dataset("english", "en", ["A dog runs.", "A cat sleeps."], tmp_path)
    pivots = transform_run_create(dataset=swahili, transformation="backtranslation", seed=1, dispatch=False)
    assert pivots.languages == ["es", "fr", "de", "tr", "ar", "en"]
    english_run = transform_run_create(dataset=english, transformation="backtranslation", seed=1, dispatch=False)
    assert "en" not in english_run.languages
    explicit = transform_run_create(
        dataset=swahili, transformation="backtranslation", seed=1, languages=["fr"], dispatch=False
    )
    assert explicit.languages == ["fr"]  # a list the user gives is kept as it is


@pytest.mark.parametrize("language,sentences,name", [("sw", SWAHILI, "Swahili"), ("am", AMHARIC, "Amharic")])
def test_swahili_and_amharic_transform_end_to_end_with_the_embedded_llm(
    llm_backend, tmp_path, monkeypatch, language, sentences, name
):
    dataset = sts_dataset(f"synthetic-{language}", language, sentences, tmp_path)
    backend = get_backend("default")
    sent: list[str] = []
    generate = backend.generate

    def recording(requests, **kwargs):
        sent.extend(m["content"] for r in requests for m in r.messages if m["role"] == "user")
        return generate(requests, **kwargs)

    monkeypatch.setattr(backend, "generate", recording)
    params = GenerationParams(max_tokens=48, max_attempts=1)
    for transformation in ("paraphrase", "translation", "backtranslation"):
        run = transform_run_create(
            dataset=dataset, transformation=transformation, seed=1337, limit=1, params=params, dispatch=False
        )
        run = transform_run_execute_inline(run_id=run.pk)
        assert run.status == "succeeded" and run.done == run.total == 2
        assert run.model_identity.startswith("sha256:")
        summary = transform_run_summary(run=run)
        assert summary.language_check == "applied" and summary.unchecked_languages == ()
        for out in TransformedItem.objects.filter(run=run):
            steps = list(Generation.objects.filter(key__in=out.generation_keys).order_by("step"))
            if transformation == "paraphrase":
                assert out.target_language == language and [g.language for g in steps] == [language]
            elif transformation == "translation":
                assert out.target_language == run.run_language != language
            else:
                assert out.target_language == language and out.pivot_language in set(run.languages) - {language}
                assert [g.language for g in steps] == [out.pivot_language, language] or out.error_type
            # The check was applied: a wrong-language verdict always rests on a detected language.
            if out.error_type == "wrong_language":
                assert out.detected_language and out.detected_language != out.target_language
    # The prompts named the language in English.
    assert any(f"in {name}" in text for text in sent) and any(f"from {name}" in text for text in sent)
