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
    """

    seconds: float
    texts: int
    calls: int
    completion_tokens: int
    outputs: dict[str, str] = field(default_factory=dict)
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
    """Reads llama.cpp's per-request timings from the server log written since the last ``mark``."""

    TOTAL = re.compile(r"llama_perf_context_print:\s+total time =\s+([0-9.]+) ms")
    DECODE = re.compile(r"llama_perf_context_print:\s+eval time =\s+([0-9.]+) ms /\s+([0-9]+) runs")

    def __init__(self, path: Path):
        self.path = path
        self.offset = 0

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
        totals = [float(v) for v in self.TOTAL.findall(text)]
        decode = [(float(ms), int(runs)) for ms, runs in self.DECODE.findall(text)]
        phase.server_s = sum(totals) / 1000 if totals else None
        runs = sum(r for _, r in decode)
        phase.decode_ms = sum(ms for ms, _ in decode) / runs if runs else None
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


def read_pairs(n_pairs: int) -> tuple[Path, list[tuple[str, str, str]]]:
    """The first ``n_pairs`` (sentence1, sentence2, score) rows of STS-B en test, or of the demo fixture."""
    if STSB_TEST.is_file():
        with STSB_TEST.open(newline="", encoding="utf-8") as handle:
            rows = [(r[0], r[1], r[2]) for r in csv.reader(handle)]
        return STSB_TEST, rows[:n_pairs]
    with DEMO_STS.open(newline="", encoding="utf-8") as handle:
        rows = [(r["sentence1"], r["sentence2"], r["score"]) for r in csv.DictReader(handle)]
    return DEMO_STS, rows[:n_pairs]


def chat_body(model: str, messages: list[dict[str, str]], seed: int) -> dict:
    """The request OpenAICompatBackend sends for one text (same fields, same values)."""
    return {
        "model": model,
        "messages": messages,
        "temperature": TEMPERATURE,
        "top_p": TOP_P,
        "max_tokens": MAX_TOKENS,
        "seed": seed,
    }


def _answer(payload: dict) -> tuple[str, int]:
    text = payload["choices"][0]["message"].get("content") or ""
    return text, int((payload.get("usage") or {}).get("completion_tokens") or 0)


def saturated_client(url: str, bodies: dict[str, dict], concurrency: int) -> Phase:
    """(a): every request in flight at once, ``concurrency`` connections."""
    import httpx

    async def run_all() -> list[tuple[str, int]]:
        limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        semaphore = asyncio.Semaphore(concurrency)
        async with httpx.AsyncClient(timeout=600, limits=limits) as client:

            async def one(body: dict) -> tuple[str, int]:
                async with semaphore:
                    response = await client.post(url, json=body)
                response.raise_for_status()
                return _answer(response.json())

            return await asyncio.gather(*(one(body) for body in bodies.values()))

    start = time.perf_counter()
    answers = asyncio.run(run_all())
    seconds = time.perf_counter() - start
    outputs = {text: out for text, (out, _) in zip(bodies, answers, strict=True)}
    return Phase(seconds, len(bodies), len(bodies), sum(tokens for _, tokens in answers), outputs)


def sequential_client(url: str, bodies: dict[str, dict]) -> Phase:
    """(c): one request at a time, waiting for each answer before sending the next."""
    import httpx

    outputs, tokens = {}, 0
    start = time.perf_counter()
    with httpx.Client(timeout=600) as client:
        for text, body in bodies.items():
            response = client.post(url, json=body)
            response.raise_for_status()
            outputs[text], n = _answer(response.json())
            tokens += n
    return Phase(time.perf_counter() - start, len(bodies), len(bodies), tokens, outputs)


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
    return Phase(seconds, run.done, run.llm_calls, tokens, outputs), run


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
    parser.add_argument("--n", type=int, default=64, help="texts to transform (N/2 sentence pairs; default 64)")
    parser.add_argument("--concurrency", type=int, default=16, help="in-flight requests of client (a) (default 16)")
    parser.add_argument("--n-ctx", type=int, default=4096, help="server context window (default 4096)")
    parser.add_argument("--threads", type=int, default=None, help="server CPU threads (default: all cores)")
    parser.add_argument("--repeat", type=int, default=1, help="run a, b, c this many times; report medians")
    parser.add_argument("--order", default="abc", help="order of the phases a, b, c in each pass (default abc)")
    args = parser.parse_args()
    if args.n < 2 or args.repeat < 1:
        parser.error("--n must be at least 2 and --repeat at least 1")
    if sorted(args.order) != ["a", "b", "c"]:
        parser.error("--order must name a, b and c once each, e.g. bca")

    data_dir = Path(tempfile.mkdtemp(prefix="shiftlab-bench-"))
    os.environ["SHIFTLAB_DATA_DIR"] = str(data_dir)
    os.environ.pop("DATABASE_URL", None)  # a fresh SQLite file: the generation cache starts empty
    os.environ.pop("CELERY_BROKER_URL", None)  # tasks run eagerly in this process
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shiftlab.settings")
    sys.path.insert(0, str(ROOT))

    from transforms.embedded import LlamaServer, ensure_model, free_port

    models_dir = Path(os.environ.get("SHIFTLAB_MODELS_DIR") or ROOT / "var" / "models")
    model_path = ensure_model(args.model, models_dir=models_dir, progress=print)
    port = free_port()
    os.environ["SHIFTLAB_LLM_BASE_URL"] = f"http://127.0.0.1:{port}/v1"
    os.environ["SHIFTLAB_LLM_MODEL"] = args.model
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


def run_benchmark(args, server, model_path: Path) -> None:
    import django

    django.setup()
    # One log line per request or task would bury the table; kombu warns that the eager chord has no broker host.
    for name, level in (("httpx", logging.WARNING), ("celery", logging.WARNING), ("kombu", logging.ERROR)):
        logging.getLogger(name).setLevel(level)
    import llama_cpp
    from django.core.management import call_command

    from core.hashing import sha256_text
    from corpora.services import ImportOptions, dataset_import
    from transforms import planning
    from transforms.language_id import supported_languages
    from transforms.models import Generation
    from transforms.prompts import PromptText
    from transforms.services import GenerationParams, prompt_template_active

    call_command("migrate", verbosity=0)
    source, pairs = read_pairs(args.n // 2)
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
    n_texts = 2 * len(items)

    template = prompt_template_active("paraphrase")
    prompt = PromptText(template.key, template.system, template.user)
    url = f"{server.base_url}/chat/completions"
    bodies = {
        text: chat_body(
            args.model,
            prompt.messages(text=text, language="English", source_language="English"),
            planning.sampling_seed(seed=SEED, text_hash=sha256_text(text), step=0, attempt=0),
        )
        for text in texts
    }
    params = GenerationParams(temperature=TEMPERATURE, top_p=TOP_P, max_tokens=MAX_TOKENS, max_attempts=1)

    startup_s = server.wait_ready(timeout=300)
    started = time.perf_counter()
    supported_languages()  # loads the language identifier once, as a long-lived worker would have
    langid_s = time.perf_counter() - started
    import httpx

    warm = chat_body(args.model, prompt.messages(text="Warm-up.", language="English", source_language="English"), 7)
    httpx.post(url, json=warm, timeout=600).raise_for_status()  # model paged in, prompt prefix evaluated

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
        f"request: paraphrase prompt v{template.version}, temperature {TEMPERATURE}, top_p {TOP_P}, "
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


if __name__ == "__main__":
    main()
