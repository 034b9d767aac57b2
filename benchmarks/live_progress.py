"""Live progress of a transformation run (issue 41, item 3): what per-text progress costs and how
soon a finished text shows on the run's row.

Usage: .venv/bin/python benchmarks/live_progress.py [--texts 64] [--latency 0.05] [--in-flight 4] [--repeat 3]

A loopback OpenAI-style server answers every chat request after ``--latency`` seconds (a stand-in
for an LLM; no model runs, so the platform's own overhead is what differs). One chunk of a
paraphrase run of ``--texts`` distinct texts (max_attempts 1) is executed in-process against a
fresh SQLite database, the backend keeping ``--in-flight`` requests in flight, in three modes:

  (a) baseline: the run's row written once, when the chunk ends (``FLUSH_EVERY_S`` = infinity: what
      a page saw before, "0/64" until the chunk was done);
  (b) default: written at most every ``FLUSH_EVERY_S`` = 0.5 s;
  (c) every answer: written after each answer (``FLUSH_EVERY_S`` = 0).

Each mode runs ``--repeat`` times on a fresh run (a new seed: no cache hits), interleaved; medians
are reported. Per mode: the chunk's wall time, the UPDATEs of the run's row, and the lag from the
moment the server sent the k-th answer to the moment the row's ``done`` reached k (median and
maximum over texts). Last lines: the wall-time ratios b/a and c/a.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import statistics
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def stub_server(latency: float, sent: list[float]) -> ThreadingHTTPServer:
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            self.send_response(404)
            self.end_headers()

        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            time.sleep(latency)
            with lock:
                n = len(sent)
                sent.append(time.perf_counter())
            body = json.dumps(
                {"choices": [{"message": {"content": f"A plain rewording, number {n}."}, "finish_reason": "stop"}]}
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=64)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--in-flight", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    data_dir = Path(tempfile.mkdtemp(prefix="shiftlab-bench-"))
    os.environ["SHIFTLAB_DATA_DIR"] = str(data_dir)
    os.environ.pop("DATABASE_URL", None)
    os.environ.pop("CELERY_BROKER_URL", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shiftlab.settings")
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection

    from corpora.services import dataset_import
    from transforms import llm_activity
    from transforms.backends import reset_backends
    from transforms.chunk_services import transform_run_execute_chunk
    from transforms.models import TransformRun
    from transforms.params import GenerationParams
    from transforms.services import transform_run_create, transform_run_pending_chunks

    call_command("migrate", verbosity=0)
    source = data_dir / "pairs.csv"
    with source.open("w", newline="", encoding="utf-8") as handle:
        rows = csv.writer(handle)
        rows.writerow(["id", "sentence1", "sentence2", "score"])
        for i in range(math.ceil(args.texts / 2)):
            first, second = f"The river number {i} flows past the old mill.", f"Train {i} leaves at noon."
            rows.writerow([f"p{i}", first, second, 2.5])
    dataset = dataset_import(source=source, task="sts", name="live-progress")
    sent: list[float] = []
    server = stub_server(args.latency, sent)
    settings.TRANSFORM_CHUNK_SIZE = args.texts
    settings.TRANSFORM_BACKENDS = {
        "default": {
            "BACKEND": "transforms.backends.openai_compat.OpenAICompatBackend",
            "OPTIONS": {
                "base_url": f"http://127.0.0.1:{server.server_address[1]}/v1",
                "model": "stub",
                "max_retries": 0,
                "max_concurrency": args.in_flight,
            },
        }
    }
    reset_backends()

    modes = {"a baseline (one write)": math.inf, "b default (0.5 s)": 0.5, "c every answer": 0.0}
    results: dict[str, list[tuple[float, int, float, float]]] = {name: [] for name in modes}
    seed = 0
    for _ in range(args.repeat):
        for name, every in modes.items():
            seed += 1
            llm_activity.FLUSH_EVERY_S = every
            run = transform_run_create(
                dataset=dataset,
                transformation="paraphrase",
                seed=seed,
                params=GenerationParams(max_tokens=16, max_attempts=1),
                dispatch=False,
            )
            TransformRun.objects.filter(pk=run.pk).update(status="running")
            (chunk,) = transform_run_pending_chunks(run_id=run.pk)
            writes: list[tuple[float, int]] = []
            reading = [False]

            def watch(execute, sql, params, many, context, run_pk=run.pk, writes=writes, reading=reading):
                result = execute(sql, params, many, context)
                if sql.startswith("UPDATE") and TransformRun._meta.db_table in sql and not reading[0]:
                    reading[0] = True
                    done = TransformRun.objects.filter(pk=run_pk).values_list("done", flat=True).get()
                    reading[0] = False
                    writes.append((time.perf_counter(), done))
                return result

            del sent[:]
            started = time.perf_counter()
            with connection.execute_wrapper(watch):
                transform_run_execute_chunk(run_id=run.pk, item_ids=chunk)
            wall = time.perf_counter() - started
            answers = sorted(sent)
            lags = []
            for k, answered_at in enumerate(answers, start=1):
                shown = next(t for t, done in writes if done >= k)
                lags.append(shown - answered_at)
            results[name].append((wall, len(writes), statistics.median(lags), max(lags)))
    server.shutdown()

    n = len(answers)
    print(
        f"{n} texts, one chunk, server latency {args.latency} s, {args.in_flight} in flight, "
        f"medians of {args.repeat} repeats (SQLite, this machine)"
    )
    print(f"{'mode':28} {'wall s':>8} {'row UPDATEs':>12} {'lag median s':>13} {'lag max s':>10}")
    medians = {}
    for name, rows in results.items():
        wall, updates, lag_median, lag_max = (statistics.median(column) for column in zip(*rows, strict=True))
        medians[name] = wall
        print(f"{name:28} {wall:8.3f} {updates:12.0f} {lag_median:13.3f} {lag_max:10.3f}")
    base = medians["a baseline (one write)"]
    print(f"ratio wall b/a = {medians['b default (0.5 s)'] / base:.3f}")
    print(f"ratio wall c/a = {medians['c every answer'] / base:.3f}")


if __name__ == "__main__":
    main()
