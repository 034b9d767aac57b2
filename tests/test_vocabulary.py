"""One vocabulary for people (issue 42): every code name the code can record or show has plain
words in ``core.vocabulary``. The verbs are read from the source itself, the rest from the
registries, so a new verb, parameter, metric, axis, task type or side without words fails here."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

import pytest

from core import vocabulary
from corpora.task_types import TASK_SPECS, TaskType
from evaluation.benchmark_plan import SIDES
from evaluation.evaluators.classification import ClassificationResult
from evaluation.evaluators.clustering import ClusteringResult
from evaluation.evaluators.pair_classification import HIGHER_IS_SIMILAR, PairClassificationResult, ThresholdScores
from evaluation.evaluators.ranking import K_VALUES, MEASURES, RankingResult
from evaluation.evaluators.sts import STSResult
from evaluation.evaluators.summarization import SummarizationResult
from evaluation.human_baseline import BASELINE_SCORINGS
from transforms import describe
from transforms.params import GenerationParams, JudgeParams, RunOptions
from transforms.registry import Axis, LanguagePlan

ROOT = Path(__file__).resolve().parent.parent
APPS = ("core", "corpora", "transforms", "annotation", "evaluation", "shiftlab")

# Where a verb is recorded: ``verb=...`` (a call's keyword, or a class's ``verb = ...``) or a
# module constant named ``*_VERB``; its string literals are the verbs it can record.
VERB_ASSIGNMENT = re.compile(r"\b(?:verb|[A-Z_]*_VERB)\s*=\s*(?P<expr>[^\n]+)")
VERB_LITERAL = re.compile(r'(?<![\w{])"(?P<verb>[a-z_]+(?:\.[a-z_]+)+)"')
VERB_TEMPLATE = re.compile(r'f"(?P<prefix>[a-z_.]+)\{\w+\}"')
PUBLISHED = re.compile(r'mark_published\([^)]*verb="(?P<verb>[^"]+)"', re.S)


def _template_values() -> dict[str, tuple[str, ...]]:
    """The values an f-string verb's placeholder takes: the decisions a reviewer can record."""
    from annotation.models import Approval, Flag

    return {
        "study.flag.": (Flag.Status.CONFIRMED, Flag.Status.DISMISSED),
        "study.transformation.": tuple(Approval.Decision.values),
    }


def recordable_verbs() -> set[str]:
    """Every audit verb the source can record, read from the source."""
    verbs: set[str] = set()
    templates = _template_values()
    for app in APPS:
        for path in (ROOT / app).rglob("*.py"):
            if "migrations" in path.parts or path.name.startswith("test_"):
                continue
            source = path.read_text()
            for assignment in VERB_ASSIGNMENT.finditer(source):
                expr = assignment["expr"]
                verbs.update(m["verb"] for m in VERB_LITERAL.finditer(expr))
                for template in VERB_TEMPLATE.finditer(expr):
                    prefix = template["prefix"]
                    assert prefix in templates, f"{path}: add the values of verb f-string {prefix!r} to this test"
                    verbs.update(prefix + value for value in templates[prefix])
            # mark_published records "<verb>.again" on a later publish.
            verbs.update(f"{m['verb']}.again" for m in PUBLISHED.finditer(source))
    return verbs


@pytest.mark.django_db  # the decision choices live on models; nothing is written
def test_every_audit_verb_the_code_can_record_has_plain_words_and_none_is_stale():
    verbs = recordable_verbs()
    assert {"annotator.roster.add", "dataset.import", "study.publish.again", "study.flag.dismissed"} <= verbs
    assert len(verbs) > 50, "the source scan found too few verbs: has the way verbs are recorded changed?"
    assert sorted(verbs - vocabulary.AUDIT_VERBS.keys()) == []
    assert sorted(vocabulary.AUDIT_VERBS.keys() - verbs) == []  # no words for a verb nothing records


def test_every_generation_parameter_and_language_plan_has_plain_words():
    names = {f.name for f in fields(GenerationParams)} | {f.name for f in fields(JudgeParams)}
    names |= set(RunOptions.__annotations__) | set(describe._OPTION_WORDS) | set(describe._PARAM_WORDS)
    assert sorted(n for n in names if vocabulary.param_words(n) is None) == []
    assert sorted(p.value for p in LanguagePlan if vocabulary.param_words(p.value) is None) == []
    assert vocabulary.plain_param("pivot_per_text") == "a pivot language per text, then back to the source"


