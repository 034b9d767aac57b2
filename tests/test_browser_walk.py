"""The whole loop walked through the pages in headless Chromium (issue 20): import, transform,
judge, study, a rating in the Argilla web UI, sync, validate, gate, approve, export, benchmark,
report and human baseline, which is published, answered (by the LLM and two annotators), synced
and closed with its page's buttons; then the annotator's own home (issue 31).

Every page is opened at 1400 px and 390 px wide (and re-laid out at 360 px): nothing may be wider
than the viewport (``scrollWidth <= innerWidth``), and axe-core (shipped by the
``axe-playwright-python`` package) may find no serious or critical violation. A viewport
screenshot of each page at both widths goes to ``var/screenshots/walk-*.png``; with
SHIFTLAB_UPDATE_SCREENSHOTS=1 they are also copied to ``docs/screenshots/``.

Real services: the embedded LLM (SmolLM2, a poor generator and judge: the walk checks the pages,
not the science), a local Argilla server, MiniLM for the benchmark. Celery runs eagerly, so every
queued job has ended when its page answers. Every step goes through its page's form; the only
ratings not clicked in Argilla's web UI are the rest of the annotators' queues, submitted through
Argilla's REST API with each annotator's own key.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

import pytest
from django.urls import reverse

from annotation.argilla import client as argilla
from annotation.models import Annotator, BaselineAnnotator, BaselineAnswer, BaselineStudy, Study, StudyItem
from core.roles import Role
from tests.argilla_ui import answer, rate_in_ui, respond
from tests.browser_support import (
    DEMO_STS,
    DOC_SCREENSHOTS,
    SCREENSHOTS,
    TIMEOUT_MS,
    chromium_browser,
    expect,
    log_in,
    upload,
)
from tests.support import PASSWORD, argilla_annotator_client, argilla_pending, make_user
from tests.test_vocabulary_pages import code_names_in, prose

try:
    import axe_playwright_python
except ImportError:  # pragma: no cover - the fixture below reports it
    axe_playwright_python = None

pytestmark = [pytest.mark.services, pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WIDE, NARROW, NARROWEST = 1400, 390, 360
HEIGHTS = {WIDE: 800, NARROW: 780}
BLOCKING_IMPACTS = ("serious", "critical")
SCREENSHOT_MAX_BYTES = 200_000  # a text-dense page (the annotators page with its carefulness rates) is ~182 KB
# Few, short texts: SmolLM2 on a CPU shared with the rest of the suite.
RUN_SETTINGS = {"seed": "1337", "limit": "3", "temperature": "0.7", "max_tokens": "48", "max_attempts": "2"}


@pytest.fixture(scope="module")
def browser():
    with chromium_browser() as chromium:
        yield chromium


@pytest.fixture(scope="module")
def axe_source() -> str:
    if axe_playwright_python is None:
        from tests.support import require_or_skip

        require_or_skip(
            "the walk's accessibility checks need axe-playwright-python (pip install -r requirements-dev.txt)"
        )
    return (Path(axe_playwright_python.__file__).parent / "axe.min.js").read_text(encoding="utf-8")


NAVIGATION_TIMING = """() => {
  const n = performance.getEntriesByType('navigation')[0];
  return n && n.loadEventEnd > 0 ? [n.responseStart - n.requestStart, n.loadEventEnd - n.startTime] : null;
}"""


class Walk:
    """Two logged-in browser pages, wide and narrow, and the checks every page gets."""

    def __init__(self, browser, base_url: str, axe: str, label: str = "walk"):
        self.base_url, self.axe, self.label = base_url, axe, label
        self.contexts = {
            width: browser.new_context(
                viewport={"width": width, "height": HEIGHTS[width]}, locale="en-US", bypass_csp=True
            )
            for width in (WIDE, NARROW)
        }
        self.pages = {}
        for width, context in self.contexts.items():
            context.set_default_timeout(TIMEOUT_MS)
            context.set_default_navigation_timeout(TIMEOUT_MS)
            self.pages[width] = context.new_page()
        self.seen: list[str] = []
        self.started = time.monotonic()
        self.problems: list[str] = []
        # page, width, how it was reached (opened by its address / the answer to a form), first byte ms, loaded ms
        self.timings: list[tuple[str, int, str, float, float]] = []

    @property
    def wide(self):
        return self.pages[WIDE]

    def close(self) -> None:
        for context in self.contexts.values():
            context.close()
        self._report_timings()

    def _record_timing(self, name: str, page, width: int, how: str) -> None:
        # The Navigation Timing entry of the page as the browser loaded it: request sent to first byte
        # (the server's time) and to the load event (the whole page). A form's answer counts the POST
        # too, which in this walk runs its job in the request (Celery eager), unlike a deployment.
        found = page.evaluate(NAVIGATION_TIMING)
        if found:
            self.timings.append((name, width, how, *found))

    def _report_timings(self) -> None:
        """Per page and width, written to var/screenshots/walk-timings.tsv and the slowest printed:
        a measurement under the conditions of the run (CI shares its CPU with the Argilla server,
        the embedded LLM and a Celery run in the same process), not a pass/fail check."""
        if not self.timings:
            return
        lines = ["page\twidth\treached\tfirst_byte_ms\tloaded_ms"]
        lines += [f"{n}\t{w}\t{how}\t{first:.0f}\t{loaded:.0f}" for n, w, how, first, loaded in self.timings]
        (SCREENSHOTS / f"{self.label}-timings.tsv").write_text("\n".join(lines) + "\n")
        opened = [row for row in self.timings[1:] if row[2] == "opened"]  # the first load starts the server
        over = [row[:2] + (round(row[4]),) for row in opened if row[4] > 1000]
        print(f"{self.label}: {len(opened)} pages opened after the first, {len(over)} over 1 s: {over}")

    def check(self, name: str, path: str | None = None) -> None:
        """Open *path* at both widths (the wide page stays where it is when *path* is None: the page
        a form answered with) and check overflow and accessibility; screenshot both."""
        for width, page in self.pages.items():
            if path is not None or width != WIDE:
                url = path or self.wide.url
                response = page.goto(url if url.startswith("http") else f"{self.base_url}{url}")
                assert response is not None and response.status == 200, f"{name}: {url} answered {response.status}"
            self._record_timing(name, page, width, "opened" if path is not None or width != WIDE else "answer")
            self._check_layout(name, page, width)
            self._check_accessibility(name, page, width)
            if width == WIDE:
                self._check_words(name, page)
            page.screenshot(path=str(SCREENSHOTS / f"walk-{name}-{width}.png"))
        self.seen.append(name)
        print(f"{time.monotonic() - self.started:6.1f} s  {name}")

    def _check_layout(self, name: str, page, width: int) -> None:
        sizes = [width] if width == WIDE else [width, NARROWEST]
        for size in sizes:
            if size != width:
                page.set_viewport_size({"width": size, "height": HEIGHTS[width]})
            scroll, inner = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
            if scroll > inner:
                wide = page.evaluate(WIDEST_ELEMENTS)
                self.problems.append(f"{name} at {size} px: page is {scroll} px wide; widest: {wide}")
                print(self.problems[-1])
        if width != WIDE:
            page.set_viewport_size({"width": width, "height": HEIGHTS[width]})

    def _check_words(self, name: str, page) -> None:
        """No code name from the registries on the page outside a <code> hint (issue 42)."""
        if names := code_names_in(prose(page.content())):
            self.problems.append(f"{name}: code names on the page: {', '.join(names)}")
            print(self.problems[-1])

    def _check_accessibility(self, name: str, page, width: int) -> None:
        page.evaluate(self.axe)
        results = page.evaluate("axe.run(document, {resultTypes: ['violations']})")
        for violation in results["violations"]:
            if violation["impact"] in BLOCKING_IMPACTS:
                targets = [node["target"] for node in violation["nodes"][:3]]
                self.problems.append(f"{name} at {width} px: {violation['id']} ({violation['impact']}) {targets}")
                print(self.problems[-1])

    def submit(self, locator, *, timeout_ms: float = TIMEOUT_MS) -> None:
        """Click a submit button on the wide page and wait for the page it leads to (eager Celery:
        a queued job has ended when it answers)."""
        with self.wide.expect_navigation(timeout=timeout_ms):
            locator.click()


WIDEST_ELEMENTS = """
[...document.querySelectorAll('body *')]
  .filter((e) => e.getBoundingClientRect().right > window.innerWidth + 1)
  .slice(-3)
  .map((e) => `${e.tagName.toLowerCase()}${e.id ? '#' + e.id : ''}${e.className ? '.' + e.className : ''}`
    + ` right=${Math.round(e.getBoundingClientRect().right)}`)
