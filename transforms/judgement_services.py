"""Cached LLM judgements of text pairs, and the steps every kind of judge report shares (options,
judges, progress, dispatch)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum

from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction

from core.errors import ShiftlabError
from core.hashing import sha256_text
from core.job_services import JobWait, progress_tick
from core.models import Project
from core.services import audit_record
from corpora.models import Dataset
from transforms import planning
from transforms.backends import backend_chosen, get_backend
from transforms.backends.base import ChatFailure, ChatRequest, ChatResult, LLMBackend, TransientBackendError
from transforms.cache_keys import judgement_key
from transforms.jobs import REPORTS
from transforms.judging import JUDGE_PROMPTS, SCALES, JudgeKind, parse_score
from transforms.llm_activity import LLMCalls, job_note_busy
from transforms.models import Judgement, JudgeReport, TransformedItem, TransformRun
from transforms.params import JudgeParams
from transforms.prompts import prompt_hash

JUDGE_CHUNK_SIZE = 16  # pairs judged per batch (progress moves per answer within it)
RUN_KINDS = (JudgeKind.QUALITY, JudgeKind.FLUENCY)


@dataclass(frozen=True)
class _JudgeCall:
    """What one judgement needs: the judge, its prompt and parameters, and where it lies in the cache."""

    kind: JudgeKind
    backend: LLMBackend
    system: str
    user: str
    template_hash: str
    params: JudgeParams
    seed: int

    def key(self, a: str, b: str, attempt: int) -> str:
        return judgement_key(
            kind=self.kind.value,
            model=self.backend.model_id,
            prompt_hash=self.template_hash,
            params_hash=self.params.sampling_hash,
            text_a=a,
            text_b=b,
            seed=self.seed,
            attempt=attempt,
        )


def judge_pairs(
    *,
    kind: JudgeKind | str,
    pairs: Sequence[tuple[str, str]],
    backend_alias: str = "default",
    seed: int = 0,
    params: JudgeParams | None = None,
    on_answer: Callable[[], None] | None = None,
) -> list[Judgement]:
    """Judge every (text_a, text_b) pair; return the kept judgement of each, in order.

    Cached judgements are reused (no LLM call); an answer without a number on the scale is retried
    with a new sampling seed up to ``max_attempts`` times, then kept as a parse failure
    (``score`` None), never replaced by a default. ``on_answer()`` hears each answer of a first
    attempt as it arrives (at most once per pair), for live progress.
    """
    kind = JudgeKind(kind)
    params = params or JudgeParams()
    system, user = JUDGE_PROMPTS[kind]
    call = _JudgeCall(kind, get_backend(backend_alias), system, user, prompt_hash(system, user), params, seed)
    kept: dict[int, Judgement] = {}
    pending = list(range(len(pairs)))
    for attempt in range(params.max_attempts):
        if not pending:
            break
        keys = {i: call.key(*pairs[i], attempt) for i in pending}
        cached = _cached_judgements(keys)
        misses = [i for i in pending if keys[i] not in cached]
        if misses:
            _judge_missing(call, [(keys[i], pairs[i]) for i in misses], attempt, on_answer if attempt == 0 else None)
            cached = _cached_judgements(keys)
        still = []
        for i in pending:
            kept[i] = cached[keys[i]]
            if kept[i].score is None:
                still.append(i)
        pending = still
    return [kept[i] for i in range(len(pairs))]


def _cached_judgements(keys: dict[int, str]) -> dict[str, Judgement]:
    return {j.key: j for j in Judgement.objects.filter(key__in=keys.values())}


class LookupStatus(StrEnum):
    """What the cache holds for a pair, as ``judge_pairs`` would see it."""

    SCORED = "scored"  # a parsed answer is kept
    FAILED = "failed"  # every attempt is cached and none parsed: kept as a parse failure
    MISSING = "missing"  # the judge has not answered the attempt that would be asked next


@dataclass(frozen=True)
class JudgeLookup:
    """One pair's kept judgement as read from the cache: its score when ``status`` is scored, the
    kept judgement's id when it is scored or failed."""

    status: LookupStatus
    score: float | None = None
    judgement_id: int | None = None


# Keys per query of a cache lookup: well under SQLite's limit on bound parameters (32,766).
LOOKUP_BATCH = 10_000


