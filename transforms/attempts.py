"""Attempts of one text through a transformation's steps (pure module).

A chunk turns each unique input text into a :class:`TextState` that goes through the LLM steps,
attempt after attempt. This module decides, without touching the database or a backend, what each
step asks for (:func:`plan_step`: languages, sampling seed, cache key) and what happens after an
attempt (:func:`finish_attempt`: keep the outcome, try again or give up).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from corpora.task_types import task_spec
from transforms import planning
from transforms.cache_keys import generation_key
from transforms.cleaning import clean_output
from transforms.error_checks import OutputAnalysis, analyse_output
from transforms.languages import identifier_code
from transforms.registry import LanguagePlan, Step, StepLanguage, Transformation
from transforms.text_metrics import normalized_edit_distance, word_count

__all__ = [
    "BACKEND_FAILURE",
    "StepCall",
    "TextState",
    "analyse_attempt",
    "finish_attempt",
    "plan_step",
    "plan_text",
    "record_step",
    "side_language",
]

#: The error of an attempt whose LLM call failed for good (not a transient failure).
BACKEND_FAILURE = "backend_failure"


@dataclass
class TextState:
    """One unique input text of a chunk and its progress through steps and attempts."""

    text: str
    text_hash: str
    source_language: str
    target_language: str
    pivot_language: str
    attempt: int = 0
    errors: list[str] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)
    current: str = ""
    failed_step: bool = False
    outcome: dict | None = None
    calls: int = 0
    hits: int = 0

    def start_attempt(self) -> None:
        """Begin the steps again from the source text."""
        self.current, self.keys, self.failed_step = self.text, [], False


@dataclass(frozen=True)
class StepCall:
    """What one text asks of one step: the generation's cache key and the request's inputs."""

    text: TextState
    key: str
    language: str
    input_language: str
    sampling_seed: int


def side_language(language: str, side: str, task_type: str) -> str:
    """Cross-lingual pair datasets carry "en-de": the first code is sentence1's, the last sentence2's.
    A script subtag belongs to the language ("zh-Hant", "sr-Latn" are one language, kept whole); a
    region subtag is dropped ("pt-BR" -> "pt")."""
    parts = language.split("-")
    if len(parts) == 2 and len(parts[1]) == 4 and parts[1].isalpha():
        return language
    if len(parts) == 2 and (parts[1].isdigit() or (len(parts[1]) == 2 and parts[1].isupper())):
        return parts[0]  # a region ("pt-BR", "es-419"), not a second language
    if task_spec(task_type).sentence_pairs and side == "sentence2":
        return parts[-1]
    return parts[0]


def plan_text(
    text: str,
    text_hash: str,
    source_language: str,
    *,
    language_plan: LanguagePlan,
    run_language: str,
    seed: int,
    languages: Sequence[str],
) -> TextState:
    """A text's state before its first attempt, with its target and pivot languages drawn."""
    target, pivot = source_language, ""
    if language_plan is LanguagePlan.PER_RUN:
        target = run_language
    elif language_plan is LanguagePlan.PER_TEXT:
        target = planning.draw_text_language(
            seed=seed, text_hash=text_hash, languages=languages, source_language=source_language
        )
    elif language_plan is LanguagePlan.PIVOT_PER_TEXT:
        pivot = planning.draw_text_language(
            seed=seed, text_hash=text_hash, languages=languages, source_language=source_language
        )
    return TextState(text, text_hash, source_language, target, pivot)


def _step_language(t: TextState, language: StepLanguage) -> str:
    return {
        StepLanguage.SOURCE: t.source_language,
        StepLanguage.TARGET: t.target_language,
        StepLanguage.PIVOT: t.pivot_language,
    }[language]


