"""Tests of language identification (transforms.language_id)."""

from __future__ import annotations

import pytest

from transforms.language_id import (
    LANGUAGE_MIN_CONFIDENCE,
    MIN_WORDS_FOR_LANGUAGE,
    detect_language,
    supported_languages,
)

SENTENCES = {
    "en": "The children were playing football in the park until it started to rain.",
    "de": "Die Kinder spielten im Park Fu\u00dfball, bis es anfing zu regnen.",
    "es": "Los ni\u00f1os jugaban al f\u00fatbol en el parque hasta que empez\u00f3 a llover.",
    "fr": "Les enfants jouaient au football dans le parc jusqu'\u00e0 ce qu'il commence \u00e0 pleuvoir.",
    "tr": "\u00c7ocuklar ya\u011fmur ya\u011fmaya ba\u015flayana kadar parkta futbol oynuyordu.",
    "ar": "\u0643\u0627\u0646 \u0627\u0644\u0623\u0637\u0641\u0627\u0644 \u064a\u0644\u0639\u0628\u0648\u0646 "
    "\u0643\u0631\u0629 \u0627\u0644\u0642\u062f\u0645 \u0641\u064a \u0627\u0644\u062d\u062f\u064a\u0642\u0629 "
    "\u062d\u062a\u0649 \u0628\u062f\u0623 \u0627\u0644\u0645\u0637\u0631 \u064a\u0647\u0637\u0644.",
}


def test_thresholds():
    assert MIN_WORDS_FOR_LANGUAGE == 3 and 0.5 <= LANGUAGE_MIN_CONFIDENCE < 1


@pytest.mark.parametrize(("language", "sentence"), sorted(SENTENCES.items()))
def test_detect_language(language, sentence):
    assert detect_language(sentence) == language
    assert detect_language(sentence, candidates=sorted(SENTENCES)) == language


def test_detect_language_more_sentences():
    assert detect_language("Mein Bruder wohnt seit drei Jahren in einer kleinen Wohnung in Berlin.") == "de"
    assert detect_language("\u00bfD\u00f3nde est\u00e1 la estaci\u00f3n de tren m\u00e1s cercana?") == "es"
    assert detect_language("Nous avons mang\u00e9 une tarte aux pommes apr\u00e8s le d\u00eener.") == "fr"
    assert detect_language("Yar\u0131n sabah erkenden \u0130stanbul'a gidece\u011fiz.") == "tr"
    assert (
        detect_language(
            "\u0623\u062d\u0628 \u0642\u0631\u0627\u0621\u0629 \u0627\u0644\u0643\u062a\u0628 "
            "\u0641\u064a \u0627\u0644\u0645\u0633\u0627\u0621."
        )
        == "ar"
    )
    assert detect_language("\u5b69\u5b50\u4eec\u5728\u516c\u56ed\u91cc\u8e22\u8db3\u7403\u3002") == "zh"


def test_detect_language_too_short_or_empty():
    assert detect_language("Hello world") is None  # fewer than MIN_WORDS_FOR_LANGUAGE words
    assert detect_language("") is None
    assert detect_language("... !!") is None


def test_detect_language_candidates():
    # Restricting forces the answer into the candidates; region subtags and unknown codes are tolerated.
    assert detect_language(SENTENCES["en"], candidates=["en-GB", "xx"]) == "en"
    assert detect_language(SENTENCES["de"], candidates=["DE", "en"]) == "de"
    with pytest.raises(ValueError):
        detect_language(SENTENCES["en"], candidates=["xx", "yy"])
    assert {"en", "de", "zh", "ja", "tr", "ar"} <= supported_languages()
    assert "wuu" not in supported_languages()  # folded into zh
