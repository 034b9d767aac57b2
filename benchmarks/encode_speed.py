"""Encoding through Shiftlab against sentence-transformers' own ``encode`` on the same texts.

Shiftlab's path is ``encode_cached`` with an empty cache (hashing, claims, the model's own process,
shards written), so everything a cold benchmark unit pays for encoding is counted; the reference
is ``SentenceTransformer.encode`` in this process with the same model files and batch size. Both
models are loaded before timing; the two are timed in turn, ``--repeats`` times, alternating
which goes first, and the best of each is compared (the machine is shared: the minimum is the
least disturbed). Goal: ratio <= 1.1.

    .venv/bin/python benchmarks/encode_speed.py [--texts stsb|scifact] [--limit N]

Needs ../shared/data. Last line: ``ratio shiftlab/st = X.XX``.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data"


def load_texts(source: str, limit: int | None) -> list[str]:
    if source == "stsb":
        with (DATA / "stsb-multi-mt" / "stsb-en-test.csv").open(encoding="utf-8", newline="") as handle:
            texts = [text for row in csv.reader(handle) for text in row[:2]]
    else:
        with (DATA / "scifact" / "corpus.jsonl").open(encoding="utf-8") as handle:
            texts = [f"{doc['title']} {doc['text']}".strip() for doc in map(json.loads, handle)]
    return list(dict.fromkeys(texts))[:limit]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", choices=("stsb", "scifact"), default="stsb")
    parser.add_argument("--limit", type=int, help="First N unique texts (default: all).")
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("SHIFTLAB_DATA_DIR", tempfile.mkdtemp(prefix="shiftlab-encode-speed-"))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shiftlab.settings")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    import numpy as np
    import torch
    from sentence_transformers import SentenceTransformer

    from evaluation.embedding_cache import encode_cached
    from evaluation.encoders import get_encoder

    texts = load_texts(args.texts, args.limit)
    encoder = get_encoder(args.model)
    encoder.encode(["warm-up: load the model before timing"], batch_size=args.batch_size)
    reference = SentenceTransformer(str(encoder.model_path), device="cpu", local_files_only=True)
    reference.encode(["warm-up"], batch_size=args.batch_size, show_progress_bar=False)

    def shiftlab() -> np.ndarray:
        root = tempfile.mkdtemp(prefix="embeddings-")  # a cold cache each time
        return encode_cached(encoder, texts, batch_size=args.batch_size, root=root)

    def sentence_transformers() -> np.ndarray:
        return reference.encode(texts, batch_size=args.batch_size, convert_to_numpy=True, show_progress_bar=False)

    seconds = {shiftlab: [], sentence_transformers: []}
    vectors = {}
    for repeat in range(args.repeats):
        # Alternate which goes first, so a load that rises or falls favours neither.
        for path in (shiftlab, sentence_transformers)[:: 1 if repeat % 2 == 0 else -1]:
            started = time.perf_counter()
            vectors[path] = path()
            seconds[path].append(time.perf_counter() - started)
    ours, theirs = vectors[shiftlab], vectors[sentence_transformers]
    shiftlab_s, st_s = seconds[shiftlab], seconds[sentence_transformers]

    lengths = sorted(len(text) for text in texts)
    print(
        f"texts: {len(texts)} unique from {args.texts} "
        f"(characters: median {lengths[len(lengths) // 2]}, max {lengths[-1]})"
    )
    print(
        f"model: {encoder.model_id}, batch size {args.batch_size}, best of {args.repeats}, "
        f"{torch.get_num_threads()} torch threads"
    )
    print(f"max |shiftlab - st| over all vectors: {float(np.abs(ours - theirs).max()):.2e}")
    print("shiftlab encode_cached (cold cache): " + ", ".join(f"{s:.2f}" for s in shiftlab_s) + " s")
    print("sentence-transformers encode:       " + ", ".join(f"{s:.2f}" for s in st_s) + " s")
    print(f"texts/s: shiftlab {len(texts) / min(shiftlab_s):.0f}, st {len(texts) / min(st_s):.0f}")
    print(f"ratio shiftlab/st = {min(shiftlab_s) / min(st_s):.2f}")


if __name__ == "__main__":
    main()
