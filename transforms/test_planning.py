"""Pure parts of the engine: registry, prompts, seeded language draws, random keywords."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from transforms import planning
from transforms.prompts import DEFAULT_PROMPTS, PromptText, default_prompt, validate_template
from transforms.registry import TRANSFORMATIONS, Axis, LanguagePlan, StepLanguage


def test_registry_has_the_ten_transformations_with_their_axes_and_steps():
    axes = {name: t.axis for name, t in TRANSFORMATIONS.items() if not t.noise}
    assert axes == {
        "paraphrase": Axis.LEXICAL,
        "backtranslation": Axis.LEXICAL,
        "style_change": Axis.LEXICAL,
        "expansion": Axis.LENGTH,
        "summarization": Axis.LENGTH,
        "summarized_expansion": Axis.LENGTH,
        "translation": Axis.LANGUAGE,
        "cross_translation": Axis.LANGUAGE,
        "keywords": Axis.EXTRA,
        "random_keywords": Axis.EXTRA,
        "negation": Axis.SENSITIVITY,
        "antonym": Axis.SENSITIVITY,
        "number_entity_swap": Axis.SENSITIVITY,
        "role_swap": Axis.SENSITIVITY,
    }
    steps = {name: t.n_llm_steps for name, t in TRANSFORMATIONS.items()}
    assert steps["backtranslation"] == steps["summarized_expansion"] == 2
    assert steps["random_keywords"] == 0
    assert all(
        n == 1
        for name, n in steps.items()
        if name not in {"backtranslation", "summarized_expansion", "random_keywords"}
        and not TRANSFORMATIONS[name].noise
    )
    noise = [t for t in TRANSFORMATIONS.values() if t.noise]  # 6 kinds x 4 severities, no LLM
    assert len(noise) == 24 and all(t.axis is Axis.NOISE and not t.uses_llm for t in noise)
    bt = TRANSFORMATIONS["backtranslation"]
    assert [s.language for s in bt.steps] == [StepLanguage.PIVOT, StepLanguage.SOURCE]
    assert TRANSFORMATIONS["translation"].language_plan is LanguagePlan.PER_RUN
    assert TRANSFORMATIONS["cross_translation"].language_plan is LanguagePlan.PER_TEXT
    assert TRANSFORMATIONS["summarization"].must_shrink and TRANSFORMATIONS["expansion"].may_grow
    for t in TRANSFORMATIONS.values():
        assert set(t.prompt_keys) <= set(DEFAULT_PROMPTS)


def test_default_prompts_render_and_are_valid():
    for key in DEFAULT_PROMPTS:
        prompt = default_prompt(key)
        validate_template(prompt.system, prompt.user)
        messages = prompt.messages(text="The cat sat.", language="Spanish", source_language="English")
        assert messages[0]["role"] == "system" and "The cat sat." in messages[1]["content"]


def test_prompt_hash_changes_with_any_edit():
    base = default_prompt("paraphrase")
    edited = PromptText("paraphrase", base.system, base.user + " Be brief.")
    assert base.content_hash != edited.content_hash
    assert base.content_hash == default_prompt("paraphrase").content_hash


@pytest.mark.parametrize(
    "system,user,message",
    [
        ("ok", "no text here", "must contain {text}"),
        ("ok", "{text} {colour}", "unknown placeholder(s) colour"),
        ("{oops", "{text}", "not a valid template"),
    ],
)
def test_invalid_templates_are_explained(system, user, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        validate_template(system, user)


def test_run_language_is_seeded_and_never_the_source():
    languages = ["es", "fr", "de", "tr", "ar", "en"]
    draws = {planning.draw_run_language(seed=s, languages=languages, source_language="en") for s in range(200)}
    assert draws == {"es", "fr", "de", "tr", "ar"}
    assert planning.draw_run_language(seed=7, languages=languages, source_language="en") == planning.draw_run_language(
        seed=7, languages=languages, source_language="en"
    )


@given(st.integers(0, 10**9), st.text(min_size=1, max_size=30))
def test_text_language_is_reproducible_and_excludes_source(seed, text_hash):
    kwargs = {"seed": seed, "text_hash": text_hash, "languages": ["es", "fr", "de"], "source_language": "fr"}
    first = planning.draw_text_language(**kwargs)
    assert first == planning.draw_text_language(**kwargs) and first in {"es", "de"}


def test_text_languages_vary_across_texts():
    drawn = [
        planning.draw_text_language(
            seed=1, text_hash=f"h{i}", languages=["es", "fr", "de", "tr", "ar"], source_language="en"
        )
        for i in range(100)
    ]
    counts = {code: drawn.count(code) for code in set(drawn)}
    assert set(counts) == {"es", "fr", "de", "tr", "ar"} and min(counts.values()) >= 8


def test_only_source_language_left_is_an_error():
    with pytest.raises(ValueError, match="no target language left"):
        planning.draw_run_language(seed=1, languages=["en"], source_language="en")


def test_sampling_seed_changes_with_attempt_and_step():
    seeds = {planning.sampling_seed(seed=1, text_hash="h", step=s, attempt=a) for s in range(2) for a in range(3)}
    assert len(seeds) == 6


def test_random_keywords_are_words_of_the_text_at_least_three():
    text = "The quick brown fox jumps over the lazy dog near the quiet river bank today"
    words = planning.random_keywords(text, seed=3, text_hash="x").split(", ")
    assert len(words) >= 3 and all(w in text.split() for w in words)
    assert planning.random_keywords(text, seed=3, text_hash="x") == ", ".join(words)
    assert planning.random_keywords("Two words", seed=1, text_hash="y") == "Two, words"


def test_the_augmentation_papers_keyword_share_keeps_16_of_58_words_without_punctuation():
    # 58 word tokens (the paper's mean text length), with punctuation between them.
    words = [f"w{i}" for i in range(58)]
    text = ", ".join(words[:29]) + ". " + "; ".join(words[29:]) + "!"
    kept = planning.random_keywords(text, seed=1, text_hash="t", sampling=planning.PAPER_KEYWORD_SAMPLING)
    # round(16.1 / 58.2 * 58) = round(16.04) = 16 words, in text order, separated by spaces only.
    assert len(kept.split(" ")) == 16
    assert not any(mark in kept for mark in ",.;!")
    tokens = kept.split(" ")
    assert tokens == sorted(tokens, key=words.index) and set(tokens) <= set(words)
    assert planning.PAPER_KEYWORD_SAMPLING.share == pytest.approx(0.2766, abs=1e-4)


def test_the_papers_share_counts_repeated_words_and_the_default_does_not():
    text = "rain rain rain rain rain rain rain rain rain rain sun"
    default = planning.random_keywords(text, seed=2, text_hash="r")
    paper = planning.random_keywords(text, seed=2, text_hash="r", sampling=planning.PAPER_KEYWORD_SAMPLING)
    assert sorted(default.split(", ")) == ["rain", "sun"]  # two distinct words: all of them
    assert len(paper.split(" ")) == 3  # max(3, round(0.2766 * 11)) word tokens
