"""A voided config stays voided when it is renamed and signed again (issue 39, finding 5).

Renaming a config changes its hash, so it is no longer one of this deployment's exports; signing
it again (with the public development key on the demo, or with the server's own key) made it
acceptable, and the evidence check used to run only for registered configs. The check now runs
for every config that names studies of this deployment, registered or not, whoever signed it:
the same refusal on the service, the command, the API and the page, and at the start task."""

from __future__ import annotations

import pytest
from django.utils import timezone

from annotation.configs.config_export import HASH_KEY, config_render, config_seal
from annotation.models import BenchmarkConfig, GateResult, Study
from evaluation.benchmark_services import benchmark_run_create_from_config
from evaluation.models import BenchmarkRun
from evaluation.tasks import start_benchmark_run
from tests.test_config_forgery import INTERFACES, LIMIT, MODEL, export, refused  # noqa: F401

pytestmark = pytest.mark.django_db


def _renamed(config: BenchmarkConfig, *, key: str) -> str:
    """The export under another name, sealed again with ``key`` (as anyone holding the key can)."""
    document = config_seal({**config.document, "name": "renamed"}, key=key)
    assert not BenchmarkConfig.objects.filter(config_hash=document[HASH_KEY]).exists()  # not registered here
    return config_render(document, "json")


def _change_ratings(config: BenchmarkConfig) -> Study:
    study = GateResult.objects.get(pk=config.document["transformations"][0]["gate"]["id"]).study
    Study.objects.filter(pk=study.pk).update(ratings_changed_at=timezone.now())
    return study


@pytest.mark.parametrize("interface", INTERFACES)
def test_a_voided_config_renamed_and_resigned_with_the_development_key_is_refused(
    export,  # noqa: F811
    interface,
    settings,
    request,
):
    settings.CONFIG_SIGNING_KEY = settings.DEV_CONFIG_SIGNING_KEY  # the demo signs with the public key
    config = export()
    _change_ratings(config)
    text = _renamed(config, key=settings.DEV_CONFIG_SIGNING_KEY)
    shown = refused(interface, text, "json", request=request)
    assert "the evidence behind the config changed since it was exported" in shown, shown
    assert "random_keywords (forgery v1): ratings changed since the gate" in shown, shown
    assert "run it anyway" in shown


def test_a_voided_config_resigned_with_the_servers_own_key_is_refused(export, settings):  # noqa: F811
    settings.CONFIG_SIGNING_KEY = "this-deployments-own-key"
    config = export()
    _change_ratings(config)
    with pytest.raises(Exception, match="ratings changed since the gate"):
        benchmark_run_create_from_config(
            text=_renamed(config, key="this-deployments-own-key"), fmt="json", models=[MODEL], dispatch=False
        )
    assert not BenchmarkRun.objects.exists()


def test_a_renamed_config_whose_evidence_holds_is_accepted_and_rechecked_at_start(export, researcher, settings):  # noqa: F811
    settings.CONFIG_SIGNING_KEY = settings.DEV_CONFIG_SIGNING_KEY
    config = export()
    text = _renamed(config, key=settings.DEV_CONFIG_SIGNING_KEY)
    run = benchmark_run_create_from_config(
        text=text, fmt="json", models=[MODEL], limit=LIMIT, created_by=researcher, dispatch=False
    )
    assert not run.evidence_override
    _change_ratings(config)
    start_benchmark_run.apply(args=(run.pk,))
    run.refresh_from_db()
    assert run.status == BenchmarkRun.Status.FAILED and run.done == 0
    assert "ratings changed since the gate" in run.error and "run it anyway" in run.error


def test_a_voided_config_whose_study_is_renamed_inside_is_still_refused(export, researcher, settings):  # noqa: F811
    """Renaming the study (and changing its design hash) in the config keeps the gate result it
    names: a gate result of the run's project is checked whatever the config calls its study."""
    settings.CONFIG_SIGNING_KEY = settings.DEV_CONFIG_SIGNING_KEY
    config = export()
    _change_ratings(config)
    document = dict(config.document)
    document["transformations"] = [
        {**entry, "study": {**entry["study"], "name": "innocent", "version": 9, "design_hash": "0" * 64}}
        for entry in document["transformations"]
    ]
    text = config_render(config_seal({**document, "name": "renamed"}, key=settings.DEV_CONFIG_SIGNING_KEY), "json")
    with pytest.raises(Exception, match="no longer the one the config names|ratings changed since the gate"):
        benchmark_run_create_from_config(
            text=text, fmt="json", models=[MODEL], limit=LIMIT, created_by=researcher, dispatch=False
        )
    assert not BenchmarkRun.objects.exists()