"""


def _fill_design(page, *, run_ids: list[int]) -> None:
    form = page.locator("#study-form")
    form.locator("#id_name").fill("walk")
    form.locator("#id_runs").select_option([str(pk) for pk in run_ids])
    values = {
        "items_per_transformation": "3",
        "raters_per_item": "2",
        "batch_size": "3",
        "controls_per_batch": "2",
        "min_control_ratings": "2",
        "max_confirmed_flags": "3",
        # Three items leave too few controls to estimate their detectability: a lock needs a reason.
        "detectability_override": "a walk of three items: too few controls to estimate their detectability",
    }
    for name, value in values.items():
        form.locator(f"#id_{name}").fill(value)
    form.locator("#id_llm_judges").select_option([])
    invalid = form.evaluate(
        "f => [...f.elements].filter((e) => !e.checkValidity()).map((e) => `${e.name}: ${e.validationMessage}`)"
    )
    assert not invalid, invalid


def _tick_annotators(page, form: str, names) -> None:
    """Tick the named annotators in a form's annotator picker, finding each with its filter box."""
    picker = page.locator(f"{form} [data-picker]")
    for name in names:
        picker.locator("[data-picker-filter]").fill(name)
        picker.get_by_label(name, exact=True).check()
    picker.locator("[data-picker-filter]").fill("")


