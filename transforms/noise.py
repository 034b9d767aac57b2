"""Noise perturbations without an LLM: keyboard typos, OCR confusions, character edits, casing,
punctuation and whitespace, diacritics removal, each at a severity (pure module).

Determinism. Every draw comes from :class:`Stream`, a counter-mode SHA-256 generator keyed by
(kind, severity, seed, text id): no ``hash()``, no set order, no library random generator whose
algorithm could change between versions, so the same inputs give the same bytes on every machine and
NumPy version. Texts are normalised to NFC before they are perturbed and the output is NFC too.
Letters, cases, word characters and diacritics are Python's Unicode database's
(``unicodedata.unidata_version``): the same bytes need the same Unicode version.

Severity ``s`` (a whole percentage, e.g. 2, 5, 10, 20) is the share of a text's *eligible units*
that a kind changes: exactly ``k = round_half_up(s/100 × n)`` of its ``n`` units, and at least one
when the text has any (so every text with something to change changes). The units per kind:

- ``typos``: letters on the language's keyboard layout (``transforms.keyboards``); each chosen
  letter becomes one of its neighbouring keys (case kept).
- ``ocr``: characters with a known OCR confusion (``OCR_CONFUSIONS``: o→0, l→1, m→rn, ...).
- ``char_edits``: letters; each chosen letter is deleted, swapped with the next letter, or followed
  by an inserted neighbouring key (one of the three, drawn).
- ``casing``: words with a cased letter; each chosen word becomes upper, lower or title case
  (whichever of them differs, drawn).
- ``punctuation``: the gaps after each word (the separator up to the next word, or the text's end);
  a chosen gap loses its punctuation, or its space, or gets a doubled space or a punctuation mark.
- ``diacritics``: characters that carry a diacritic; each chosen one loses it (é→e, ñ→n, ø→o).

A text with no eligible unit is returned unchanged (an English text has no diacritic to remove).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass

from transforms.keyboards import layout_for, neighbours

NOISE_VERSION = "shiftlab-noise-1"  # part of every stream key: changing an algorithm changes it
SEVERITIES: tuple[int, ...] = (2, 5, 10, 20)
_WORD = re.compile(r"\w+", re.UNICODE)
_PUNCTUATION_MARKS = (",", ".", ";", ":", "!", "?")


class Stream:
    """Deterministic random integers from SHA-256 in counter mode, keyed by ``parts``."""

    def __init__(self, *parts: object):
        self._key = hashlib.sha256("\x1f".join(str(p) for p in parts).encode("utf-8")).digest()
        self._counter = 0
        self._pool: list[int] = []

    def _next64(self) -> int:
        if not self._pool:
            block = hashlib.sha256(self._key + self._counter.to_bytes(8, "big")).digest()
            self._counter += 1
            self._pool = [int.from_bytes(block[i : i + 8], "big") for i in range(24, -1, -8)]
        return self._pool.pop()

    def below(self, n: int) -> int:
        """A uniform integer in [0, n) (rejection sampling: no modulo bias)."""
        if n <= 0:
            raise ValueError(f"below() needs a positive bound, got {n}")
        limit = (1 << 64) - (1 << 64) % n
        while True:
            value = self._next64()
            if value < limit:
                return value % n

    def pick(self, options):
        return options[self.below(len(options))]

    def sample(self, n: int, k: int) -> list[int]:
        """``k`` distinct indices of ``range(n)``, sorted (a partial Fisher–Yates shuffle)."""
        pool = list(range(n))
        for i in range(k):
            j = i + self.below(n - i)
            pool[i], pool[j] = pool[j], pool[i]
        return sorted(pool[:k])


def edits_for(n_units: int, severity: int) -> int:
    """How many of ``n_units`` a severity changes: round half up, at least one when there is any."""
    if n_units <= 0:
        return 0
    return min(n_units, max(1, (2 * n_units * severity + 100) // 200))


# OCR confusions: a character and what a recogniser misreads it as (one choice drawn per edit).
OCR_CONFUSIONS: dict[str, tuple[str, ...]] = {
    "o": ("0",),
    "O": ("0", "Q"),
    "0": ("O",),
    "l": ("1", "I"),
    "I": ("l", "1"),
    "1": ("l",),
    "i": ("l",),
    "e": ("c",),
    "c": ("e",),
    "a": ("o",),
    "m": ("rn",),
    "w": ("vv",),
    "d": ("cl",),
    "u": ("v",),
    "v": ("u",),
    "h": ("b",),
    "b": ("h",),
    "g": ("q", "9"),
    "q": ("g",),
    "t": ("f",),
    "f": ("t",),
    "S": ("5",),
    "5": ("S",),
    "B": ("8",),
    "8": ("B",),
    "Z": ("2",),
    "2": ("Z",),
    "G": ("6",),
    "6": ("G",),
}
# Letters whose diacritic is not a combining mark in Unicode's decomposition.
_STROKED = {"ø": "o", "Ø": "O", "ł": "l", "Ł": "L", "đ": "d", "Đ": "D", "ħ": "h", "Ħ": "H"}


@dataclass(frozen=True)
class NoiseKind:
    name: str
    label: str
    unit: str  # what the severity is a share of
    description: str


NOISE_KINDS: dict[str, NoiseKind] = {
    k.name: k
    for k in (
        NoiseKind("typos", "Keyboard typos", "letters on the layout", "letters replaced by a neighbouring key"),
        NoiseKind("ocr", "OCR confusions", "confusable characters", "characters misread as by OCR (o→0, m→rn)"),
        NoiseKind("char_edits", "Character edits", "letters", "letters deleted, swapped or doubled by a neighbour"),
        NoiseKind("casing", "Casing", "cased words", "words set in upper, lower or title case"),
        NoiseKind("punctuation", "Punctuation and spaces", "word gaps", "punctuation or spaces removed or added"),
        NoiseKind("diacritics", "Diacritics removal", "characters with a diacritic", "accents and marks removed"),
    )
}


def perturb(text: str, *, kind: str, severity: int, seed: int, text_id: str, language: str = "en") -> str:
    """``text`` with noise ``kind`` at ``severity`` percent (see the module docstring).
    ``text_id`` identifies the text (its sha256): with ``seed`` and ``severity`` it keys the draws;
    ``language`` picks the keyboard layout of typos and character edits."""
    if kind not in NOISE_KINDS:
        raise ValueError(f"unknown noise kind {kind!r}: choose one of {', '.join(NOISE_KINDS)}")
    if not 0 < severity <= 100:
        raise ValueError(f"severity is a percentage in (0, 100], got {severity}")
    text = unicodedata.normalize("NFC", text)
    stream = Stream(NOISE_VERSION, kind, severity, seed, text_id)
    out = _KINDS[kind](text, severity, stream, language)
    return unicodedata.normalize("NFC", out)


def _replace_at(text: str, positions: list[int], replace) -> str:
    chars = list(text)
    for i in positions:
        chars[i] = replace(chars[i])
    return "".join(chars)


def _with_case(original: str, replacement: str) -> str:
    return replacement.upper() if original.isupper() else replacement


def _typos(text: str, severity: int, stream: Stream, language: str) -> str:
    near = neighbours(layout_for(language).name)
    eligible = [i for i, ch in enumerate(text) if near.get(ch.lower())]
    chosen = [eligible[j] for j in stream.sample(len(eligible), edits_for(len(eligible), severity))]
    return _replace_at(text, chosen, lambda ch: _with_case(ch, stream.pick(near[ch.lower()])))


def _ocr(text: str, severity: int, stream: Stream, language: str) -> str:
    eligible = [i for i, ch in enumerate(text) if ch in OCR_CONFUSIONS]
    chosen = [eligible[j] for j in stream.sample(len(eligible), edits_for(len(eligible), severity))]
    return _replace_at(text, chosen, lambda ch: stream.pick(OCR_CONFUSIONS[ch]))


def _char_edits(text: str, severity: int, stream: Stream, language: str) -> str:
    near = neighbours(layout_for(language).name)
    eligible = [i for i, ch in enumerate(text) if ch.isalpha()]
    chosen = [eligible[j] for j in stream.sample(len(eligible), edits_for(len(eligible), severity))]
    ops = [(i, stream.pick(("delete", "swap", "insert"))) for i in chosen]
    chars = list(text)
    for i, op in reversed(ops):  # right to left: an edit never moves a position still to edit
        ch = chars[i]
        following = chars[i + 1] if i + 1 < len(chars) else ""
        if op == "swap" and following.isalpha() and following != ch:
            chars[i], chars[i + 1] = following, ch
        elif op == "insert":
            chars.insert(i + 1, _with_case(ch, stream.pick(near.get(ch.lower()) or (ch.lower(),))))
        else:  # delete, and a swap with nothing to swap with
            del chars[i]
    return "".join(chars)


def _casing(text: str, severity: int, stream: Stream, language: str) -> str:
    words = [m for m in _WORD.finditer(text) if m.group().lower() != m.group().upper()]
    chosen = [words[j] for j in stream.sample(len(words), edits_for(len(words), severity))]
    parts, end = [], 0
    for m in chosen:
        word = m.group()
        options = [
            v for v in dict.fromkeys((word.upper(), word.lower(), word[:1].upper() + word[1:].lower())) if v != word
        ]
        parts += [text[end : m.start()], stream.pick(options)]
        end = m.end()
    return "".join(parts) + text[end:]


def _new_separator(sep: str, last: bool, stream: Stream) -> str:
    """What a chosen gap becomes: it loses its punctuation, its space or gets a doubled space or a mark."""
    marks = "".join(ch for ch in sep if not ch.isspace())
    if marks:
        bare = "".join(ch for ch in sep if ch.isspace())
        return bare or ("" if last else " ")
    if last:
        return sep + stream.pick(_PUNCTUATION_MARKS)
    return stream.pick(("", sep + " ", stream.pick(_PUNCTUATION_MARKS) + sep))


def _punctuation(text: str, severity: int, stream: Stream, language: str) -> str:
    words = list(_WORD.finditer(text))
    chosen = stream.sample(len(words), edits_for(len(words), severity))
    parts, end = [], 0
    for j in chosen:
        gap_end = words[j + 1].start() if j + 1 < len(words) else len(text)
        parts += [
            text[end : words[j].end()],
            _new_separator(text[words[j].end() : gap_end], j + 1 == len(words), stream),
        ]
        end = gap_end
    return "".join(parts) + text[end:]


def strip_diacritic(ch: str) -> str:
    """``ch`` without its diacritics (NFC), or ``ch`` when it carries none."""
    if ch in _STROKED:
        return _STROKED[ch]
    base = "".join(c for c in unicodedata.normalize("NFD", ch) if not unicodedata.combining(c))
    return unicodedata.normalize("NFC", base)


def _diacritics(text: str, severity: int, stream: Stream, language: str) -> str:
    eligible = [i for i, ch in enumerate(text) if strip_diacritic(ch) != ch]
    chosen = [eligible[j] for j in stream.sample(len(eligible), edits_for(len(eligible), severity))]
    return _replace_at(text, chosen, strip_diacritic)


_KINDS = {
    "typos": _typos,
    "ocr": _ocr,
    "char_edits": _char_edits,
    "casing": _casing,
    "punctuation": _punctuation,
    "diacritics": _diacritics,
}
