"""A config is only as good as its evidence (issue 27, finding 7).

A run re-checks, when it is created and when its first task starts, that the evidence each approved
transformation of the config names still holds: the gate result is still the current one and
passed, its approval stands, the study was not revised and no rating changed since the gate.
Otherwise the run is refused with what changed, unless the researcher runs it anyway, which the
run records and shows (page, API, report, result files). Configs signed with Shiftlab's public
development key are labelled so everywhere, never called validated, and production refuses them."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from annotation.models import Annotator, Approval, BenchmarkConfig, GateResult, RaterDecision, Study
from evaluation.benchmark_execution import benchmark_unit_execute
from evaluation.benchmark_services import benchmark_run_create_from_config
from evaluation.models import BenchmarkResult, BenchmarkRun
from evaluation.tasks import start_benchmark_run
from tests.support import api_as, page_as
from tests.test_config_forgery import INTERFACES, LIMIT, MODEL, export, refused  # noqa: F401

pytestmark = pytest.mark.django_db
DEV_LABEL = "signed with the development key"


def fail_the_gate_again(config: BenchmarkConfig, researcher) -> GateResult:
    """What ``study_gate`` stores when the study is gated again after more ratings and fails."""
    entry = config.document["transformations"][0]
    first = GateResult.objects.get(pk=entry["gate"]["id"])
    return GateResult.objects.create(
        study=first.study,
        transformation=first.transformation,
        passed=False,
        evidence={"state": "failed", "reasons": ["quality mean 2.10 < 3"]},
        evidence_hash="f" * 64,
        created_by=researcher,
    )


@pytest.mark.parametrize("interface", INTERFACES)
def test_a_config_whose_gate_later_failed_is_refused_everywhere(export, researcher, interface, request):  # noqa: F811
    config = export()
    later = fail_the_gate_again(config, researcher)
    shown = refused(interface, config.json_text, "json", request=request)
    assert "the evidence behind the config changed since it was exported" in shown, shown
    assert f"random_keywords (forgery v1): a later gate (result {later.pk}" in shown and "failed" in shown, shown
    assert "run it anyway" in shown


def test_each_change_of_evidence_is_named(export, researcher):  # noqa: F811
    config = export()
    gate = GateResult.objects.get(pk=config.document["transformations"][0]["gate"]["id"])
    study = gate.study
    changes = {
        "ratings": lambda: Study.objects.filter(pk=study.pk).update(ratings_changed_at=timezone.now()),
        "revised": lambda: Study.objects.create(
            name=study.name,
            version=2,
            previous=study,
            project=study.project,
            design=study.design,
            design_hash=study.design_hash,
            status=Study.Status.LOCKED,  # a draft revision is only a proposal: it voids nothing
        ),
        "rejected": lambda: RaterDecision.objects.create(
            annotator=Annotator.objects.create(study=study, user=researcher),
            reason=RaterDecision.Reason.choices[0][0],
            detail="failed the control check",
        ),
        "approval": lambda: Approval.objects.filter(gate_result=gate).delete(),
    }
    messages = {
        "ratings": "ratings changed since the gate",
        "revised": "the study was revised: forgery v2 replaces v1",
        "rejected": "annotators rejected since the gate (rita)",
        "approval": "its approval was withdrawn",
    }
    for name, change in changes.items():
        change()
        with pytest.raises(Exception) as raised:
            benchmark_run_create_from_config(text=config.json_text, fmt="json", models=[MODEL], dispatch=False)
        assert messages[name] in str(raised.value), (name, str(raised.value))


def test_a_draft_revision_voids_nothing(export):  # noqa: F811
    """A revision in draft is a proposal: the config's evidence holds until a newer version is locked."""
    config = export()
    study = GateResult.objects.get(pk=config.document["transformations"][0]["gate"]["id"]).study
    Study.objects.create(
        name=study.name,
        version=2,
        previous=study,
        project=study.project,
        design=study.design,
        design_hash=study.design_hash,
    )
    run = benchmark_run_create_from_config(text=config.json_text, fmt="json", models=[MODEL], dispatch=False)
    assert not run.evidence_override


