"""Control items and the per-rater control check (pure module).

Two kinds of control ("dummy") items, shown in exactly the same two fields as real items:

- **easy positive**: a text against a meaning-preserving rewrite of it, never a punctuation or
  case edit: a pair from the researcher's control pool, a pair validated in an earlier study, or a
  gold paraphrase pair of a dataset. Every question's expected answer is the top of its scale.
- **easy negative**: a text against an unrelated text (different dataset items, little word
  overlap): a pair from the control pool, or two texts not in the study, typically the source of
  one held-back item and the output of another held-back item of the same run. Meaning questions
  (quality, similarity) expect the bottom of the scale; fluency has no expectation, since an
  unrelated text can be perfectly fluent.

Controls must not stand out among the real items, so :func:`draw_controls`

- never uses a text that appears anywhere else in the study (in a real item or another control);
- gives the controls the language patterns of the real items (text A in ``en``, text B in ``de``
  for an en→de study), in proportion to the real items of each pattern;
- makes each control copy the shape of a randomly drawn real item of one transformation and
  pattern (controls are shared over transformations and patterns in proportion to their real
  items): the word count of text A, the length ratio B/A and, for easy positives, how much B
  rewrites A (normalised word edit distance) and how many words they share (word overlap); the
  closest of up to 256 candidates is taken. For a
  transformation whose output is a keyword list (``keywords``, ``random_keywords``) text B becomes
  a keyword list too (``text_measures.keyword_list``, the real item's number of words, content words
  first): of text A's own words for an easy positive (a gold pair supplies text A; a text whose
  content words all fit in the list is always preferred, so that the list keeps its meaning, and
  ``ControlPair.dropped`` counts the content words left out when none fits), of the unrelated
  text B's for an easy negative. A researcher's pool pair is shown as given;
- gives controls of a noise study (``typos_10``, ``ocr_5``: the real items' text B carries seeded
  noise, ``transforms.noise``) the same noise, so that clean text does not give them away: an easy
  positive becomes text A against text A itself with that noise kind and severity; an easy
  negative's unrelated text B gets the noise, unless it already is an output of that
  transformation (a held-back item of the study's own run). The noise is seeded by the text, so
  the same draw gives the same controls. A researcher's pool pair is still shown as given;
- takes candidates from the first source (tier) that still has one, so a researcher's pool is
  used before validated pairs, and validated pairs before dataset gold pairs.

Expected answers and the per-rater control check are in :mod:`annotation.science.control_check`.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Collection, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from annotation.kinds import ItemKind
from annotation.science.text_measures import (
    content_overlap,
    dropped_content_words,
    is_punctuation_edit,
    keyword_list,
    looks_like_keywords,
    word_overlap,
)
from core.hashing import sha256_text
from transforms.noise import perturb
from transforms.text_metrics import normalized_edit_distance, word_count

# An easy negative's texts share at most this Jaccard overlap of content words (4+ letters).
MAX_NEGATIVE_OVERLAP = 0.2
# Candidates scored per control when matching a real item's shape (bounds the work on big pools).
_SHAPE_CANDIDATES = 256
# Added to a keyword-shaped positive's shape distance per content word its list drops: more than
# any shape difference, so that lists keeping every content word are always taken first.
_DROPPED_WORD_PENALTY = 10.0
_NEGATIVE_A_CANDIDATES = 24
_NOISE_SEED = 0  # with the text's own hash: a control text always gets the same noise


@dataclass(frozen=True)
class Shape:
    """What a control imitates of a real item: its languages, its texts' word counts and how much
    the second text rewrites the first (normalised word edit distance, matched by positives only:
    a negative's texts are unrelated by definition)."""

    language_a: str
    language_b: str
    words_a: int
    words_b: int
    edit: float = 0.0
    transformation: str = ""
    overlap: float | None = None  # word overlap of the texts (``word_overlap``), matched by positives when given
    keywords: bool = False  # the real item's text B is a keyword list
    noise: str = ""  # the noise kind the real item's text B carries (``transforms.noise``), if any
    severity: int = 0  # and at what severity (percent)

    @property
    def pattern(self) -> tuple[str, str]:
        return (self.language_a, self.language_b)

    @property
    def group(self) -> str:
        """Controls are shared over these groups: one transformation, one language pattern."""
        return f"{self.transformation}|{self.language_a}>{self.language_b}"


@dataclass(frozen=True)
class PairCandidate:
    """A ready-made control pair. Empty languages (a pool pair without them) fit any same-language
    pattern; ``symmetric`` pairs (dataset gold pairs) may be shown in either order."""

    text_a: str
    text_b: str
    language_a: str
    language_b: str
    origin: str
    symmetric: bool = False
    as_given: bool = False  # a researcher's pair (control pool): shown as it is, never reshaped


@dataclass(frozen=True)
class TextCandidate:
    """A text that easy negatives may pair with another. Only texts of one ``pool`` (one run, one
    dataset) are paired, never two of one ``group`` (one dataset item: its texts are related).
    ``side`` "a" or "b" keeps a text to that side (a run's sources are shown as text A and its
    outputs as text B, like the real items); "" allows either."""

    text: str
    language: str
    group: Hashable
    pool: Hashable
    origin: str
    side: str = ""
    transformation: str = ""  # the transformation whose output the text is (held-back outputs)


@dataclass(frozen=True)
class ControlPair:
    kind: ItemKind
    text_a: str
    text_b: str
    language_a: str
    language_b: str
    origin: str
    imitates: str = ""  # the transformation whose real items it was shaped after
    keywords: bool = False  # text B is a keyword list
    dropped: int = 0  # content words of text A that text B, a keyword list, leaves out
    noise: int = 0  # the severity (percent) of the noise text B carries, as a noise study's real items; 0: none


@dataclass(frozen=True)
class Shortage:
    kind: ItemKind
    pattern: tuple[str, str]
    needed: int
    found: int
    found_by_origin: tuple[tuple[str, int], ...]


class ControlShortage(ValueError):
    """Too few control candidates for some kind and language pattern; nothing was drawn."""

    def __init__(self, shortages: Sequence[Shortage]):
        self.shortages = tuple(shortages)
        super().__init__(
            "; ".join(
                f"{s.kind.value} {s.pattern[0]}>{s.pattern[1]}: {s.needed} needed, {s.found} found"
                for s in self.shortages
            )
        )


def _allocate(counts: dict[str, int], n: int) -> dict[str, int]:
    """``n`` controls shared over patterns in proportion to their real items (largest remainder,
    ties by pattern); unlike a sample, a pattern may get more controls than it has real items."""
    total = sum(counts.values())
    quotas = {key: n * count / total for key, count in counts.items()}
    shares = {key: math.floor(q) for key, q in quotas.items()}
    for key in sorted(counts, key=lambda k: (-(quotas[k] - shares[k]), k))[: n - sum(shares.values())]:
        shares[key] += 1
    return shares


def _distance(words_a: int, words_b: int, target: Shape) -> float:
    """How far a pair's shape is from a real item's: log word count of A plus log ratio B/A."""
    a, b = max(words_a, 1), max(words_b, 1)
    ta, tb = max(target.words_a, 1), max(target.words_b, 1)
    return abs(math.log(a / ta)) + abs(math.log((b / a) / (tb / ta)))


class _Tiers:
    """Candidate tiers, materialised only when every earlier tier has run dry."""

    def __init__(self, tiers: Iterable[Sequence], prepare):
        self._source: Iterator[Sequence] = iter(tiers)
        self._prepare = prepare
        self._done: list = []
        self._exhausted = False

    def __iter__(self):
        k = 0
        while True:
            if k == len(self._done):
                if self._exhausted:
                    return
                tier = next(self._source, None)
                if tier is None:
                    self._exhausted = True
                    return
                self._done.append(self._prepare(tier))
            yield self._done[k]
            k += 1


@dataclass(frozen=True)
class _Oriented:
    text_a: str
    text_b: str
    language_a: str
    language_b: str
    words_a: int
    words_b: int
    origin: str
    as_given: bool = False


def _orient(
    pairs: Sequence[PairCandidate], patterns: Collection[tuple[str, str]], taken: Collection[str], *, rewrites: bool
):
    """Pair candidates per real pattern they can serve (both orders of a symmetric pair); with
    ``rewrites``, pairs whose texts differ only in punctuation or case are left out."""
    out: dict[tuple[str, str], list[_Oriented]] = {p: [] for p in patterns}
    for pair in pairs:
        if not isinstance(pair, PairCandidate):
            continue
        if pair.text_a in taken or pair.text_b in taken or pair.text_a.strip() == pair.text_b.strip():
            continue
        if rewrites and is_punctuation_edit(pair.text_a, pair.text_b):
            continue
        orders = [(pair.text_a, pair.text_b, pair.language_a, pair.language_b)]
        if pair.symmetric:
            orders.append((pair.text_b, pair.text_a, pair.language_b, pair.language_a))
        for text_a, text_b, lang_a, lang_b in orders:
            for pattern in patterns:
                wildcard = not lang_a and not lang_b and pattern[0] == pattern[1]
                if wildcard or (lang_a, lang_b) == pattern:
                    out[pattern].append(
                        _Oriented(
                            text_a,
                            text_b,
                            *pattern,
                            word_count(text_a),
                            word_count(text_b),
                            pair.origin,
                            pair.as_given,
                        )
                    )
    return out


def _texts(texts: Sequence[TextCandidate], taken: Collection[str]):
    """Text candidates by language, each with its word count."""
    out: dict[str, list[tuple[TextCandidate, int]]] = {}
    for text in texts:
        if isinstance(text, TextCandidate) and text.text not in taken and text.text.strip():
            out.setdefault(text.language, []).append((text, word_count(text.text)))
    return out


def _subset(n: int, k: int, rng: np.random.Generator) -> Sequence[int]:
    return range(n) if n <= k else sorted(int(i) for i in rng.choice(n, size=k, replace=False))


def _as_keywords(c: _Oriented, target: Shape, *, positive: bool) -> _Oriented:
    """The candidate with its text B replaced by a keyword list of the target's length: of text A's
    own words for an easy positive (a keyword list is made of its source's words), of text B's
    for an easy negative."""
    listed = keyword_list(c.text_a if positive else c.text_b, target.words_b, prefer=c.text_a)
    return _Oriented(c.text_a, listed, c.language_a, c.language_b, c.words_a, word_count(listed), c.origin)


def _as_noisy(c: _Oriented, target: Shape, *, positive: bool) -> _Oriented:
    """The candidate shaped after a noise study's real items: text A against itself with the
    noise for an easy positive, its unrelated text B with the noise for an easy negative."""
    text = c.text_a if positive else c.text_b
    noisy = perturb(
        text,
        kind=target.noise,
        severity=target.severity,
        seed=_NOISE_SEED,
        text_id=sha256_text(text),
        language=c.language_b,
    )
    return _Oriented(c.text_a, noisy, c.language_a, c.language_b, c.words_a, word_count(noisy), c.origin)


def _best_pair(
    candidates: list[_Oriented],
    used: set[str],
    target: Shape,
    rng: np.random.Generator,
    *,
    rewrites: bool,
    whole: bool = False,
):
    free = [c for c in candidates if c.text_a not in used and c.text_b not in used]
    if not free:
        return None
    picks = _subset(len(free), _SHAPE_CANDIDATES, rng)

    def distance(pair: tuple[_Oriented, _Oriented]) -> float:
        original, c = pair
        shape = _distance(c.words_a, c.words_b, target)
        if rewrites and target.overlap is not None:
            shape += abs(word_overlap(c.text_a, c.text_b) - target.overlap)
        if reshape and rewrites and not original.as_given:
            # A list that drops content words of its text loses meaning: any candidate whose list
            # keeps them all comes first.
            shape += _DROPPED_WORD_PENALTY * dropped_content_words(original.text_a, c.words_b)
        return shape + abs(normalized_edit_distance(c.text_a, c.text_b) - target.edit) if rewrites else shape

    reshape = target.keywords

    def shaped_after_target(c: _Oriented) -> _Oriented:
        if c.as_given:
            return c
        if target.noise:
            return _as_noisy(c, target, positive=rewrites)
        return _as_keywords(c, target, positive=rewrites) if reshape else c

    shaped = [(c, shaped_after_target(c)) for c in (free[i] for i in picks)]
    if whole:  # only keyword lists that keep every content word of their text
        shaped = [(o, c) for o, c in shaped if o.as_given or not dropped_content_words(o.text_a, c.words_b)]
    if not shaped:
        return None
    original, best = min(shaped, key=distance)
    return best, original


def _best_text_pair(by_language, used: set[str], target: Shape, rng: np.random.Generator):
    side_a = [t for t in by_language.get(target.language_a, []) if t[0].side != "b" and t[0].text not in used]
    side_b = [t for t in by_language.get(target.language_b, []) if t[0].side != "a" and t[0].text not in used]
    if not side_a or not side_b:
        return None
    by_pool: dict[Hashable, list[tuple[TextCandidate, int]]] = {}
    for t in side_b:
        by_pool.setdefault(t[0].pool, []).append(t)
    side_a = [t for t in side_a if t[0].pool in by_pool]  # only texts that have partners
    scored = []
    for i in _subset(len(side_a), _NEGATIVE_A_CANDIDATES, rng):
        a, words_a = side_a[i]
        partners = by_pool.get(a.pool, [])
        for j in _subset(len(partners), _SHAPE_CANDIDATES, rng):
            b, words_b = partners[j]
            if b.group != a.group and b.text != a.text:
                shown_b = min(words_b, max(1, target.words_b)) if target.keywords else words_b
                scored.append((_distance(words_a, shown_b, target), len(scored), a, b, words_a, words_b))
    for _, _, a, b, words_a, words_b in sorted(scored, key=lambda s: s[:2]):
        if content_overlap(a.text, b.text) <= MAX_NEGATIVE_OVERLAP:
            pick = _Oriented(a.text, b.text, a.language, b.language, words_a, words_b, a.origin)
            if target.noise:  # an output of the real items' own transformation has its noise already
                shown = pick if b.transformation == target.transformation else _as_noisy(pick, target, positive=False)
                return shown, pick
            return (_as_keywords(pick, target, positive=False) if target.keywords else pick), pick
    return None


def _pick(
    tiers: _Tiers, pattern: tuple[str, str], used: set[str], target: Shape, rng: np.random.Generator, *, positive: bool
) -> tuple[_Oriented, _Oriented] | None:
    """The best candidate for one control imitating ``target``, from the first tier that has one."""
    # Keyword-shaped positives: first a list keeping every content word, from any tier.
    for whole in (True, False) if positive and target.keywords else (False,):
        for pairs, texts in tiers:
            pick = _best_pair(pairs[pattern], used, target, rng, rewrites=positive, whole=whole)
            if pick is None and texts:
                pick = _best_text_pair(texts, used, target, rng)
            if pick is not None:
                return pick
    return None


def _control(kind: ItemKind, shown: _Oriented, pattern: tuple[str, str], target: Shape) -> ControlPair:
    return ControlPair(
        kind,
        shown.text_a,
        shown.text_b,
        *pattern,
        shown.origin,
        imitates=target.transformation,
        keywords=looks_like_keywords(shown.text_b),
        noise=target.severity if target.noise and not shown.as_given else 0,
        dropped=dropped_content_words(shown.text_a, shown.words_b)
        if target.keywords and kind == ItemKind.EASY_POSITIVE and not shown.as_given
        else 0,
    )


def draw_controls(
    real: Sequence[Shape],
    *,
    n: int,
    positives: Iterable[Sequence[PairCandidate]],
    negatives: Iterable[Sequence[PairCandidate | TextCandidate]],
    taken: Collection[str],
    rng: np.random.Generator,
) -> list[ControlPair]:
    """``n`` controls for a study whose real items have the shapes ``real``: ``ceil(n / 2)`` easy
    positives and ``floor(n / 2)`` easy negatives (see the module docstring).

    ``positives`` and ``negatives`` are tiers of candidates in order of preference; a tier is
    read only when the earlier ones cannot serve a control. Negative tiers may hold ready pairs
    and texts to pair. ``taken`` holds the texts of the real items. Raises
    :class:`ControlShortage` (listing every kind and pattern that is short) when too few
    candidates remain.
    """
    if n == 0:
        return []
    if not real:
        raise ValueError("controls imitate real items: give at least one real item's shape")
    patterns = Counter(s.pattern for s in real)
    groups = Counter(s.group for s in real)
    by_group: dict[str, list[Shape]] = {}
    for shape in real:
        by_group.setdefault(shape.group, []).append(shape)
    taken = frozenset(taken)
    used: set[str] = set()
    controls: list[ControlPair] = []
    shortages: list[Shortage] = []
    plans = (
        (
            ItemKind.EASY_POSITIVE,
            (n + 1) // 2,
            _Tiers(positives, lambda t: (_orient(t, patterns, taken, rewrites=True), {})),
        ),
        (
            ItemKind.EASY_NEGATIVE,
            n // 2,
            _Tiers(negatives, lambda t: (_orient(t, patterns, taken, rewrites=False), _texts(t, taken))),
        ),
    )
    for kind, count, tiers in plans:
        allocation = _allocate(dict(groups), count)
        needed: Counter = Counter()
        found_by_pattern: dict[tuple[str, str], Counter] = {}
        for key in sorted(allocation):
            shapes = by_group[key]
            pattern = shapes[0].pattern
            found = found_by_pattern.setdefault(pattern, Counter())
            needed[pattern] += allocation[key]
            for _ in range(allocation[key]):
                target = shapes[int(rng.integers(len(shapes)))]
                pick = _pick(tiers, pattern, used, target, rng, positive=kind == ItemKind.EASY_POSITIVE)
                if pick is None:
                    break
                shown, source = pick
                used.update((source.text_a, source.text_b, shown.text_b))
                found[shown.origin] += 1
                controls.append(_control(kind, shown, pattern, target))
        for pattern in sorted(needed):
            found = found_by_pattern[pattern]
            if sum(found.values()) < needed[pattern]:
                shortages.append(
                    Shortage(kind, pattern, needed[pattern], sum(found.values()), tuple(sorted(found.items())))
                )
    if shortages:
        raise ControlShortage(shortages)
    return controls


def n_controls(n_real: int, *, batch_size: int, controls_per_batch: int) -> int:
    """Controls for ``n_real`` real items: ``controls_per_batch`` per started batch."""
    if controls_per_batch == 0 or n_real == 0:
        return 0
    batches = -(-n_real // batch_size)
    return batches * controls_per_batch