def _metric_keys() -> set[str]:
    keys = {"n_queries", "n_pairs", *(scoring.metric for scoring in BASELINE_SCORINGS.values())}
    for result in (ClassificationResult, ClusteringResult, STSResult, SummarizationResult):
        # An instance of zeros: its metrics() keys are the ones stored with every result.
        zeros = result(
            **{f.name: () if "tuple" in str(f.type) else None if f.name == "items" else 0.0 for f in fields(result)}
        )
        keys |= set(zeros.metrics()) | {result.main_metric}
    keys |= {f"{measure}_at_{k}" for measure in MEASURES for k in K_VALUES}
    keys.add(RankingResult(at={}, n_queries=0).main_metric)
    threshold = {f.name for f in fields(ThresholdScores)}
    keys |= {f"{function}_{name}" for function in HIGHER_IS_SIMILAR for name in threshold}
    keys |= {f"max_{name}" for name in ("accuracy", "f1", "precision", "recall", "ap")}
    keys.add(PairClassificationResult.main_metric)
    return keys


def test_every_metric_key_of_the_evaluators_and_the_human_baseline_has_plain_words():
    keys = _metric_keys()
    assert {"cosine_spearman", "ndcg_at_10", "map_at_1000", "max_ap", "spearman"} <= keys
    assert sorted(k for k in keys if vocabulary.metric_words(k) is None) == []
    assert vocabulary.plain_metric("ndcg_at_10") == "nDCG@10"
    assert vocabulary.plain_metric("cosine_ap") == "average precision (cosine)"
    assert vocabulary.plain_metric("max_ap") == "average precision (best similarity)"


def test_every_axis_task_type_and_side_has_plain_words():
    assert sorted(a.value for a in Axis if vocabulary.axis_words(a.value) is None) == []
    assert sorted(t.value for t in TaskType if vocabulary.task_type_words(t.value) is None) == []
    sides = set(SIDES) | {f for spec in TASK_SPECS.values() for f in spec.transformable_fields}
    assert sorted(s for s in sides if vocabulary.side_words(s) is None) == []
    assert vocabulary.plain_task_type("sts") == "semantic textual similarity (STS)"
    assert vocabulary.plain_axis("lexical") == "Lexical/stylistic"


def test_every_flag_rule_and_rejection_reason_has_plain_words():
    from annotation.kinds import FlagRule, RejectionReason

    assert sorted(r.value for r in FlagRule if r.value not in vocabulary.FLAG_RULES) == []
    assert sorted(r.value for r in RejectionReason if r.value not in vocabulary.REJECTION_REASONS) == []


def test_aliases_raters_and_agreement_groups_read_as_words():
    assert vocabulary.plain_rater("llm:default") == "the default LLM"
    assert vocabulary.plain_rater("llm:judge2") == "the LLM “judge2”"
    assert vocabulary.plain_rater("anna") == "anna"
    assert vocabulary.plain_group("axis:lexical") == "Lexical/stylistic axis"
    assert vocabulary.plain_group("transformation:typos_2", {"typos_2": "Keyboard typos 2%"}) == "Keyboard typos 2%"
    assert vocabulary.plain_group("overall") == "Overall"
    assert vocabulary.plain_verb("annotator.roster.add") == "added an annotator to the roster"
    # A code name not in the tables still shows, without its underscores: nothing stored is hidden.
    assert vocabulary.plain_verb("some.new_verb") == "some new verb"
    assert vocabulary.plain_key("n_widgets") == "number of widgets"


def test_a_run_is_picked_by_its_transformation_title_and_number():
    class Dataset:
        name = "demo-sts"

    class Run:
        pk, transformation, seed, dataset = 4, "typos_2", 1337, Dataset()

    assert describe.run_label(Run()) == "Keyboard typos 2% of demo-sts (run 4, seed 1337)"
    assert describe.transformation_title("no_longer_registered") == "no_longer_registered"
