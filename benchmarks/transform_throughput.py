"""LLM transformation throughput: a Shiftlab paraphrase run against bare HTTP clients on the same llama.cpp server.

Usage: .venv/bin/python benchmarks/transform_throughput.py [--model NAME] [--n 64] [--repeat 1]

Starts one llama.cpp server (llama-cpp-python, CPU) for an embedded model (default smollm2-135m-instruct;
the GGUF file must be in var/models or SHIFTLAB_MODELS_DIR, or it is downloaded) and takes the first N
texts (N/2 sentence pairs) of the STS-B English test set (../shared/data; the demo STS fixture when that
is absent). Every phase sends the same chat requests: the active paraphrase prompt, temperature 0.7,
top_p 0.95, max_tokens 64, and per text the sampling seed the platform derives from the run seed and the
text's hash (a different seed per text, the same set in every phase), so all phases ask for the same work:

  (a) a bare async httpx client, all requests at once (--concurrency, default 16): the backend's saturated rate;
  (b) a paraphrase run of the imported pairs with max_attempts=1 (one LLM call per text), executed in-process
      through the eager Celery tasks (chunks, generation cache, output analysis, database writes);
  (c) a synchronous httpx loop, one request at a time (as code that calls Ollama sequentially does);
  (d) the same run again (same dataset, seed and parameters): every output should come from the cache.

The platform's cache lives in a fresh temporary SQLite database and the HTTP clients bypass it, so (a)
and (c) always reach the model. With --repeat R the phases a, b, c run R times, interleaved (the cache is
emptied before each b) and medians are reported. Prints a table, the ratios b/a and b/c, and where (b)
spends its time (inside the backend's generate, output analysis, SQL, the rest).

With --server llama-server [--slots 1 4 8 16 32] it compares the embedded servers instead, on the
texts and prompts above at temperature 0 (--temperature), taking the first N/2 pairs whose sentences
are all distinct (N distinct texts): a paraphrase run (as (b)) against today's embedded server,
llama-cpp-python's, which answers one request at a time, then against llama.cpp's own
``llama-server`` (built by scripts/build_llama_server.sh, or --llama-server-bin) with each slot
count N (``--parallel N``: the sequences of N requests decoded together, continuous batching), the
backend keeping as many requests in flight as the server reports slots and copying each batch's
shared prompt prefix into the idle slots first (transforms/backends/slot_sharing.py;
--no-prefix-sharing leaves it out). Both servers run the embedded LLM's thread count (all CPUs but
one; --threads for llama-server, --baseline-threads for today's). It first measures the machine's
memory bandwidth (numpy copy) and float32 matmul rate, then prints per server: texts/s, generated
tokens/s, the bandwidth ceiling of the token rate for that many sequences, prompt tokens computed
against sent (the prompt cache), outputs identical to today's server's and the failed outputs;
last ``ratio llama-server/today = X.XX (N slots)``. One command for the issue's measurement on the
demo's model:

  .venv/bin/python benchmarks/transform_throughput.py --server llama-server \\
      --model qwen2.5-coder-1.5b-instruct --n 48 --slots 1 4 8 16 32 --repeat 3
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import logging
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SHARED = ROOT.parent / "shared" / "data"
STSB_TEST = SHARED / "stsb-multi-mt" / "stsb-en-test.csv"
DEMO_STS = ROOT / "fixtures" / "sts" / "demo-sts.csv"

SEED = 42
TEMPERATURE = 0.7
TOP_P = 0.95
MAX_TOKENS = 64
GOAL_B_OVER_A = 0.9


@dataclass
class Phase:
    """One measured pass: wall time, outputs delivered, LLM calls made and what came back (text -> output).

    ``server_s`` is the llama.cpp compute time of the pass (sum of the server's per-request "total
    time" log lines), so ``server_s / seconds`` is how busy the single server slot was; ``decode_ms``
    the server's mean time per generated token; ``client_cpu_s`` the CPU this process used meanwhile.
    ``prompt_evaluated`` counts the prompt tokens the server computed (llama-server reports it; the rest
    of each prompt came from its cache), 0 where the server does not say.
    """

    seconds: float
    texts: int
    calls: int
    completion_tokens: int
    outputs: dict[str, str] = field(default_factory=dict)
    prompt_evaluated: int = 0
    prompt_sent: int = 0
    server_s: float | None = None
    decode_ms: float | None = None
    client_cpu_s: float | None = None

    @property
    def texts_per_s(self) -> float:
        return self.texts / self.seconds if self.seconds else 0.0

    @property
    def calls_per_s(self) -> float:
        return self.calls / self.seconds if self.seconds else 0.0

    @property
    def tokens_per_s(self) -> float:
        return self.completion_tokens / self.seconds if self.seconds else 0.0


class ServerLog:
    """Reads llama.cpp's per-request timings from the server log written during ``measure``.

    llama-cpp-python's server logs llama.cpp's context timings after each request; llama-server logs
    each slot's timings when its request ends (``slot print_timing: id 0 | task 5 |       eval time = ...``).
    """

    PATTERNS = {
        "llama-cpp-python": (
            re.compile(r"llama_perf_context_print:\s+total time =\s+([0-9.]+) ms"),
            re.compile(r"llama_perf_context_print:\s+eval time =\s+([0-9.]+) ms /\s+([0-9]+) runs"),
        ),
        "llama-server": (
            re.compile(r"\|\s+total time =\s+([0-9.]+) ms"),
            re.compile(r"\|\s+eval time =\s+([0-9.]+) ms /\s+([0-9]+) tokens"),
        ),
    }

    # Prompt tokens computed (not taken from the prompt cache), in both servers' logs.
    PROMPT = re.compile(r"prompt eval time =\s+[0-9.]+ ms /\s+([0-9]+) (?:tokens|runs)")

    def __init__(self, path: Path, server: str = "llama-cpp-python"):
        self.path = path
        self.offset = 0
        self.total, self.decode = self.PATTERNS[server]

    def measure(self, action):
        """Run ``action`` and attach the server's compute time and the client's CPU time to its Phase."""
        self.offset = self.path.stat().st_size
        cpu = time.process_time()
        result = action()
        phase = result[0] if isinstance(result, tuple) else result
        phase.client_cpu_s = time.process_time() - cpu
        time.sleep(0.2)  # the server writes its timings just after answering
        with self.path.open("rb") as handle:
            handle.seek(self.offset)
            text = handle.read().decode("utf-8", "replace")
        totals = [float(v) for v in self.total.findall(text)]
        decode = [(float(ms), int(runs)) for ms, runs in self.decode.findall(text)]
        phase.server_s = sum(totals) / 1000 if totals else None
        runs = sum(r for _, r in decode)
        phase.decode_ms = sum(ms for ms, _ in decode) / runs if runs else None
        if not phase.prompt_evaluated:
            phase.prompt_evaluated = sum(int(n) for n in self.PROMPT.findall(text))
        return result


@dataclass
class Meter:
    """Where a platform run spends its time, collected by wrapping the backend, the analyser and SQL."""

    llm_s: float = 0.0
    llm_n: int = 0  # backend.generate calls: one per chunk and step
    llm_requests: int = 0
    analyse_s: float = 0.0
    analyse_n: int = 0
    sql_s: float = 0.0
    sql_n: int = 0

    def timed(self, kind: str, function):
        """``function``, adding the duration of each call to ``<kind>_s`` and the call to ``<kind>_n``."""

        def wrapper(*args, **kwargs):
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                setattr(self, f"{kind}_s", getattr(self, f"{kind}_s") + time.perf_counter() - started)
                setattr(self, f"{kind}_n", getattr(self, f"{kind}_n") + 1)

        return wrapper


def read_pairs(n_pairs: int, *, distinct: bool = False) -> tuple[Path, list[tuple[str, str, str]]]:
    """The first ``n_pairs`` (sentence1, sentence2, score) rows of STS-B en test, or of the demo fixture;
    with ``distinct`` the first whose sentences appeared in no earlier row taken (2 x n_pairs distinct texts)."""
    if STSB_TEST.is_file():
        with STSB_TEST.open(newline="", encoding="utf-8") as handle:
            rows, source = [(r[0], r[1], r[2]) for r in csv.reader(handle)], STSB_TEST
    else:
        with DEMO_STS.open(newline="", encoding="utf-8") as handle:
            rows, source = [(r["sentence1"], r["sentence2"], r["score"]) for r in csv.DictReader(handle)], DEMO_STS
    if not distinct:
        return source, rows[:n_pairs]
    seen: set[str] = set()
    taken = []
    for row in rows:
        if row[0] != row[1] and not {row[0], row[1]} & seen and len(taken) < n_pairs:
            taken.append(row)
            seen.update(row[:2])
    return source, taken


def chat_body(model: str, messages: list[dict[str, str]], seed: int, temperature: float = TEMPERATURE) -> dict:
    """The request OpenAICompatBackend sends for one text (same fields, same values)."""
    return {
        "model": model,
        "messages": messages,
        "temperature": temperature,
        "top_p": TOP_P,
        "max_tokens": MAX_TOKENS,
        "seed": seed,
    }


def _answer(payload: dict) -> tuple[str, int, int]:
    """The answer's text, its completion tokens and the prompt tokens the server evaluated (0 if unknown)."""
    text = payload["choices"][0]["message"].get("content") or ""
    completion = int((payload.get("usage") or {}).get("completion_tokens") or 0)
    return text, completion, int((payload.get("timings") or {}).get("prompt_n") or 0)


def saturated_client(url: str, bodies: dict[str, dict], concurrency: int) -> Phase:
    """(a): every request in flight at once, ``concurrency`` connections."""
    import httpx

    async def run_all() -> list[tuple[str, int, int]]:
        limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        semaphore = asyncio.Semaphore(concurrency)
        async with httpx.AsyncClient(timeout=600, limits=limits) as client:

            async def one(body: dict) -> tuple[str, int, int]:
                async with semaphore:
                    response = await client.post(url, json=body)
                response.raise_for_status()
                return _answer(response.json())

            return await asyncio.gather(*(one(body) for body in bodies.values()))

    start = time.perf_counter()
    answers = asyncio.run(run_all())
    seconds = time.perf_counter() - start
    outputs = {text: out for text, (out, _, _) in zip(bodies, answers, strict=True)}
    completion, prompt = sum(answer[1] for answer in answers), sum(answer[2] for answer in answers)
    return Phase(seconds, len(bodies), len(bodies), completion, outputs, prompt_evaluated=prompt)


def sequential_client(url: str, bodies: dict[str, dict]) -> Phase:
    """(c): one request at a time, waiting for each answer before sending the next."""
    import httpx

    outputs, tokens, prompt = {}, 0, 0
    start = time.perf_counter()
    with httpx.Client(timeout=600) as client:
        for text, body in bodies.items():
            response = client.post(url, json=body)
            response.raise_for_status()
            outputs[text], n, evaluated = _answer(response.json())
            tokens, prompt = tokens + n, prompt + evaluated
    seconds = time.perf_counter() - start
    return Phase(seconds, len(bodies), len(bodies), tokens, outputs, prompt_evaluated=prompt)


def platform_run(*, dataset, params, n_items: int, meter: Meter) -> tuple[Phase, object]:
    """(b) and (d): create a paraphrase run and execute it in this process (eager Celery tasks)."""
    from django.db import connection

    import transforms.attempts as attempts
    from core.hashing import sha256_text
    from transforms.backends import get_backend
    from transforms.models import Generation
    from transforms.services import transform_run_create
    from transforms.tasks import start_run

    backend = get_backend("default")
    generate, analyse = backend.generate, attempts.analyse_output

    def counted_generate(requests, **kwargs):
        meter.llm_requests += len(requests)
        return generate(requests, **kwargs)

    backend.generate, attempts.analyse_output = meter.timed("llm", counted_generate), meter.timed("analyse", analyse)
    timed_sql = meter.timed("sql", lambda execute, *args: execute(*args))
    before = set(Generation.objects.values_list("pk", flat=True))
    try:
        with connection.execute_wrapper(timed_sql):
            start = time.perf_counter()
            run = transform_run_create(
                dataset=dataset, transformation="paraphrase", seed=SEED, params=params, limit=n_items, dispatch=False
            )
            start_run.delay(run.pk)  # CELERY_TASK_ALWAYS_EAGER: start, chunks and finalize run here
            seconds = time.perf_counter() - start
    finally:
        del backend.generate
        attempts.analyse_output = analyse
    run.refresh_from_db()
    new = list(Generation.objects.exclude(pk__in=before).filter(step=0, attempt=0))
    by_hash = {generation.input_hash: generation.output for generation in new}
    sources = set(run.outputs.values_list("source_text", flat=True))
    outputs = {text: by_hash[sha256_text(text)] for text in sources if sha256_text(text) in by_hash}
    tokens = sum(generation.completion_tokens for generation in new)
    phase = Phase(seconds, run.done, run.llm_calls, tokens, outputs)
    phase.prompt_sent = sum(generation.prompt_tokens for generation in new)
    return phase, run


def same_outputs(left: Phase, right: Phase) -> str:
    shared = set(left.outputs) & set(right.outputs)
    if not shared:
        return "n/a"
    return f"{sum(left.outputs[t] == right.outputs[t] for t in shared)}/{len(shared)}"


def parallel_verdict(a: Phase, c: Phase) -> str:
    """Whether the server overlapped requests in (a), judged by its own timings where the log has them.

    With requests served one at a time the per-request compute times add up to at most the wall time
    (busy <= 100%); overlapping requests add up to more. The throughput ratio a/c is only the fallback:
    on a shared machine the server's speed drifts between phases by more than HTTP overhead costs.
    """
    if a.server_s is None or c.server_s is None:
        parallel = a.calls_per_s / c.calls_per_s >= 1.3
        return ("yes" if parallel else "no") + f" (a/c = {a.calls_per_s / c.calls_per_s:.2f}; no server timings)"
    busy = a.server_s / a.seconds
    if busy > 1.05:
        return f"yes: in (a) the server's per-request compute adds up to {busy:.0%} of the wall time"
    return (
        f"no, one at a time: with requests queued in (a) the server's per-request compute adds up to "
        f"{busy:.0%} of the wall time (it would exceed 100% if they overlapped); a and c differ by the server's "
        f"decode speed ({a.decode_ms or 0:.2f} vs {c.decode_ms or 0:.2f} ms/token), not by parallelism"
    )


def median_phase(phases: list[Phase]) -> Phase:
    ordered = sorted(phases, key=lambda p: p.seconds)
    return ordered[(len(ordered) - 1) // 2]


def spread(phases: list[Phase]) -> str:
    if len(phases) < 2:
        return ""
    values = [p.calls_per_s for p in phases]
    return f"  calls/s {min(values):.3f}-{max(values):.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m-instruct", help="embedded model name")
    parser.add_argument("--gguf", default=None, help="serve this GGUF file under the --model name (default: its file)")
    parser.add_argument("--n", type=int, default=64, help="texts to transform (N/2 sentence pairs; default 64)")
    parser.add_argument("--concurrency", type=int, default=16, help="in-flight requests of client (a) (default 16)")
    parser.add_argument("--n-ctx", type=int, default=4096, help="server context window (default 4096)")
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="server CPU threads (default: all CPUs but one, as the embedded server runs)",
    )
    parser.add_argument(
        "--baseline-threads",
        type=int,
        default=None,
        help="--server llama-server: CPU threads of today's server (default: as the embedded server, all CPUs but one)",
    )
    parser.add_argument(
        "--temperature",
        type=float,
        default=None,
        help=f"sampling temperature (default {TEMPERATURE}; 0 with --server llama-server, so outputs compare)",
    )
    parser.add_argument("--repeat", type=int, default=1, help="run a, b, c this many times; report medians")
    parser.add_argument("--order", default="abc", help="order of the phases a, b, c in each pass (default abc)")
    parser.add_argument(
        "--server",
        choices=("llama-cpp-python", "llama-server"),
        default="llama-cpp-python",
        help="llama-cpp-python's server (default; phases a-d) or today's embedded server against llama.cpp's "
        "llama-server per slot count (paraphrase runs)",
    )
    parser.add_argument(
        "--slots",
        type=int,
        nargs="+",
        default=[1, 4, 8, 16, 32],
        help="llama-server: parallel slot counts (default 1 4 8 16 32)",
    )
    parser.add_argument(
        "--no-prefix-sharing",
        action="store_true",
        help="llama-server: send each batch without first copying its shared prompt prefix into the slots",
    )
    parser.add_argument(
        "--llama-server-bin",
        default=None,
        help="llama-server: the binary (default: the built one, see llama_build)",
    )
    args = parser.parse_args()
    if args.n < 2 or args.repeat < 1:
        parser.error("--n must be at least 2 and --repeat at least 1")
    if min(args.slots) < 1:
        parser.error("--slots must be positive")
    if sorted(args.order) != ["a", "b", "c"]:
        parser.error("--order must name a, b and c once each, e.g. bca")
    if args.temperature is None:
        args.temperature = 0.0 if args.server == "llama-server" else TEMPERATURE

    data_dir = Path(tempfile.mkdtemp(prefix="shiftlab-bench-"))
    os.environ["SHIFTLAB_DATA_DIR"] = str(data_dir)
    os.environ.pop("DATABASE_URL", None)  # a fresh SQLite file: the generation cache starts empty
    os.environ.pop("CELERY_BROKER_URL", None)  # tasks run eagerly in this process
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shiftlab.settings")

    from transforms.embedded import LlamaServer, default_models_dir, ensure_model, free_port

    models_dir = default_models_dir()
    model_path = Path(args.gguf) if args.gguf else ensure_model(args.model, models_dir=models_dir, progress=print)
    port = free_port()
    os.environ["SHIFTLAB_LLM_BASE_URL"] = f"http://127.0.0.1:{port}/v1"
    os.environ["SHIFTLAB_LLM_MODEL"] = args.model
    if args.server == "llama-server":
        run_comparison(args, model_path, data_dir, port)  # one server after the other, all on this port
        return
    server = LlamaServer(
        model_path,
        model_alias=args.model,
        port=port,
        n_ctx=args.n_ctx,
        n_threads=args.threads,
        log_path=data_dir / "llama-server.log",
    )
    server.start()
    try:
        run_benchmark(args, server, model_path)
    finally:
        server.stop()


