"""The embedded LLM and the encoder sharing one machine: each alone, then both at once, per thread setup.

Usage: .venv/bin/python benchmarks/llm_encoder_sharing.py [--model auto] [--n 48] [--repeat 3]
           [--setups old fixed] [--slot-counts 1 32] [--chunk-size N] [--ubatch 128]

Issue 41, item 5: on a small machine the demo's Celery worker (``-Q default,llm,encode --concurrency
2``) runs an encoding task while an LLM task waits on the embedded llama-server, so both compete for
the cores. One run measures, side by side:

1. Sharing. The embedded llama-server (``transforms.embedded.LlamaServer``: its default threads, all
   CPUs but one; ``--slots`` slots, default 32; ``--poll 0``) serves a paraphrase run of the platform
   (``transform_throughput.platform_run``: run creation, eager chunk tasks, generation cache, output
   checks, database writes) of the first N/2 STS-B English test pairs whose sentences are distinct
   (N texts, temperature 0, max_tokens 64, an empty generation cache each time). The encoder is the
   platform's own (``evaluation.encoders.SentenceTransformerEncoder``: the packaged all-MiniLM-L6-v2 in
   its model process, batch 32) encoding STS-B sentences in requests of ``--encode-batch`` texts. Per
   pass: the LLM alone; then for each setup the encoder alone (``--encode-n`` texts) and both at once
   (the encoder loops until the LLM run ends; its rate counts the requests finished meanwhile). Setups:

   - ``old``: torch's default threads in the encoder process (one per core), as before the fix;
   - ``fixed``: the platform's default now (``evaluation.encoders.encoder_process_threads``: with an LLM
     server answering at the default backend's loopback address, the cores it leaves, at least one);
   - ``pinned``: ``fixed``, and the LLM server's threads bound to the last CPUs, the encoder's to the rest;
   - ``passive``: torch's default threads with ``OMP_WAIT_POLICY=PASSIVE`` (waiting threads sleep);
   - ``old2``, ``fixed2``: two encoder processes of ``old`` or ``fixed`` at once, as the demo's worker runs
     two encoding tasks with ``--concurrency 2`` (their rates added).

   Setups alternate within each pass and the order flips every pass; medians over the passes.
2. Slots. The same paraphrase run against llama-server with each of ``--slot-counts`` (default 1 and
   the sharing run's slots) at the same threads, and with ``--ubatch`` sizes at the sharing run's slots;
   servers alternate within each pass, the order flips every pass (``--chunk-size`` sets the
   platform's TRANSFORM_CHUNK_SIZE for this part: a chunk sends at most twice that many texts).

Before each measurement the 1-minute load average is recorded and printed (the machine may be
shared). The model: ``--model auto`` takes the demo's (qwen2.5-coder-1.5b-instruct) where its GGUF
file is in SHIFTLAB_MODELS_DIR, ~/.cache/shiftlab/models or var/models, else the test model
(smollm2-135m-instruct) where that one is, else downloads the demo's into var/models. Last lines:
``ratio ... beside/solo`` per side and setup, and ``ratio llama-server N slots/1 slot``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

DEMO_MODEL = "qwen2.5-coder-1.5b-instruct"
TEST_MODEL = "smollm2-135m-instruct"
SETUPS = ("old", "fixed", "pinned", "passive", "old2", "fixed2")
GOAL_SHARE = 0.5  # neither side below half of its solo speed
GOAL_SLOTS = 2.0  # the default server against the one-slot server


def models_dirs() -> list[Path]:
    dirs = [
        os.environ.get("SHIFTLAB_MODELS_DIR"),
        Path.home() / ".cache" / "shiftlab" / "models",
        ROOT / "var" / "models",
    ]
    return [Path(d) for d in dirs if d]


def choose_model(name: str) -> tuple[str, Path]:
    """The model's name and verified GGUF path (see the module docstring for ``auto``)."""
    from transforms.embedded import ensure_model, get_model

    wanted = [DEMO_MODEL, TEST_MODEL] if name == "auto" else [name]
    for model in wanted:
        for folder in models_dirs():
            if (folder / get_model(model).filename).is_file():
                return model, ensure_model(model, models_dir=folder, progress=print)
    model = wanted[0]
    return model, ensure_model(model, models_dir=ROOT / "var" / "models", progress=print)


def load1() -> float:
    return os.getloadavg()[0]


