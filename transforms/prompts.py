"""Default prompt wording (written for Shiftlab) and prompt rendering (pure module).

A template has a system part and a user part; ``{text}`` is the input, ``{language}`` the name
of the language the answer must be written in, ``{source_language}`` the input's language.
Its content hash covers both parts, so any edit is a new version and misses the cache.
"""

from __future__ import annotations

import string
from dataclasses import dataclass

from core.errors import ShiftlabError
from core.hashing import sha256_json

SYSTEM = (
    "You are a careful text editor for a research benchmark. Follow the instruction exactly and reply "
    "with the resulting text only: no title, no label, no quotation marks, no explanation."
)

DEFAULT_PROMPTS: dict[str, tuple[str, str]] = {
    "paraphrase": (
        SYSTEM,
        "Reword the text below in {language} so that it means exactly the same thing but uses different "
        "words and sentence structure where natural. Keep every fact, name and number. If it is a "
        "question, keep it a question.\n\nText: {text}",
    ),
    "translate": (
        SYSTEM,
        "Translate the text below from {source_language} into {language}. Keep the meaning, tone and "
        "sentence type (a question stays a question). Write only the {language} translation.\n\n"
        "Text: {text}",
    ),
    "style_change": (
        SYSTEM,
        "Change the register of the text below while keeping its meaning and its language ({language}). "
        "If it sounds formal, rewrite it in a casual, everyday style; if it sounds casual, rewrite it "
        "in a formal, polished style. If it is a question, keep it a question.\n\nText: {text}",
    ),
    "expansion": (
        SYSTEM,
        "Rewrite the text below in {language} as a longer version, about two to three times its length, "
        "by adding plausible detail and elaboration that does not change its core meaning. If it is a "
        "question, the result must still be a question and must not answer it.\n\nText: {text}",
    ),
    "summarization": (
        SYSTEM,
        "Write a shorter version of the text below in {language} that keeps only its central meaning. "
        "It must have fewer words than the original. If it is a question, the result must be a shorter "
        "question; never answer it.\n\nText: {text}",
    ),
    "keywords": (
        SYSTEM,
        "List the most important keywords of the text below, in {language}, separated by commas. "
        "Use words or short phrases only, most important first, at most eight.\n\nText: {text}",
    ),
    # The sensitivity axis: small edits that must change the meaning (transforms.registry.MEANING_CHANGES).
    # No worked example sentences: small models copy them into their answer.
    "negation": (
        SYSTEM,
        "Make the text below say the opposite by negating its main statement: add a negation such as "
        "'not', 'never' or 'no', or take one away if it is already negative. Change as few words as "
        "possible, keep every other word, and write in {language}. A question stays a question.\n\n"
        "Text: {text}",
    ),
    "antonym": (
        SYSTEM,
        "Replace one important word of the text below with a word of opposite meaning (such as open and "
        "closed, rise and fall, safe and dangerous), so that the text now means something different. "
        "Change nothing else, do not add a negation, and write in {language}. A question stays a "
        "question.\n\nText: {text}",
    ),
    "number_entity_swap": (
        SYSTEM,
        "Change one fact of the text below: replace a number, date, person, organisation or place with "
        "a different one of the same kind, so that the text now states something else. If the text has "
        "none of these, replace its main subject with a different one. Keep every other word, and "
        "write in {language}. A question stays a question.\n\nText: {text}",
    ),
    "role_swap": (
        SYSTEM,
        "Swap the roles in the text below: exchange who does something and who it is done to (or the "
        "two things being compared or connected), reusing the same words as far as possible, so that "
        "the meaning changes. Write in {language}. A question stays a question.\n\nText: {text}",
    ),
}

PLACEHOLDERS = frozenset({"text", "language", "source_language"})


@dataclass(frozen=True)
class PromptText:
    key: str
    system: str
    user: str

    @property
    def content_hash(self) -> str:
        return prompt_hash(self.system, self.user)

    def messages(self, *, text: str, language: str, source_language: str) -> list[dict[str, str]]:
        values = {"text": text, "language": language, "source_language": source_language}
        return [
            {"role": "system", "content": self.system.format(**values)},
            {"role": "user", "content": self.user.format(**values)},
        ]


def prompt_hash(system: str, user: str) -> str:
    return sha256_json({"system": system, "user": user})


def default_prompt(key: str) -> PromptText:
    system, user = DEFAULT_PROMPTS[key]
    return PromptText(key, system, user)


class PromptTemplateError(ShiftlabError, ValueError):
    """A prompt template that cannot be rendered."""


def validate_template(system: str, user: str) -> None:
    """Raise PromptTemplateError naming the problem when a template cannot be rendered."""
    for part_name, part in (("system", system), ("user", user)):
        try:
            fields = {name for _, name, _, _ in string.Formatter().parse(part) if name is not None}
        except ValueError as exc:
            raise PromptTemplateError(
                f"the {part_name} part is not a valid template ({exc}); write literal braces as {{{{ }}}}"
            ) from None
        unknown = fields - PLACEHOLDERS
        if unknown:
            raise PromptTemplateError(
                f"the {part_name} part uses unknown placeholder(s) {', '.join(sorted(unknown))}: "
                f"only {{text}}, {{language}} and {{source_language}} exist"
            )
    if "{text}" not in user:
        raise PromptTemplateError("the user part must contain {text}, where the input text goes")
