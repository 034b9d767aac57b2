"""Decompression and decoding bombs against the dataset readers (issue 39, finding 1): for each
bomb, the file's size, what it claims to decode to, how long the reader took to refuse it, and how
much the reading process's resident memory grew.

The bombs are written by one process, then each is read in a fresh process with the import
limits' defaults (1 MB a cell, 4 MB a row, 2048 MB in all, 5,000,000 rows): once by the reader
itself ("reader": memory is how much that process grew while reading) and once the way an import
job reads it, in a child capped at 4096 MB ("job": memory is the child's peak, interpreter and
pyarrow included; the time includes starting it).

    .venv/bin/python benchmarks/import_bombs.py

No Django and no database: only the pure reading modules.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MB = 2**20
BOMBS = ("finding", "dictionary", "list", "rle", "zstd", "csv_cell")


def _write(name: str, folder: Path) -> tuple[Path, int]:
    """The bomb's file and the bytes it claims to decode to."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    def dictionary(rows: int, value: int) -> pa.Array:
        return pa.DictionaryArray.from_arrays(pa.array(np.zeros(rows, dtype=np.int32)), pa.array(["x" * value]))

    if name == "finding":  # the file: one 8 MB text, 200,000 rows
        path = folder / "finding.parquet"
        pq.write_table(pa.table({"text": dictionary(200_000, 8 * MB)}), path, store_schema=False)
        return path, 200_000 * 8 * MB
    if name == "dictionary":  # cells within the 1 MB bound, the total far past 2 GB
        path = folder / "dictionary.parquet"
        pq.write_table(pa.table({"text": dictionary(200_000, MB)}), path, store_schema=False)
        return path, 200_000 * MB
    if name == "list":  # a list column whose items are one dictionary text
        path = folder / "list.parquet"
        items = dictionary(200_000, 4 * MB)
        lists = pa.ListArray.from_arrays(pa.array(np.arange(200_001, dtype=np.int32)), items)
        pq.write_table(pa.table({"positive": lists}), path, store_schema=False)
        return path, 200_000 * 4 * MB
    if name == "rle":  # 50 million empty rows: one run of definition levels
        path = folder / "rle.parquet"
        pq.write_table(pa.table({"text": pa.nulls(50_000_000, pa.string())}), path)
        return path, 50_000_000 * 8
    if name == "zstd":  # plain pages of one repeated 16 MB text, compressed
        path = folder / "zstd.parquet"
        pq.write_table(pa.table({"text": ["z" * 16 * MB] * 64}), path, use_dictionary=False, compression="zstd")
        return path, 64 * 16 * MB
    path = folder / "cell.csv"  # one 64 MB cell
    path.write_bytes(b"sentence1,sentence2,score\n" + b"w" * 64 * MB + b",b,1\n")
    return path, 64 * MB


def write_all(folder: Path) -> dict[str, tuple[str, int]]:
    return {name: (str(path), claimed) for name in BOMBS for path, claimed in [_write(name, folder)]}


def one(name: str, mode: str, path: Path, claimed: int) -> dict:
    from corpora.bounded_import import ChildRead, parse_in_child
    from corpora.limits import ReadLimits
    from corpora.readers import read_source

    limits = ReadLimits(max_cell_bytes=MB, max_row_bytes=4 * MB, max_total_bytes=2048 * MB, max_rows=5_000_000)
    if mode == "reader":
        import pyarrow.parquet  # noqa: F401 (loaded first: the reading is measured, not the import)
    with open("/proc/self/status", encoding="ascii") as status:
        resident = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
    start = time.perf_counter()
    try:
        if mode == "reader":
            read_source(path, limits=limits, label=path.name)
        else:
            parse_in_child(
                ChildRead(source=str(path), task="sts", label=path.name, limits=limits), memory_bytes=4096 * MB
            )
        outcome = "read (not refused)"
    except Exception as exc:  # noqa: BLE001 - the refusal is the result
        outcome = str(exc).splitlines()[0][:150]
    seconds = time.perf_counter() - start
    if mode == "reader":
        with open("/proc/self/status", encoding="ascii") as status:
            grew = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) - resident
    else:  # the child's own peak from its start: it is this (small) process's only child
        grew = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return {
        "bomb": name,
        "mode": mode,
        "file_kb": path.stat().st_size / 1024,
        "claimed_gib": claimed / 2**30,
        "seconds": seconds,
        "memory_mb": grew / 1024,  # reader: growth of the process while reading; job: the child's peak
        "outcome": outcome,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--write", metavar="DIR")
    parser.add_argument("--one", nargs=4, metavar=("BOMB", "MODE", "PATH", "CLAIMED"))
    args = parser.parse_args()
    if args.write:
        print(json.dumps(write_all(Path(args.write))))
        return
    if args.one:
        name, mode, path, claimed = args.one
        print(json.dumps(one(name, mode, Path(path), int(claimed))))
        return
    with tempfile.TemporaryDirectory() as folder:
        written = subprocess.run(
            [sys.executable, __file__, "--write", folder], capture_output=True, text=True, cwd=ROOT, check=True
        )
        bombs = json.loads(written.stdout)
        print(f"{'bomb':<11} {'mode':<7} {'file':>9} {'claims':>10} {'refused in':>10} {'memory':>8}  message")
        for name in BOMBS:
            path, claimed = bombs[name]
            for mode in ("reader", "job"):
                done = subprocess.run(
                    [sys.executable, __file__, "--one", name, mode, path, str(claimed)],
                    capture_output=True,
                    text=True,
                    cwd=ROOT,
                    check=False,
                )
                if done.returncode:
                    print(f"{name:<11} {mode:<7} failed: {done.stderr.strip()[-300:]}")
                    continue
                r = json.loads(done.stdout)
                print(
                    f"{name:<11} {mode:<7} {r['file_kb']:>6.0f} KB {r['claimed_gib']:>6.1f} GiB {r['seconds']:>8.3f} s "
                    f"{r['memory_mb']:>5.0f} MB  {r['outcome']}"
                )


if __name__ == "__main__":
    main()
