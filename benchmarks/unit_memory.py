"""Peak memory of one benchmark unit (issue 19): Banking77 (classification, 13,083 texts) and
SciFact (retrieval, 5,183 abstracts + 300 claims) with all-MiniLM-L6-v2.

Each measurement runs in a fresh process: ``benchmark_unit_execute`` of the dataset's original
unit, cold (empty embedding cache: the encoder process encodes and writes shards) and then warm
(every vector read back from the cache). A process reports its own peak resident set
(``ru_maxrss``) and that of its children (the encoder process, read from ``/proc``: VmHWM). The
baseline is the same process doing everything but the unit: Django set up, the evaluation code
and its libraries imported. The unit's own share is the difference; for reference, the float32
vectors of all its texts take ``n_texts x 384 x 4`` bytes.

    .venv/bin/python benchmarks/unit_memory.py [--datasets banking77 scifact]

Needs ../shared/data. Prints one line per measurement, then ``peak unit/baseline`` per dataset.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data"
MODEL = "all-MiniLM-L6-v2"
IMPORTS = {
    "banking77": {"task": "classification", "path": "banking77", "map": {"label": "category"}},
    "scifact": {"task": "retrieval", "path": "scifact", "map": {}},
}

# Runs in the measured process: set Django up, import what a worker imports, then (unless
# baseline) execute the unit; print the peaks as JSON.
CHILD = """
import json, resource, sys
import django
django.setup()
from evaluation.benchmark_execution import benchmark_unit_execute
from evaluation.models import BenchmarkResult, BenchmarkRun
import sentence_transformers, torch  # what a worker has loaded either way
run_id, mode = int(sys.argv[1]), sys.argv[2]
score = None
if mode != "baseline":
    run = BenchmarkRun.objects.get(pk=run_id)
    BenchmarkResult.objects.filter(run=run).delete()
    unit = run.plan["units"][0]
    benchmark_unit_execute(run_id=run_id, unit=unit)
    result = BenchmarkResult.objects.filter(run=run).first()
    run.refresh_from_db()
    assert result is not None, run.error
    score = result.main_score
def children_peak_kb():
    # The encoder process lives on until exit, so ask the kernel for its peak (VmHWM) now.
    import os, pathlib
    total = 0
    for stat in pathlib.Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) != os.getpid():
                continue
            status = (stat.parent / "status").read_text()
        except (OSError, ValueError, IndexError):
            continue
        total += next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:")), 0)
    return total
print(json.dumps({
    "self_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    "child_mb": max(children_peak_kb(), resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024,
    "score": score,
}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", choices=sorted(IMPORTS), default=sorted(IMPORTS))
    args = parser.parse_args()
    data_dir = Path(tempfile.mkdtemp(prefix="shiftlab-unit-memory-"))
    env = {
        **os.environ,
        "SHIFTLAB_DATA_DIR": str(data_dir),
        "SHIFTLAB_EMBEDDING_CACHE_DIR": str(data_dir / "embeddings"),
        "DJANGO_SETTINGS_MODULE": "shiftlab.settings",
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
    }
    env.pop("DATABASE_URL", None)
    env.pop("CELERY_BROKER_URL", None)
    os.environ.update(env)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    from corpora.services import ImportOptions, dataset_import
    from evaluation.benchmark_services import benchmark_run_create_from_datasets

    call_command("migrate", verbosity=0)
    ratios = []
    for name in args.datasets:
        spec = IMPORTS[name]
        dataset = dataset_import(
            source=DATA / spec["path"], task=spec["task"], name=name, options=ImportOptions(field_map=spec["map"])
        )
        n_texts = dataset.items.count()
        run = benchmark_run_create_from_datasets(datasets=[name], models=[MODEL], dispatch=False)
        vectors_mb = n_texts * 384 * 4 / 2**20
        peaks = {}
        for mode in ("baseline", "cold", "warm"):
            done = subprocess.run(
                [sys.executable, "-c", CHILD, str(run.pk), mode],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode:
                raise SystemExit(f"{name} {mode} failed:\n{done.stderr[-3000:]}")
            peaks[mode] = json.loads(done.stdout.strip().splitlines()[-1])
            p = peaks[mode]
            score = f"; main score {p['score']:.4f}" if p["score"] is not None else ""
            print(
                f"{name} {mode:8s}: process peak {p['self_mb']:.0f} MB, encoder process peak {p['child_mb']:.0f} MB"
                f"{score}"
            )
        base = peaks["baseline"]["self_mb"]
        for mode in ("cold", "warm"):
            extra = peaks[mode]["self_mb"] - base
            print(
                f"{name} {mode}: the unit adds {extra:.0f} MB to the worker process ({n_texts} texts; "
                f"their vectors take {vectors_mb:.0f} MB)"
            )
        ratios.append(f"{name} {peaks['cold']['self_mb'] / base:.2f}/{peaks['warm']['self_mb'] / base:.2f}")
    print(f"peak unit/baseline (cold/warm) = {'; '.join(ratios)}")


if __name__ == "__main__":
    main()
