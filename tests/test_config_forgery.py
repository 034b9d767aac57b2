"""Benchmark configs cannot be forged: a run accepts a config only when this deployment exported it
or it is signed with this deployment's key. Forged and malformed configs are refused with a clear
message by the service, the commands, the API and the page, and nothing is created."""

from __future__ import annotations

import copy
import html
import io
import json
from collections.abc import Callable

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from annotation.configs.config_export import HASH_KEY, SIGNATURE_KEY, config_hash, config_render, signing_key_id
from annotation.export_services import BenchmarkConfigExportRequest, benchmark_config_export
from annotation.models import BenchmarkConfig
from core.errors import ShiftlabError
from evaluation.benchmark_services import benchmark_run_create_from_config
from evaluation.models import BenchmarkRun
from tests.support import keywords_approved, published_keyword_study
from transforms.models import TransformRun

pytestmark = pytest.mark.django_db
MODEL = "all-MiniLM-L6-v2"
LIMIT = 5  # the study run's item limit, so an accepted run reuses it
INTERFACES = ("service", "cli", "api", "page")


@pytest.fixture
def export(researcher, tmp_path, settings) -> Callable[[], BenchmarkConfig]:
    """Exports the approved random-keywords transformation of a study (a real export)."""
    settings.DATA_DIR = tmp_path
    settings.EMBEDDING_CACHE_DIR = tmp_path / "embeddings"
    study = published_keyword_study(researcher=researcher, name="forgery", limit=LIMIT, items=6, batch_size=3)
    keywords_approved(study, researcher, comment="meaning kept")
    return lambda: benchmark_config_export(actor=researcher, request=BenchmarkConfigExportRequest(name="real"))


def forge(config: BenchmarkConfig, edit: Callable[[dict], None], *, strip_signature: bool, fmt: str = "json") -> str:
    """The export with ``edit`` applied and its hash recomputed, as a forger would."""
    document = copy.deepcopy(config.document)
    edit(document)
    if strip_signature:
        del document[SIGNATURE_KEY]
    document[HASH_KEY] = config_hash(document)
    return config_render(document, fmt)


def add_paraphrase(document: dict) -> None:
    entry = copy.deepcopy(document["transformations"][0])
    entry["transformation"] = "paraphrase"
    document["transformations"].append(entry)


def reseed(document: dict) -> None:
    document["transformations"][0]["runs"][0]["seed"] = 99


def drop_generator(document: dict) -> None:
    del document["transformations"][0]["runs"][0]["generator"]


def attempt(interface: str, text: str, fmt: str, *, request) -> str | BenchmarkRun:
    """Start a run from ``text`` through ``interface``: the run, or the message the user sees."""
    common = {"models": [MODEL], "limit": LIMIT}
    if interface == "service":
        try:
            return benchmark_run_create_from_config(text=text, fmt=fmt, dispatch=False, **common)
        except ShiftlabError as exc:
            return str(exc)
    if interface == "cli":
        path = request.getfixturevalue("tmp_path") / f"config.{fmt}"
        path.write_text(text, encoding="utf-8")
        try:
            call_command(
                "benchmark",
                "run",
                "--config",
                str(path),
                "--models",
                MODEL,
                "--limit",
                str(LIMIT),
                stdout=io.StringIO(),
            )
        except CommandError as exc:
            return str(exc)
        return BenchmarkRun.objects.latest("pk")
    if interface == "api":
        response = request.getfixturevalue("researcher_client").post(
            "/api/benchmark-runs/", {**common, "config_text": text, "config_format": fmt}, format="json"
        )
        if response.status_code == 201:
            return BenchmarkRun.objects.get(pk=response.json()["id"])
        assert response.status_code == 400, response.content
        return response.json()["detail"]
    client = request.getfixturevalue("client")
    client.force_login(request.getfixturevalue("researcher"))
    upload = SimpleUploadedFile(f"config.{fmt}", text.encode("utf-8"))
    response = client.post(
        reverse("evaluation:benchmarks"), {"models": MODEL, "limit": str(LIMIT), "config_file": upload}
    )
    if response.status_code == 302:
        return BenchmarkRun.objects.latest("pk")
    assert response.status_code == 200, response.status_code
    page = html.unescape(response.content.decode())
    return page[page.index('class="message') :][:2000] if 'class="message' in page else page


def refused(interface: str, text: str, fmt: str, *, request) -> str:
    transform_runs = TransformRun.objects.count()
    outcome = attempt(interface, text, fmt, request=request)
    assert isinstance(outcome, str), f"{interface} accepted it: run {outcome.pk}"
    assert not BenchmarkRun.objects.exists() and TransformRun.objects.count() == transform_runs
    return outcome


def accepted(interface: str, text: str, fmt: str, *, request) -> BenchmarkRun:
    outcome = attempt(interface, text, fmt, request=request)
    assert isinstance(outcome, BenchmarkRun), f"{interface} refused it: {outcome}"
    assert [t["transformation"] for t in outcome.plan["transformations"]] == ["random_keywords"]
    return outcome


# --- forged configs -----------------------------------------------------------------------------


@pytest.mark.parametrize("interface", INTERFACES)
@pytest.mark.parametrize(
    ("edit", "strip_signature", "message"),
    [
        (
            add_paraphrase,
            True,
            "not exported by this deployment (no export has hash {hash}) and it carries no signature",
        ),
        (
            add_paraphrase,
            False,
            "its signature does not match this server's key: it names this server's key but does not match "
            "the content (the content was changed after it was signed)",
        ),
        (reseed, False, "does not match the content (the content was changed after it was signed)"),
    ],
    ids=["added-unsigned", "added-old-signature", "reseeded"],
)
def test_a_forged_config_is_refused_everywhere_and_creates_nothing(
    export, interface, edit, strip_signature, message, request
):
    config = export()
    text = forge(config, edit, strip_signature=strip_signature)
    shown = refused(interface, text, "json", request=request)
    forged_hash = config_hash(json.loads(text))
    assert "the benchmark config is refused" in shown, shown
    assert message.format(hash=forged_hash) in shown, shown
    assert "SHIFTLAB_CONFIG_SIGNING_KEY" in shown


