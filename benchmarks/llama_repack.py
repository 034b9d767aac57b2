"""What turning off llama.cpp's weight repacking costs on a CPU without AMX.

Usage: .venv/bin/python benchmarks/llama_repack.py [--model qwen2.5-coder-1.5b-instruct] [--n 24] [--repeat 2]

On CPUs with AMX the embedded LLM loads models with ``use_extra_bufts = False`` (no weight
repacking at all), because llama.cpp's AMX repacking segfaults (transforms/cpu_features.py). This
script measures what that choice would cost where repacking is safe: it starts the embedded server
(``transforms.embedded.LlamaServer``, the platform's own launcher) with ``SHIFTLAB_LLAMA_REPACK=on``
and ``=off`` in turn, ``--repeat`` times interleaved, each time a fresh server, and sends the same
requests one at a time (the server answers one at a time anyway): the platform's default paraphrase
prompt for the first N texts of the STS-B English test set (../shared/data; the demo fixture when
absent), temperature 0, max_tokens 64, one fixed seed. Per mode it prints texts/s, generated tokens/s,
prompt tokens/s (llama.cpp's own prompt-eval timings from the server log), whether the log shows a
CPU_REPACK buffer, and how many outputs are identical across the two modes; last the ratio
``texts/s off/on``.
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from transforms.cpu_features import read_cpu_flags, weight_repacking  # noqa: E402 (pure, no Django)
from transforms.embedded import DEFAULT_MODEL, LlamaServer, default_models_dir, ensure_model, get_model  # noqa: E402
from transforms.prompts import default_prompt  # noqa: E402

STSB_TEST = ROOT.parent / "shared" / "data" / "stsb-multi-mt" / "stsb-en-test.csv"
DEMO_STS = ROOT / "fixtures" / "sts" / "demo-sts.csv"
PROMPT_EVAL = re.compile(r"prompt eval time =\s*([\d.]+) ms /\s*(\d+) tokens")


@dataclass(frozen=True)
class Measure:
    mode: str
    seconds: float
    texts: int
    completion_tokens: int
    prompt_tokens: int
    prompt_ms: float
    repack_buffer: bool
    outputs: tuple[str, ...]

    @property
    def texts_per_s(self) -> float:
        return self.texts / self.seconds

    @property
    def tokens_per_s(self) -> float:
        return self.completion_tokens / self.seconds

    @property
    def prompt_tokens_per_s(self) -> float:
        return self.prompt_tokens / (self.prompt_ms / 1000) if self.prompt_ms else float("nan")


def read_texts(n: int) -> tuple[Path, list[str]]:
    if STSB_TEST.is_file():
        with STSB_TEST.open(newline="", encoding="utf-8") as handle:
            rows = [(r[0], r[1]) for r in csv.reader(handle)]
        source = STSB_TEST
    else:
        with DEMO_STS.open(newline="", encoding="utf-8") as handle:
            rows = [(r["sentence1"], r["sentence2"]) for r in csv.DictReader(handle)]
        source = DEMO_STS
    texts = list(dict.fromkeys(text for pair in rows for text in pair))
    return source, texts[:n]


def measure(mode: str, model_path: Path, alias: str, texts: list[str], log_dir: Path, run: int) -> Measure:
    import httpx

    os.environ["SHIFTLAB_LLAMA_REPACK"] = mode
    prompt = default_prompt("paraphrase")
    log = log_dir / f"{mode}-{run}.log"
    with LlamaServer(model_path, model_alias=alias, n_ctx=2048, log_path=log) as server:
        offset = log.stat().st_size  # timings after the warm-up generation only
        url = f"{server.base_url}/chat/completions"
        outputs, completion = [], 0
        started = time.perf_counter()
        with httpx.Client(timeout=600) as client:
            for text in texts:
                body = {
                    "model": alias,
                    "messages": prompt.messages(text=text, language="English", source_language="English"),
                    "temperature": 0.0,
                    "top_p": 1.0,
                    "max_tokens": 64,
                    "seed": 42,
                }
                response = client.post(url, json=body)
                response.raise_for_status()
                payload = response.json()
                outputs.append(payload["choices"][0]["message"].get("content") or "")
                completion += int(payload["usage"]["completion_tokens"])
        seconds = time.perf_counter() - started
    text = log.read_text(errors="replace")
    evals = [(float(ms), int(n)) for ms, n in PROMPT_EVAL.findall(text[offset:])]
    return Measure(
        mode=mode,
        seconds=seconds,
        texts=len(texts),
        completion_tokens=completion,
        prompt_tokens=sum(n for _, n in evals),
        prompt_ms=sum(ms for ms, _ in evals),
        repack_buffer="CPU_REPACK model buffer" in text,
        outputs=tuple(outputs),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=DEFAULT_MODEL, help=f"embedded model (default {DEFAULT_MODEL})")
    parser.add_argument("--n", type=int, default=24, help="texts (default 24)")
    parser.add_argument("--repeat", type=int, default=2, help="runs per mode, interleaved (default 2)")
    args = parser.parse_args()

    models_dir = default_models_dir()
    model_path = ensure_model(args.model, models_dir=models_dir, progress=print)
    source, texts = read_texts(args.n)
    flags = read_cpu_flags()
    log_dir = ROOT / "var" / "bench-repack"
    log_dir.mkdir(parents=True, exist_ok=True)
    print(f"model:  {args.model} ({get_model(args.model).filename})")
    print(f"texts:  {len(texts)} from {source.name}; temperature 0, max_tokens 64, sequential requests")
    print(
        f"CPU:    AMX {'present' if {'amx_int8', 'amx_tile'} & flags else 'absent'}; auto choice here: "
        f"{weight_repacking(flags).describe()}"
    )

    runs: dict[str, list[Measure]] = {"on": [], "off": []}
    for run in range(args.repeat):
        for mode in ("on", "off"):
            result = measure(mode, model_path, args.model, texts, log_dir, run)
            runs[mode].append(result)
            print(f"  run {run + 1} repack {mode:<3}: {result.texts_per_s:.3f} texts/s ({result.seconds:.1f} s)")

    print(f"\n{'repacking':<10} {'texts/s':>8} {'gen tok/s':>10} {'prompt tok/s':>13} {'REPACK buffer':>14}")
    medians = {}
    for mode, measures in runs.items():
        best = sorted(measures, key=lambda m: m.seconds)[len(measures) // 2]
        medians[mode] = best
        print(
            f"{mode:<10} {statistics.median(m.texts_per_s for m in measures):>8.3f} "
            f"{statistics.median(m.tokens_per_s for m in measures):>10.2f} "
            f"{statistics.median(m.prompt_tokens_per_s for m in measures):>13.1f} "
            f"{'yes' if best.repack_buffer else 'no':>14}"
        )
    same = sum(a == b for a, b in zip(medians["on"].outputs, medians["off"].outputs, strict=True))
    print(f"identical outputs on/off (temperature 0): {same}/{len(texts)}")
    ratio = statistics.median(m.texts_per_s for m in runs["off"]) / statistics.median(m.texts_per_s for m in runs["on"])
    print(f"ratio texts/s off/on = {ratio:.3f}")


if __name__ == "__main__":
    main()
