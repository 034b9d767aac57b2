"""Control items: their construction (they must look like real items) and the per-rater check."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from annotation.kinds import ItemKind
from annotation.science.control_check import ControlRating, ControlStatus, control_check, expected_value
from annotation.science.controls import (
    MAX_NEGATIVE_OVERLAP,
    ControlShortage,
    PairCandidate,
    Shape,
    TextCandidate,
    draw_controls,
    n_controls,
)
from annotation.science.design import QUESTIONS, StudyDesign, StudyKind
from annotation.science.text_measures import (
    content_overlap,
    content_words,
    is_punctuation_edit,
    keyword_list,
    looks_like_keywords,
)
from transforms.text_metrics import word_count

SOURCES = [
    "The volcano erupted last night after weeks of small tremors.",
    "Stock markets fell sharply today as investors feared higher interest rates.",
    "The museum will reopen next spring with a new wing for modern art.",
    "Heavy snow closed the mountain pass for the whole weekend.",
    "The council approved a new budget for public libraries.",
    "Our neighbours adopted two kittens from the local shelter.",
]
OUTPUTS = [
    "Last night the volcano erupted, following weeks of minor tremors.",
    "Fearing rising interest rates, investors sent stock markets sharply lower today.",
    "Next spring the museum reopens, adding a new modern art wing.",
    "The mountain pass was shut all weekend because of heavy snow.",
    "A new budget for public libraries was approved by the council.",
    "Two kittens from the local shelter were adopted by our neighbours.",
]
GOLD = [
    ("She forgot her umbrella at the café.", "She left her umbrella behind at the coffee shop."),
    ("The train to Lyon was delayed by forty minutes.", "The Lyon train ran forty minutes late."),
    ("A man is slicing onions on a board.", "Someone is chopping onions on a wooden board."),
    ("The company reported record profits.", "The firm's profits reached an all-time high."),
    ("The museum is closed on Mondays.", "On Mondays the museum does not open."),
    ("Several towns were flooded after heavy rain.", "Heavy rainfall flooded several towns."),
]
HELD_BACK = [
    (
        "A cyclist won the final stage of the race in heavy rain.",
        "In heavy rain, a cyclist took the race's last stage.",
    ),
    ("The bakery sells bread made with spelt flour.", "Bread baked from spelt flour is sold at the bakery."),
    (
        "Scientists found water ice near the moon's south pole.",
        "Water ice was discovered close to the lunar south pole.",
    ),
    ("The school added a course on computer programming.", "A programming course has been added by the school."),
    (
        "Farmers expect a poor harvest after the long drought.",
        "After the long drought, farmers predict a weak harvest.",
    ),
    (
        "The orchestra played a new symphony to a full hall.",
        "To a packed hall, the orchestra performed a new symphony.",
    ),
    ("Tourists queued for hours to enter the old castle.", "Visitors waited hours in line to get into the old castle."),
    ("The airline cancelled dozens of flights because of fog.", "Fog forced the airline to cancel dozens of flights."),
]


def shapes(lang_a="en", lang_b="en"):
    return [Shape(lang_a, lang_b, word_count(a), word_count(b)) for a, b in zip(SOURCES, OUTPUTS, strict=True)]


def gold_tier(lang_a="en", lang_b="en", origin="gold:demo"):
    return [PairCandidate(a, b, lang_a, lang_b, origin=origin, symmetric=True) for a, b in GOLD]


def held_back_texts(lang_a="en", lang_b="en", run=1):
    texts = []
    for k, (source, output) in enumerate(HELD_BACK):
        common = {"group": k, "pool": run, "origin": f"held_back:{run}"}
        texts += [TextCandidate(source, lang_a, side="a", **common), TextCandidate(output, lang_b, side="b", **common)]
    return texts


def draw(n, *, real=None, positives=None, negatives=None, taken=None, seed=0):
    return draw_controls(
        real if real is not None else shapes(),
        n=n,
        positives=positives if positives is not None else [gold_tier()],
        negatives=negatives if negatives is not None else [held_back_texts()],
        taken=taken if taken is not None else set(SOURCES) | set(OUTPUTS),
        rng=np.random.default_rng(seed),
    )


def test_controls_use_no_text_twice_and_none_of_the_study():
    controls = draw(8)
    assert [c.kind for c in controls].count(ItemKind.EASY_POSITIVE) == 4
    assert [c.kind for c in controls].count(ItemKind.EASY_NEGATIVE) == 4
    texts = [t for c in controls for t in (c.text_a, c.text_b)]
    assert len(texts) == len(set(texts))
    assert not set(texts) & (set(SOURCES) | set(OUTPUTS))
    # A candidate sharing a text with a real item is never used.
    taken = set(SOURCES) | set(OUTPUTS) | {GOLD[0][1], HELD_BACK[0][0]}
    controls = draw(8, taken=taken)
    assert not {t for c in controls for t in (c.text_a, c.text_b)} & taken


def test_positives_are_rewrites_never_punctuation_edits():
    near_copies = [PairCandidate(s, s.rstrip("."), "en", "en", origin="copy") for s in ("A cat.", "The dog barks!")]
    near_copies.append(PairCandidate("The Dog barks", "the dog, barks.", "en", "en", origin="copy"))
    controls = draw(6, positives=[near_copies, gold_tier()])
    positives = [c for c in controls if c.kind == ItemKind.EASY_POSITIVE]
    assert positives and all(c.origin == "gold:demo" for c in positives)
    assert not any(is_punctuation_edit(c.text_a, c.text_b) for c in positives)
    assert is_punctuation_edit("Rain tomorrow.", "rain tomorrow") and not is_punctuation_edit("It rains.", "It pours.")


def test_negatives_pair_unrelated_texts_of_different_items_with_the_real_shape():
    real = [Shape("en", "de", 10, 11)] * 4 + [Shape("en", "de", 12, 12)] * 4
    english = [
        TextCandidate(f"{w} word " * n, "en", group=k, pool=1, origin="held_back:1", side="a")
        for k, (w, n) in enumerate([("alpha", 5), ("bravo", 6), ("charlie", 2), ("delta", 20)])
    ]
    german = [
        TextCandidate(f"{w} wort " * n, "de", group=10 + k, pool=1, origin="held_back:1", side="b")
        for k, (w, n) in enumerate([("eins", 5), ("zwei", 6), ("drei", 1), ("vier", 25)])
    ]
    english_b = [TextCandidate("echo word " * 5, "en", group=20, pool=1, origin="held_back:1", side="b")]
    positives = [
        [
            PairCandidate(f"en text {k} of ten words in all here ok", f"de satz {k} zehn", "en", "de", origin="pool")
            for k in range(4)
        ]
    ]
    controls = draw(4, real=real, positives=positives, negatives=[english + german + english_b])
    negatives = [c for c in controls if c.kind == ItemKind.EASY_NEGATIVE]
    assert len(negatives) == 2
    for c in negatives:
        assert (c.language_a, c.language_b) == ("en", "de")
        assert c.text_a.startswith(("alpha", "bravo")) and c.text_b.startswith(("eins", "zwei"))
        ratio = word_count(c.text_b) / word_count(c.text_a)
        assert abs(math.log(ratio)) < 0.25  # the real items' ratios are about 1, the others far off
        assert content_overlap(c.text_a, c.text_b) <= MAX_NEGATIVE_OVERLAP


def test_negatives_never_pair_texts_of_one_item_or_related_texts():
    one_item = [
        TextCandidate("the red fox jumps over", "en", group=1, pool=1, origin="t"),
        TextCandidate("a red fox jumps over it", "en", group=1, pool=1, origin="t"),
        TextCandidate("red foxes jumps over fences", "en", group=2, pool=1, origin="t"),
    ]
    with pytest.raises(ControlShortage) as raised:
        draw(2, negatives=[one_item])
    (shortage,) = raised.value.shortages
    assert (shortage.kind, shortage.needed, shortage.found) == (ItemKind.EASY_NEGATIVE, 1, 0)


def test_sources_are_used_in_order_of_preference_and_languages_follow_the_real_items():
    pool = [
        PairCandidate(
            "Can you call me back later today?", "Please ring me again later on today.", "", "", origin="pool"
        )
    ]
    controls = draw(4, positives=[pool, gold_tier()])
    positives = [c for c in controls if c.kind == ItemKind.EASY_POSITIVE]
    assert [c.origin for c in positives] == ["pool", "gold:demo"]
    assert all((c.language_a, c.language_b) == ("en", "en") for c in controls)
    # A pool pair without languages serves same-language studies only.
    with pytest.raises(ControlShortage):
        draw(2, real=shapes("en", "de"), positives=[pool], negatives=[held_back_texts("en", "de")])


def test_symmetric_gold_pairs_serve_the_reversed_language_pattern():
    controls = draw(
        4, real=shapes("en", "de"), positives=[gold_tier("de", "en")], negatives=[held_back_texts("en", "de")]
    )
    positives = [c for c in controls if c.kind == ItemKind.EASY_POSITIVE]
    assert len(positives) == 2 and all(c.text_a in {b for _, b in GOLD} for c in positives)
    assert all((c.language_a, c.language_b) == ("en", "de") for c in controls)


def test_controls_follow_the_language_mix_of_the_real_items():
    real = shapes("en", "en")[:3] + shapes("en", "de")
    positives = [
        gold_tier("en", "en")
        + [
            PairCandidate(
                f"Sentence number {k} in English here.", f"Satz Nummer {k} auf Deutsch.", "en", "de", origin="pool"
            )
            for k in range(6)
        ]
    ]
    negatives = [held_back_texts("en", "en", run=1) + held_back_texts("en", "de", run=2)]
    controls = draw(6, real=real, positives=positives, negatives=negatives)
    patterns = [(c.kind, c.language_b) for c in controls]
    assert patterns.count((ItemKind.EASY_POSITIVE, "de")) == 2 and patterns.count((ItemKind.EASY_POSITIVE, "en")) == 1
    assert patterns.count((ItemKind.EASY_NEGATIVE, "de")) == 2 and patterns.count((ItemKind.EASY_NEGATIVE, "en")) == 1


def test_shortage_names_kind_pattern_needed_and_found():
    with pytest.raises(ControlShortage) as raised:
        draw(
            10, real=shapes("en", "de"), positives=[gold_tier("en", "de")[:2]], negatives=[held_back_texts("en", "de")]
        )
    (positive,) = [s for s in raised.value.shortages if s.kind == ItemKind.EASY_POSITIVE]
    assert (positive.pattern, positive.needed, positive.found) == (("en", "de"), 5, 2)
    assert positive.found_by_origin == (("gold:demo", 2),)


def test_same_inputs_and_seed_give_the_same_controls():
    assert draw(8, seed=4) == draw(8, seed=4)
    assert n_controls(41, batch_size=20, controls_per_batch=2) == 6
    assert n_controls(5, batch_size=20, controls_per_batch=0) == 0 and draw(0) == []


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(0, 8),
    seed=st.integers(0, 2**16),
    words=st.lists(
        st.sampled_from(["sun", "rain", "river", "stone", "cloud", "bird", "tree", "lamp"]), min_size=40, max_size=40
    ),
)
def test_property_no_text_is_ever_shared(n, seed, words):
    texts = [" ".join(words[k : k + 1 + k % 5]) + f" {k}" for k in range(20)]
    real_texts = texts[:4]
    pairs = [PairCandidate(texts[k], texts[k + 1], "en", "en", origin="p", symmetric=True) for k in range(0, 20, 2)]
    loose = [TextCandidate(t, "en", group=k // 2, pool=0, origin="t") for k, t in enumerate(texts)]
    try:
        controls = draw_controls(
            [Shape("en", "en", 3, 2), Shape("en", "en", 5, 5)],
            n=n,
            positives=[pairs],
            negatives=[loose],
            taken=set(real_texts),
            rng=np.random.default_rng(seed),
        )
    except ControlShortage:
        return
    used = [t for c in controls for t in (c.text_a, c.text_b)]
    assert len(used) == len(set(used)) and not set(used) & set(real_texts) and len(controls) == n


def test_control_expectations_and_check():
    quality, fluency = StudyDesign().questions
    similarity = StudyDesign(kind="similarity").questions[0]
    assert expected_value(ItemKind.EASY_POSITIVE, quality) == 5 and expected_value(ItemKind.EASY_NEGATIVE, quality) == 1
    assert expected_value(ItemKind.EASY_NEGATIVE, fluency) is None  # an unrelated text can be fluent
    assert expected_value(ItemKind.EASY_NEGATIVE, similarity) == 0
    good = [ControlRating(5, 4), ControlRating(1, 2), ControlRating(5, 5)]
    assert control_check(good, margin=1, min_ratings=2).status == ControlStatus.PASSED
    bad = control_check(good + [ControlRating(1, 5)], margin=1, min_ratings=2)
    assert bad.status == ControlStatus.FAILED and bad.misses == (ControlRating(1, 5),) and bad.pass_rate == 0.75
    assert control_check(good[:1], margin=1, min_ratings=2).status == ControlStatus.INSUFFICIENT
    assert control_check([], margin=1, min_ratings=0).status == ControlStatus.PASSED


def test_keyword_lists_take_content_words_of_the_text_in_its_order():
    text = "The museum is closed on Mondays for cleaning."
    assert keyword_list(text, 3) == "museum, closed, Mondays"
    assert keyword_list(text, 2) == "museum, closed"
    assert keyword_list("It is on.", 5) == "It, is, on"  # all it has
    assert keyword_list("Heavy rainfall flooded several towns.", 2, prefer="The towns were flooded.") == (
        "flooded, towns"
    )
    assert content_words("This is what they said about the weather.") == 2  # said, weather
    assert looks_like_keywords("museum, closed, Mondays") and looks_like_keywords("onions, wooden board")
    assert not looks_like_keywords("The museum is closed, on Mondays.")


def test_keyword_shaped_controls_are_lists_of_their_own_text_and_expect_no_fluency():
    real = [Shape("en", "en", word_count(s), 3, 0.7, transformation="random_keywords", keywords=True) for s in SOURCES]
    controls = draw(6, real=real)
    for control in controls:
        assert control.imitates == "random_keywords" and control.keywords
        assert looks_like_keywords(control.text_b) and word_count(control.text_b) <= 3
        if control.kind == ItemKind.EASY_POSITIVE:
            # Made of text A's own words, keeping all its content words (short gold texts exist).
            words_a = {w.lower() for w in control.text_a.replace(",", " ").replace(".", " ").split()}
            assert {w.lower() for w in control.text_b.split(", ")} <= words_a
            assert control.dropped == 0
    fluency = StudyDesign().question("fluency")
    assert expected_value(ItemKind.EASY_POSITIVE, fluency, keywords=True) is None
    assert expected_value(ItemKind.EASY_POSITIVE, fluency) == fluency.high


def test_a_pool_pair_is_shown_as_given():
    pool = [PairCandidate("The shop opens at nine.", "Opening time: nine.", "", "", origin="pool", as_given=True)]
    real = [Shape("en", "en", 6, 3, 0.7, transformation="keywords", keywords=True)]
    (control,) = draw_controls(real, n=1, positives=[pool], negatives=[[]], taken=set(), rng=np.random.default_rng(0))
    assert (control.text_a, control.text_b) == ("The shop opens at nine.", "Opening time: nine.")


def _letters_changed(a: str, b: str) -> int:
    return sum(x != y for x, y in zip(a, b, strict=True))


def test_controls_of_a_noise_study_carry_its_noise_and_positives_expect_no_fluency():
    # The real items: text A against text A with 10% of its letters replaced by neighbouring keys.
    real = [Shape("en", "en", 11, 11, 0.3, transformation="typos_10", noise="typos", severity=10)]
    controls = draw(6, real=real * 6)
    seen = {t for pair in GOLD for t in pair} | {t for pair in HELD_BACK for t in pair}
    for control in controls:
        assert control.noise == 10 and control.imitates == "typos_10"
        assert control.text_b not in seen  # never a clean text: clean text would give a control away
        if control.kind == ItemKind.EASY_POSITIVE:
            # Its own text with typos (a substitution keeps the length): one letter in ten, at
            # least one, rounded half up.
            assert len(control.text_b) == len(control.text_a)
            clean = control.text_a
        else:  # an unrelated text with the same typos
            clean = min(
                (t for t in seen if len(t) == len(control.text_b)), key=lambda t: _letters_changed(t, control.text_b)
            )
        letters = sum(ch.isalpha() for ch in clean)
        assert _letters_changed(clean, control.text_b) == max(1, math.floor(letters * 0.10 + 0.5))
    quality, fluency = StudyDesign().question("quality"), StudyDesign().question("fluency")
    assert expected_value(ItemKind.EASY_POSITIVE, quality, noise=10) == quality.high
    assert expected_value(ItemKind.EASY_POSITIVE, fluency, noise=10) is None
    assert expected_value(ItemKind.EASY_NEGATIVE, quality, noise=20) == quality.low
    # The same draw gives the same noise.
    assert controls == draw(6, real=real * 6)


def test_a_positive_with_more_noise_than_reads_at_a_glance_checks_nothing():
    # At 20% whether the meaning survives is the study's question: the control keeps the real
    # items' look but expects no answer; an unrelated text stays unrelated whatever its noise.
    design = StudyDesign()
    for question in design.questions:
        assert expected_value(ItemKind.EASY_POSITIVE, question, noise=20) is None
        if question.meaning:
            assert expected_value(ItemKind.EASY_NEGATIVE, question, noise=20) == question.low
    changed = QUESTIONS[StudyKind.SENSITIVITY][0]
    assert changed.inverse
    assert expected_value(ItemKind.EASY_POSITIVE, changed, noise=10) == changed.low
    assert expected_value(ItemKind.EASY_POSITIVE, changed, noise=20) is None


def test_an_output_of_the_noise_studys_own_run_is_not_given_noise_twice():
    real = [Shape("en", "en", 11, 11, 0.3, transformation="typos_10", noise="typos", severity=10)]
    own_run = [
        TextCandidate(t.text, t.language, t.group, t.pool, t.origin, side=t.side, transformation="typos_10")
        for t in held_back_texts()
    ]
    controls = draw_controls(
        real, n=2, positives=[gold_tier()], negatives=[own_run], taken=set(), rng=np.random.default_rng(0)
    )
    (negative,) = [c for c in controls if c.kind == ItemKind.EASY_NEGATIVE]
    assert negative.noise == 10
    assert negative.text_b in {output for _, output in HELD_BACK}  # shown as the run wrote it
