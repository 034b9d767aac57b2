"""The transformations of SPEC §2: axis, LLM steps, language behaviour, length rules (pure module)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from core.errors import ShiftlabError
from transforms.noise import NOISE_KINDS, SEVERITIES


class Axis(StrEnum):
    LEXICAL = "lexical"
    LENGTH = "length"
    LANGUAGE = "language"
    EXTRA = "extra"
    # Meaning-changing rewrites (issue 30): the meaning must change; a model should move the pair apart.
    SENSITIVITY = "sensitivity"
    NOISE = "noise"  # seeded character and word noise without an LLM, at severity levels


class LanguagePlan(StrEnum):
    SAME = "same"  # output stays in the source language
    PER_RUN = "per_run"  # one target language for the whole run (seeded draw)
    PER_TEXT = "per_text"  # a target language drawn for each text (seeded)
    PIVOT_PER_TEXT = "pivot_per_text"  # a pivot language drawn per text; the output returns to the source


class StepLanguage(StrEnum):
    SOURCE = "source"
    TARGET = "target"
    PIVOT = "pivot"


@dataclass(frozen=True)
class Step:
    """One LLM call. ``prompt`` names the template; ``language`` is the language it writes in."""

    prompt: str
    language: StepLanguage


@dataclass(frozen=True)
class Transformation:
    name: str
    label: str
    axis: Axis
    steps: tuple[Step, ...]
    language_plan: LanguagePlan
    description: str
    may_grow: bool = False
    may_shrink: bool = False
    must_shrink: bool = False
    # The rewrite keeps the meaning in the source's language, so a statement stays a statement and a
    # question a question (the ``sentence_type`` error check).
    keeps_sentence_type: bool = False
    # The output is a comma-separated list of words, not prose (controls of its studies take that
    # shape, and have no fluency to expect).
    keyword_output: bool = False
    # The rewrite must change the meaning with a small edit (the sensitivity axis): its output keeps
    # close to the source's length (the ``length_changed`` error check).
    changes_meaning: bool = False
    # Noise without an LLM (``transforms.noise``): its kind and severity (percent of units changed).
    noise: str = ""
    severity: int = 0

    @property
    def uses_llm(self) -> bool:
        return bool(self.steps)

    @property
    def n_llm_steps(self) -> int:
        return len(self.steps)

    @property
    def prompt_keys(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(step.prompt for step in self.steps))


_SRC, _TGT, _PIV = StepLanguage.SOURCE, StepLanguage.TARGET, StepLanguage.PIVOT

# The meaning-changing rewrites of the sensitivity axis: (name, label, contract). Each is one LLM
# call in the source language (its prompt has the same name, transforms.prompts).
MEANING_CHANGES: tuple[tuple[str, str, str], ...] = (
    ("negation", "Negation", "The main statement negated (or a negation removed): the meaning flips."),
    ("antonym", "Antonym", "One key word replaced by its opposite: the meaning flips, the wording barely moves."),
    (
        "number_entity_swap",
        "Swapped numbers or entities",
        "A number, date, name or place replaced by a different one of the same kind.",
    ),
    (
        "role_swap",
        "Swapped roles",
        "Who does what to whom reversed: 'the dog bit the man' becomes 'the man bit the dog'.",
    ),
)

TRANSFORMATIONS: dict[str, Transformation] = {
    t.name: t
    for t in (
        Transformation(
            "paraphrase",
            "Paraphrase",
            Axis.LEXICAL,
            (Step("paraphrase", _SRC),),
            LanguagePlan.SAME,
            "Same meaning and language, different wording.",
            keeps_sentence_type=True,
        ),
        Transformation(
            "backtranslation",
            "Backtranslation",
            Axis.LEXICAL,
            (Step("translate", _PIV), Step("translate", _SRC)),
            LanguagePlan.PIVOT_PER_TEXT,
            "Translated to a pivot language drawn per text (never the source) and back: two LLM calls.",
            keeps_sentence_type=True,
        ),
        Transformation(
            "style_change",
            "Style change",
            Axis.LEXICAL,
            (Step("style_change", _SRC),),
            LanguagePlan.SAME,
            "Formal text becomes informal and informal text formal; the meaning is kept.",
            keeps_sentence_type=True,
        ),
        Transformation(
            "expansion",
            "Expansion",
            Axis.LENGTH,
            (Step("expansion", _SRC),),
            LanguagePlan.SAME,
            "Longer text with the core meaning kept; a question stays a question.",
            may_grow=True,
            keeps_sentence_type=True,
        ),
        Transformation(
            "summarization",
            "Summarisation",
            Axis.LENGTH,
            (Step("summarization", _SRC),),
            LanguagePlan.SAME,
            "Shorter text; a question stays a question and is never answered.",
            may_shrink=True,
            must_shrink=True,
            keeps_sentence_type=True,
        ),
        Transformation(
            "summarized_expansion",
            "Summarised expansion",
            Axis.LENGTH,
            (Step("expansion", _SRC), Step("summarization", _SRC)),
            LanguagePlan.SAME,
            "Expansion followed by summarisation of the expanded text: two LLM calls.",
            keeps_sentence_type=True,
        ),
        Transformation(
            "translation",
            "Translation",
            Axis.LANGUAGE,
            (Step("translate", _TGT),),
            LanguagePlan.PER_RUN,
            "Every text translated into one target language drawn for the run (never the source).",
        ),
        Transformation(
            "cross_translation",
            "Cross-translation",
            Axis.LANGUAGE,
            (Step("translate", _TGT),),
            LanguagePlan.PER_TEXT,
            "Each text translated into a target language drawn for that text.",
        ),
        Transformation(
            "keywords",
            "Keyword extraction",
            Axis.EXTRA,
            (Step("keywords", _SRC),),
            LanguagePlan.SAME,
            "Only the key words of the text (used for augmented encoding).",
            may_shrink=True,
            keyword_output=True,
        ),
        Transformation(
            "random_keywords",
            "Random keywords",
            Axis.EXTRA,
            (),
            LanguagePlan.SAME,
            "Baseline without an LLM: at least three words drawn at random from the text.",
            may_shrink=True,
            keyword_output=True,
        ),
        *(
            Transformation(
                name,
                label,
                Axis.SENSITIVITY,
                (Step(name, _SRC),),
                LanguagePlan.SAME,
                description,
                keeps_sentence_type=True,
                changes_meaning=True,
            )
            for name, label, description in MEANING_CHANGES
        ),
    )
}


def noise_name(kind: str, severity: int) -> str:
    """The registry name of noise ``kind`` at ``severity`` percent: ``typos_5``."""
    return f"{kind}_{severity}"


TRANSFORMATIONS.update(
    {
        noise_name(kind.name, severity): Transformation(
            noise_name(kind.name, severity),
            f"{kind.label} {severity}%",
            Axis.NOISE,
            (),
            LanguagePlan.SAME,
            f"No LLM: {kind.description}, in {severity}% of the {kind.unit} (seeded).",
            noise=kind.name,
            severity=severity,
        )
        for kind in NOISE_KINDS.values()
        for severity in SEVERITIES
    }
)

KEYWORD_TRANSFORMATIONS: frozenset[str] = frozenset(name for name, t in TRANSFORMATIONS.items() if t.keyword_output)

DEFAULT_LANGUAGES: tuple[str, ...] = ("es", "fr", "de", "tr", "ar")


class UnknownTransformation(ShiftlabError, ValueError):
    """A transformation name that is not in the registry."""


def transformation_get(name: str) -> Transformation:
    try:
        return TRANSFORMATIONS[name]
    except KeyError:
        raise UnknownTransformation(
            f"unknown transformation {name!r}: choose one of {', '.join(TRANSFORMATIONS)}"
        ) from None


def noise_transformations(name: str, severities: Sequence[int] | None = None) -> tuple[str, ...]:
    """The registry names a run request for ``name`` at ``severities`` covers: ``typos`` (a noise
    kind) at 2 and 5 -> ``typos_2, typos_5``; a kind without severities -> every level of
    ``SEVERITIES``; any other name, without severities, -> itself. Severities of a transformation
    that is not a noise kind, or levels that are not offered, are refused."""
    if name in NOISE_KINDS:
        levels = tuple(dict.fromkeys(severities or SEVERITIES))
        if unknown := [s for s in levels if s not in SEVERITIES]:
            raise ShiftlabError(
                f"no severity {', '.join(map(str, unknown))}% for {name}: choose among "
                f"{', '.join(map(str, SEVERITIES))}",
                field="severities",
            )
        return tuple(noise_name(name, s) for s in levels)
    spec = transformation_get(name)
    if severities and not (spec.noise and list(severities) == [spec.severity]):
        raise ShiftlabError(
            f"severities apply to the noise kinds ({', '.join(NOISE_KINDS)}), not to {name}", field="severities"
        )
    return (name,)
