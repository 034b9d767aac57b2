"""Noise perturbations: layouts checked by hand, golden outputs, measured severities, and the same
bytes in another process."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

from transforms.keyboards import layout_for, neighbours
from transforms.noise import NOISE_KINDS, SEVERITIES, Stream, edits_for, perturb

# Neighbours read off a picture of each keyboard by hand (letter rows only).
HAND_NEIGHBOURS = {
    # QWERTY g: f h beside it, t y above, v b below.
    ("en", "g"): {"f", "h", "t", "y", "v", "b"},
    # QWERTZ z sits where QWERTY has y: t u beside it, g h below.
    ("de", "z"): {"t", "u", "g", "h"},
    # AZERTY q starts the home row: s beside it, a z above, w below.
    ("fr", "q"): {"a", "z", "s", "w"},
    # ЙЦУКЕН а is on the F key: в п beside it, к е above, с м below.
    ("ru", "а"): {"в", "п", "к", "е", "с", "м"},
    # Greek α is on the A key: σ beside it, ς (the W key) above (Q carries no letter), ζ below.
    ("el", "α"): {"σ", "ς", "ζ"},
}

GOLDEN_LAYOUT = {
    "en": ("Typing fast on a keyboard makes errors.", "Ttlung fast on a keyhosrd makes errkrs."),
    "de": ("Größere Zeitungen drucken täglich zwölf Seiten.", "Größere Zeitzngej druxken tüglicg gwöof Seitwn."),
    "fr": ("Le garçon mange une pomme près de la fenêtre.", "Lr garçon mange ujr pompe pdès de lz fenêtrs."),
    "ru": ("Быстрая коричневая лиса прыгает через собаку.", "Бястраф кгричнеыая оиса ерыгает черещ собвку."),
    "el": (
        "Η γρήγορη καφέ αλεπού πηδάει πάνω από τον σκύλο.",
        "Η ττήωορη καφέ αλεπού πξδάσι πάνω από τον σλύλο.",
    ),
}
GOLDEN_LETTER = {"en": "t", "de": "t", "fr": "a", "ru": "к", "el": "ς"}

GOLDEN_TEXT = "Zoë’s café in Köln: “Öffnungszeiten” — the OLD mill, 10 km away."
GOLDEN_KINDS = {
    "typos": "Zoë’s café in Kölb: “Öfvnungszeiten” — the KLD milp, 10 km away.",
    "ocr": "Zoë’s eafé in Köln: “Ötfnungszeiten” — the OLD rnill, 10 km away.",
    "char_edits": "Zoë’s cdaf in Köln: “Öfvfnungszeiten” — the OLD mill, 10 km way.",
    "casing": "Zoë’s café in Köln: “Öffnungszeiten” — the OLD mill, 10 km Away.",
    "punctuation": "Zoë’s café in Köln: “Öffnungszeiten” — the OLD mill, 10km away.",
    "diacritics": "Zoë’s cafe in Köln: “Öffnungszeiten” — the OLD mill, 10 km away.",
}


@pytest.mark.parametrize("language", sorted(GOLDEN_LAYOUT))
def test_each_layout_types_neighbours_checked_by_hand(language):
    (letter,) = [ch for lang, ch in HAND_NEIGHBOURS if lang == language]
    assert set(neighbours(layout_for(language).name)[letter]) == HAND_NEIGHBOURS[(language, letter)]
    one = perturb(letter, kind="typos", severity=2, seed=7, text_id="one", language=language)
    assert one == GOLDEN_LETTER[language] and one in HAND_NEIGHBOURS[(language, letter)]
    source, golden = GOLDEN_LAYOUT[language]
    out = perturb(source, kind="typos", severity=20, seed=7, text_id="golden", language=language)
    assert out == golden
    near = neighbours(layout_for(language).name)
    changed = [(a, b) for a, b in zip(source, out, strict=True) if a != b]
    assert changed and all(b.lower() in near[a.lower()] for a, b in changed)


def test_layouts_follow_the_language_code():
    assert layout_for("de-AT").name == "qwertz" and layout_for("fr").name == "azerty"
    assert layout_for("ru").name == "jcuken" and layout_for("el").name == "greek"
    assert layout_for("es").name == "qwerty" and layout_for("").name == "qwerty"


@pytest.mark.parametrize("kind", sorted(GOLDEN_KINDS))
def test_golden_outputs(kind):
    assert perturb(GOLDEN_TEXT, kind=kind, severity=10, seed=3, text_id="golden", language="en") == GOLDEN_KINDS[kind]


def test_the_stream_is_sha256_in_counter_mode():
    import hashlib

    key = hashlib.sha256(b"a\x1f1").digest()
    block = hashlib.sha256(key + (0).to_bytes(8, "big")).digest()
    stream = Stream("a", 1)
    assert stream._next64() == int.from_bytes(block[:8], "big")
    assert stream._next64() == int.from_bytes(block[8:16], "big")
    assert sorted(Stream("x").sample(10, 10)) == list(range(10))


def test_edits_round_half_up_with_at_least_one():
    assert [edits_for(n, 5) for n in (0, 1, 10, 30, 50, 1000)] == [0, 1, 1, 2, 3, 50]
    assert edits_for(25, 2) == 1 and edits_for(75, 2) == 2  # 0.5 and 1.5 round up


def test_seed_text_and_severity_key_the_draws():
    text = "A fairly long sentence with many letters to perturb, again and again."
    base = perturb(text, kind="typos", severity=10, seed=1, text_id="t")
    assert base == perturb(text, kind="typos", severity=10, seed=1, text_id="t")
    assert base != perturb(text, kind="typos", severity=10, seed=2, text_id="t")
    assert base != perturb(text, kind="typos", severity=10, seed=1, text_id="u")


def test_input_is_normalised_to_nfc():
    decomposed = unicodedata.normalize("NFD", "café crème brûlée")
    out = perturb(decomposed, kind="diacritics", severity=100, seed=1, text_id="n")
    assert out == "cafe creme brulee"
    assert perturb(decomposed, kind="casing", severity=2, seed=1, text_id="n") == unicodedata.normalize(
        "NFC", perturb("café crème brûlée", kind="casing", severity=2, seed=1, text_id="n")
    )


def test_text_without_eligible_units_is_unchanged():
    assert perturb("plain English", kind="diacritics", severity=20, seed=1, text_id="x") == "plain English"
    assert perturb("12 345", kind="casing", severity=20, seed=1, text_id="x") == "12 345"


LONG = " ".join(
    [
        "The committee agreed that the new library would open next spring, after years of delay.",
        "Residents, however, asked why the budget had doubled; nobody answered them clearly.",
        "Señora Muñoz said the façade looked naïve, but the café next door was très élégant.",
    ]
    * 12
)


def _osa(a: str, b: str) -> int:
    """Optimal string alignment distance (insert, delete, substitute, adjacent swap)."""
    d = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i in range(len(a) + 1):
        d[i][0] = i
    for j in range(len(b) + 1):
        d[0][j] = j
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            cost = a[i - 1] != b[j - 1]
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
    return d[-1][-1]


def _gaps(text: str) -> list[str]:
    """The separator after each word character (empty inside words); word characters are never
    changed by punctuation noise, so both texts have the same number of gaps."""
    return [m.group(2) for m in re.finditer(r"(\w)(\W*)", text)]


def _measured(kind: str, source: str, out: str) -> tuple[int, int]:
    """(changed units, units) of the kind, counted here without the module's code."""
    if kind == "typos":  # every ASCII letter is on QWERTY; the accented ones are not
        return sum(a != b for a, b in zip(source, out, strict=True)), sum(a.isascii() and a.isalpha() for a in source)
    if kind == "diacritics":
        base = sum(unicodedata.normalize("NFD", a) != a for a in source)
        return sum(a != b for a, b in zip(source, out, strict=True)), base
    if kind == "ocr":  # confusions stay inside words; m→rn costs one substitution and one insertion
        pairs = zip(re.findall(r"\w+", source), re.findall(r"\w+", out), strict=True)
        changed = sum(_osa(a, b) - (len(b) - len(a)) for a, b in pairs)
        return changed, sum(ch in "oO0lI1iecamwduvhbgqtfS5B8Z2G6" for ch in source)
    if kind == "char_edits":  # edits touch letters only, so the punctuation splits both alike
        pieces = zip(re.split(r"[.,;]", source), re.split(r"[.,;]", out), strict=True)
        return sum(_osa(a, b) for a, b in pieces), sum(ch.isalpha() for ch in source)
    if kind == "casing":
        a, b = re.findall(r"\w+", source), re.findall(r"\w+", out)
        return sum(x != y for x, y in zip(a, b, strict=True)), len(a)
    gaps_a, gaps_b = _gaps(source), _gaps(out)
    return sum(x != y for x, y in zip(gaps_a, gaps_b, strict=True)), len(re.findall(r"\w+", source))


