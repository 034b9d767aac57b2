"""docs/tutorial.md, run as written: every command of its ```bash tutorial blocks in order, against a
test database seeded as ``make demo`` seeds it, with the embedded LLM (SmolLM2) and a real local
Argilla server; the annotator's step (rating in Argilla) goes through Argilla's REST API with the
password the annotator chose on My Argilla account, and each demo page the tutorial names is opened in headless
Chromium and photographed (``docs/screenshots/tutorial-*.png`` with SHIFTLAB_UPDATE_SCREENSHOTS=1,
else ``var/screenshots/``).

SmolLM2 is a poor paraphraser: the test checks that the walk-through works, not the science.
"""

from __future__ import annotations

import io
import os
import re
import shlex
from pathlib import Path

import httpx
import pytest
from django.core.management import call_command, get_commands
from django.test import Client
from django.urls import reverse

from annotation.models import StudyItem
from evaluation.models import BenchmarkRun
from tests.argilla_ui import answer, respond
from tests.browser_support import BASE_DIR, DOC_SCREENSHOTS, SCREENSHOTS, chromium_browser, log_in
from tests.support import PASSWORD, argilla_pending

TUTORIAL = BASE_DIR / "docs" / "tutorial.md"
COMMAND_PREFIX = ".venv/bin/python manage.py "
DEMO_URL = "http://127.0.0.1:8000"


def tutorial_commands(text: str) -> list[list[str]]:
    """The argument lists of the commands in the ```bash tutorial blocks, in order."""
    commands = []
    for block in re.findall(r"^```bash tutorial\n(.*?)^```", text, flags=re.S | re.M):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            if not line.startswith(COMMAND_PREFIX):
                raise ValueError(f"a tutorial command must start with {COMMAND_PREFIX!r}: {line!r}")
            commands.append(shlex.split(line.removeprefix(COMMAND_PREFIX)))
    return commands


def tutorial_pages(text: str) -> list[str]:
    """The paths of the demo's pages the tutorial sends the reader to, in order, once each."""
    return list(dict.fromkeys(re.findall(rf"<{re.escape(DEMO_URL)}(/[^>]*)>", text)))


def screenshot_path(name: str) -> Path:
    folder = DOC_SCREENSHOTS if os.environ.get("SHIFTLAB_UPDATE_SCREENSHOTS") == "1" else SCREENSHOTS
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"tutorial-{name}.png"


def page_name(path: str) -> str:
    return "-".join(part for part in path.split("/") if part) or "home"


def test_tutorial_commands_name_real_commands():
    text = TUTORIAL.read_text()
    commands = tutorial_commands(text)
    assert len(commands) >= 10
    unknown = {args[0] for args in commands} - set(get_commands())
    assert not unknown, f"docs/tutorial.md uses unknown management commands: {sorted(unknown)}"
    assert [args[:2] for args in commands if args[0] == "study"][:3] == [
        ["study", "create"],
        ["study", "lock"],
        ["study", "publish"],
    ]
    assert "/benchmarks/1/report/" in tutorial_pages(text)


def sign_in_to_argilla(url: str, username: str, password: str) -> httpx.Client:
    """What the annotator does on Argilla's sign-in page, through its API: a bearer token."""
    response = httpx.post(f"{url}/api/v1/token", data={"username": username, "password": password}, trust_env=False)
    token = response.raise_for_status().json()["access_token"]
    return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30, trust_env=False)


def rate_as_annotator(argilla_url: str, publish_output: str) -> int:
    """Step 4 of the tutorial: ``annotator`` chooses an Argilla password on My Argilla account
    (publishing printed none), signs in to Argilla with it, photographs the first record and
    answers every record as a careful person would. Returns how many were answered. The browser
    closes before the tutorial goes on: its event loop would stop the LLM backend's."""
    assert "New Argilla account annotator: they set its password themselves" in publish_output, publish_output
    shiftlab = Client()
    assert shiftlab.login(username="annotator", password=PASSWORD)
    password = "annotator-chose-1"
    chosen = {"current_password": PASSWORD, "password": password, "password_again": password}
    assert shiftlab.post(reverse("annotation:my-argilla"), chosen).status_code == 302
    client = sign_in_to_argilla(argilla_url, "annotator", password)
    datasets = client.get("/api/v1/me/datasets").raise_for_status().json()["items"]
    assert [d["name"] for d in datasets] == ["tutorial v1: items for annotator"], "the tutorial names the dataset"

    with chromium_browser() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(f"{argilla_url}/sign-in")
        page.locator("input[name=Username]").fill("annotator")
        page.locator("input[name=Password]").fill(password)
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(f"{argilla_url}/")
        page.goto(f"{argilla_url}/dataset/{datasets[0]['id']}/annotation-mode")
        page.locator("label[for=quality_4]").wait_for()
        page.screenshot(path=str(screenshot_path("argilla-rating")), full_page=True)

    kinds = {item.external_id: item for item in StudyItem.objects.filter(study__name="tutorial")}
    records = argilla_pending(client, datasets[0]["id"])
    for record in records:
        respond(client, record["id"], "submitted", answer(kinds[record["external_id"]]))
    return len(records)


@pytest.mark.services
@pytest.mark.django_db(transaction=True, reset_sequences=True)
def test_tutorial_runs_as_written(llm_backend, argilla_server, live_server, settings, tmp_path, monkeypatch):
    settings.ARGILLA_API_URL, settings.ARGILLA_API_KEY = argilla_server.url, argilla_server.api_key
    settings.DATA_DIR = tmp_path / "var"
    settings.MEDIA_ROOT = tmp_path / "var" / "media"
    # The tutorial's relative paths (fixtures/ to read, var/ to write) from a folder of the test's own.
    (tmp_path / "var").mkdir()
    (tmp_path / "fixtures").symlink_to(BASE_DIR / "fixtures")
    monkeypatch.chdir(tmp_path)
    text = TUTORIAL.read_text()
    call_command("seed_demo", password=PASSWORD, stdout=io.StringIO())  # what `make demo` does first

    outputs: dict[str, str] = {}
    for args in tutorial_commands(text):
        out = io.StringIO()
        call_command(*args, stdout=out, stderr=io.StringIO())
        outputs[" ".join(args[:2])] = out.getvalue()
        if args[:2] == ["study", "publish"]:
            assert rate_as_annotator(argilla_server.url, out.getvalue()) == 6  # 4 items + 2 controls

    # What the tutorial says the commands print.
    assert "Run 1: paraphrase on my-sts" in outputs["transform --dataset"]
    assert 'Control checks: {"annotator": "passed"}' in outputs["study validate"]
    assert "paraphrase: PASSED" in outputs["study gate"]
    assert "verifies" in outputs["benchmark_config verify"]
    run = BenchmarkRun.objects.get(pk=1)
    assert run.status == "succeeded", run.error
    assert {r.transformation for r in run.results.all()} == {"original", "paraphrase"}
    assert "paraphrase" in outputs["benchmark results"]
    assert (tmp_path / "var" / "reports" / "1").is_dir()

    # Every page the tutorial names, as the researcher sees it.
    with chromium_browser() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900}, locale="en-US")
        log_in(page, live_server.url, "researcher")
        for path in tutorial_pages(text):
            response = page.goto(f"{live_server.url}{path}")
            assert response is not None and response.status == 200, f"{path}: HTTP {response and response.status}"
            page.screenshot(path=str(screenshot_path(page_name(path))), full_page=True)