def cached_judge_scores(
    *,
    kind: JudgeKind | str,
    pairs: Sequence[tuple[str, str]],
    backend_alias: str = "default",
    seed: int = 0,
    params: JudgeParams | None = None,
) -> list[JudgeLookup]:
    """What ``judge_pairs`` would keep for every pair, read from the cache alone: never an LLM call.

    The same attempts in the same order: the first attempt whose answer parsed is kept (scored);
    when all ``max_attempts`` attempts are cached and none parsed, the last one is kept as a
    failure; when the attempt ``judge_pairs`` would ask next is not cached, the pair is missing.
    One query per attempt level (per ``LOOKUP_BATCH`` pairs).
    """
    kind = JudgeKind(kind)
    params = params or JudgeParams()
    system, user = JUDGE_PROMPTS[kind]
    call = _JudgeCall(kind, get_backend(backend_alias), system, user, prompt_hash(system, user), params, seed)
    found: dict[int, JudgeLookup] = {}
    unparsed: dict[int, int] = {}  # pair -> id of its latest cached attempt without a score
    pending = list(range(len(pairs)))
    for attempt in range(params.max_attempts):
        if not pending:
            break
        keys = {i: call.key(*pairs[i], attempt) for i in pending}
        distinct = list(set(keys.values()))
        cached: dict[str, tuple[int, float | None]] = {}
        for start in range(0, len(distinct), LOOKUP_BATCH):
            rows = Judgement.objects.filter(key__in=distinct[start : start + LOOKUP_BATCH])
            cached.update((key, (pk, score)) for key, pk, score in rows.values_list("key", "pk", "score"))
        still = []
        for i in pending:
            if keys[i] not in cached:
                found[i] = JudgeLookup(LookupStatus.MISSING)
                continue
            pk, score = cached[keys[i]]
            if score is None:
                unparsed[i] = pk
                still.append(i)
            else:
                found[i] = JudgeLookup(LookupStatus.SCORED, score=score, judgement_id=pk)
        pending = still
    for i in pending:
        found[i] = JudgeLookup(LookupStatus.FAILED, judgement_id=unparsed[i])
    return [found[i] for i in range(len(pairs))]


def _judge_missing(
    call: _JudgeCall,
    missing: list[tuple[str, tuple[str, str]]],
    attempt: int,
    on_answer: Callable[[], None] | None = None,
) -> None:
    """Ask the judge about every (key, pair) and save the answers (and permanent failures) before a
    transient failure raises TransientBackendError."""
    params = call.params
    requests = [
        ChatRequest(
            messages=[
                {"role": "system", "content": call.system},
                {"role": "user", "content": call.user.format(text_a=a, text_b=b)},
            ],
            seed=planning.sampling_seed(seed=call.seed, text_hash=sha256_text(a + "\x00" + b), step=0, attempt=attempt),
            temperature=params.temperature,
            top_p=params.top_p,
            max_tokens=params.max_tokens,
        )
        for _, (a, b) in missing
    ]

    def answered(index: int, result: ChatResult | ChatFailure) -> None:
        if not (isinstance(result, ChatFailure) and result.transient):
            on_answer()

    results = call.backend.generate(requests, on_result=answered if on_answer else None)
    low, high = SCALES[call.kind]
    rows = []
    for (key, (a, b)), result in zip(missing, results, strict=True):
        if isinstance(result, ChatFailure) and result.transient:
            continue
        common = dict(
            key=key,
            kind=call.kind.value,
            model=call.backend.model_id,
            prompt_hash=call.template_hash,
            params_hash=params.sampling_hash,
            text_a_hash=sha256_text(a),
            text_b_hash=sha256_text(b),
            seed=call.seed,
            attempt=attempt,
        )
        if isinstance(result, ChatFailure):
            rows.append(Judgement(**common, failure=result.message[:2000]))
        else:
            score = parse_score(result.text, low=low, high=high)
            rows.append(Judgement(**common, output=result.text, score=score, latency_s=result.latency_s))
    Judgement.objects.bulk_create(rows, ignore_conflicts=True)
    if len(rows) < len(missing):
        failure = next(r for r in results if isinstance(r, ChatFailure) and r.transient)
        n_failed = len(missing) - len(rows)
        raise TransientBackendError.for_backend(call.backend, n_failed=n_failed, message=failure.message)


# --- steps shared by the report kinds -----------------------------------------------------------


def check_judges(judges: Sequence[str]) -> list[str]:
    """The distinct judge aliases, each a configured backend; ShiftlabError when there are none."""
    judges = list(dict.fromkeys(judges))
    if not judges:
        raise ShiftlabError("name at least one judge (a backend alias in TRANSFORM_BACKENDS)", field="judges")
    for alias in judges:
        backend_chosen(alias)
    return judges


def report_options(*, seed: int, params: JudgeParams, n_resamples: int, **extra) -> dict:
    if n_resamples < 100:
        raise ShiftlabError(f"use at least 100 bootstrap resamples (got {n_resamples})")
    return {"seed": seed, "judge_params": asdict(params), "n_resamples": n_resamples, **extra}