def test_verify_reports_the_three_facts(export, researcher_client, tmp_path):
    config = export()
    forged = forge(config, add_paraphrase, strip_signature=True)
    cases = {
        "real": (config.json_text, True, True, "valid"),
        "forged": (forged, True, False, "absent"),
        "edited": (config.json_text.replace("meaning kept", "meaning Kept"), False, None, None),
    }
    for name, (text, content_ok, registered, signature) in cases.items():
        body = researcher_client.post("/api/benchmark-configs/verify/", {"text": text, "format": "json"}, format="json")
        assert body.status_code == 200
        facts = body.json()
        assert (facts["content_ok"], facts["registered"], facts["signature"]) == (content_ok, registered, signature), (
            name
        )
        assert facts["accepted"] is (name == "real") and facts["detail"], name
        path = tmp_path / f"{name}.json"
        path.write_text(text, encoding="utf-8")
        out, err = io.StringIO(), io.StringIO()
        if name == "real":
            call_command("benchmark_config", "verify", str(path), stdout=out, stderr=err)
            assert "registered here: yes" in out.getvalue() and "signature: valid" in out.getvalue()
            continue
        with pytest.raises(CommandError) as raised:
            call_command("benchmark_config", "verify", str(path), stdout=out, stderr=err)
        if name == "forged":
            assert "content: OK" in out.getvalue() and "registered here: no" in out.getvalue()
            assert "signature: absent" in out.getvalue() and "carries no signature" in str(raised.value)
        else:
            assert "content hash mismatch" in err.getvalue() and "does not verify" in str(raised.value)


# --- configs from other deployments -------------------------------------------------------------


@pytest.mark.parametrize("interface", INTERFACES)
def test_this_deployments_export_is_accepted(export, interface, request):
    config = export()
    fmt = "yaml" if interface in ("cli", "page") else "json"
    run = accepted(interface, config.yaml_text if fmt == "yaml" else config.json_text, fmt, request=request)
    assert run.config_hash == config.config_hash


def test_a_stored_export_is_accepted_by_id(export, researcher_client):
    config = export()
    response = researcher_client.post(
        "/api/benchmark-runs/", {"models": [MODEL], "config_id": config.pk, "limit": LIMIT}, format="json"
    )
    assert response.status_code == 201, response.content


@pytest.mark.parametrize("interface", INTERFACES)
def test_a_config_signed_elsewhere_with_the_same_key_is_accepted(export, interface, settings, request):
    settings.CONFIG_SIGNING_KEY = "a-key-two-deployments-share"
    config = export()
    BenchmarkConfig.objects.filter(pk=config.pk).delete()  # exported on the other deployment
    run = accepted(interface, config.json_text, "json", request=request)
    assert run.config_hash == config.config_hash


@pytest.mark.parametrize("interface", INTERFACES)
def test_a_config_signed_with_another_key_is_refused(export, interface, settings, request):
    settings.CONFIG_SIGNING_KEY = "the-other-deployments-key"
    config = export()
    BenchmarkConfig.objects.filter(pk=config.pk).delete()
    settings.CONFIG_SIGNING_KEY = "this-deployments-key"
    shown = refused(interface, config.json_text, "json", request=request)
    assert "signature does not match this server's key" in shown, shown
    assert signing_key_id("the-other-deployments-key") in shown and signing_key_id("this-deployments-key") in shown


# --- malformed configs --------------------------------------------------------------------------

ALIAS_BOMB = "\n".join(
    ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    + [f"a{n}: &a{n} [" + ",".join([f"*a{n - 1}"] * 9) + "]" for n in range(1, 10)]
)


@pytest.mark.parametrize("interface", INTERFACES)
def test_a_malformed_config_is_refused_with_the_bad_field_named(export, interface, request):
    config = export()
    cases = [
        (ALIAS_BOMB, "yaml", "YAML anchors and aliases (&/*) are not allowed"),
        (forge(config, drop_generator, strip_signature=False), "json", "transformations[0].runs[0].generator: missing"),
        (
            forge(config, lambda d: d["transformations"][0]["runs"][0].update(seed="1"), strip_signature=False),
            "json",
            "transformations[0].runs[0].seed: expected an integer, got a string",
        ),
        (
            forge(config, lambda d: d.update(transformations=[]), strip_signature=True),
            "json",
            "transformations: must not be empty",
        ),
        ("[]", "json", "the file holds a list, not a benchmark config mapping"),
        ('{"schema": "x", "schema": "y"}', "json", "duplicate key 'schema'"),
    ]
    for text, fmt, message in cases:
        shown = refused(interface, text, fmt, request=request)
        assert "does not verify" in shown and message in shown, (message, shown)


def test_a_missing_key_that_used_to_be_a_key_error_is_a_clear_error(export):
    # Before the typed schema this self-consistent document passed verification and failed with a
    # KeyError in the plan; the signature was not asked for.
    config = export()
    text = forge(config, drop_generator, strip_signature=True)
    with pytest.raises(ShiftlabError, match=r"transformations\[0\]\.runs\[0\]\.generator: missing"):
        benchmark_run_create_from_config(text=text, fmt="json", models=[MODEL], dispatch=False)
