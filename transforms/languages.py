"""Language codes of datasets and runs: normalisation, English names, checkability (pure module).

Codes are BCP-47 tags as ``langcodes`` understands them: ISO 639-1 (``da``), ISO 639-3 (``dan``,
``eng``), deprecated codes (``iw``, ``in``, ``sh``) and script or region subtags (``zh-Hant``,
``sr-Latn``, ``pt-BR``). Names come from CLDR through ``language_data`` (offline, in the wheel).

Whether an output's language can be checked is decided by the language identifier
(:mod:`transforms.language_id`, py3langid): a language it does not know cannot be checked, and a
run writing in one needs the user's explicit consent (``--no-language-check``).
"""

from __future__ import annotations

from collections.abc import Iterable

import langcodes

from transforms.language_id import normalise_language_code, supported_languages

__all__ = [
    "can_check_language",
    "identifier_code",
    "language_name",
    "normalise_code",
    "primary_language",
    "unchecked_languages",
]

# ISO 639-3 individual languages the identifier knows under their macrolanguage or another code.
_IDENTIFIER_ALIASES = {
    "fil": "tl",
    "cmn": "zh",
    "yue": "zh",
    "wuu": "zh",
    "arb": "ar",
    "arz": "ar",
    "ary": "ar",
    "nb": "no",
    "zsm": "ms",
    "pes": "fa",
    "swh": "sw",
    "ekk": "et",
    "lvs": "lv",
    "uzn": "uz",
    "khk": "mn",
    "ckb": "ku",
    "kmr": "ku",
}


# How langcodes names a code it has no name for ("Unknown language [xx]"); "und" is named just that.
_UNKNOWN = "Unknown language"


def _parse(code: str) -> langcodes.Language:
    cleaned = code.strip().replace("_", "-") if isinstance(code, str) else ""
    try:
        language = langcodes.Language.get(langcodes.standardize_tag(cleaned))
    except (ValueError, langcodes.LanguageTagError):
        language = None
    if language is None or not language.language or _UNKNOWN in language.language_name("en"):
        raise ValueError(
            f"{code!r} is not a language code Shiftlab knows: use an ISO 639-1 or 639-3 code or a BCP-47 "
            "tag, e.g. 'de', 'dan', 'zh-Hant', 'sr-Latn', 'pt-BR'"
        )
    return language


def normalise_code(code: str, *, default: str | None = None) -> str:
    """The canonical BCP-47 tag of ``code``: the shortest language code, scripts and regions kept.

    ``"eng"`` -> ``"en"``, ``"dan"`` -> ``"da"``, ``"zh_hant"`` -> ``"zh-Hant"``, ``"sh"`` -> ``"sr-Latn"``.
    Raises ``ValueError`` for a code that names no known language, unless ``default`` is given,
    which is then returned.
    """
    try:
        return _parse(code).to_tag()
    except ValueError:
        if default is not None:
            return default
        raise


def primary_language(code: str) -> str:
    """The language subtag of a tag, normalised (``"zh-Hant"`` -> ``"zh"``, ``"eng"`` -> ``"en"``)."""
    return _parse(code).language


def language_name(code: str, *, default: str | None = None) -> str:
    """The English name of a language, as the prompts write it ("Danish", "Chinese (Traditional)").

    Raises ``ValueError`` for an unknown code unless ``default`` is given, which is then returned.
    """
    try:
        return _parse(code).display_name("en")
    except ValueError:
        if default is not None:
            return default
        raise


def identifier_code(code: str) -> str | None:
    """The language identifier's code for ``code``, or None when the identifier cannot tell that language."""
    try:
        language = _parse(code).language
    except ValueError:
        return None
    known = supported_languages()
    checked = normalise_language_code(_IDENTIFIER_ALIASES.get(language, language))
    if checked in known:
        return checked
    alpha3 = langcodes.Language.get(language).to_alpha3()  # the identifier's label for Kikuyu is "kik", not "ki"
    return alpha3 if alpha3 in known else None


def can_check_language(code: str) -> bool:
    """Whether a text's language can be checked against ``code``."""
    return identifier_code(code) is not None


def unchecked_languages(codes: Iterable[str]) -> list[str]:
    """The codes among ``codes`` whose language cannot be checked, in first-seen order, once each."""
    return [code for code in dict.fromkeys(codes) if not can_check_language(code)]