def test_running_anyway_records_the_reasons_and_shows_them(export, researcher, tmp_path):  # noqa: F811
    config = export()
    later = fail_the_gate_again(config, researcher)
    reason = f"a later gate (result {later.pk}"
    runs = [
        benchmark_run_create_from_config(
            text=config.json_text, fmt="json", models=[MODEL], limit=LIMIT, evidence_override=True, dispatch=False
        )
    ]
    path = tmp_path / "config.json"
    path.write_text(config.json_text, encoding="utf-8")
    out = io.StringIO()
    call_command(
        "benchmark", "run", "--config", str(path), "--models", MODEL, "--limit", str(LIMIT), "--run-anyway", stdout=out
    )
    assert "ran anyway" in out.getvalue()
    runs.append(BenchmarkRun.objects.latest("pk"))
    api = api_as(researcher)
    created = api.post(
        "/api/benchmark-runs/",
        {"models": [MODEL], "config_id": config.pk, "limit": LIMIT, "run_anyway": True},
        format="json",
    )
    assert created.status_code == 201, created.content
    runs.append(BenchmarkRun.objects.get(pk=created.json()["id"]))
    page = page_as(researcher).post(
        reverse("evaluation:benchmarks"),
        {
            "models": MODEL,
            "limit": str(LIMIT),
            "config_file": SimpleUploadedFile("config.json", config.json_text.encode()),
            "run_anyway": "on",
        },
    )
    assert page.status_code == 302
    runs.append(BenchmarkRun.objects.latest("pk"))
    for run in runs:
        assert run.evidence_override["by"] == ("rita" if run.created_by else "")
        assert any(reason in r for r in run.evidence_override["reasons"]), run.evidence_override
        shown = api.get(f"/api/benchmark-runs/{run.pk}/").json()
        assert any(reason in r for r in shown["evidence_override"]["reasons"])
        assert any(
            reason in r for r in api.get(f"/api/benchmark-runs/{run.pk}/report/").json()["evidence_override"]["reasons"]
        )
        detail = page_as(researcher).get(reverse("evaluation:benchmark", args=[run.pk])).content.decode()
        assert "Run anyway" in detail and f"result {later.pk}" in detail
    original = next(u for u in runs[0].plan["units"] if u["transformation"] == "original")
    assert benchmark_unit_execute(run_id=runs[0].pk, unit=original)
    written = json.loads(Path(BenchmarkResult.objects.get(run=runs[0]).result_path).read_text(encoding="utf-8"))
    assert written["shiftlab"]["evidence_override"] == runs[0].evidence_override


def test_the_start_task_rechecks_the_evidence(export, researcher):  # noqa: F811
    config = export()
    run = benchmark_run_create_from_config(
        text=config.json_text, fmt="json", models=[MODEL], limit=LIMIT, created_by=researcher, dispatch=False
    )
    later = fail_the_gate_again(config, researcher)
    start_benchmark_run.apply(args=(run.pk,))
    run.refresh_from_db()
    assert run.status == BenchmarkRun.Status.FAILED and run.done == 0
    assert f"a later gate (result {later.pk}" in run.error and "run it anyway" in run.error


# --- the development key ------------------------------------------------------------------------


@pytest.mark.parametrize("interface", INTERFACES)
def test_production_refuses_a_config_signed_with_the_development_key(export, interface, settings, request):  # noqa: F811
    settings.CONFIG_SIGNING_KEY = settings.DEV_CONFIG_SIGNING_KEY  # anyone can sign with the public key
    config = export()
    BenchmarkConfig.objects.filter(pk=config.pk).delete()
    settings.CONFIG_SIGNING_KEY = "this-production-deployments-own-key"
    settings.DEVELOPMENT_SECRETS_ALLOWED = False
    shown = refused(interface, config.json_text, "json", request=request)
    assert "signed with Shiftlab's public development key" in shown and "production refuses" in shown, shown


def test_the_demo_labels_development_key_configs_and_never_calls_them_validated(export, researcher, tmp_path):  # noqa: F811
    config = export()  # the demo's key is the development key
    api = api_as(researcher)
    facts = api.post(
        "/api/benchmark-configs/verify/", {"text": config.json_text, "format": "json"}, format="json"
    ).json()
    assert facts["accepted"] is True and facts["development_key"] is True and DEV_LABEL in facts["detail"]
    listed = api.get(f"/api/benchmark-configs/{config.pk}/").json()
    assert listed["development_key"] is True
    path = tmp_path / "config.json"
    path.write_text(config.json_text, encoding="utf-8")
    out = io.StringIO()
    call_command("benchmark_config", "verify", str(path), stdout=out)
    assert DEV_LABEL in out.getvalue(), out.getvalue()
    out = io.StringIO()
    call_command("benchmark_config", "export", "--out", str(tmp_path / "again.json"), stdout=out)
    assert DEV_LABEL in out.getvalue(), out.getvalue()
    exports = page_as(researcher).get(reverse("annotation:exports")).content.decode()
    assert DEV_LABEL in exports
    run = benchmark_run_create_from_config(
        text=config.json_text, fmt="json", models=[MODEL], limit=LIMIT, created_by=researcher, dispatch=False
    )
    detail = page_as(researcher).get(reverse("evaluation:benchmark", args=[run.pk])).content.decode()
    assert DEV_LABEL in detail and "validated config" not in detail
    assert api.get(f"/api/benchmark-runs/{run.pk}/").json()["config_development_key"] is True