def _baseline_answers(study) -> None:
    """Each annotator of the baseline answers every record of their own dataset through Argilla's
    REST API, with their own key (the rating screen itself was clicked in the study above)."""
    owner = argilla.client_get()
    for seat in BaselineAnnotator.objects.filter(study=study):
        client = argilla_annotator_client(owner, seat.argilla_user_id)
        for record in argilla_pending(client, seat.argilla_dataset_id):
            body = {"status": "submitted", "values": {"similarity": {"value": 3}}}
            client.post(f"/api/v1/records/{record['id']}/responses", json=body).raise_for_status()
        client.close()
    owner.close()


def test_walk_the_whole_loop(
    browser, axe_source, live_server, llm_backend, argilla_server, settings, django_user_model
):
    from evaluation.models import BenchmarkRun
    from transforms.models import JudgeReport, TransformRun

    started = time.monotonic()
    settings.ARGILLA_API_URL, settings.ARGILLA_API_KEY = argilla_server.url, argilla_server.api_key
    settings.MEDIA_ROOT = SCREENSHOTS.parent / "walk-media"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    researcher = make_user(django_user_model, "rosalind", Role.RESEARCHER)
    names = ("walk-ui", "walk-api")  # unlike other tests' annotators: the Argilla server is shared per session
    for name in names:
        make_user(django_user_model, name, Role.ANNOTATOR)
    walk = Walk(browser, live_server.url, axe_source)
    try:
        walk.check("login", "/accounts/login/")
        for page in walk.pages.values():
            log_in(page, live_server.url, researcher.username)
        walk.check("home", "/")
        # The narrow screen's menu: a disclosure that opens over the page, every link on its own line.
        narrow = walk.pages[NARROW]
        narrow.get_by_text("Menu", exact=True).click()
        menu = narrow.get_by_role("navigation", name="Main, compact")
        assert menu.get_by_role("link").count() == 10 and menu.is_visible()  # Human baselines, Configs too
        assert not walk.wide.get_by_role("navigation", name="Main, compact").is_visible()
        narrow.screenshot(path=str(SCREENSHOTS / f"walk-menu-{NARROW}.png"))
        scroll, inner = narrow.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
        assert scroll <= inner, f"the open menu makes the page {scroll} px wide"

        # Import: the upload form.
        response = upload(walk.wide, live_server.url, source=DEMO_STS, name="demo-sts")
        assert response is not None and response.status == 200
        walk.check("datasets")
        walk.check("dataset", "/datasets/demo-sts/")

        # Transform: the form on the runs page (eager Celery: the run has ended when the page answers).
        walk.check("transform-runs", "/transforms/")
        walk.wide.locator("#start-run summary").click()
        form = walk.wide.locator("#run-form")
        form.locator("#id_dataset").select_option("demo-sts")
        form.locator("#id_transformation").select_option("paraphrase")
        for name, value in {
            "seed": "1337",
            "limit": "3",
            "temperature": "0.7",
            "max_tokens": "48",
            "max_attempts": "2",
        }.items():
            form.locator(f"#id_{name}").fill(value)
        walk.submit(form.get_by_role("button", name="Start the run"), timeout_ms=4 * TIMEOUT_MS)
        run = TransformRun.objects.get()
        assert run.status == TransformRun.Status.SUCCEEDED, run.error
        walk.check("transform-run", reverse("transforms:run", args=[run.pk]))

        # Judge the run: the form on the judge page.
        walk.check("judge-reports", "/transforms/judge/")
        form = walk.wide.locator("#run-form")
        form.locator("select[name=run]").select_option(str(run.pk))
        walk.submit(form.get_by_role("button", name="Judge the run"), timeout_ms=4 * TIMEOUT_MS)
        report = JudgeReport.objects.get(kind=JudgeReport.Kind.RUN)
        assert report.status == "succeeded", report.error
        assert f"/transforms/judge/{report.pk}/" in walk.wide.url
        walk.check("judge-report")

        # Study: design form, lock, publish.
        walk.check("study-new", "/annotation/")
        _fill_design(walk.wide, run_ids=[run.pk])
        walk.submit(walk.wide.get_by_role("button", name="Create draft"))
        study = Study.objects.get(name="walk")
        walk.check("study-draft")
        # Publishing is a step of its own (issue 31): the draft is locked after a warning, then the
        # researcher sees the items and controls drawn and ticks the annotators.
        walk.submit(walk.wide.get_by_role("link", name="Lock and publish…"))
        expect(walk.wide.locator("#lock-confirm")).to_contain_text("Locking cannot be undone")
        walk.check("publish-lock")
        walk.submit(walk.wide.get_by_role("button", name="Lock the design and draw items"))
        expect(walk.wide.locator("#sample")).to_contain_text("control: easy")
        walk.check("publish-drawn")
        _tick_annotators(walk.wide, "#publish-form", names)
        walk.submit(walk.wide.get_by_role("button", name="Publish to Argilla"))
        # New accounts are named, with no password: each annotator chooses their own (issue 27).
        expect(walk.wide.locator(".messages")).to_contain_text("New Argilla accounts: walk-api, walk-ui")
        walk.check("study-published")

        # Rating: one record by clicking in Argilla's own web UI, the rest through its API.
        annotators = {a.user.username: a for a in Annotator.objects.filter(study=study).select_related("user")}
        owner = argilla.client_get()
        items = list(StudyItem.objects.filter(study=study))
        by_text = {(i.text_a, i.text_b): i for i in items}
        by_external = {i.external_id: i for i in items}
        ui = browser.new_context(viewport={"width": WIDE, "height": HEIGHTS[WIDE]})
        try:
            page = ui.new_page()
            page.set_default_timeout(TIMEOUT_MS)
            # walk-ui signs in to Shiftlab as herself and sets her Argilla password on My Argilla account.
            log_in(page, live_server.url, "walk-ui")
            page.get_by_role("link", name="My Argilla account").first.click()
            chosen = "walk-ui-chose-this-1"
            page.locator("#id_current_password").fill(PASSWORD)
            page.locator("#id_password").fill(chosen)
            page.locator("#id_password_again").fill(chosen)
            with page.expect_navigation():
                page.get_by_role("button", name="Set my Argilla password").click()
            expect(page.locator(".messages")).to_contain_text("Your Argilla password is set")
            page.goto(f"{live_server.url}/")
            expect(page.locator("#my-work")).to_contain_text("Study walk v1")
            page.goto(f"{argilla_server.url}/sign-in")
            page.locator("input[name=Username]").fill("walk-ui")
            page.locator("input[name=Password]").fill(chosen)
            page.get_by_role("button", name="Sign in").click()
            page.wait_for_url(f"{argilla_server.url}/")
            ui_user = annotators["walk-ui"]
            rate_in_ui(page, argilla_server.url, ui_user.argilla_dataset_id, by_text, owner, ui_user.argilla_user_id, 1)
        finally:
            ui.close()
        for name in names:
            client = argilla_annotator_client(owner, annotators[name].argilla_user_id)
            for record in argilla_pending(client, annotators[name].argilla_dataset_id):
                respond(client, record["id"], "submitted", answer(by_external[record["external_id"]]))
            client.close()
        owner.close()

        # Sync, validate, gate (buttons on the study page), approve on the gate page.
        walk.submit(walk.wide.get_by_role("button", name="Sync responses"))
        assert re.search(
            r"Synced: \d+ records newly submitted \(\d+ ratings\)", walk.wide.locator("ul.messages").inner_text()
        )
        walk.check("study-synced")
        walk.submit(walk.wide.get_by_role("button", name=re.compile("^Validate")))
        walk.check("study-validated")
        walk.check("annotator-quality", f"/annotation/studies/{study.pk}/annotators/")
        walk.check("review-queue", f"/annotation/studies/{study.pk}/review/")
        walk.wide.goto(f"{live_server.url}/annotation/studies/{study.pk}/")
        walk.submit(walk.wide.get_by_role("button", name="Evaluate the gate"))
        walk.check("gate", f"/annotation/studies/{study.pk}/gate/")
        decision = walk.wide.locator("form").filter(has=walk.wide.get_by_role("button", name="Approve"))
        decision.locator("input[name=comment]").fill("meaning kept")
        walk.submit(decision.get_by_role("button", name="Approve"))
        walk.check("gate-approved")

        # Export the validated config, start a benchmark from it, read its report.
        walk.check("exports", "/annotation/exports/")
        walk.submit(walk.wide.get_by_role("button", name="Export every approved transformation"))
        walk.check("exported")
        walk.check("benchmarks", "/benchmarks/")
        form = walk.wide.locator("#benchmark-form")
        form.locator("#bm-limit").fill(str(run.item_limit or 6))
        walk.submit(form.get_by_role("button", name="Start benchmark"))
        bench = BenchmarkRun.objects.latest("pk")
        assert bench.status == "succeeded", bench.error
        walk.check("benchmark", f"/benchmarks/{bench.pk}/")
        walk.check("report", f"/benchmarks/{bench.pk}/report/")

        # Human baseline: declare it, let the LLM annotator answer it (both forms), read its page.
        walk.check("baselines", "/benchmarks/baselines/")
        form = walk.wide.locator("#baseline-form")
        form.locator("[name=name]").fill("walk-baseline")
        form.locator("[name=dataset]").select_option("demo-sts")
        form.locator("[name=n_instances]").fill("4")
        walk.submit(form.get_by_role("button", name="Draw the instances"))
        walk.check("baseline-drawn")
        # Finish it with the page's buttons (issue 31): publish, LLM answers, sync, close.
        _tick_annotators(walk.wide, "#baseline-publish-form", names)
        walk.submit(walk.wide.get_by_role("button", name="Publish to Argilla"))
        expect(walk.wide.locator("ul.messages")).to_contain_text("Published to walk-api, walk-ui")
        form = walk.wide.locator("#llm-annotate-form")
        walk.submit(form.get_by_role("button", name="Let the LLM answer"), timeout_ms=4 * TIMEOUT_MS)
        assert "answered 4 instances" in walk.wide.locator("ul.messages").inner_text()
        baseline = BaselineStudy.objects.get(name="walk-baseline")
        _baseline_answers(baseline)
        walk.submit(walk.wide.get_by_role("button", name="Sync answers"))
        assert re.search(r"Synced: \d+ instances newly answered", walk.wide.locator("ul.messages").inner_text())
        walk.check("baseline-published")
        walk.wide.locator("#baseline-close-form input[name=final]").check()
        walk.submit(walk.wide.get_by_role("button", name="Close the study"))
        assert BaselineStudy.objects.get(pk=baseline.pk).status == "closed"
        assert BaselineAnswer.objects.filter(instance__study=baseline, source="human").exists()
        walk.check("baseline")
        walk.check("audit-log", "/audit/")
    finally:
        walk.close()

    # The annotator's own home (issue 31): their work, progress and the way into Argilla.
    annotator_walk = Walk(browser, live_server.url, axe_source, label="walk-annotator")
    try:
        for page in annotator_walk.pages.values():
            log_in(page, live_server.url, "walk-api")
        annotator_walk.check("annotator-home", "/")
        expect(annotator_walk.wide.locator("#my-work")).to_contain_text("Baseline walk-baseline")
    finally:
        annotator_walk.close()
    walk.problems += annotator_walk.problems

    assert not walk.problems, "\n".join(walk.problems)
    for shot in SCREENSHOTS.glob("walk-*.png"):
        assert shot.stat().st_size <= SCREENSHOT_MAX_BYTES, f"{shot.name} is {shot.stat().st_size} bytes"
        if os.environ.get("SHIFTLAB_UPDATE_SCREENSHOTS") == "1":
            DOC_SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(shot, DOC_SCREENSHOTS / shot.name)
    print(f"\nwalk: {len(walk.seen)} pages at {WIDE}/{NARROW}/{NARROWEST} px in {time.monotonic() - started:.1f} s")