@dataclass
class Workload:
    """What every phase asks for: the imported pairs, their distinct texts and one chat request per text."""

    source: Path
    dataset: object
    items: list
    texts: list[str]
    bodies: dict[str, dict]
    params: object
    template: object
    prompt: object

    @property
    def n_texts(self) -> int:
        return 2 * len(self.items)


def setup_django() -> None:
    import django

    django.setup()
    # One log line per request or task would bury the table; kombu warns that the eager chord has no broker host.
    for name, level in (("httpx", logging.WARNING), ("celery", logging.WARNING), ("kombu", logging.ERROR)):
        logging.getLogger(name).setLevel(level)


def prepare_workload(args) -> Workload:
    """Migrate the fresh database, import the first ``args.n // 2`` pairs and build the chat requests."""
    from django.core.management import call_command

    from core.hashing import sha256_text
    from corpora.services import ImportOptions, dataset_import
    from transforms import planning
    from transforms.params import GenerationParams
    from transforms.prompt_services import prompt_template_active
    from transforms.prompts import PromptText

    call_command("migrate", verbosity=0)
    source, pairs = read_pairs(args.n // 2, distinct=args.server == "llama-server")
    subset = Path(os.environ["SHIFTLAB_DATA_DIR"]) / "pairs.csv"
    with subset.open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(pairs)
    dataset = dataset_import(
        source=subset,
        task="sts",
        name="bench-transform",
        options=ImportOptions(columns=["sentence1", "sentence2", "score"]),
    )
    items = list(dataset.items.filter(kind="example").order_by("position"))
    texts = list(dict.fromkeys(item.payload[side] for item in items for side in ("sentence1", "sentence2")))
    template = prompt_template_active("paraphrase")
    prompt = PromptText(template.key, template.system, template.user)
    bodies = {
        text: chat_body(
            args.model,
            prompt.messages(text=text, language="English", source_language="English"),
            planning.sampling_seed(seed=SEED, text_hash=sha256_text(text), step=0, attempt=0),
            args.temperature,
        )
        for text in texts
    }
    params = GenerationParams(temperature=args.temperature, top_p=TOP_P, max_tokens=MAX_TOKENS, max_attempts=1)
    return Workload(source, dataset, items, texts, bodies, params, template, prompt)


def warm_up(url: str, model: str, prompt) -> None:
    """One request: the model paged in, the prompt's common prefix evaluated."""
    import httpx

    warm = chat_body(model, prompt.messages(text="Warm-up.", language="English", source_language="English"), 7)
    httpx.post(url, json=warm, timeout=600).raise_for_status()


def run_benchmark(args, server, model_path: Path) -> None:
    setup_django()
    import llama_cpp

    from transforms.language_id import supported_languages
    from transforms.models import Generation

    work = prepare_workload(args)
    source, dataset, items, texts, bodies = work.source, work.dataset, work.items, work.texts, work.bodies
    params, template, n_texts = work.params, work.template, work.n_texts
    url = f"{server.base_url}/chat/completions"

    startup_s = server.wait_ready(timeout=300)
    started = time.perf_counter()
    supported_languages()  # loads the language identifier once, as a long-lived worker would have
    langid_s = time.perf_counter() - started
    warm_up(url, args.model, work.prompt)

    log = ServerLog(server.log_path)
    runs_a, runs_b, runs_c, meters = [], [], [], []
    run = None
    for index in range(args.repeat):
        if index:
            Generation.objects.all().delete()
        for name in args.order:
            if name == "a":
                runs_a.append(log.measure(lambda: saturated_client(url, bodies, args.concurrency)))
            elif name == "b":
                meters.append(Meter())
                phase_b, run = log.measure(
                    lambda: platform_run(dataset=dataset, params=params, n_items=len(items), meter=meters[-1])
                )
                runs_b.append(phase_b)
            else:
                runs_c.append(log.measure(lambda: sequential_client(url, bodies)))
        print(
            f"pass {index + 1}/{args.repeat} ({args.order}): a {runs_a[-1].calls_per_s:.3f}, "
            f"b {runs_b[-1].calls_per_s:.3f}, c {runs_c[-1].calls_per_s:.3f} calls/s",
            file=sys.stderr,
        )
    meter_d = Meter()
    phase_d, run_d = log.measure(
        lambda: platform_run(dataset=dataset, params=params, n_items=len(items), meter=meter_d)
    )

    a, c = median_phase(runs_a), median_phase(runs_c)
    b_index = runs_b.index(median_phase(runs_b))
    b, meter = runs_b[b_index], meters[b_index]

    print(f"model:   {args.model} ({model_path.name}), llama-cpp-python {llama_cpp.__version__}")
    print(
        f"server:  n_ctx {server.n_ctx}, n_threads {server.n_threads or os.cpu_count()} "
        f"(n_batch default), ready in {startup_s:.1f} s; machine: os.cpu_count() = {os.cpu_count()}"
    )
    print(
        f"data:    {source.relative_to(ROOT.parent) if source.is_relative_to(ROOT.parent) else source}, "
        f"{len(items)} pairs -> {n_texts} texts ({len(texts)} distinct: (a) and (c) send the distinct ones)"
    )
    print(
        f"request: paraphrase prompt v{template.version}, temperature {args.temperature}, top_p {TOP_P}, "
        f"max_tokens {MAX_TOKENS}, per-text seeds from run seed {SEED}; "
        f"passes: {args.repeat}, order {args.order} (median shown)"
    )
    print()
    header = (
        f"{'phase':<48} {'wall s':>7} {'outputs':>7} {'calls':>5} {'compl tok':>9} {'outputs/s':>9} "
        f"{'calls/s':>7} {'tok/s':>6} {'server busy':>13} {'ms/tok':>6} {'client CPU':>10}"
    )
    print(header)
    print("-" * len(header))
    rows = [
        (f"(a) raw async httpx, {args.concurrency} in flight", a, runs_a),
        (f"(b) platform run, eager, max_attempts=1, run {run.pk}", b, runs_b),
        ("(c) sequential httpx, one request at a time", c, runs_c),
        (f"(d) cached re-run, run {run_d.pk}", phase_d, [phase_d]),
    ]
    for label, phase, phases in rows:
        busy = f"{phase.server_s:.2f} s {phase.server_s / phase.seconds:>4.0%}" if phase.server_s else "-"
        decode = f"{phase.decode_ms:.2f}" if phase.decode_ms else "-"
        print(
            f"{label:<48} {phase.seconds:>7.2f} {phase.texts:>7} {phase.calls:>5} {phase.completion_tokens:>9} "
            f"{phase.texts_per_s:>9.2f} {phase.calls_per_s:>7.3f} {phase.tokens_per_s:>6.1f} {busy:>13} "
            f"{decode:>6} {phase.client_cpu_s:>8.2f} s{spread(phases)}"
        )
    if args.repeat > 1:
        for name, phases in (("a", runs_a), ("b", runs_b), ("c", runs_c)):
            cells = ", ".join(f"{p.seconds:.2f} s / {p.decode_ms or 0:.2f} ms/tok" for p in phases)
            print(f"  passes of ({name}): {cells}")
    print(
        "  server busy: llama.cpp compute time (sum of the log's per-request 'total time') and its share of wall; "
        "ms/tok: the server's mean decode time per generated token"
    )
    print()
    ratio_ba = b.calls_per_s / a.calls_per_s
    verdict = "met" if ratio_ba >= GOAL_B_OVER_A else "NOT met"
    print(f"b/a = {ratio_ba:.3f}  same {b.calls} generations (calls/s); goal >= {GOAL_B_OVER_A}: {verdict}")
    print(
        f"b/a = {b.texts_per_s / a.texts_per_s:.3f}  counting outputs (the run writes {b.texts} outputs "
        f"for {b.calls} calls: duplicate texts are generated once)"
    )
    print(f"b/c = {b.calls_per_s / c.calls_per_s:.3f}  (calls/s; {b.texts_per_s / c.texts_per_s:.3f} counting outputs)")
    print(f"a/c = {a.calls_per_s / c.calls_per_s:.3f}  (calls/s)")
    print(f"parallel requests? {parallel_verdict(a, c)}")
    if a.server_s and b.server_s and c.server_s:
        idle = {name: p.seconds - p.server_s for name, p in (("a", a), ("b", b), ("c", c))}
        print(
            f"server idle (wall - compute): a {idle['a']:.2f} s, b {idle['b']:.2f} s, c {idle['c']:.2f} s; "
            f"at equal server speed (a's {a.server_s:.2f} s of compute): "
            f"b/a = {(a.server_s + idle['a']) / (a.server_s + idle['b']):.3f}, "
            f"b/c = {(a.server_s + idle['c']) / (a.server_s + idle['b']):.3f}"
        )
    print(
        f"(d): {phase_d.seconds:.2f} s, {run_d.llm_calls} LLM calls (goal 0), {run_d.cache_hits} cache hits, "
        f"{run_d.done}/{run_d.total} outputs, status {run_d.status}"
    )
    print(
        f"identical outputs (same seed and prompt): a=b {same_outputs(a, b)}, c=b {same_outputs(c, b)}, "
        f"a=c {same_outputs(a, c)}"
    )
    print()
    other = b.seconds - meter.llm_s - meter.analyse_s - meter.sql_s
    print(
        f"where (b) spends its {b.seconds:.2f} s: backend.generate {meter.llm_s:.2f} s "
        f"({meter.llm_n} chunks, {meter.llm_requests} requests); analyse_output {meter.analyse_s:.3f} s "
        f"({meter.analyse_n} calls); SQL {meter.sql_s:.3f} s ({meter.sql_n} queries); rest {other:.3f} s"
    )
    print(
        f"  backend.generate vs (a) for the same requests: {meter.llm_s:.2f} s vs {a.seconds:.2f} s; "
        f"outside generate: {b.seconds - meter.llm_s:.2f} s ({(b.seconds - meter.llm_s) / b.seconds:.1%} of b)"
    )
    print(
        f"  run status {run.status}, done {run.done}/{run.total}, failed {run.n_failed}, llm_calls {run.llm_calls}, "
        f"cache_hits {run.cache_hits}; language identifier loaded beforehand in {langid_s:.2f} s"
    )
    print(
        f"where (d) spends its {phase_d.seconds:.2f} s: backend.generate {meter_d.llm_s:.3f} s "
        f"({meter_d.llm_requests} requests); analyse_output {meter_d.analyse_s:.3f} s; "
        f"SQL {meter_d.sql_s:.3f} s ({meter_d.sql_n} queries)"
    )


# --- Today's embedded server against llama-server's parallel slots ------------------------------


@dataclass(frozen=True)
class MachineRates:
    """What this machine moves and computes, measured with numpy: memory copy in GB/s (bytes read +
    bytes written, as STREAM counts them) by one thread and by ``threads``; float32 matmul GFLOP/s."""

    copy_gbs_one: float
    copy_gbs_all: float
    threads: int
    matmul_gflops: float


def measure_machine(threads: int) -> MachineRates:
    """Best of a few runs: a 256 MiB array copy (1 and ``threads`` threads, each its own slice; numpy
    releases the GIL while it copies) and a 2048 x 2048 float32 matmul (BLAS, its own threads)."""
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np

    source = np.ones(32 * 2**20)
    target = np.empty_like(source)

    def copy_gbs(parts: int) -> float:
        slices = [slice(i * len(source) // parts, (i + 1) * len(source) // parts) for i in range(parts)]
        best = float("inf")
        with ThreadPoolExecutor(parts) as pool:
            for _ in range(5):
                started = time.perf_counter()
                list(pool.map(lambda part: np.copyto(target[part], source[part]), slices))
                best = min(best, time.perf_counter() - started)
        return 2 * source.nbytes / best / 1e9

    rng = np.random.default_rng(0)
    left, right = rng.standard_normal((2, 2048, 2048), dtype=np.float32)
    left @ right
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        left @ right
        best = min(best, time.perf_counter() - started)
    return MachineRates(copy_gbs(1), copy_gbs(threads), threads, 2 * 2048**3 / best / 1e9)


def output_errors(outputs: dict[str, str], *, candidates: list[str]) -> dict[str, str]:
    """Each output's error (``""`` for none), judged as a paraphrase run judges its texts' only attempt."""
    from core.hashing import sha256_text
    from transforms.attempts import TextState, analyse_attempt
    from transforms.registry import transformation_get

    spec = transformation_get("paraphrase")
    errors = {}
    for text, output in outputs.items():
        state = TextState(text, sha256_text(text), source_language="en", target_language="", pivot_language="")
        analyse_attempt(state, spec, output, candidates, max_attempts=1)
        errors[text] = state.outcome["error_type"]
    return errors


def error_cell(errors: dict[str, str]) -> str:
    """``failed/n kind count, ...`` for one phase's outputs."""
    from collections import Counter

    failed = Counter(error for error in errors.values() if error)
    kinds = " ".join(f"{kind} {count}" for kind, count in failed.most_common())
    return f"{sum(failed.values())}/{len(errors)}{' ' + kinds if kinds else ''}"


@dataclass
class ServerRow:
    """The platform runs against one embedded server: which, its slots, the backend's in-flight count."""

    kind: str
    slots: int
    threads: int
    in_flight: int
    startup_s: float
    passes: list[Phase]
    runs: list
    load1: float = 0.0

    @property
    def phase(self) -> Phase:
        return median_phase(self.passes)


def run_comparison(args, model_path: Path, data_dir: Path, port: int) -> None:
    """Paraphrase runs of the same texts against today's embedded server (llama-cpp-python, one request
    at a time) and against llama-server with each slot count; the same threads for both."""
    setup_django()
    from core.local_server import available_cpus
    from transforms.language_id import supported_languages
    from transforms.llama_build import choose_binary

    if args.llama_server_bin:
        binary, origin = Path(args.llama_server_bin), args.llama_server_bin
    else:
        choice = choose_binary()
        binary, origin = choice.binary, choice.reason
    if binary is None or not binary.is_file():
        sys.exit(f"no llama-server: {origin}")
    embedded_threads = max(1, available_cpus() - 1)  # the embedded server's default: all CPUs but one
    threads = args.threads or embedded_threads
    load_before = os.getloadavg()
    machine = measure_machine(threads)  # before any server runs, so that nothing competes with it
    work = prepare_workload(args)
    supported_languages()  # loads the language identifier once, as a long-lived worker would have
    configs = [(None, 1, args.baseline_threads or embedded_threads)]
    configs += [(binary, slots, threads) for slots in sorted(set(args.slots))]
    rows = [measure_server(args, work, model_path, data_dir, port, t, b, n) for b, n, t in configs]
    print_comparison(args, model_path, work, machine, binary, origin, rows, (load_before, os.getloadavg()))


def measure_server(args, work: Workload, model_path, data_dir, port, threads, binary, slots) -> ServerRow:
    """Start the embedded server (``binary`` None: llama-cpp-python's), run the paraphrase run
    ``args.repeat`` times with an empty generation cache, stop it."""
    from transforms.backends import get_backend, reset_backends
    from transforms.embedded import LlamaServer
    from transforms.models import Generation

    kind = "llama-server" if binary else "llama-cpp-python"
    log_path = data_dir / f"{kind}-{slots}.log"
    server = LlamaServer(
        model_path,
        model_alias=args.model,
        port=port,
        n_ctx=args.n_ctx,
        n_threads=threads,
        log_path=log_path,
        binary=binary,
        slots=slots,
    )
    server.start()
    try:
        startup = server.wait_ready(timeout=600)
        reset_backends()  # the backend asks the new server for its slots
        backend = get_backend("default")
        in_flight = backend.in_flight()
        if args.no_prefix_sharing:
            backend._slot_sharing = False  # the ablation: each slot evaluates the prefix itself
        warm_up(f"{server.base_url}/chat/completions", args.model, work.prompt)
        log = ServerLog(log_path, kind)
        row = ServerRow(kind, slots, threads, in_flight, startup, [], [])
        for index in range(args.repeat):
            Generation.objects.all().delete()  # every run reaches the model
            phase, run = log.measure(
                lambda: platform_run(dataset=work.dataset, params=work.params, n_items=len(work.items), meter=Meter())
            )
            row.passes.append(phase)
            row.runs.append(run)
            print(
                f"{kind}, {slots} slot(s), pass {index + 1}/{args.repeat}: {phase.texts_per_s:.2f} texts/s",
                file=sys.stderr,
            )
        row.load1 = os.getloadavg()[0]
        return row
    finally:
        server.stop()


def print_comparison(args, model_path, work, machine, binary, origin, rows, loads) -> None:
    import llama_cpp

    today = rows[0].phase
    model_bytes = model_path.stat().st_size
    candidates = sorted(set(rows[0].runs[0].languages) | {"en"})
    print(f"model:   {args.model} ({model_path.name}, {model_bytes / 1e6:.0f} MB)")
    print(
        f"servers: today's, llama-cpp-python {llama_cpp.__version__} (one request at a time); llama-server {origin} "
        f"(--parallel N, N x {args.n_ctx} tokens of context, continuous batching); threads "
        f"{rows[0].threads} (today's) and {machine.threads} (llama-server); ready in "
        + ", ".join(f"{row.startup_s:.1f} s" for row in rows)
    )
    print(
        f"data:    {work.source.name}, {len(work.items)} pairs -> {len(work.texts)} distinct texts; paraphrase "
        f"prompt v{work.template.version}, temperature {args.temperature}, top_p {TOP_P}, max_tokens {MAX_TOKENS}, "
        f"one attempt per text; median of {args.repeat} run(s); {os.cpu_count()} CPUs, load average "
        f"{loads[0][0]:.2f} before, {loads[1][0]:.2f} after (1 min)"
    )
    print(
        f"machine: memory copy {machine.copy_gbs_one:.1f} GB/s (1 thread), {machine.copy_gbs_all:.1f} GB/s "
        f"({machine.threads} thread(s)); float32 matmul {machine.matmul_gflops:.0f} GFLOP/s; reading the "
        f"{model_bytes / 1e9:.2f} GB of weights once per decode step allows <= "
        f"{machine.copy_gbs_all * 1e9 / model_bytes:.1f} steps/s, i.e. N x that many tokens/s for N sequences"
    )
    print()
    header = (
        f"{'server':<16} {'slots':>5} {'flight':>6} {'wall s':>7} {'texts/s':>7} {'x today':>7} {'gen tok/s':>9} "
        f"{'ceiling':>7} {'ms/tok':>6} {'weights GB/s':>12} {'prompt tok':>11} {'same':>5} {'load':>4}  failed"
    )
    print(header)
    print("-" * len(header))
    for row in rows:
        phase = row.phase
        sequences = min(row.in_flight, row.slots)
        ceiling = sequences * machine.copy_gbs_all * 1e9 / model_bytes
        streamed = phase.tokens_per_s / sequences * model_bytes / 1e9
        same = sum(phase.outputs.get(text) == output for text, output in today.outputs.items())
        errors = output_errors(phase.outputs, candidates=candidates)
        print(
            f"{row.kind:<16} {row.slots:>5} {row.in_flight:>6} {phase.seconds:>7.1f} {phase.texts_per_s:>7.2f} "
            f"{phase.texts_per_s / today.texts_per_s:>7.2f} {phase.tokens_per_s:>9.1f} {ceiling:>7.0f} "
            f"{phase.decode_ms or 0:>6.1f} {streamed:>5.1f} ({streamed / machine.copy_gbs_all:>4.0%}) "
            f"{phase.prompt_evaluated:>5}/{phase.prompt_sent:<5} {same:>2}/{len(today.outputs):<2} {row.load1:>4.1f}  "
            f"{error_cell(errors)}"
        )
    print(
        "  texts/s: texts of the paraphrase run (transform_runs_start path, eager tasks) per second; x today: over "
        "llama-cpp-python; flight: requests the backend keeps in flight (the server's /props slots, else 8); "
        "ceiling: generated tokens/s that the memory bandwidth allows with that many sequences per step; "
        "ms/tok: the server's mean time per generated token of one request; weights GB/s: the weight reads the "
        "token rate implies (share of copy bandwidth); prompt tok: computed / sent (the rest came from the "
        "prompt cache); same: outputs identical to today's server's"
    )
    best = max(rows[1:], key=lambda row: row.phase.texts_per_s)
    ratio = best.phase.texts_per_s / today.texts_per_s
    print(
        f"best: llama-server with {best.slots} slots, {best.phase.texts_per_s:.2f} texts/s against "
        f"{today.texts_per_s:.2f}; goal >= 2x: {'met' if ratio >= 2 else 'NOT met'}"
    )
    print(f"ratio llama-server/today = {ratio:.2f} ({best.slots} slots)")


if __name__ == "__main__":
    main()
