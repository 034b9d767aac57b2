"""Shiftlab's STS evaluation against the reference `mteb` package: same model, same STS-B test data.

Usage: .venv/bin/python benchmarks/evaluate_vs_mteb.py [--model all-MiniLM-L6-v2]
Needs ../shared/data (STS-B test CSV) and `mteb` (requirements-dev.txt). Prints both main scores
(cosine Spearman), the wall time of each, their ratio, and Shiftlab's time again with a warm
embedding cache.

Both timings cover the same work: importing torch, loading the model, encoding the 2,758
sentences, scoring (Shiftlab's encoder imports torch in its own process; `mteb` runs here, after
Shiftlab, and imports it in this one).
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STSB_TEST = ROOT.parent / "shared" / "data" / "stsb-multi-mt" / "stsb-en-test.csv"


def run_mteb(model_path: str, csv_path: Path) -> tuple[float, float]:
    """Evaluate with mteb's own STSBenchmark task, fed from the local CSV: (main score, seconds)."""
    start = time.perf_counter()
    import mteb
    from datasets import Dataset, DatasetDict
    from sentence_transformers import SentenceTransformer

    with csv_path.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.reader(handle))
    columns = {
        "sentence1": [r[0] for r in rows],
        "sentence2": [r[1] for r in rows],
        "score": [float(r[2]) for r in rows],
    }

    class LocalSTSBenchmark(type(mteb.get_task("STSBenchmark"))):
        def load_data(self, num_proc=None, **kwargs):
            self.dataset = DatasetDict({"test": Dataset.from_dict(columns)})
            self.data_loaded = True

    model = SentenceTransformer(model_path, device="cpu")
    results = mteb.evaluate(model, LocalSTSBenchmark(), cache=None, show_progress_bar=False)
    return results.task_results[0].scores["test"][0]["main_score"], time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="all-MiniLM-L6-v2", help="Alias, packaged model, hub id or folder.")
    args = parser.parse_args()
    if not STSB_TEST.is_file():
        sys.exit(f"STS-B test data not found at {STSB_TEST}")
    os.environ["SHIFTLAB_DATA_DIR"] = tempfile.mkdtemp(prefix="shiftlab-bench-")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shiftlab.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    from corpora.services import ImportOptions, dataset_import
    from evaluation.encoders import get_encoder
    from evaluation.services import dataset_evaluate

    call_command("migrate", verbosity=0)
    dataset = dataset_import(
        source=STSB_TEST,
        task="sts",
        name="stsb-en-test",
        options=ImportOptions(columns=["sentence1", "sentence2", "score"]),
    )
    encoder = get_encoder(args.model)
    timings = []
    for _ in range(2):  # cold: starts the model process and fills the cache; warm: cache hits only
        start = time.perf_counter()
        result = dataset_evaluate(dataset=dataset, encoder_alias_or_model=args.model)
        timings.append(time.perf_counter() - start)

    os.environ.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    reference_score, reference_seconds = run_mteb(str(encoder.model_path), STSB_TEST)

    print(f"model: {encoder.model_id}  data: STS-B test, {dataset.n_items} pairs  cpu cores: {os.cpu_count()}")
    print(f"{'run':<28} {'cosine_spearman':>16} {'seconds':>9}")
    print(f"{'mteb ' + _version('mteb'):<28} {reference_score:>16.6f} {reference_seconds:>9.2f}")
    print(f"{'shiftlab (cold cache)':<28} {result.main_score:>16.6f} {timings[0]:>9.2f}")
    print(f"{'shiftlab (warm cache)':<28} {result.main_score:>16.6f} {timings[1]:>9.2f}")
    print(f"score difference: {result.main_score - reference_score:+.6f}")
    print(
        f"wall-time ratio shiftlab/mteb: cold {timings[0] / reference_seconds:.2f}x, "
        f"warm {timings[1] / reference_seconds:.3f}x"
    )


def _version(package: str) -> str:
    from importlib.metadata import version

    return version(package)


if __name__ == "__main__":
    main()
