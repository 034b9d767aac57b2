"""Shared pieces of the browser tests (tests/test_browser.py, tests/test_browser_walk.py): Debian's
Chromium driven by Playwright (never ``playwright install``), logging in and uploading a dataset."""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.conf import settings

from tests.support import PASSWORD, require_or_skip

try:
    from playwright.sync_api import expect, sync_playwright
except ImportError:  # pragma: no cover - chromium_browser reports it
    expect = sync_playwright = None

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
BASE_DIR = Path(settings.BASE_DIR)
DEMO_STS = BASE_DIR / "fixtures" / "sts" / "demo-sts.csv"
SCREENSHOTS = BASE_DIR / "var" / "screenshots"
DOC_SCREENSHOTS = BASE_DIR / "docs" / "screenshots"
TIMEOUT_MS = 60_000


@contextmanager
def chromium_browser():
    """One headless Chromium. Playwright's sync API keeps an asyncio loop running in the main
    thread, so Django's ORM there (fixtures, assertions, the transactional flush) would raise
    SynchronousOnlyOperation: allow it while the browser lives, and restore the variable after."""
    if not (CHROMIUM.is_file() and os.access(CHROMIUM, os.X_OK)):
        require_or_skip(f"browser tests need Chromium at {CHROMIUM} (apt-get install chromium)")
    if sync_playwright is None:
        require_or_skip("browser tests need the playwright package (pip install -r requirements-dev.txt)")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        playwright = sync_playwright().start()
        try:
            chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
            try:
                yield chromium
            finally:
                chromium.close()
        finally:
            playwright.stop()


def log_in(page, base_url: str, username: str) -> None:
    page.goto(f"{base_url}/accounts/login/")
    page.locator("#id_username").fill(username)
    page.locator("#id_password").fill(PASSWORD)
    with page.expect_navigation():
        page.get_by_role("button", name="Log in", exact=True).click()
    assert "/accounts/login/" not in page.url, f"login as {username} failed: still on {page.url}"
    expect(page.locator("header .user")).to_contain_text(username)


def upload(page, base_url: str, *, source: Path, name: str, task: str = "sts", columns: str = ""):
    """Fill and submit the upload form; return the response of the page it lands on."""
    response = page.goto(f"{base_url}/datasets/")
    assert response is not None and response.status == 200
    form = page.locator("#upload-form")
    form.locator("input[name=files]").set_input_files(str(source))
    form.locator("input[name=name]").fill(name)
    form.locator("select[name=task]").select_option(task)
    form.locator("input[name=columns]").fill(columns)
    with page.expect_navigation() as navigation:
        form.get_by_role("button", name="Import").click()
    return navigation.value
