"""The LLM judge: cached judgements of text pairs, and its evaluation against gold STS scores."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from core.errors import ShiftlabError
from core.hashing import sha256_json, sha256_text
from datasets.models import Dataset
from datasets.task_types import TaskType
from transforms import planning
from transforms.backends import get_backend
from transforms.backends.base import ChatFailure, ChatRequest
from transforms.errors import word_count
from transforms.judging import JUDGE_PROMPTS, SCALES, JudgeEvaluation, JudgeKind, evaluate_judge, parse_score
from transforms.models import Judgement
from transforms.prompts import prompt_hash
from transforms.services import GenerationParams, TransientBackendError


@dataclass(frozen=True)
class JudgeParams(GenerationParams):
    """Generation parameters with the judge's defaults: greedy decoding and a short answer."""

    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 16


def judge_pairs(
    *,
    kind: JudgeKind | str,
    pairs: Sequence[tuple[str, str]],
    backend_alias: str = "default",
    seed: int = 0,
    params: JudgeParams | None = None,
) -> list[Judgement]:
    """Judge every (text_a, text_b) pair; return the kept judgement of each, in order.

    Cached judgements are reused (no LLM call); an answer without a number on the scale is retried
    with a new sampling seed up to ``max_attempts`` times, then kept as a parse failure
    (``score`` None), never replaced by a default.
    """
    kind = JudgeKind(kind)
    params = params or JudgeParams()
    backend = get_backend(backend_alias)
    system, user = JUDGE_PROMPTS[kind]
    template_hash = prompt_hash(system, user)
    low, high = SCALES[kind]
    kept: dict[int, Judgement] = {}
    pending = list(range(len(pairs)))
    for attempt in range(params.max_attempts):
        if not pending:
            break
        keys = {}
        for i in pending:
            a, b = pairs[i]
            keys[i] = sha256_json({
                "kind": kind.value, "model": backend.model_id, "prompt": template_hash,
                "params": params.sampling_hash, "a": sha256_text(a), "b": sha256_text(b), "seed": seed,
                "attempt": attempt,
            })  # fmt: skip
        cached = {j.key: j for j in Judgement.objects.filter(key__in=keys.values())}
        misses = [i for i in pending if keys[i] not in cached]
        if misses:
            requests = []
            for i in misses:
                a, b = pairs[i]
                text_hash = sha256_text(a + "\x00" + b)
                requests.append(ChatRequest(
                    messages=[{"role": "system", "content": system},
                              {"role": "user", "content": user.format(text_a=a, text_b=b)}],
                    seed=planning.sampling_seed(seed=seed, text_hash=text_hash, step=0, attempt=attempt),
                    temperature=params.temperature, top_p=params.top_p, max_tokens=params.max_tokens,
                ))  # fmt: skip
            results = backend.generate(requests)
            rows = []
            for i, result in zip(misses, results, strict=True):
                if isinstance(result, ChatFailure) and result.transient:
                    continue
                a, b = pairs[i]
                common = dict(
                    key=keys[i], kind=kind.value, model=backend.model_id, prompt_hash=template_hash,
                    params_hash=params.sampling_hash, text_a_hash=sha256_text(a), text_b_hash=sha256_text(b),
                    seed=seed, attempt=attempt,
                )  # fmt: skip
                if isinstance(result, ChatFailure):
                    rows.append(Judgement(**common, failure=result.message[:2000]))
                else:
                    score = parse_score(result.text, low=low, high=high)
                    rows.append(Judgement(**common, output=result.text, score=score, latency_s=result.latency_s))
            Judgement.objects.bulk_create(rows, ignore_conflicts=True)
            if len(rows) < len(misses):
                raise TransientBackendError("the judge backend is not answering; try again later")
            cached = {j.key: j for j in Judgement.objects.filter(key__in=keys.values())}
        still = []
        for i in pending:
            kept[i] = cached[keys[i]]
            if kept[i].score is None:
                still.append(i)
        pending = still
    return [kept[i] for i in range(len(pairs))]


def judge_evaluate(
    *,
    dataset: Dataset,
    limit: int | None = None,
    split: str | None = None,
    backend_alias: str = "default",
    seed: int = 0,
    params: JudgeParams | None = None,
) -> JudgeEvaluation:
    """Judge the sentence pairs of an STS/STR dataset and compare with the gold scores.

    Gold scores on another scale than 0–5 are compared as they are: the Spearman correlation is
    scale-free, the MAE is only meaningful for 0–5 datasets such as STS-B.
    """
    if dataset.task_type not in (TaskType.STS, TaskType.STR):
        raise ShiftlabError(f"judge evaluation needs an sts or str dataset; {dataset.name} is {dataset.task_type}")
    items = dataset.items.filter(kind="example").order_by("position")
    if split:
        items = items.filter(split=split)
    items = list(items[:limit] if limit else items)
    if not items:
        raise ShiftlabError(f"{dataset.name} has no items{f' in split {split}' if split else ''}")
    pairs = [(i.payload["sentence1"], i.payload["sentence2"]) for i in items]
    judgements = judge_pairs(kind=JudgeKind.SIMILARITY, pairs=pairs, backend_alias=backend_alias, seed=seed,
                             params=params)  # fmt: skip
    return evaluate_judge(
        [float(i.gold) for i in items],
        [j.score for j in judgements],
        [max(word_count(a), word_count(b)) for a, b in pairs],
    )
