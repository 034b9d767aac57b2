"""Encoding on a GPU: Shiftlab's encoder path against sentence-transformers' own saturated ``encode``.

Shiftlab's path is ``encode_cached`` with an empty cache (hashing, claims, the model in its own
process started by fork + exec, the vectors piped back, shards written); the reference is
``SentenceTransformer.encode`` in this process with the same model files. The reference is run at
several batch sizes and its best is the backend's saturated throughput; Shiftlab is run at its
configured batch size (32) and at the reference's best one. Goal: Shiftlab >= 0.9x of saturated.
Also prints the STS-B (en, test) Spearman of Shiftlab's vectors, to check the GPU vectors
against the published all-MiniLM-L6-v2 score (0.8203, float32).

Texts: the STS-B multilingual test sentences (short, unique across the languages given) and
the SciFact abstracts (long). ``--standalone`` configures Django with the few settings the encoder
and the cache read, so the script runs where only Django, sentence-transformers and torch are
installed (the GPU machine); without it, it uses ``shiftlab.settings``.

    python benchmarks/gpu_encode.py --standalone --model DIR --data DIR --device cuda

Last line: ``ratio shiftlab/saturated = X.XX``.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _open(data: Path, name: str):
    """``name`` in ``data``, plain or gzipped."""
    plain = data / name
    if plain.is_file():
        return plain.open(encoding="utf-8", newline="")
    return io.TextIOWrapper(gzip.open(data / f"{name}.gz"), encoding="utf-8", newline="")


def sts_rows(data: Path, language: str) -> list[tuple[str, str, float]]:
    with _open(data, f"stsb-{language}-test.csv") as handle:
        return [(row[0], row[1], float(row[2])) for row in csv.reader(handle)]


def scifact_texts(data: Path) -> list[str]:
    with _open(data, "scifact-corpus.jsonl") as handle:
        return [f"{doc['title']} {doc['text']}".strip() for doc in map(json.loads, handle)]


def configure(args) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sys.path.insert(0, str(ROOT))
    import django
    from django.conf import settings

    if args.standalone:
        settings.configure(
            EVALUATION_ENCODERS={
                "default": {
                    "BACKEND": "evaluation.encoders.SentenceTransformerEncoder",
                    "OPTIONS": {"model": args.model, "device": args.device},
                }
            },
            EMBEDDING_CACHE_DIR=Path(tempfile.mkdtemp(prefix="embeddings-")),
            EMBEDDING_CACHE_URL="",
            EMBEDDING_CLAIM_SECONDS=600.0,
        )
    else:
        os.environ.setdefault("SHIFTLAB_DATA_DIR", tempfile.mkdtemp(prefix="shiftlab-gpu-encode-"))
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shiftlab.settings")
    django.setup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="all-MiniLM-L6-v2", help="Packaged name or model folder.")
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "stsb-multi-mt")
    parser.add_argument("--scifact", type=Path, help="Folder of scifact-corpus.jsonl[.gz] (default: --data).")
    parser.add_argument("--languages", nargs="+", default=["en", "de", "es", "fr", "it", "nl", "pl", "pt", "ru"])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtypes", nargs="+", default=["float16", "float32"])
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[32, 128, 512])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--limit", type=int, help="First N texts of each set (a quick check).")
    parser.add_argument("--standalone", action="store_true")
    args = parser.parse_args()
    configure(args)

    import numpy as np
    import torch
    from scipy.stats import spearmanr
    from sentence_transformers import SentenceTransformer

    from evaluation.embedding_cache import encode_cached
    from evaluation.encoders import get_encoder

    english = sts_rows(args.data, "en")
    short = list(dict.fromkeys(t for lang in args.languages for row in sts_rows(args.data, lang) for t in row[:2]))
    long = list(dict.fromkeys(scifact_texts(args.scifact or args.data)))
    short, long = short[: args.limit], long[: args.limit]
    device_name = torch.cuda.get_device_name(0) if args.device.startswith("cuda") else args.device
    print(f"device: {device_name}; torch {torch.__version__}; model {args.model}")
    print(f"texts: {len(short)} STS-B sentences ({len(args.languages)} languages), {len(long)} SciFact abstracts")

    ratios = []
    for dtype in args.dtypes:
        encoder = get_encoder(args.model, dtype=dtype)
        encoder.encode(["warm-up: load the model before timing"])
        reference = SentenceTransformer(str(encoder.model_path), device=args.device, local_files_only=True)
        reference.to(getattr(torch, dtype))  # transformers 5 keeps a checkpoint's own dtype otherwise
        reference.eval()
        reference.encode(["warm-up"] * 64, show_progress_bar=False)

        def best(function, texts, batch_size):
            times = []
            for _ in range(args.repeats):
                if args.device.startswith("cuda"):
                    torch.cuda.synchronize()
                started = time.perf_counter()
                vectors = function(texts, batch_size)
                if args.device.startswith("cuda"):
                    torch.cuda.synchronize()
                times.append(time.perf_counter() - started)
            return min(times), vectors

        def st(texts, batch_size, reference=reference):
            return reference.encode(texts, batch_size=batch_size, convert_to_numpy=True, show_progress_bar=False)

        def shiftlab(texts, batch_size, encoder=encoder):
            root = tempfile.mkdtemp(prefix="embeddings-")  # a cold cache each time
            return encode_cached(encoder, texts, batch_size=batch_size, root=root)

        for label, texts in (("STS-B", short), ("SciFact", long)):
            st_rates = {}
            for batch_size in args.batch_sizes:
                seconds, reference_vectors = best(st, texts, batch_size)
                st_rates[batch_size] = len(texts) / seconds
            saturated_batch = max(st_rates, key=st_rates.get)
            ours = {}
            for batch_size in sorted({32, saturated_batch}):
                seconds, vectors = best(shiftlab, texts, batch_size)
                ours[batch_size] = len(texts) / seconds
            _, reference_vectors = best(st, texts, saturated_batch)
            gap = float(np.abs(vectors.astype(np.float32) - reference_vectors.astype(np.float32)).max())
            ratio = max(ours.values()) / st_rates[saturated_batch]
            ratios.append(ratio)
            print(
                f"{dtype} {label}: sentence-transformers texts/s by batch "
                + ", ".join(f"{b}: {r:,.0f}" for b, r in st_rates.items())
                + "; Shiftlab texts/s "
                + ", ".join(f"{b}: {r:,.0f}" for b, r in ours.items())
                + f"; Shiftlab/saturated {ratio:.2f}; max |diff| {gap:.1e}"
            )

        pairs = encode_cached(encoder, [t for row in english for t in row[:2]], root=tempfile.mkdtemp())
        left, right = pairs[0::2], pairs[1::2]
        cosine = (left * right).sum(1) / (np.linalg.norm(left, axis=1) * np.linalg.norm(right, axis=1))
        score = spearmanr(cosine, [row[2] for row in english]).statistic
        print(f"{dtype} STS-B en test Spearman (cosine) through Shiftlab on {args.device}: {score:.4f}", end="")
        print(" (published 0.8203)")
        encoder.close()
        reference = None  # frees the GPU memory before the next dtype
        if args.device.startswith("cuda"):
            torch.cuda.empty_cache()
    print(f"ratio shiftlab/saturated = {min(ratios):.2f}")


if __name__ == "__main__":
    main()
