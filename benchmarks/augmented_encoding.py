"""Augmented encoding against the plain encoder on an STS dataset (issue 8, SPEC §7).

Usage: .venv/bin/python benchmarks/augmented_encoding.py [--dataset stsb-en-test] [--model all-MiniLM-L6-v2]
           [--seed 1] [--runs 13] [--missing error|original] [--resamples 1000]

Reads the database and the embedding cache of the current settings (SHIFTLAB_DATA_DIR,
SHIFTLAB_EMBEDDING_CACHE_DIR). The paraphrase variants must already be generated (a succeeded
`paraphrase` run with the seed, e.g. `manage.py transform --dataset stsb-en-test --transformation
paraphrase --seed 1 --wait`); random keywords are computed. For each setting, prints the
augmented and the plain cosine Spearman, their difference with its paired bootstrap 95% CI over
pairs (seed 42), and how many texts lacked their variant.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
AUGMENTED = "evaluation.augmented_encoder.AugmentedEncoder"


def settings_to_compare(model: str, seed: int, runs: list[int] | None) -> dict[str, dict]:
    source = {"runs": runs} if runs else {"seeds": [seed]}
    paraphrase = {"base": model, "transformations": ["paraphrase"], "k": 1, **source}
    return {
        "paraphrase, mean": {**paraphrase, "pooling": "mean"},
        "paraphrase, weighted w=0.5": {**paraphrase, "pooling": "weighted", "weight": 0.5},
        "paraphrase, weighted w=0.75": {**paraphrase, "pooling": "weighted", "weight": 0.75},
        "random_keywords, mean": {"base": model, "transformations": ["random_keywords"], "k": 1, "seeds": [seed]},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="stsb-en-test")
    parser.add_argument("--model", default="all-MiniLM-L6-v2", help="The base (plain) encoder: alias or model.")
    parser.add_argument("--seed", type=int, default=1, help="Seed of the paraphrase run and of random keywords.")
    parser.add_argument("--runs", type=int, nargs="+", help="Explicit paraphrase run ids instead of --seed.")
    parser.add_argument("--missing", choices=["error", "original"], default="error")
    parser.add_argument("--resamples", type=int, default=1000)
    args = parser.parse_args()

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shiftlab.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.conf import settings

    from corpora.models import Dataset
    from evaluation.services import dataset_compare

    dataset = Dataset.objects.get(name=args.dataset)
    print(f"{dataset.name}, base {args.model}, paired bootstrap over pairs ({args.resamples} resamples, seed 42)")
    print(f"{'setting':<30} {'augmented':>9} {'plain':>7} {'difference':>10}  {'95% CI':<19} {'lacking':>7}")
    for number, (label, options) in enumerate(settings_to_compare(args.model, args.seed, args.runs).items()):
        alias = f"augmented-{number}"
        settings.EVALUATION_ENCODERS[alias] = {"BACKEND": AUGMENTED, "OPTIONS": {**options, "missing": args.missing}}
        start = time.perf_counter()
        c = dataset_compare(dataset=dataset, model=alias, baseline=args.model, n_resamples=args.resamples)
        r = c.result
        print(
            f"{label:<30} {r.spearman_a:>9.4f} {r.spearman_b:>7.4f} {r.difference:>+10.4f}  "
            f"[{r.ci_low:+.4f}, {r.ci_high:+.4f}] {c.model_coverage.incomplete:>7}"
            f"   ({r.n} pairs, {c.model_coverage.texts} texts, {time.perf_counter() - start:.0f} s)"
        )


if __name__ == "__main__":
    main()
