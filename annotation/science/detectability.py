"""How easily control items can be told from real items (pure module).

Controls only test attention when annotators cannot tell them apart from the items they rate.
:func:`control_detectability` trains a logistic regression to separate controls from real items
on a study's records, using only cheap surface features an attentive annotator could also notice:

- the length ratio of the two texts (log of words B / words A) and each text's word count (log);
- the word-level edit distance between them, normalised by the longer text
  (:func:`transforms.text_metrics.normalized_edit_distance`), and their word overlap (Jaccard of
  lower-cased words);
- how many other records share a text with the record;
- how list-like the second text is (commas per word: a keyword list among sentences stands out);
- how many of the second text's words are near misses of a word of the first (not in it, but one
  or two letters away, as a typo or an OCR misreading is), per word: noise stands out against
  clean text;
- whether both texts have the same language, and the language pair (one indicator per pair).

It reports the cross-validated ROC AUC (stratified k-fold, seeded; the mean over folds, classes
weighted equally), for all controls against the real items and for each kind of control alone.
0.5 means indistinguishable, 1.0 means perfectly separable. Near-copies of a real text score
about 1.0; a control built well scores near 0.5 on easy positives. Easy negatives are unrelated
texts by definition, so overlap and edit distance separate them from good rewrites: their AUC
stays high whatever the construction and is reported for completeness.

References: Pedregosa et al., "Scikit-learn: Machine Learning in Python", JMLR 12 (2011).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from rapidfuzz import process
from rapidfuzz.distance import Levenshtein
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from annotation.kinds import ItemKind
from transforms.text_metrics import normalized_edit_distance, word_count

# Fewest controls of a group, and real items, an AUC is estimated from (fewer: no estimate, and
# ``study_lock`` needs the same recorded override as for detectable controls).
MIN_PER_CLASS = 5
REAL, EASY_POSITIVE, EASY_NEGATIVE = ItemKind.REAL.value, ItemKind.EASY_POSITIVE.value, ItemKind.EASY_NEGATIVE.value
_WORD = re.compile(r"\w+", re.UNICODE)
# Columns of :func:`features`, followed by one indicator per language pair.
FEATURE_NAMES = (
    "log_length_ratio",
    "log_words_a",
    "log_words_b",
    "edit_distance",
    "word_overlap",
    "shared_texts",
    "list_shape",
    "near_misses",
    "same_language",
)


@dataclass(frozen=True)
class Record:
    """One study record as annotators see it, with its kind (``real``, ``easy_positive``,
    ``easy_negative``) and languages."""

    kind: str
    text_a: str
    text_b: str
    language_a: str = ""
    language_b: str = ""


@dataclass(frozen=True)
class DetectabilityScore:
    """Cross-validated AUC of one group of controls against the real items, or None with the reason."""

    auc: float | None
    n_controls: int
    n_real: int
    folds: int
    reason: str = ""

    def text(self) -> str:
        return f"{self.auc:.2f}" if self.auc is not None else f"n/a ({self.reason})"


@dataclass(frozen=True)
class ControlDetectability:
    all: DetectabilityScore
    easy_positive: DetectabilityScore
    easy_negative: DetectabilityScore

    @classmethod
    def from_dict(cls, data: dict) -> ControlDetectability:
        """The result back from ``dataclasses.asdict`` (as ``Study.sample_info`` stores it)."""
        return cls(**{name: DetectabilityScore(**data[name]) for name in ("all", "easy_positive", "easy_negative")})

    def summary(self) -> str:
        return (
            "Controls detectability (cross-validated AUC, 0.5 = indistinguishable): "
            f"all {self.all.text()}, easy positives {self.easy_positive.text()}, "
            f"easy negatives {self.easy_negative.text()}"
        )


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text)}


def near_misses(text_a: str, text_b: str) -> float:
    """Words of ``text_b`` that are not in ``text_a`` but within one letter (two for words of six
    letters or more) of one of its words of two letters or more, per word of ``text_b``. Words of
    one letter are left out: any two are one letter apart ("a" and the "s" of "woman's")."""
    words_b = [w.lower() for w in _WORD.findall(text_b)]
    if not words_b:
        return 0.0
    words_a = _words(text_a)
    longer = [w for w in words_a if len(w) > 1]
    missed = 0
    for word in words_b:
        if len(word) > 1 and word not in words_a:
            bound = 2 if len(word) >= 6 else 1
            missed += process.extractOne(word, longer, scorer=Levenshtein.distance, score_cutoff=bound) is not None
    return missed / len(words_b)


def features(records: Sequence[Record]) -> np.ndarray:
    """The feature matrix (one row per record) described in the module docstring."""
    texts = Counter()
    for r in records:
        texts.update({r.text_a, r.text_b})
    pairs = sorted({f"{r.language_a}>{r.language_b}" for r in records})
    rows = []
    for r in records:
        words_a, words_b = max(word_count(r.text_a), 1), max(word_count(r.text_b), 1)
        set_a, set_b = _words(r.text_a), _words(r.text_b)
        union = set_a | set_b
        own = {r.text_a, r.text_b}
        shared = sum(texts[t] - 1 for t in own)
        pair = f"{r.language_a}>{r.language_b}"
        rows.append(
            [
                math.log(words_b / words_a),
                math.log(words_a),
                math.log(words_b),
                normalized_edit_distance(r.text_a, r.text_b),
                len(set_a & set_b) / len(union) if union else 1.0,
                float(shared),
                r.text_b.count(",") / words_b,
                near_misses(r.text_a, r.text_b),
                float(r.language_a == r.language_b),
                *(float(pair == p) for p in pairs),
            ]
        )
    return np.asarray(rows, dtype=float)


def _score(x: np.ndarray, y: np.ndarray, *, n_splits: int, min_per_class: int, seed: int, what: str):
    n_controls, n_real = int(y.sum()), int(len(y) - y.sum())
    smallest = min(n_controls, n_real)
    if smallest < min_per_class:
        reason = f"needs at least {min_per_class} {what} and {min_per_class} real items, has {n_controls} and {n_real}"
        return DetectabilityScore(None, n_controls, n_real, 0, reason)
    folds = min(n_splits, smallest)
    model = make_pipeline(StandardScaler(), LogisticRegression(class_weight="balanced", max_iter=1000))
    cv = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    aucs = cross_val_score(model, x, y, cv=cv, scoring="roc_auc")
    return DetectabilityScore(float(np.mean(aucs)), n_controls, n_real, folds)


def control_detectability(
    records: Sequence[Record],
    *,
    rng: np.random.Generator,
    n_splits: int = 5,
    min_per_class: int = MIN_PER_CLASS,
) -> ControlDetectability:
    """How well cheap features tell controls from real items (see the module docstring).

    Parameters
    ----------
    records : sequence of Record
        Every record of a study, real items and controls.
    rng : numpy.random.Generator
        Seeds the fold split (one draw), so the same records and generator state give the same AUCs.
    n_splits : int
        Folds of the stratified cross-validation (fewer when a class has fewer members).
    min_per_class : int
        A score needs at least this many controls of the group and real items; otherwise its AUC
        is None and ``reason`` says why.
    """
    if n_splits < 2 or min_per_class < 2:
        raise ValueError("cross-validation needs n_splits >= 2 and min_per_class >= 2")
    seed = int(rng.integers(2**31 - 1))
    kinds = np.array([r.kind for r in records])
    unknown = set(kinds) - {REAL, EASY_POSITIVE, EASY_NEGATIVE}
    if unknown:
        raise ValueError(f"unknown record kind(s) {sorted(unknown)}")
    x = features(records) if len(records) else np.zeros((0, 1))
    scores = {}
    for name, group, what in (
        ("all", {EASY_POSITIVE, EASY_NEGATIVE}, "controls"),
        ("easy_positive", {EASY_POSITIVE}, "easy positives"),
        ("easy_negative", {EASY_NEGATIVE}, "easy negatives"),
    ):
        keep = np.isin(kinds, [REAL, *group])
        y = np.isin(kinds[keep], list(group)).astype(int)
        scores[name] = _score(x[keep], y, n_splits=n_splits, min_per_class=min_per_class, seed=seed, what=what)
    return ControlDetectability(**scores)
