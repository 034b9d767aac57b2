"""A prediction-powered gate with the database (issue 40): locking draws a simple random sample and
starts the judges on every output; the gate waits for them, then corrects their mean with the human
ratings; the evidence, the exported config and the page say what it rests on; a changed judge voids it.
The judge is the rule-based backend of ``tests/test_judge_population.py`` (answers follow from the
rewrite's text), so the judges' scores are recomputed here from the texts alone."""

from io import StringIO

import numpy as np
import pytest
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from annotation.configs.config_schema import config_read
from annotation.export_services import BenchmarkConfigExportRequest, benchmark_config_export
from annotation.kinds import ItemKind
from annotation.models import JudgePopulationJob, Study
from annotation.studies import adaptive_services, judge_population_services
from annotation.studies.gate_services import approval_decide, study_gate
from annotation.studies.judge_population_services import study_judge_population_start
from annotation.studies.validation_services import study_validate
from core.errors import ShiftlabError
from core.models import AuditEvent
from tests.test_judge_population import fluency_answer, judges, quality_answer  # noqa: F401 (fixture)
from tests.test_one_rating_per_item import everyone_rates
from tests.test_pull_assignment import _study
from transforms.backends import reset_backends
from transforms.models import Judgement, TransformedItem

pytestmark = pytest.mark.django_db

PPI = {
    "items_per_transformation": 12,
    "raters_per_item": 2,
    "adaptive": True,
    "adaptive_gate_raters": 1,
    "adaptive_overlap_share": 0.25,
    "adaptive_alpha": 0.5,
    "adaptive_min_items": 4,
    "adaptive_sequence": "asymptotic",
    "gate_estimator": "prediction_powered",
    "llm_judges": ("one",),
}


@pytest.mark.usefixtures("judges")
def test_the_gate_corrects_the_judges_mean_over_every_output(
    researcher, django_user_model, tmp_path, django_capture_on_commit_callbacks, client, monkeypatch
):
    with django_capture_on_commit_callbacks(execute=True):
        study, _ = _study(researcher, django_user_model, tmp_path, ("anna", "bob", "cara", "dan"), **PPI)
    name = study.runs.get().transformation
    info = study.sample_info[name]
    outputs = TransformedItem.objects.filter(run__in=study.runs.all(), ok=True).exclude(output_text="")
    # A simple random sample of the run's 40 outputs (20 pairs, both sides rewritten), and what it was
    # drawn from, recorded.
    assert sorted(info["population"]) == sorted(outputs.values_list("pk", flat=True)) and len(info["population"]) == 40
    real = study.items.filter(kind=ItemKind.REAL)
    assert real.count() == 12 and set(real.values_list("transformed_item_id", flat=True)) <= set(info["population"])
    # Locking started the judges; eager here, so every output is scored.
    job = JudgePopulationJob.objects.get(study=study)
    assert job.status == "succeeded" and job.done == job.total == 40 * 2

    everyone_rates(study)
    result = adaptive_services.study_adaptive_check(study=Study.objects.get(pk=study.pk))
    study = Study.objects.get(pk=study.pk)
    stored = study.sample_info["adaptive"][name]
    assert stored["estimator"] == "prediction_powered" and stored["sequence"] == "asymptotic"
    # The judges' mean over all 40 outputs, recomputed from the texts (judge and question scales are both 1-5).
    texts = dict(outputs.values_list("pk", "output_text"))
    for question, answer in (("quality", quality_answer), ("fluency", fluency_answer)):
        expected = np.mean([answer("judge-one", texts[pk]) for pk in info["population"]])
        assert stored["judge"]["questions"][question]["judge_mean"] == pytest.approx(expected, abs=1e-4)
    # Settled: it rests on the items up to the one it settled at, and the raters behind them.
    assert stored["state"] == "pass"
    n, raters = stored["n"], stored["decided_raters"]
    assert stored["basis"] == f"LLM judge one on 40 outputs, corrected by {n} human-rated items from {raters} raters"
    assert raters >= 3
    assert study.sample_info["adaptive_judge"][name] == stored["judge"]["fingerprint"]
    assert result.decisions[name].state.value in ("pass", "undecided")

    # The end-of-study gate keeps what it rests on; no item is "thin" with one rating by design.
    Study.objects.filter(pk=study.pk).update(published_at=timezone.now(), status=Study.Status.PUBLISHED)
    study_validate(study=Study.objects.get(pk=study.pk))
    [gate] = study_gate(study=Study.objects.get(pk=study.pk))
    assert gate.evidence["gate_basis"] == stored["basis"]
    assert gate.evidence["sequential"]["judge"]["fingerprint"] == stored["judge"]["fingerprint"]
    assert not any("fewer than 2 counted raters" in r for r in gate.evidence["reasons"])
    assert "population" not in gate.evidence["sample"] and gate.evidence["sample"]["population_outputs"] == 40

    # Approved and exported: the config's gate entry says what it rests on, and reads back.
    assert gate.passed
    approval_decide(gate_result=gate, decision="approve", comment="judge-corrected gate passed", actor=researcher)
    config = benchmark_config_export(actor=researcher, request=BenchmarkConfigExportRequest(studies=[study]))
    [entry] = config.document["transformations"]
    assert entry["gate"]["basis"] == stored["basis"]
    assert config_read(config.document).transformations[0].gate.basis == stored["basis"]

    # The lock's audit event keeps the population's size, not its thousands of ids.
    lock = AuditEvent.objects.get(verb="study.lock", object_id=str(study.pk))
    assert "population" not in lock.payload["sample"][name] and lock.payload["sample"][name]["population_outputs"] == 40

    # The study page shows the judges' agreement, reading the judge cache once per question and judge
    # (the judges' table and the gate share it); annotators' pages are another matter (never these).
    calls = []
    real_lookup = judge_population_services.cached_judge_scores

    def counted(**kwargs):
        calls.append(kwargs["kind"])
        return real_lookup(**kwargs)

    monkeypatch.setattr(judge_population_services, "cached_judge_scores", counted)
    client.force_login(researcher)
    page = client.get(reverse("annotation:study", args=[study.pk])).content.decode()
    assert 'data-gate-judge="' in page and "every one of 40 outputs scored by one" in page
    assert sorted(calls) == ["fluency", "quality"]


