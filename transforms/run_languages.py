"""The languages of a transformation run: its target or pivot languages, the language drawn for a
whole run, and the output languages the language identifier cannot check. Reads only the
dataset's declared languages and task type."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from core.errors import ShiftlabError
from corpora.models import Dataset
from corpora.task_types import task_spec
from transforms import planning
from transforms.attempts import side_language
from transforms.languages import language_name, normalise_code, primary_language, unchecked_languages
from transforms.registry import DEFAULT_LANGUAGES, LanguagePlan, Transformation


@dataclass(frozen=True)
class OutputLanguages:
    run_language: str
    """The target drawn for the whole run (per-run translations), else ""."""
    unchecked: list[str]
    """Languages of the outputs that the language identifier cannot check."""


def run_target_languages(spec: Transformation, dataset: Dataset, languages: Sequence[str] | None) -> list[str]:
    """The run's target/pivot languages (see :func:`_run_target_languages`); refuses a dataset
    whose language the prompts cannot name."""
    codes = _run_target_languages(spec, dataset, languages)
    _check_named(spec, dataset)
    return codes


def run_output_languages(
    spec: Transformation, dataset: Dataset, codes: list[str], *, seed: int, language_check: bool
) -> OutputLanguages:
    """Draw a per-run translation's target (never a language of the dataset) and refuse outputs in
    languages the identifier cannot check, unless ``language_check`` is off."""
    run_language = ""
    if spec.language_plan is LanguagePlan.PER_RUN:
        # Exclude every language of the dataset so no text is "translated" into its own language.
        sources = {_primary_or_none(code) for code in source_languages(dataset)}
        remaining = [code for code in codes if _primary_or_none(code) not in sources]
        if not remaining:
            raise ShiftlabError(f"no target language left after removing the dataset's {dataset.languages}")
        run_language = planning.draw_run_language(seed=seed, languages=remaining, source_language="")
    unchecked = _unchecked_output_languages(spec, dataset, codes, run_language)
    if unchecked and language_check:
        named = ", ".join(f"{code} ({language_name(code, default='unknown')})" for code in unchecked)
        raise ShiftlabError(
            f"the language identifier cannot check outputs in {named}, so wrong-language outputs would go "
            "unnoticed. Choose other languages, or run without the language check (--no-language-check; "
            'API: "language_check": false): the run then records that the check was skipped'
        )
    return OutputLanguages(run_language, unchecked)


def _run_target_languages(spec: Transformation, dataset: Dataset, languages: Sequence[str] | None) -> list[str]:
    """The run's target/pivot languages, normalised ("eng" -> "en"). By default, a backtranslation
    of non-English texts may also pivot through English."""
    try:
        codes = [normalise_code(code) for code in languages] if languages else list(DEFAULT_LANGUAGES)
    except ValueError as exc:
        raise ShiftlabError(f"--languages: {exc}", field="languages") from None
    if (
        not languages
        and spec.language_plan is LanguagePlan.PIVOT_PER_TEXT
        and "en" not in codes
        and any(_primary_or_none(code) not in {"en", None} for code in source_languages(dataset))
    ):
        codes.append("en")
    return list(dict.fromkeys(codes))


def _primary_or_none(code: str) -> str | None:
    try:
        return primary_language(code)
    except ValueError:
        return None


def source_languages(dataset: Dataset) -> list[str]:
    """The languages the dataset's transformable texts are written in (both sides of "en-de" pairs),
    normalised where known ("swa" -> "sw")."""
    fields = task_spec(dataset.task_type).transformable_fields
    sides = (side_language(lang, side, dataset.task_type) for lang in dataset.languages for side in fields)
    return list(dict.fromkeys(normalise_code(code, default=code) for code in sides))


def _check_named(spec: Transformation, dataset: Dataset) -> None:
    """The prompts name the texts' language: refuse a dataset whose language code is unknown."""
    if not spec.uses_llm:
        return
    unknown = [code for code in source_languages(dataset) if _primary_or_none(code) is None]
    if unknown:
        raise ShiftlabError(
            f"dataset {dataset.name} has texts in {', '.join(map(repr, unknown))}, which is not a language code "
            "Shiftlab knows, so the prompts cannot name it: re-import it with an ISO 639-1/639-3 code or a BCP-47 "
            "tag (e.g. 'sw', 'amh', 'zh-Hant')",
            field="dataset",
        )


def _unchecked_output_languages(
    spec: Transformation, dataset: Dataset, languages: list[str], run_language: str
) -> list[str]:
    """The languages the run's outputs are written in that the identifier cannot check."""
    if spec.language_plan is LanguagePlan.PER_RUN:
        written = [run_language]
    elif spec.language_plan is LanguagePlan.PER_TEXT:
        written = languages
    else:  # the source language: rewrites, and backtranslations once back from the pivot
        written = source_languages(dataset)
    return unchecked_languages(written)