@pytest.mark.parametrize("kind", sorted(NOISE_KINDS))
@pytest.mark.parametrize("severity", SEVERITIES)
def test_measured_severity_matches(kind, severity):
    """The share of changed units is the severity up to rounding to whole units (half a unit); for
    character edits a swap counts once in the distance and a swap next to another edit may count
    twice, so a quarter of the severity is allowed there; an OCR expansion (m→rn) next to another
    confusion can align at a smaller distance, so half a percentage point is allowed there."""
    out = perturb(LONG, kind=kind, severity=severity, seed=11, text_id="long", language="en")
    changed, units = _measured(kind, LONG, out)
    tolerance = {"char_edits": 0.25 * severity / 100, "ocr": 0.005}.get(kind, 0.5 / units + 1e-12)
    assert changed / units == pytest.approx(severity / 100, abs=tolerance), (kind, severity, changed, units)


def test_same_bytes_in_another_process():
    cases = [(kind, s, lang) for kind in NOISE_KINDS for s in SEVERITIES for lang in ("en", "de", "ru")]
    here = [perturb(LONG, kind=k, severity=s, seed=5, text_id="p", language=lang) for k, s, lang in cases]
    code = (
        "import json,sys\nfrom transforms.noise import perturb\n"
        "cases, text = json.loads(sys.stdin.read())\n"
        "print(json.dumps([perturb(text, kind=k, severity=s, seed=5, text_id='p', language=l) for k, s, l in cases]))"
    )
    root = Path(__file__).resolve().parent.parent
    for hash_seed in ("1", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        done = subprocess.run(
            [sys.executable, "-c", code],
            input=json.dumps([cases, LONG]),
            capture_output=True,
            text=True,
            check=True,
            cwd=root,
            env=env,
        )
        assert json.loads(done.stdout) == here