def report_declare(
    *,
    kind: str,
    project: Project,
    dataset: Dataset,
    judges: Sequence[str],
    options: dict,
    runs: Sequence[TransformRun] = (),
    audited: dict | None = None,
    created_by: AbstractBaseUser | None,
    dispatch: bool,
) -> JudgeReport:
    """Create a report of ``runs`` (its judges checked), audit it with ``audited`` and its options,
    and (with ``dispatch``) queue it once the transaction commits: all or nothing."""
    with transaction.atomic():
        report = JudgeReport.objects.create(
            kind=kind,
            project=project,
            dataset=dataset,
            judges=check_judges(judges),
            options=options,
            created_by=created_by,
        )
        if runs:
            report.runs.set(runs)
        audit_record(actor=created_by, verb="judge.report.create", obj=report, payload={**(audited or {}), **options})
        report_start(report, dispatch=dispatch)
    return report


def report_start(report: JudgeReport, *, dispatch: bool) -> None:
    """Queue the report's execution once the current transaction commits (see :class:`transforms.jobs.JobKind`)."""
    if dispatch:
        REPORTS.dispatch(report.pk)
        # Its task may wait in the LLM queue behind the job that holds the judge's backend: say so.
        if report.judges:  # a report of no judge fails in its task, with the reason
            job_note_busy(model=JudgeReport, job_id=report.pk, alias=report.judges[0])


def judge_report_fail(*, report_id: int, reason: str) -> None:
    """Fail an unfinished report with ``reason`` and say how to go on."""
    REPORTS.fail(report_id, reason=reason)


def judge_report_waiting(*, report_id: int) -> JobWait:
    """How the report's task records that it waits on a judge's backend, and fails it when it gives up."""
    return REPORTS.waiting(report_id)


def report_params(report: JudgeReport) -> JudgeParams:
    return JudgeParams(**report.options["judge_params"])


@dataclass
class ReportProgress:
    """Progress of a report, kept on its row (for the page and API) and told to a callback.
    ``pending`` steps are done but not yet on the row (:meth:`take` hands them to a flush)."""

    report_id: int
    callback: Callable[[int, int], None] | None
    done: int = 0
    total: int = 0
    pending: int = 0

    def set_total(self, total: int) -> None:
        self.total = total
        JudgeReport.objects.filter(pk=self.report_id).update(total=total)

    def step(self, steps: int = 1) -> None:
        """``steps`` more are done; the row hears it at the next :meth:`take` or :meth:`advance`."""
        self.done += steps
        self.pending += steps

    def take(self) -> dict[str, int]:
        """The steps to add to the row now (``LLMCalls``' flush), told to the callback."""
        steps, self.pending = self.pending, 0
        if steps and self.callback:
            self.callback(self.done, self.total)
        return {"done": steps}

    def advance(self, steps: int) -> None:
        """``steps`` more are done: written now, with any pending ones."""
        self.step(steps)
        progress_tick(model=JudgeReport, job_id=self.report_id, clear_waiting=False, **self.take())


def judge_with_progress(
    report: JudgeReport, progress: ReportProgress, *, kind: JudgeKind, judge: str, pairs: list[tuple[str, str] | None]
) -> list[float | None]:
    """Judge the pairs (None: nothing to judge, e.g. a failed transformation) chunk by chunk,
    advancing the report's progress per answer as it arrives (and at each chunk's end for cached
    and skipped pairs); returns the scores (None where nothing was judged)."""
    scores: list[float | None] = []
    with LLMCalls(
        model=JudgeReport, job_id=report.pk, label=f"judge report #{report.pk}", alias=judge, flush=progress.take
    ) as calls:
        for start in range(0, len(pairs), JUDGE_CHUNK_SIZE):
            chunk = pairs[start : start + JUDGE_CHUNK_SIZE]
            todo = [p for p in chunk if p is not None]
            answered = _Answers(progress, calls, limit=len(todo))
            judged = iter(
                judge_pairs(
                    kind=kind,
                    pairs=todo,
                    backend_alias=judge,
                    seed=report.options["seed"],
                    params=report_params(report),
                    on_answer=answered,
                )
                if todo
                else []
            )
            scores += [next(judged).score if p is not None else None for p in chunk]
            progress.step(len(chunk) - answered.count)
            calls.flush_now()
    return scores


class _Answers:
    """Counts a chunk's first answers as report steps (never more than the chunk's pairs)."""

    def __init__(self, progress: ReportProgress, calls: LLMCalls, *, limit: int):
        self.progress, self.calls, self.limit, self.count = progress, calls, limit, 0

    def __call__(self) -> None:
        if self.count < self.limit:
            self.count += 1
            self.progress.step()
        self.calls.answered()


def run_texts(run: TransformRun) -> list[TransformedItem]:
    """The run's outcomes in a stable order (item position, then field)."""
    return list(TransformedItem.objects.filter(run=run).order_by("item__position", "side"))
