"""Are noise perturbations the same bytes under other Python interpreters? (issue 30)

Run with the project's interpreter and name others::

    .venv/bin/python benchmarks/noise_interpreters.py /usr/bin/python3.11 ~/.pyenv/versions/*/bin/python

Each interpreter runs this file in ``--digests`` mode: it loads ``transforms/noise.py`` and
``transforms/keyboards.py`` by path (only they and the standard library: no Django, no project
package), perturbs every text of ``TEXTS`` for every kind × severity × keyboard layout with one
seed, and prints the sha256 of the outputs per (kind, severity, layout), for two sets: ``scripts``
(established scripts, the claim) and ``new_letters`` (letters Unicode added in 13.0 to 15.1, where
the Unicode database decides what is a letter, a word or a case). The driver prints one row per
interpreter: its version, ``unicodedata.unidata_version``, machine, and whether each set's digests
equal those of the interpreter running it. Interpreters before 3.9 lack ``functools.cache``; it is
given ``lru_cache(maxsize=None)``, which memoises alike. Before 3.7 the modules cannot be read
(``from __future__ import annotations``).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import types

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEED = 7
LAYOUT_LANGUAGES = ("en", "de", "fr", "ru", "el")  # QWERTY, QWERTZ, AZERTY, ЙЦУКЕН, Greek
TEXTS = {
    "scripts": (
        "Typing fast on a keyboard makes errors, doesn't it? The OLD mill is 10 km away.",
        "Größere Zeitungen drucken täglich zwölf Seiten; STRAẞE und Straße.",
        "Le garçon mange une pomme près de la fenêtre — « très élégant », naïve Œuvre.",
        "Быстрая коричневая лиса прыгает через собаку. Ёжик в тумане!",
        "Η γρήγορη καφέ αλεπού πηδάει πάνω από τον σκύλο. ΟΔΟΣ Ϊ ΰ.",
        "Señora Muñoz: Łódź, Kraków, Dvořák, Ørsted, Đà Nẵng, Tiếng Việt, Ħamrun.",
        "İstanbul'da ılık bir gün; DİYARBAKIR ıslak.",
        "ქართული ენა ძალიან ლამაზია. ᲥᲐᲠᲗᲣᲚᲘ.",
        "مَرْحَبًا بِكُمْ في العالم، كيف حالك؟",
        "नमस्ते दुनिया, क़लम और ज़मीन।",
        "日本語の文章です。中文句子，没有大小写。한국어 문장입니다.",
        "Zoë’s café in Köln: “Öffnungszeiten” — ﬁne ligatures, Ǆemal, ǅ, Ⅻ, ①.",
    ),
    # Letters Unicode added in 13.0 to 15.1 (which Python first has them): Yezidi 𐺀 (13.0, 3.9),
    # Vithkuqi capital and small 𐕰 𐖗 and Toto 𞊐 (14.0, 3.11), Kawi 𑼄 and Nag Mundari 𞓐 and Latin
    # 𝼥 (15.0, 3.12), CJK extension I 𮯰 (15.1, 3.13).
    "new_letters": (
        "Yezidi 𐺀𐺁 word, Vithkuqi 𐕰𐕱 𐖗𐖘 case, Toto 𞊐𞊑 word.",
        "Kawi 𑼄𑼅 word, Nag Mundari 𞓐𞓑 word, Latin 𝼥𝼦 word, CJK 𮯰𮯱 word.",
    ),
}


def load_noise():
    """``transforms.noise`` loaded from its file without the ``transforms`` package's own import."""
    import functools

    if not hasattr(functools, "cache"):
        functools.cache = functools.lru_cache(maxsize=None)
    package = types.ModuleType("transforms")
    package.__path__ = [os.path.join(ROOT, "transforms")]
    sys.modules["transforms"] = package
    import transforms.noise as noise

    return noise


def case_digests(noise) -> dict[str, dict[str, str]]:
    """Set -> "kind/severity/layout language" -> sha256 of the set's outputs, one per line."""
    found = {}
    for name, texts in TEXTS.items():
        per_case = {}
        for kind in noise.NOISE_KINDS:
            for severity in noise.SEVERITIES:
                for language in LAYOUT_LANGUAGES:
                    outputs = [
                        noise.perturb(t, kind=kind, severity=severity, seed=SEED, text_id=str(i), language=language)
                        for i, t in enumerate(texts)
                    ]
                    text = "\n".join(outputs).encode("utf-8")
                    per_case[f"{kind}/{severity}/{language}"] = hashlib.sha256(text).hexdigest()
        found[name] = per_case
    return found


def combined(per_case: dict[str, str]) -> str:
    """One sha256 for a set's digests."""
    return hashlib.sha256(json.dumps(per_case, sort_keys=True).encode()).hexdigest()


def digests() -> dict:
    import platform
    import unicodedata

    return {
        "python": platform.python_version(),
        "unidata": unicodedata.unidata_version,
        "machine": f"{platform.system()} {platform.machine()}",
        "digests": case_digests(load_noise()),
    }


def run(interpreter: str) -> dict:
    done = subprocess.run(
        [interpreter, os.path.abspath(__file__), "--digests"], capture_output=True, text=True, cwd=ROOT
    )
    if done.returncode:
        return {"interpreter": interpreter, "error": (done.stderr.strip().splitlines() or ["?"])[-1]}
    return {"interpreter": interpreter, **json.loads(done.stdout)}


def compare(reference: dict, other: dict) -> str:
    if "error" in other:
        return f"cannot run: {other['error']}"
    cells = []
    for name, ours in reference["digests"].items():
        theirs = other["digests"][name]
        differing = sorted(case for case in ours if ours[case] != theirs[case])
        cells.append(f"{name} {'equal' if not differing else f'{len(differing)}/{len(ours)} differ'}")
        if differing:
            kinds = sorted({case.split("/")[0] for case in differing})
            cells[-1] += f" ({', '.join(kinds)})"
    return "; ".join(cells)


def main(argv: list[str]) -> None:
    if argv[:1] == ["--digests"]:
        print(json.dumps(digests()))
        return
    reference = run(sys.executable)
    print(f"reference {sys.executable}: Python {reference['python']}, Unicode {reference['unidata']}")
    for name, per_case in reference["digests"].items():
        print(f"  {name}: {len(per_case)} digests, combined sha256 {combined(per_case)}")
    for interpreter in argv:
        other = run(interpreter)
        version = f"Python {other.get('python', '?')}, Unicode {other.get('unidata', '?')}"
        print(f"{interpreter}: {version}: {compare(reference, other)}")


if __name__ == "__main__":
    main(sys.argv[1:])
