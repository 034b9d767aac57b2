"""An LLM as one more annotator of a human-baseline study: it answers the study's instances with
the instructions and texts the humans get, and its replies are stored as ``BaselineAnswer`` rows
of rater ``llm:<backend alias>`` (prompts and parsers: ``annotation.baselines.llm_annotator``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from django.contrib.auth.base_user import AbstractBaseUser
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.utils import timezone

from annotation.baselines import llm_annotator
from annotation.models import BaselineAnswer, BaselineInstance, BaselineStudy
from core.errors import ShiftlabError
from core.hashing import sha256_text
from core.services import audit_record
from corpora.task_types import TaskType
from transforms import planning
from transforms.backends import get_backend
from transforms.backends.base import ChatFailure, ChatRequest

LLM_MAX_TOKENS = {TaskType.STS: 16, TaskType.CLASSIFICATION: 48, TaskType.RERANKING: 8}
LLM_TOKENS_PER_CLUSTER_LINE = 24
LLM_CHUNK = 16  # LLM requests between two saves / progress updates


def rater_of_llm(backend_alias: str) -> str:
    return f"llm:{backend_alias}"


@dataclass(frozen=True)
class LLMAnnotateResult:
    rater: str
    total: int  # instances in the study
    skipped: int  # already answered by this rater before the call
    valid: int  # answers stored now that parsed
    invalid: int  # answers stored now that did not parse
    failed: int  # instances the backend could not answer (nothing stored; run again)


@dataclass(frozen=True)
class _Unit:
    """One LLM request: one instance, or a whole clustering batch."""

    instances: tuple[BaselineInstance, ...]
    messages: list[dict[str, str]]
    max_tokens: int


def _llm_units(study: BaselineStudy, todo: Sequence[BaselineInstance]) -> list[_Unit]:
    if study.task_type == TaskType.CLUSTERING:
        batches: dict[str, list[BaselineInstance]] = defaultdict(list)
        for instance in todo:
            batches[instance.group].append(instance)
        return [
            _Unit(
                tuple(batch),
                llm_annotator.clustering_messages(study.instructions, [i.texts[0] for i in batch]),
                16 + LLM_TOKENS_PER_CLUSTER_LINE * len(batch),
            )
            for batch in batches.values()
        ]
    labels = study.options.get("labels", ())
    return [
        _Unit(
            (i,),
            llm_annotator.instance_messages(study.task_type, study.instructions, i.texts, labels=labels),
            LLM_MAX_TOKENS[study.task_type],
        )
        for i in todo
    ]


def _parse_unit(study: BaselineStudy, unit: _Unit, reply: str) -> list[llm_annotator.Parsed]:
    if study.task_type == TaskType.CLUSTERING:
        parsed = llm_annotator.parse_clusters(reply, len(unit.instances))
        if not parsed.ok:
            return [parsed] * len(unit.instances)
        return [llm_annotator.Parsed(value=v) for v in parsed.value]
    return [llm_annotator.parse_instance(study.task_type, reply, labels=study.options.get("labels", ()))]


def baseline_llm_annotate(
    *,
    study: BaselineStudy,
    backend_alias: str = "default",
    actor: AbstractBaseUser | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> LLMAnnotateResult:
    """Have the LLM of ``backend_alias`` answer every instance the way an annotator would.

    Same instructions and texts as the humans get; greedy decoding (temperature 0) with a seed
    drawn from the study's seed and the instance key. Each reply is stored as a ``BaselineAnswer``
    of rater ``llm:<alias>`` with its raw text; a reply that does not parse is stored with
    ``valid=False``. Resumable and idempotent: instances this rater answered are skipped, and
    answers are saved every few requests. Clustering is asked per batch (a batch whose reply does
    not parse gets an invalid answer for each of its texts). ``on_progress(done, total)`` counts
    instances. Requests the backend fails are not stored: the call then raises ``ShiftlabError``
    after saving the rest, and running it again retries them.
    """
    study = BaselineStudy.objects.get(pk=study.pk)
    if study.status == BaselineStudy.Status.CLOSED:
        raise ShiftlabError(f"{study} is closed: it takes no more answers, from humans or LLMs")
    try:
        backend = get_backend(backend_alias)
    except ImproperlyConfigured as exc:
        raise ShiftlabError(str(exc)) from exc
    rater = rater_of_llm(backend_alias)
    instances = list(study.instances.order_by("position"))
    answered = set(
        BaselineAnswer.objects.filter(instance__study=study, rater=rater).values_list("instance_id", flat=True)
    )
    todo = [i for i in instances if i.pk not in answered]
    units = _llm_units(study, todo)
    done, counts, failures = len(answered), defaultdict(int), []
    if on_progress:
        on_progress(done, len(instances))
    for start in range(0, len(units), LLM_CHUNK):
        chunk = units[start : start + LLM_CHUNK]
        requests = [
            ChatRequest(
                messages=u.messages,
                temperature=0.0,
                top_p=1.0,
                max_tokens=u.max_tokens,
                seed=planning.sampling_seed(
                    seed=study.seed, text_hash=sha256_text(u.instances[0].key), step=0, attempt=0
                ),
            )
            for u in chunk
        ]
        results = backend.generate(requests)
        rows, now = [], timezone.now()
        chunk_failures = [r.message for r in results if isinstance(r, ChatFailure)]
        failures.extend(chunk_failures)
        for unit, result in zip(chunk, results, strict=True):
            if isinstance(result, ChatFailure):
                continue
            for instance, parsed in zip(unit.instances, _parse_unit(study, unit, result.text), strict=True):
                rows.append(
                    BaselineAnswer(
                        instance=instance,
                        rater=rater,
                        source=BaselineAnswer.Source.LLM,
                        value=parsed.value if parsed.ok else None,
                        raw=result.text,
                        valid=parsed.ok,
                        submitted_at=now,
                    )
                )
                counts["valid" if parsed.ok else "invalid"] += 1
        with transaction.atomic():
            BaselineAnswer.objects.bulk_create(rows, ignore_conflicts=True)
        done += len(rows)
        if on_progress:
            on_progress(done, len(instances))
        if len(chunk_failures) == len(chunk):
            break  # the backend answers nothing: no point sending the rest now
    result = LLMAnnotateResult(
        rater=rater,
        total=len(instances),
        skipped=len(answered),
        valid=counts["valid"],
        invalid=counts["invalid"],
        failed=len(todo) - counts["valid"] - counts["invalid"],
    )
    if counts["valid"] or counts["invalid"]:
        with transaction.atomic():
            audit_record(
                actor=actor,
                verb="baseline.llm_annotate",
                obj=study,
                payload={
                    "rater": rater,
                    "model": backend.model_id,
                    "valid": result.valid,
                    "invalid": result.invalid,
                    "failed": result.failed,
                },
            )
    if result.failed:
        saved = counts["valid"] + counts["invalid"]
        reason = failures[0] if failures else "stopped early"
        raise ShiftlabError(
            f"the LLM backend {backend_alias!r} failed on {result.failed} of {len(todo)} instances "
            f"({reason}); the {saved} answers received are saved: run llm-annotate again to retry "
            "the rest"
        )
    return result