@pytest.mark.usefixtures("judges")
def test_the_gate_waits_for_the_judges_and_a_changed_judge_voids_the_sequence(
    researcher, django_user_model, tmp_path, django_capture_on_commit_callbacks, settings
):
    with django_capture_on_commit_callbacks(execute=True):
        study, _ = _study(researcher, django_user_model, tmp_path, ("anna", "bob", "cara", "dan"), **PPI)
    everyone_rates(study)
    name = study.runs.get().transformation
    # Locking ran the judges; wipe their answers to see the gate wait.
    Judgement.objects.all().delete()
    [row] = adaptive_services.study_adaptive_rows(study=Study.objects.get(pk=study.pk))
    assert row.decision.state.value == "undecided"
    assert row.outcome.waiting_for_judge.startswith("waiting for the LLM judges to score every output of the run (0 of")
    with django_capture_on_commit_callbacks(execute=True):
        study_judge_population_start(study=Study.objects.get(pk=study.pk))
    adaptive_services.study_adaptive_check(study=Study.objects.get(pk=study.pk))
    started = Study.objects.get(pk=study.pk).sample_info["adaptive_judge"][name]
    # Another model behind the same judge alias: the sequence it began with no longer holds.
    settings.TRANSFORM_BACKENDS = {
        "one": {"BACKEND": "tests.test_judge_population.RuleJudge", "OPTIONS": {"model": "judge-one-v2"}}
    }
    reset_backends()
    [row] = adaptive_services.study_adaptive_rows(study=Study.objects.get(pk=study.pk))
    assert "waiting for the LLM judges" in row.outcome.waiting_for_judge  # the new model has scored nothing yet
    with django_capture_on_commit_callbacks(execute=True):
        study_judge_population_start(study=Study.objects.get(pk=study.pk))
    [row] = adaptive_services.study_adaptive_rows(study=Study.objects.get(pk=study.pk))
    assert row.decision.state.value == "undecided" and "voids" in row.outcome.waiting_for_judge
    assert Study.objects.get(pk=study.pk).sample_info["adaptive_judge"][name] == started


@pytest.mark.usefixtures("judges")
def test_the_command_starts_the_judges_and_status_says_what_the_gate_rests_on(
    researcher, django_user_model, tmp_path, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        study, _ = _study(researcher, django_user_model, tmp_path, ("anna", "bob", "cara", "dan"), **PPI)
    everyone_rates(study)
    out = StringIO()
    call_command("study", "judge", str(study.pk), stdout=out)
    assert "judge calls done (succeeded)" in out.getvalue()  # the job of the lock, reused
    out = StringIO()
    call_command("study", "status", str(study.pk), stdout=out)
    text = out.getvalue()
    assert "on LLM judge one on 40 outputs, corrected by" in text and "judge on quality: correlation" in text


@pytest.mark.usefixtures("judges")
def test_a_population_too_large_to_judge_is_refused_at_lock(researcher, django_user_model, tmp_path, monkeypatch):
    from annotation.studies import design_services

    monkeypatch.setattr(design_services, "MAX_JUDGED_OUTPUTS", 39)  # the run has 40 outputs
    with pytest.raises(ShiftlabError, match=r"random_keywords has 40 \(at most 39\)\. Nothing was written"):
        _study(researcher, django_user_model, tmp_path, ("anna", "bob", "cara", "dan"), **PPI)
    assert not Study.objects.filter(status=Study.Status.LOCKED).exists()
