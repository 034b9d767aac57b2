"""Language codes: normalisation, English names and whether the identifier can check them (pure)."""

from __future__ import annotations

import pytest

from transforms.attempts import side_language
from transforms.language_id import supported_languages
from transforms.languages import (
    can_check_language,
    identifier_code,
    language_name,
    normalise_code,
    primary_language,
    unchecked_languages,
)


@pytest.mark.parametrize(
    "code,tag",
    [
        ("eng", "en"),
        ("dan", "da"),
        ("swa", "sw"),
        ("amh", "am"),
        ("EN", "en"),
        ("en_US", "en-US"),
        ("zh-Hant", "zh-Hant"),
        ("zh_hant", "zh-Hant"),
        ("sr-Latn", "sr-Latn"),
        ("sh", "sr-Latn"),  # deprecated Serbo-Croatian code
        ("iw", "he"),
        ("in", "id"),
        ("pt-BR", "pt-BR"),
    ],
)
def test_codes_are_normalised_to_the_shortest_tag_keeping_script_and_region(code, tag):
    assert normalise_code(code) == tag


@pytest.mark.parametrize(
    "code,name",
    [
        ("da", "Danish"),
        ("dan", "Danish"),
        ("sw", "Swahili"),
        ("ha", "Hausa"),
        ("am", "Amharic"),
        ("id", "Indonesian"),
        ("zh-Hant", "Chinese (Traditional)"),
        ("sr-Latn", "Serbian (Latin)"),
        ("pt-BR", "Portuguese (Brazil)"),
    ],
)
def test_english_names_come_from_cldr(code, name):
    assert language_name(code) == name


@pytest.mark.parametrize("code", ["xx", "zz-Top", "", "und", "12"])
def test_an_unknown_code_is_refused_with_examples_of_good_ones(code):
    with pytest.raises(ValueError, match="ISO 639-1 or 639-3 code or a BCP-47 tag"):
        normalise_code(code)
    with pytest.raises(ValueError):
        language_name(code)
    assert language_name(code, default=code) == code
    assert normalise_code(code, default=code) == code
    assert identifier_code(code) is None


@pytest.mark.parametrize(
    "code,checked",
    [
        ("en", "en"),
        ("eng", "en"),
        ("zh-Hant", "zh"),
        ("pt-BR", "pt"),
        ("fil", "tl"),  # the identifier knows Filipino as Tagalog
        ("tl", "tl"),
        ("nb", "no"),
        ("iw", "he"),
        ("sw", "sw"),
        ("am", "am"),
        ("haw", None),  # Hawaiian: not among the identifier's languages
        ("mi", None),  # Maori
    ],
)
def test_identifier_codes(code, checked):
    assert identifier_code(code) == checked
    assert can_check_language(code) is (checked is not None)


def test_unchecked_languages_lists_each_once_in_order():
    assert unchecked_languages(["en", "haw", "mi", "haw", "sw"]) == ["haw", "mi"]
    assert primary_language("zh-Hant") == "zh" and primary_language("eng") == "en"


@pytest.mark.parametrize(
    "language,task,side,expected",
    [
        ("en-de", "sts", "sentence1", "en"),
        ("en-de", "sts", "sentence2", "de"),
        ("zh-Hant", "sts", "sentence2", "zh-Hant"),  # a script subtag, not a second language
        ("sr-Latn", "classification", "text", "sr-Latn"),
        ("pt-BR", "sts", "sentence2", "pt"),  # a region, not Breton
        ("es-419", "sts", "sentence2", "es"),
        ("sw", "sts", "sentence2", "sw"),
    ],
)
def test_side_language_tells_cross_lingual_pairs_from_script_and_region_subtags(language, task, side, expected):
    assert side_language(language, side, task) == expected


def test_every_language_the_identifier_knows_has_a_name_and_a_check():
    for code in sorted(supported_languages()):
        assert not language_name(code).startswith("Unknown"), code
        assert identifier_code(code) == code
    assert language_name("grc") == "Ancient Greek" and identifier_code("ki") == "kik"
