"""A benchmark run in headless Chromium (issue 31), under the site's real Content-Security-Policy:
its page follows the run's progress in place (no reload), turns into a failure with Resume and
Retry when the run fails, and the run page, the launch form and the stored robustness report have
no serious or critical axe-core violation at 1400 and 390 px."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from core.roles import Role
from evaluation import benchmark_execution
from evaluation.benchmark_execution import benchmark_run_finalize
from evaluation.models import BenchmarkResult, BenchmarkRun, StoredRobustnessReport
from tests.browser_support import SCREENSHOTS, TIMEOUT_MS, chromium_browser, expect, log_in
from tests.support import benchmark_run_with_results, make_user

try:
    import axe_playwright_python
except ImportError:  # pragma: no cover - the test skips
    axe_playwright_python = None

pytestmark = [pytest.mark.services, pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WIDTHS = {1400: 800, 390: 780}
BLOCKING = ("serious", "critical")


def axe_problems(page, axe: str, name: str) -> list[str]:
    """Serious or critical axe-core violations, and a page wider than its viewport."""
    scroll, inner = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    wider = [f"{name}: the page is {scroll} px wide in a {inner} px viewport"] if scroll > inner else []
    page.evaluate(axe)
    found = page.evaluate("axe.run(document, {resultTypes: ['violations']})")["violations"]
    return wider + [
        f"{name}: {v['id']} ({v['impact']}) {[n['target'] for n in v['nodes'][:3]]}"
        for v in found
        if v["impact"] in BLOCKING
    ]


def test_a_run_page_follows_the_run_then_offers_resume_and_retry(live_server, django_user_model, monkeypatch):
    if axe_playwright_python is None:
        pytest.skip("needs axe-playwright-python (pip install -r requirements-dev.txt)")
    axe = (Path(axe_playwright_python.__file__).parent / "axe.min.js").read_text(encoding="utf-8")
    researcher = make_user(django_user_model, "grace", Role.RESEARCHER)
    queued = []  # the synthetic run has no units to execute: resuming records the dispatch only
    monkeypatch.setattr(benchmark_execution, "benchmark_run_dispatch", queued.append)
    run = benchmark_run_with_results()
    n_results = BenchmarkResult.objects.filter(run=run).count()
    BenchmarkRun.objects.filter(pk=run.pk).update(status="running", total=n_results + 1, done=n_results)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    problems: list[str] = []
    with chromium_browser() as browser:
        pages = {}
        for width, height in WIDTHS.items():
            context = browser.new_context(viewport={"width": width, "height": height}, locale="en-US")
            context.set_default_timeout(TIMEOUT_MS)
            pages[width] = context.new_page()
            log_in(pages[width], live_server.url, researcher.username)
        url = f"{live_server.url}/benchmarks/{run.pk}/"
        for width, page in pages.items():
            page.goto(url)
            expect(page.locator("#run-state")).to_contain_text(f"{n_results}/{n_results + 1} units scored")
            problems += axe_problems(page, axe, f"running run at {width} px")
            page.evaluate("window.notReloaded = true")
        # The run fails: each page shows it in place within a few seconds, with Resume and Retry.
        BenchmarkRun.objects.filter(pk=run.pk).update(
            status="failed", n_failed=1, error="alpha / sts_a / summary seed 2: the model process died"
        )
        started = time.monotonic()
        for width, page in pages.items():
            expect(page.locator("#run-badge")).to_contain_text("Failed", timeout=10_000)
            expect(page.get_by_role("button", name="Resume")).to_be_visible()
            assert page.evaluate("window.notReloaded === true"), "the page reloaded itself"
            problems += axe_problems(page, axe, f"failed run at {width} px")
            page.screenshot(path=str(SCREENSHOTS / f"benchmark-failed-{width}.png"))
        print(f"failure shown in place after {time.monotonic() - started:.1f} s")
        wide = pages[1400]
        with wide.expect_navigation():
            wide.get_by_role("button", name="Resume").click()
        expect(wide.locator(".messages")).to_contain_text("Resumed: 1 unit without a result queued again.")
        assert queued == [run.pk]
        # Retry: the launch form, filled in as the run was started.
        BenchmarkRun.objects.filter(pk=run.pk).update(status="failed")
        wide.goto(url)
        with wide.expect_navigation():
            wide.get_by_role("link", name="Retry with changes").click()
        expect(wide.locator("#bm-name")).to_have_value("robust")
        problems += axe_problems(wide, axe, "launch form at 1400 px")
        # The report, stored when the run ended.
        BenchmarkRun.objects.filter(pk=run.pk).update(status="running", total=n_results, done=0)
        benchmark_run_finalize(run_id=run.pk)
        assert StoredRobustnessReport.objects.filter(run=run).exists()
        for width, page in pages.items():
            page.goto(f"{url}report/")
            expect(page.locator("#report-computed")).to_contain_text("when the run ended")
            problems += axe_problems(page, axe, f"report at {width} px")
    assert not problems, "\n".join(problems)
