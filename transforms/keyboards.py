"""Keyboard layouts for typo noise: which keys neighbour a letter (pure module).

A layout is its three letter rows as typed without shift, each with its horizontal offset in key
widths (the stagger of a standard ISO/ANSI keyboard: the top letter row starts 0.5 key to the
right of the number row, the home row 0.75, the bottom row 1.25). A space in a row is a key that
carries no letter (Greek ``;`` where QWERTY has ``q``); it is never a neighbour.

Two keys neighbour each other when they sit side by side in one row, or in adjacent rows with
centres less than one key width apart horizontally. With the offsets above this gives the usual
six neighbours of a key in the middle of the keyboard: QWERTY ``g`` -> ``f h t y v b``.

Only the letter rows count: a typo replaces a letter with a neighbouring letter, never with a digit
or a punctuation key, so a typo never creates a number the text did not hold.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

ROW_OFFSETS = (0.5, 0.75, 1.25)


@dataclass(frozen=True)
class Layout:
    name: str
    rows: tuple[str, str, str]

    @property
    def letters(self) -> frozenset[str]:
        return frozenset(ch for row in self.rows for ch in row if ch != " ")


LAYOUTS: dict[str, Layout] = {
    layout.name: layout
    for layout in (
        Layout("qwerty", ("qwertyuiop", "asdfghjkl", "zxcvbnm")),
        Layout("qwertz", ("qwertzuiopü", "asdfghjklöä", "yxcvbnm")),
        Layout("azerty", ("azertyuiop", "qsdfghjklm", "wxcvbn")),
        Layout("jcuken", ("йцукенгшщзхъ", "фывапролджэ", "ячсмитьбю")),
        Layout("greek", (" ςερτυθιοπ", "ασδφγηξκλ", "ζχψωβνμ")),
    )
}

#: The layout of each language (ISO 639-1 code); every other language types on QWERTY.
LANGUAGE_LAYOUTS: dict[str, str] = {
    "en": "qwerty",
    "de": "qwertz",
    "fr": "azerty",
    "ru": "jcuken",
    "el": "greek",
}
DEFAULT_LAYOUT = "qwerty"


def layout_for(language: str) -> Layout:
    """The layout of ``language`` (a code such as "de", "de-AT" or "deu"'s two-letter form);
    QWERTY for a language without its own."""
    code = (language or "").split("-")[0].split("_")[0].lower()
    return LAYOUTS[LANGUAGE_LAYOUTS.get(code, DEFAULT_LAYOUT)]


@cache
def neighbours(layout_name: str) -> dict[str, tuple[str, ...]]:
    """Letter -> its neighbouring letters on the layout, in row order then left to right."""
    layout = LAYOUTS[layout_name]
    positions = [
        (ch, r, ROW_OFFSETS[r] + i) for r, row in enumerate(layout.rows) for i, ch in enumerate(row) if ch != " "
    ]
    found: dict[str, tuple[str, ...]] = {}
    for ch, r, x in positions:
        near = []
        for other, r2, x2 in positions:
            if other == ch:
                continue
            side_by_side = r2 == r and abs(x2 - x) == 1
            above_below = abs(r2 - r) == 1 and abs(x2 - x) < 1
            if side_by_side or above_below:
                near.append(other)
        found[ch] = tuple(near)
    return found
