"""Control detectability: a classifier's cross-validated AUC at telling controls from real items."""

import numpy as np
import pytest

from annotation.science.detectability import Record, control_detectability, features, near_misses

VOCABULARY = [f"w{k}" for k in range(300)]


def sentence(rng, n):
    return " ".join(rng.choice(VOCABULARY, size=n)) + "."


def rewrite(rng, text, changed):
    words = text.rstrip(".").split()
    for k in rng.choice(len(words), size=min(changed, len(words)), replace=False):
        words[k] = str(rng.choice(VOCABULARY))
    return " ".join(words) + "."


def records_like_real(rng, kind, n):
    out = []
    for _ in range(n):
        a = sentence(rng, int(rng.integers(6, 20)))
        out.append(Record(kind, a, rewrite(rng, a, int(rng.integers(1, 6))), "en", "en"))
    return out


def test_separable_controls_score_about_one():
    rng = np.random.default_rng(0)
    real = records_like_real(rng, "real", 60)
    # Old-style controls: a near copy (final full stop dropped) and a text shared with a real item.
    copies = [Record("easy_positive", r.text_a, r.text_a.rstrip("."), "en", "") for r in real[:10]]
    negatives = [Record("easy_negative", r.text_a, real[-1 - k].text_b, "en", "") for k, r in enumerate(real[10:20])]
    result = control_detectability(real + copies + negatives, rng=np.random.default_rng(1))
    assert result.easy_positive.auc > 0.95 and result.easy_negative.auc > 0.95 and result.all.auc > 0.95
    assert (result.all.n_controls, result.all.n_real, result.easy_positive.folds) == (20, 60, 5)


def test_controls_drawn_like_real_items_score_about_one_half():
    rng = np.random.default_rng(2)
    records = records_like_real(rng, "real", 300) + records_like_real(rng, "easy_positive", 150)
    records += records_like_real(rng, "easy_negative", 150)
    result = control_detectability(records, rng=np.random.default_rng(3))
    for score in (result.all, result.easy_positive, result.easy_negative):
        assert abs(score.auc - 0.5) < 0.1


def test_too_few_controls_give_no_auc_with_the_reason():
    rng = np.random.default_rng(4)
    records = records_like_real(rng, "real", 20) + records_like_real(rng, "easy_positive", 3)
    records += records_like_real(rng, "easy_negative", 6)
    result = control_detectability(records, rng=np.random.default_rng(0))
    assert result.easy_positive.auc is None and "at least 5 easy positives" in result.easy_positive.reason
    assert result.easy_negative.auc is not None and result.easy_negative.folds == 5
    assert result.all.n_controls == 9
    summary = result.summary()
    assert summary.startswith("Controls detectability (cross-validated AUC, 0.5 = indistinguishable): all 0.")
    assert "easy positives n/a (needs at least 5 easy positives and 5 real items, has 3 and 20)" in summary
    empty = control_detectability([], rng=np.random.default_rng(0))
    assert empty.all.auc is None and empty.all.n_real == 0


def test_same_records_and_seed_give_the_same_auc_and_features_count_shared_texts():
    rng = np.random.default_rng(5)
    records = records_like_real(rng, "real", 30) + records_like_real(rng, "easy_positive", 10)
    first = control_detectability(records, rng=np.random.default_rng(9))
    assert first == control_detectability(records, rng=np.random.default_rng(9))
    shared = [Record("real", "a b", "c d"), Record("easy_negative", "a b", "e f"), Record("real", "g h", "c d")]
    assert features(shared)[:, 5].tolist() == [2.0, 1.0, 1.0]
    with pytest.raises(ValueError, match="unknown record kind"):
        control_detectability([Record("gold", "a", "b")], rng=np.random.default_rng(0))


def test_near_misses_count_typo_like_words_per_word_of_text_b():
    # Counted by hand: of the 9 words of B, "groyp", "oh" and "bezch" are one letter from a word of A
    # and "doccdr" (6 letters) two from "soccer"; "of", "men", "play", "the" are A's own, and "S" has
    # one letter (any two such are one letter apart).
    typed = near_misses("A group of men play soccer on the beach.", "S groyp of men play doccdr oh the bezch.")
    assert typed == pytest.approx(4 / 9)
    # A rewrite's new words are other words, not misspellings: "measures" is 3 letters from
    # "measuring", and "A" has one letter.
    assert near_misses("One woman is measuring another woman's ankle.", "A woman measures another woman's ankle.") == 0
    assert near_misses("Same words.", "Same words.") == 0 and near_misses("Text.", "") == 0