def pin(pid: int, cpus: set[int]) -> None:
    """Bind every thread of process ``pid`` to ``cpus`` (``sched_setaffinity`` acts on one thread)."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
        except (ProcessLookupError, FileNotFoundError):  # a thread that ended meanwhile
            pass


def encoder_texts() -> list[str]:
    from transform_throughput import read_pairs

    _, rows = read_pairs(100_000)
    return list(dict.fromkeys(text for row in rows for text in row[:2]))


@dataclass
class Encoding:
    """An encoder process of one setup and the texts it encodes."""

    encoder: object
    texts: list[str]
    batch: int
    position: int = 0

    def request(self) -> int:
        """Encode the next ``batch`` texts (cycling); return how many."""
        chunk = [self.texts[(self.position + i) % len(self.texts)] for i in range(self.batch)]
        self.position = (self.position + self.batch) % len(self.texts)
        self.encoder.encode(chunk)
        return len(chunk)

    def solo(self, n: int) -> float:
        """Sentences/s encoding ``n`` texts alone."""
        done, started = 0, time.perf_counter()
        while done < n:
            done += self.request()
        return done / (time.perf_counter() - started)


def encode_together(encodings: list[Encoding], n: int) -> float:
    """Sentences/s of all ``encodings`` encoding ``n`` texts each at the same time (alone, no LLM)."""
    if len(encodings) == 1:
        return encodings[0].solo(n)
    started = time.perf_counter()
    threads = [threading.Thread(target=e.solo, args=(n,)) for e in encodings]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return n * len(encodings) / (time.perf_counter() - started)


class Background:
    """The encoder looping in a thread while the caller runs the LLM; counts finished requests."""

    def __init__(self, encoding: Encoding):
        self.encoding = encoding
        self.stop = threading.Event()
        self.done = 0
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        try:
            while not self.stop.is_set():
                n = self.encoding.request()
                if not self.stop.is_set():  # finished while the LLM still ran
                    self.done += n
                    self.last = time.perf_counter()
        except BaseException as exc:  # reported by the caller
            self.error = exc

    def __enter__(self) -> Background:
        self.started = self.last = time.perf_counter()
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()
        if self.error is not None:
            raise RuntimeError(f"the encoder failed while the LLM ran: {self.error}") from self.error

    @property
    def rate(self) -> float:
        return self.done / (self.last - self.started) if self.done else 0.0


@dataclass
class Samples:
    """Per-pass figures of one setup, with the 1-minute load average before each measurement."""

    llm_solo: list[float] = field(default_factory=list)
    encoder_solo: list[float] = field(default_factory=list)
    llm_beside: list[float] = field(default_factory=list)
    encoder_beside: list[float] = field(default_factory=list)
    loads: list[float] = field(default_factory=list)

    @staticmethod
    def median(values: list[float]) -> float:
        return statistics.median(values) if values else float("nan")


def make_encoder(setup: str, texts: list[str], batch: int) -> tuple[Encoding, int | None]:
    """A fresh encoder process configured as ``setup``; returns it and its torch threads."""
    from django.conf import settings

    import evaluation.encoders as encoders

    options = dict(settings.EVALUATION_ENCODERS["default"]["OPTIONS"], model="all-MiniLM-L6-v2")
    encoder = encoders.SentenceTransformerEncoder(alias=f"sharing-{setup}", **options)
    resolve = encoders.encoder_process_threads
    if setup in ("old", "passive", "old2"):
        encoders.encoder_process_threads = lambda: None  # torch's default: one thread per core
    if setup == "passive":
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    try:
        encoder.encode(["warm-up: the model process starts and loads"])
    finally:
        encoders.encoder_process_threads = resolve
        os.environ.pop("OMP_WAIT_POLICY", None)
    encoder.encode(texts[:batch])  # torch's first batch allocates
    return Encoding(encoder, texts, batch), encoder._worker.threads


def run_sharing(args, work, model: str, model_path: Path, data_dir: Path, port: int) -> tuple[dict[str, Samples], dict]:
    from django.conf import settings
    from transform_throughput import Meter, platform_run, warm_up

    from core.local_server import available_cpus
    from transforms.backends import get_backend, reset_backends
    from transforms.embedded import LlamaServer, default_llm_threads
    from transforms.models import Generation

    threads = default_llm_threads(available_cpus(), int(settings.EMBEDDED_LLM_THREADS or 0))
    texts = encoder_texts()
    server = LlamaServer(
        model_path, model_alias=model, port=port, n_threads=threads, slots=args.slots, log_path=data_dir / "sharing.log"
    )
    server.start()
    all_cpus = os.sched_getaffinity(0)
    try:
        startup = server.wait_ready(timeout=600)
        reset_backends()
        get_backend("default").in_flight()
        warm_up(f"{server.base_url}/chat/completions", model, work.prompt)

        def llm() -> float:
            Generation.objects.all().delete()  # every run reaches the model
            phase, _ = platform_run(dataset=work.dataset, params=work.params, n_items=len(work.items), meter=Meter())
            return phase.texts_per_s

        setups = {name: Samples() for name in args.setups}
        encoders = {}
        threads_of = {}
        for name in args.setups:
            made = [make_encoder(name, texts, args.encode_batch) for _ in range(2 if name.endswith("2") else 1)]
            encoders[name], threads_of[name] = [encoding for encoding, _ in made], made[0][1]
            for i, encoding in enumerate(encoders[name]):  # two processes encode different texts
                encoding.position = i * len(texts) // 2
        for index in range(args.repeat):
            order = list(args.setups) if index % 2 == 0 else list(reversed(args.setups))
            load = load1()
            solo = llm()
            say(f"pass {index + 1}: LLM alone {solo:.2f} texts/s (load {load:.2f})")
            for name in order:
                samples, encodings = setups[name], encoders[name]
                samples.llm_solo.append(solo)
                if name == "pinned":  # the LLM's threads on the last CPUs, the encoder's on the others
                    cpus = sorted(all_cpus)
                    pin(server.process.pid, set(cpus[-threads:]))
                    pin(encodings[0].encoder._worker.process.pid, set(cpus[:-threads]) or set(cpus))
                samples.loads.append(load1())
                samples.encoder_solo.append(encode_together(encodings, args.encode_n))
                samples.loads.append(load1())
                with contextlib.ExitStack() as stack:
                    backgrounds = [stack.enter_context(Background(encoding)) for encoding in encodings]
                    samples.llm_beside.append(llm())
                    for background in backgrounds:  # requests finishing after the LLM run do not count
                        background.stop.set()
                samples.encoder_beside.append(sum(background.rate for background in backgrounds))
                pin(server.process.pid, all_cpus)
                say(
                    f"pass {index + 1}, {name}: encoder alone {samples.encoder_solo[-1]:.0f}/s, beside "
                    f"{samples.encoder_beside[-1]:.0f}/s; LLM beside {samples.llm_beside[-1]:.2f} texts/s "
                    f"(load {samples.loads[-2]:.2f}, {samples.loads[-1]:.2f})"
                )
        for encodings in encoders.values():
            for encoding in encodings:
                encoding.encoder.close()
        info = {"threads": threads, "startup": startup, "texts": len(work.texts), "encoder_threads": threads_of}
        return setups, info
    finally:
        server.stop()


def run_slots(
    args, work, model: str, model_path: Path, data_dir: Path, port: int
) -> tuple[dict[str, list[float]], list]:
    """texts/s per server configuration, alternating, one pass each per repeat."""
    from django.conf import settings
    from transform_throughput import Meter, platform_run, warm_up

    from core.local_server import available_cpus
    from transforms.backends import get_backend, reset_backends
    from transforms.embedded import LlamaServer, default_llm_threads
    from transforms.models import Generation

    if args.chunk_size:
        settings.TRANSFORM_CHUNK_SIZE = args.chunk_size
    threads = default_llm_threads(available_cpus(), int(settings.EMBEDDED_LLM_THREADS or 0))
    configs = [(f"{n} slot{'s' if n != 1 else ''}", n, ()) for n in dict.fromkeys(args.slot_counts)]
    configs += [(f"{args.slots} slots, ubatch {u}", args.slots, ("--ubatch-size", str(u))) for u in args.ubatch]
    results: dict[str, list[float]] = {label: [] for label, _, _ in configs}
    loads = []
    for index in range(args.repeat):
        for label, slots, extra in configs if index % 2 == 0 else list(reversed(configs)):
            server = LlamaServer(
                model_path,
                model_alias=model,
                port=port,
                n_threads=threads,
                slots=slots,
                extra_args=extra,
                log_path=data_dir / f"slots-{slots}.log",
            )
            server.start()
            try:
                server.wait_ready(timeout=600)
                reset_backends()
                get_backend("default").in_flight()
                warm_up(f"{server.base_url}/chat/completions", model, work.prompt)
                Generation.objects.all().delete()
                loads.append(load1())
                phase, _ = platform_run(
                    dataset=work.dataset, params=work.params, n_items=len(work.items), meter=Meter()
                )
            finally:
                server.stop()
            results[label].append(phase.texts_per_s)
            say(f"pass {index + 1}, {label}: {phase.texts_per_s:.2f} texts/s (load {loads[-1]:.2f})")
    return results, loads


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def print_report(args, model, model_path, sharing, info, slots, slot_loads) -> None:
    med = Samples.median
    print(
        f"model: {model} ({model_path.name}); llama-server {info.get('threads', '?')} thread(s), "
        f"{args.slots} slots for the sharing part; {os.cpu_count()} CPUs; {args.n} texts per paraphrase run "
        f"(temperature 0, max_tokens 64); encoder all-MiniLM-L6-v2 in its model process, requests of "
        f"{args.encode_batch} STS-B sentences ({args.encode_n} alone); median of {args.repeat} pass(es)"
    )
    if sharing:
        print(
            "\n| setup | encoder torch threads | LLM alone texts/s | LLM beside | LLM beside/alone "
            "| encoder alone sentences/s | encoder beside | encoder beside/alone | load (1 min) |"
        )
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for name, s in sharing.items():
            threads = info["encoder_threads"].get(name)
            print(
                f"| {name} | {threads} | {med(s.llm_solo):.2f} | {med(s.llm_beside):.2f} | "
                f"{med(s.llm_beside) / med(s.llm_solo):.2f} | {med(s.encoder_solo):.0f} | "
                f"{med(s.encoder_beside):.0f} | "
                f"{med(s.encoder_beside) / med(s.encoder_solo):.2f} | {min(s.loads):.2f}-{max(s.loads):.2f} |"
            )
        best_encoder = max(med(s.encoder_solo) for s in sharing.values())
        for name, s in sharing.items():
            print(
                f"ratio {name}: LLM beside/solo = {med(s.llm_beside) / med(s.llm_solo):.2f}, encoder beside/solo = "
                f"{med(s.encoder_beside) / med(s.encoder_solo):.2f} (against the best encoder alone, "
                f"{best_encoder:.0f}/s: {med(s.encoder_beside) / best_encoder:.2f})"
            )
    if slots:
        base_label = next(iter(slots))
        base = med(slots[base_label])
        chunk = args.chunk_size or "default"
        print(f"\nslots (texts/s, TRANSFORM_CHUNK_SIZE {chunk}; load {min(slot_loads):.2f}-{max(slot_loads):.2f}):")
        for label, values in slots.items():
            print(f"  {label}: {med(values):.2f} ({', '.join(f'{v:.2f}' for v in values)})")
        for label, values in slots.items():
            if label != base_label:
                print(f"ratio llama-server {label}/{base_label} = {med(values) / base:.2f} (goal >= {GOAL_SLOTS:.1f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="auto", help="embedded model name, or auto (see above)")
    parser.add_argument("--n", type=int, default=48, help="texts per paraphrase run (default 48)")
    parser.add_argument("--repeat", type=int, default=3, help="passes; medians are reported (default 3)")
    parser.add_argument("--slots", type=int, default=32, help="llama-server slots for the sharing part (default 32)")
    parser.add_argument("--setups", nargs="+", choices=SETUPS, default=["old", "fixed"], help="encoder setups")
    parser.add_argument("--encode-n", type=int, default=1024, help="texts the encoder encodes alone (default 1024)")
    parser.add_argument("--encode-batch", type=int, default=32, help="texts per encoder request (default 32)")
    parser.add_argument("--slot-counts", type=int, nargs="*", default=None, help="default: 1 and --slots")
    parser.add_argument("--ubatch", type=int, nargs="*", default=[], help="llama-server --ubatch-size values to try")
    parser.add_argument("--chunk-size", type=int, default=None, help="TRANSFORM_CHUNK_SIZE for the slots part")
    parser.add_argument("--skip-sharing", action="store_true")
    parser.add_argument("--skip-slots", action="store_true")
    args = parser.parse_args()
    if args.slot_counts is None:
        args.slot_counts = [1, args.slots]
    args.server, args.temperature = "llama-server", 0.0  # for transform_throughput.prepare_workload

    data_dir = Path(tempfile.mkdtemp(prefix="shiftlab-sharing-"))
    os.environ["SHIFTLAB_DATA_DIR"] = str(data_dir)
    os.environ.pop("DATABASE_URL", None)
    os.environ.pop("CELERY_BROKER_URL", None)  # tasks run eagerly in this process
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shiftlab.settings")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from core.local_server import free_port

    model, model_path = choose_model(args.model)
    args.model = model
    port = free_port()
    os.environ["SHIFTLAB_LLM_BASE_URL"] = f"http://127.0.0.1:{port}/v1"
    os.environ["SHIFTLAB_LLM_MODEL"] = model
    from transform_throughput import prepare_workload, setup_django

    setup_django()
    work = prepare_workload(args)
    sharing, info = ({}, {}) if args.skip_sharing else run_sharing(args, work, model, model_path, data_dir, port)
    slots, slot_loads = ({}, []) if args.skip_slots else run_slots(args, work, model, model_path, data_dir, port)
    from django.conf import settings

    from core.local_server import available_cpus
    from transforms.embedded import default_llm_threads

    info.setdefault("threads", default_llm_threads(available_cpus(), int(settings.EMBEDDED_LLM_THREADS or 0)))
    print_report(args, model, model_path, sharing, info, slots, slot_loads)


if __name__ == "__main__":
    main()
