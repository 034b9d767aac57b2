"""Can an annotator tell the controls of a noise study from its real items? Clean controls (before)
against controls that carry the study's noise (now), measured with the detectability model.

Usage: .venv/bin/python benchmarks/noise_controls.py [--items 40] [--seeds 5] [--kind typos]
           [--shared-data DIR]

A noise study rates text A against text A with seeded noise (``typos_10``: 10% of the letters
replaced by a neighbouring key). Its controls are drawn by ``annotation.science.controls``, the
pure function ``study_lock`` calls, from the tiers the service gives it, rebuilt here from STS-B
(English test set of stsb-multi-mt, from ../shared/data; the demo STS fixture when that is
absent):

- real items: the first ``--items`` first sentences, each against its noisy copy (the noise run's
  seed 1, as ``transforms.noise.perturb`` writes it);
- held-back items of the same run: the next ``--items`` first sentences and their noisy copies
  (texts for easy negatives, as the service offers them);
- gold pairs (score >= 4.5 of 5, the top tenth of the scale as the service takes them): the rows
  after those, for easy positives;
- 2 controls per 5 real items, so there are enough to cross-validate.

BEFORE draws the controls as the code did before they carried noise (the real items' shapes
without their noise kind); NOW draws them as ``study_lock`` does. Both are scored by
``annotation.science.detectability.control_detectability`` (cross-validated AUC of a logistic
regression on cheap surface features, now with the near-miss share: words one or two letters away
from a word of text A, as typos are), over ``--seeds`` draw seeds, for each severity of the kind.
0.5 means indistinguishable; ``study_lock`` refuses a study whose easy-positive AUC is above 0.75
for some transformation, unless overridden. It also prints the AUC of BEFORE's controls without
the near-miss feature: what the study page reported for them before. Easy negatives are unrelated
texts by definition, so their AUC stays high whatever the construction (see
``annotation.science.detectability``).
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shiftlab.settings")

import django  # noqa: E402

django.setup()

import numpy as np  # noqa: E402

from annotation.kinds import ItemKind  # noqa: E402
from annotation.science import detectability  # noqa: E402
from annotation.science.controls import PairCandidate, Shape, TextCandidate, draw_controls  # noqa: E402
from annotation.science.detectability import Record, control_detectability  # noqa: E402
from annotation.science.text_measures import word_overlap  # noqa: E402
from core.hashing import sha256_text  # noqa: E402
from transforms.noise import SEVERITIES, perturb  # noqa: E402
from transforms.registry import noise_name  # noqa: E402
from transforms.text_metrics import normalized_edit_distance, word_count  # noqa: E402

DEMO_STS = ROOT / "fixtures" / "sts" / "demo-sts.csv"


def sts_rows(shared: Path) -> list[tuple[str, str, float]]:
    """(sentence 1, sentence 2, score 0-5) of STS-B's English test set, or of the demo fixture."""
    path = shared / "stsb-multi-mt" / "stsb-en-test.csv"
    if path.exists():
        with path.open(encoding="utf-8", newline="") as handle:
            return [(a, b, float(score)) for a, b, score in csv.reader(handle)]
    print(f"{path} not found: using the demo STS fixture (40 pairs)")
    with DEMO_STS.open(encoding="utf-8", newline="") as handle:
        return [(r["sentence1"], r["sentence2"], float(r["score"])) for r in csv.DictReader(handle)]


def study_records(rows, *, kind: str, severity: int, items: int, seed: int, with_noise: bool) -> list[Record]:
    name = noise_name(kind, severity)

    def noisy(text: str) -> str:
        return perturb(text, kind=kind, severity=severity, seed=1, text_id=sha256_text(text))

    sources = list(dict.fromkeys(a for a, _, _ in rows))
    real_a = sources[:items]
    held_a = sources[items : 2 * items]
    real = [(a, noisy(a)) for a in real_a]
    shapes = [
        Shape(
            "en",
            "en",
            word_count(a),
            word_count(b),
            normalized_edit_distance(a, b),
            transformation=name,
            overlap=word_overlap(a, b),
            noise=kind if with_noise else "",
            severity=severity if with_noise else 0,
        )
        for a, b in real
    ]
    held_back = []
    for k, a in enumerate(held_a):
        common = {"group": k, "pool": "run:1", "origin": "held_back:1"}
        held_back += [
            TextCandidate(a, "en", side="a", **common),
            TextCandidate(noisy(a), "en", side="b", transformation=name, **common),
        ]
    taken = {t for pair in real for t in pair}
    later = [(a, b, s) for a, b, s in rows if a not in set(real_a) | set(held_a)]
    gold = [PairCandidate(a, b, "en", "en", origin="gold:stsb", symmetric=True) for a, b, s in later if s >= 4.5]
    texts = [
        TextCandidate(t, "en", group=1000 + i, pool="dataset:1", origin="texts:stsb")
        for i, (t, _, _) in enumerate(later)
    ]
    controls = draw_controls(
        shapes,
        n=2 * -(-items // 5),
        positives=[gold],
        negatives=[held_back, texts],
        taken=taken,
        rng=np.random.default_rng(seed),
    )
    return [Record(ItemKind.REAL.value, a, b, "en", "en") for a, b in real] + [
        Record(c.kind.value, c.text_a, c.text_b, c.language_a, c.language_b) for c in controls
    ]


def auc(records, seed: int, *, near_misses: bool = True):
    if near_misses:
        return control_detectability(records, rng=np.random.default_rng(seed))
    kept = detectability.near_misses
    detectability.near_misses = lambda a, b: 0.0  # a constant column: the model before the feature
    try:
        return control_detectability(records, rng=np.random.default_rng(seed))
    finally:
        detectability.near_misses = kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=40)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--kind", default="typos")
    parser.add_argument("--shared-data", type=Path, default=ROOT.parent / "shared" / "data")
    args = parser.parse_args()
    rows = sts_rows(args.shared_data)
    print(f"{args.kind}: {args.items} real items, {2 * -(-args.items // 5)} controls, {args.seeds} draw seeds")
    print("cross-validated AUC, mean [min, max] over the seeds (0.5 = indistinguishable; 0.75 = the lock's limit)")
    header = f"{'severity':>8}  {'controls':<8} {'positives':>20} {'negatives':>20} {'all':>20}"
    print(header)

    def cell(values):
        return f"{statistics.mean(values):.2f} [{min(values):.2f}, {max(values):.2f}]"

    for severity in SEVERITIES:
        for label, with_noise, near in (("before*", False, False), ("before", False, True), ("now", True, True)):
            scores = {"easy_positive": [], "easy_negative": [], "all": []}
            for seed in range(args.seeds):
                records = study_records(
                    rows, kind=args.kind, severity=severity, items=args.items, seed=seed, with_noise=with_noise
                )
                result = auc(records, seed, near_misses=near)
                for name in scores:
                    scores[name].append(getattr(result, name).auc)
            print(
                f"{severity:>7}%  {label:<8} {cell(scores['easy_positive']):>20} "
                f"{cell(scores['easy_negative']):>20} {cell(scores['all']):>20}"
            )
    print("before* = clean controls scored without the near-miss feature (what the study page showed before)")


if __name__ == "__main__":
    main()