def plan_step(
    texts: Sequence[TextState],
    *,
    step: Step,
    step_index: int,
    transformation: str,
    prompt_hash: str,
    model: str,
    params_hash: str,
    seed: int,
    model_identity: str = "",
) -> list[StepCall]:
    """The call of every text for one step, in order, from each text's current input."""
    calls = []
    for t in texts:
        language = _step_language(t, step.language)
        # The language the current input is written in: the pivot after the first backtranslation step.
        input_language = t.pivot_language if step_index and t.pivot_language else t.source_language
        key = generation_key(
            input_text=t.current,
            transformation=transformation,
            step=step_index,
            prompt_hash=prompt_hash,
            model=model,
            params_hash=params_hash,
            seed=seed,
            attempt=t.attempt,
            language=language,
            input_language=input_language,
            model_identity=model_identity,
        )
        sampling_seed = planning.sampling_seed(seed=seed, text_hash=t.text_hash, step=step_index, attempt=t.attempt)
        calls.append(StepCall(t, key, language, input_language, sampling_seed))
    return calls


def record_step(t: TextState, key: str, *, output: str, failure: str) -> None:
    """Take a step's generation as the text's next input (or mark the attempt failed)."""
    t.keys.append(key)
    if failure:
        t.failed_step = True
        t.current = ""
    else:
        t.current = clean_output(output)


def finish_attempt(
    texts: Sequence[TextState],
    spec: Transformation,
    candidates: list[str],
    *,
    max_attempts: int,
    check_language: bool = True,
) -> list[TextState]:
    """Record the outcome of every text whose attempt is final; return the texts to try again."""
    retry = []
    for t in texts:
        if t.failed_step:
            t.errors.append(BACKEND_FAILURE)
            if t.attempt + 1 < max_attempts:
                t.attempt += 1
                retry.append(t)
            else:
                t.outcome = _outcome(t, None, error_type=BACKEND_FAILURE)
            continue
        if not analyse_attempt(
            t, spec, t.current, candidates, max_attempts=max_attempts, check_language=check_language
        ):
            t.attempt += 1
            retry.append(t)
    return retry


def analyse_attempt(
    t: TextState,
    spec: Transformation,
    output: str,
    candidates: list[str],
    *,
    max_attempts: int,
    check_language: bool = True,
) -> bool:
    """Analyse the final output; record the outcome when it is good or attempts are used up.
    Return True when the text needs no further attempt. Without ``check_language`` (a run made
    with --no-language-check) the output's language is detected and stored but never an error."""
    expected = identifier_code(t.target_language or t.source_language) if check_language else None
    analysis = analyse_output(
        t.text,
        output,
        expected_language=expected,
        may_grow=spec.may_grow,
        may_shrink=spec.may_shrink,
        must_shrink=spec.must_shrink,
        keep_sentence_type=spec.keeps_sentence_type,
        keep_length=spec.changes_meaning,
        language_candidates=[code for code in map(identifier_code, candidates) if code],
    )
    if analysis.error is None:
        t.errors.append("")
        t.outcome = _outcome(t, analysis, error_type="")
        return True
    t.errors.append(analysis.error.value)
    if t.attempt + 1 >= max_attempts:
        t.outcome = _outcome(t, analysis, error_type=analysis.error.value)
        return True
    return False


def record_noise(t: TextState, output: str) -> None:
    """Record a noise output as computed: no cleaning and no error check (noise keeps the meaning by
    construction, and a text with nothing of its kind to change, such as an English text under
    diacritics removal, stays identical and counts as done)."""
    analysis = OutputAnalysis(
        text=output,
        error=None,
        all_errors=(),
        detected_language=None,
        edit_distance=normalized_edit_distance(t.text, output),
        length_ratio=word_count(output) / max(word_count(t.text), 1),
    )
    t.errors.append("")
    t.outcome = _outcome(t, analysis, error_type="")


def _outcome(t: TextState, analysis: OutputAnalysis | None, *, error_type: str) -> dict:
    """The stored fields of a text's final attempt; ``analysis`` is None when the backend failed."""
    return {
        "output_text": analysis.text if analysis else "",
        "ok": not error_type,
        "error_type": error_type,
        "attempt_errors": list(t.errors),
        "attempts": t.attempt + 1,
        "target_language": t.target_language,
        "pivot_language": t.pivot_language,
        "detected_language": (analysis.detected_language or "") if analysis else "",
        "edit_distance": analysis.edit_distance if analysis else None,
        "length_ratio": analysis.length_ratio if analysis else None,
        "generation_keys": list(t.keys),
        "llm_calls": t.calls,
    }
