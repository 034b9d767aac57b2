"""One definition per task type of a human baseline (as mteb's abstract tasks): what annotators
read and answer in Argilla, the options a study takes, how its instances are drawn, what counts as
an answer, and how an LLM is asked and its reply read. The services ask ``baseline_task(type)``;
nothing else branches on the task type. No Django, no I/O: the Argilla values here are plain
dataclasses of the adapter.

Facts shared with the rest of Shiftlab (the fields a dataset of the type holds, its gold field)
come from ``corpora.task_types.TASK_SPECS``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from annotation.argilla import client as argilla
from annotation.baselines import baseline_sampling as sampling
from annotation.baselines import llm_annotator
from core.errors import ShiftlabError
from corpora.task_types import TASK_SPECS, TaskType

COMMON_OPTIONS: dict[str, Any] = {"raters_per_instance": 3}
# Options whose value is a count: positive whole numbers.
COUNT_OPTIONS = ("raters_per_instance", "batch_size", "clusters_per_batch", "candidates")
BATCH_FIELD = argilla.TextField("batch", "Every text of this batch")
RELEVANCE_LABELS = (("1", "Relevant"), ("0", "Not relevant"))
STS_VALUES = (0, 1, 2, 3, 4, 5)
LLM_TOKENS_PER_CLUSTER_LINE = 24


@dataclass(frozen=True)
class LLMUnit:
    """One LLM request: one instance, or a whole clustering batch. ``instances`` are the study's
    instance rows (anything with ``texts``, ``key`` and ``group``)."""

    instances: tuple[Any, ...]
    messages: list[dict[str, str]]
    max_tokens: int


class BaselineTask:
    """A task type as a human baseline asks it. Subclasses set the class attributes and the
    methods that differ; ``options`` are a study's (``check_options`` output)."""

    task_type: ClassVar[TaskType]
    instructions: ClassVar[str]  # the project's wording, when a study brings none
    fields: ClassVar[tuple[argilla.TextField, ...]]  # in the order of ``BaselineInstance.texts``
    question: ClassVar[str]  # the Argilla question whose answer is the instance's answer
    option_defaults: ClassVar[dict[str, Any]] = {}  # options of this task beside the common ones
    llm_max_tokens: ClassVar[int] = 16

    @property
    def gold_field(self) -> str | None:
        return TASK_SPECS[self.task_type].gold_field

    # --- create ---

    asks_labels: ClassVar[bool] = False  # whether annotators choose from the dataset's label set

    def check_options(self, given: Mapping[str, Any], labels: Sequence[Any] = ()) -> dict[str, Any]:
        """The study's options: ``given`` over the defaults, each checked (``labels``: the dataset's
        label set, when ``asks_labels``). Raises ``ShiftlabError`` naming the option."""
        allowed = {**COMMON_OPTIONS, **self.option_defaults}
        unknown = sorted(set(given) - set(allowed) - {"labels"})
        if unknown:
            raise ShiftlabError(
                f"unknown option(s) {', '.join(unknown)} for a {self.task_type} baseline; "
                f"known: {', '.join(sorted(allowed))}"
            )
        options = {**allowed, **given}
        for name in COUNT_OPTIONS:
            value = options.get(name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise ShiftlabError(f"option {name} must be a positive whole number, got {value!r}", field=name)
        if not isinstance(options.get("stratify", False), bool):
            raise ShiftlabError(f"option stratify must be true or false, got {options['stratify']!r}", field="stratify")
        return {**options, **self.labels_option(given, labels)}

    def labels_option(self, given: Mapping[str, Any], labels: Sequence[Any]) -> dict[str, Any]:
        if "labels" in given:
            raise ShiftlabError(f"option labels belongs to classification baselines, not {self.task_type}")
        return {}

    def sample(
        self, items: Sequence[sampling.SourceItem], n: int, *, rng: np.random.Generator, options: Mapping[str, Any]
    ) -> list[sampling.DrawnInstance]:
        raise NotImplementedError

    # --- publish ---

    def argilla_fields(self) -> tuple[argilla.TextField, ...]:
        return self.fields

    def questions(self, options: Mapping[str, Any]) -> list[argilla.Question]:
        raise NotImplementedError

    def records(self, instances: Sequence[Any]) -> list[argilla.RecordIn]:
        """The instance key and the texts, nothing else: no gold, no label hint, no metadata."""
        names = [f.name for f in self.fields]
        return [argilla.RecordIn(external_id=i.key, fields=dict(zip(names, i.texts, strict=True))) for i in instances]

    # --- answers ---

    def answer_value(self, value: Any, options: Mapping[str, Any]) -> Any | None:
        """A submitted Argilla value as the task's answer value, or None if it is none."""
        raise NotImplementedError

    def llm_units(self, instructions: str, options: Mapping[str, Any], todo: Sequence[Any]) -> list[LLMUnit]:
        """The LLM requests answering ``todo``: one per instance."""
        return [LLMUnit((i,), self.llm_messages(instructions, i.texts, options), self.llm_max_tokens) for i in todo]

    def llm_messages(self, instructions: str, texts: Sequence[str], options: Mapping[str, Any]) -> list[dict]:
        raise NotImplementedError

    def llm_parse(self, unit: LLMUnit, reply: str, options: Mapping[str, Any]) -> list[llm_annotator.Parsed]:
        """The answer of each instance of ``unit`` in ``reply``."""
        raise NotImplementedError


class STSBaseline(BaselineTask):
    task_type = TaskType.STS
    instructions = (
        "Each task shows two sentences. Rate how similar their meanings are, from 0 to 5:\n\n"
        "- 0: about different things\n- 1: not the same meaning, but on the same topic\n"
        "- 2: not the same meaning, some details in common\n"
        "- 3: roughly the same meaning, some important detail differs or is missing\n"
        "- 4: mostly the same meaning, only minor details differ\n- 5: exactly the same meaning\n\n"
        "Judge the meaning, not the wording. Work on your own and do not look anything up."
    )
    fields = (argilla.TextField("sentence1", "Sentence 1"), argilla.TextField("sentence2", "Sentence 2"))
    question = "similarity"

    def sample(self, items, n, *, rng, options):
        return sampling.sample_sts(items, n, rng=rng)

    def questions(self, options):
        title = "How similar are the meanings? (0 = different, 5 = the same)"
        return [argilla.RatingQuestion(self.question, title, STS_VALUES)]

    def answer_value(self, value, options):
        ok = isinstance(value, int) and not isinstance(value, bool) and value in STS_VALUES
        return float(value) if ok else None

    def llm_messages(self, instructions, texts, options):
        return llm_annotator.sts_messages(instructions, texts)

    def llm_parse(self, unit, reply, options):
        return [llm_annotator.parse_sts(reply)]


class ClassificationBaseline(BaselineTask):
    task_type = TaskType.CLASSIFICATION
    instructions = (
        "Each task shows one text. Choose the label that describes it best; exactly one label applies. "
        "Read the list of labels carefully (its search box helps with long lists). Work on your own and "
        "do not look anything up."
    )
    fields = (argilla.TextField("text", "Text"),)
    question = "label"
    option_defaults = {"stratify": False}
    llm_max_tokens = 48
    asks_labels = True

    def labels_option(self, given, labels):
        if "labels" in given:
            raise ShiftlabError("the label set comes from the dataset; do not pass option labels")
        return {"labels": sorted({str(label) for label in labels})}

    def sample(self, items, n, *, rng, options):
        return sampling.sample_classification(items, n, rng=rng, stratify=bool(options.get("stratify", False)))

    def questions(self, options):
        labels = tuple((label, label.replace("_", " ")) for label in options["labels"])
        return [argilla.LabelQuestion(self.question, "Which label fits the text?", labels)]

    def answer_value(self, value, options):
        return value if isinstance(value, str) and value in options["labels"] else None

    def llm_messages(self, instructions, texts, options):
        return llm_annotator.classification_messages(instructions, texts, options.get("labels", ()))

    def llm_parse(self, unit, reply, options):
        return [llm_annotator.parse_label(reply, options.get("labels", ()))]


class ClusteringBaseline(BaselineTask):
    """Answered per batch: each record also shows every text of its batch, and the LLM gets one
    request per batch (a group name only means something next to the other texts)."""

    task_type = TaskType.CLUSTERING
    instructions = (
        "Texts come in batches; each task shows one text and, below it, every text of its batch. "
        "Sort the batch into groups of texts about the same subject: for each text, type a short group "
        "name, and type exactly the same name for every text of the batch that belongs in that group. "
        "A name only has to make sense within its batch; how many groups there are is for you to decide."
    )
    fields = (argilla.TextField("text", "Text to place in a group"),)
    question = "group"
    option_defaults = {"batch_size": sampling.DEFAULT_BATCH_SIZE, "clusters_per_batch": None}

    def sample(self, items, n, *, rng, options):
        return sampling.sample_clustering(
            items,
            n,
            rng=rng,
            batch_size=int(options.get("batch_size", sampling.DEFAULT_BATCH_SIZE)),
            clusters_per_batch=options.get("clusters_per_batch"),
        )

    def argilla_fields(self):
        return (*self.fields, BATCH_FIELD)

    def questions(self, options):
        description = "Use the same name for every text of the batch that belongs with it."
        return [argilla.TextQuestion(self.question, "Group name for this text", description)]

    def records(self, instances):
        batches: dict[str, list[str]] = defaultdict(list)
        for instance in instances:
            batches[instance.group].append(instance.texts[0])
        records = super().records(instances)
        for record, instance in zip(records, instances, strict=True):
            batch = "\n".join(f"{k}. {text}" for k, text in enumerate(batches[instance.group], 1))
            record.fields[BATCH_FIELD.name] = batch
        return records

    def answer_value(self, value, options):
        return (llm_annotator.normalise_cluster(value) or None) if isinstance(value, str) else None

    def llm_units(self, instructions, options, todo):
        batches: dict[str, list[Any]] = defaultdict(list)
        for instance in todo:
            batches[instance.group].append(instance)
        return [
            LLMUnit(
                tuple(batch),
                llm_annotator.clustering_messages(instructions, [i.texts[0] for i in batch]),
                16 + LLM_TOKENS_PER_CLUSTER_LINE * len(batch),
            )
            for batch in batches.values()
        ]

    def llm_parse(self, unit, reply, options):
        parsed = llm_annotator.parse_clusters(reply, len(unit.instances))
        if not parsed.ok:
            return [parsed] * len(unit.instances)
        return [llm_annotator.Parsed(value=v) for v in parsed.value]


class RerankingBaseline(BaselineTask):
    task_type = TaskType.RERANKING
    instructions = (
        "Each task shows a query and one candidate text. Say whether the candidate is relevant to the "
        "query, i.e. whether it answers it or is what someone asking it would want to find. Judge each "
        "candidate on its own."
    )
    fields = (argilla.TextField("query", "Query"), argilla.TextField("candidate", "Candidate"))
    question = "relevant"
    option_defaults = {"candidates": sampling.DEFAULT_CANDIDATES}
    llm_max_tokens = 8

    def sample(self, items, n, *, rng, options):
        return sampling.sample_reranking(
            items, n, rng=rng, max_candidates=options.get("candidates", sampling.DEFAULT_CANDIDATES)
        )

    def questions(self, options):
        return [argilla.LabelQuestion(self.question, "Is the candidate relevant to the query?", RELEVANCE_LABELS)]

    def answer_value(self, value, options):
        return int(value) if value in ("0", "1") else None

    def llm_messages(self, instructions, texts, options):
        return llm_annotator.reranking_messages(instructions, texts)

    def llm_parse(self, unit, reply, options):
        return [llm_annotator.parse_relevance(reply)]


BASELINE_TASKS: dict[TaskType, BaselineTask] = {
    task.task_type: task
    for task in (STSBaseline(), ClassificationBaseline(), ClusteringBaseline(), RerankingBaseline())
}
# Each task's own options with their defaults (forms show them).
OPTION_DEFAULTS: dict[TaskType, dict[str, Any]] = {t: dict(task.option_defaults) for t, task in BASELINE_TASKS.items()}


def baseline_task(task_type: str) -> BaselineTask:
    """The definition of ``task_type``; ``ShiftlabError`` naming the choices for any other."""
    try:
        return BASELINE_TASKS[task_type]
    except KeyError:
        choices = ", ".join(BASELINE_TASKS)
        raise ShiftlabError(f"unknown baseline task type {task_type!r}: choose one of {choices}") from None
