"""End-to-end tests of the dataset upload page in a real browser (Debian's Chromium via Playwright).

Skipped when /usr/bin/chromium (or the playwright package) is missing, unless
SHIFTLAB_REQUIRE_SERVICES=1, which turns the skip into a failure. Never run ``playwright install``:
the tests drive the system Chromium.

Full-page screenshots go to ``var/screenshots/``; with SHIFTLAB_UPDATE_SCREENSHOTS=1 the dataset
list screenshot is also copied to ``docs/screenshots/``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from django.conf import settings

from core.roles import Role
from corpora.models import Dataset, DatasetImport
from tests.browser_support import (
    BASE_DIR,
    DEMO_STS,
    DOC_SCREENSHOTS,
    SCREENSHOTS,
    TIMEOUT_MS,
    chromium_browser,
    expect,
    log_in,
    upload,
)
from tests.support import make_user, rostered

STSB_EN_TEST = BASE_DIR.parent / "shared" / "data" / "stsb-multi-mt" / "stsb-en-test.csv"

pytestmark = [pytest.mark.services, pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def browser():
    """One headless Chromium for the module."""
    with chromium_browser() as chromium:
        yield chromium


@pytest.fixture(autouse=True)
def _media_root(settings, tmp_path):
    """Uploads (failed imports keep theirs) land in the test's own folder, not SHIFTLAB_DATA_DIR."""
    settings.MEDIA_ROOT = tmp_path / "media"


@pytest.fixture
def page(browser):
    """A fresh browser context (no cookies) per test."""
    context = browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-US")
    context.set_default_timeout(TIMEOUT_MS)
    context.set_default_navigation_timeout(TIMEOUT_MS)
    try:
        yield context.new_page()
    finally:
        context.close()


@pytest.fixture
def e2e_researcher(browser, django_user_model):
    return make_user(django_user_model, "rosalind", Role.RESEARCHER)


@pytest.fixture
def e2e_annotator(browser, django_user_model):
    return make_user(django_user_model, "ada", Role.ANNOTATOR)


@pytest.fixture
def screenshots() -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS


@pytest.fixture
def upload_case() -> tuple[Path, str, str, int]:
    """(file, dataset name, columns, expected items): the real STS-B English test split when the
    shared benchmark data is present, else the project's own 40-pair demo file."""
    if STSB_EN_TEST.is_file():
        return STSB_EN_TEST, "stsb-en-test", "sentence1,sentence2,score", 1379
    return DEMO_STS, "demo-sts", "", 40


def test_researcher_uploads_sts_csv(live_server, page, e2e_researcher, upload_case, screenshots):
    source, name, columns, n_items = upload_case
    log_in(page, live_server.url, e2e_researcher.username)

    response = upload(page, live_server.url, source=source, name=name, columns=columns)

    assert response is not None and response.status == 200
    assert page.url.rstrip("/").endswith("/datasets"), f"expected the dataset list, got {page.url}"
    expect(page.locator("ul.messages li.success")).to_have_text(f"Imported {n_items} items into {name}.")
    row = page.locator("#dataset-table tr").filter(has=page.get_by_role("link", name=name, exact=True))
    expect(row).to_have_count(1)
    expect(row.locator("td").nth(1)).to_have_text("shiftlab")  # the open default project
    expect(row.locator("td").nth(2)).to_have_text("semantic textual similarity (STS)")  # plain words (issue 42)
    expect(row.locator("td.num")).to_have_text(str(n_items))
    expect(row.locator("td").nth(4)).to_have_text(f"test\u00a0{n_items}")

    dataset = Dataset.objects.get(name=name)
    assert dataset.n_items == n_items
    assert dataset.items.count() == n_items
    assert dataset.created_by == e2e_researcher

    shot = screenshots / "datasets-list.png"
    page.screenshot(path=str(shot), full_page=True)
    if os.environ.get("SHIFTLAB_UPDATE_SCREENSHOTS") == "1":
        DOC_SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, DOC_SCREENSHOTS / "datasets-list.png")


def test_malformed_csv_shows_file_and_line(live_server, page, e2e_researcher, tmp_path, screenshots):
    bad = tmp_path / "upload" / "bad-scores.csv"
    bad.parent.mkdir()
    bad.write_text(
        "sentence1,sentence2,score\n"
        "A man is playing a guitar.,A man plays the guitar.,4.8\n"
        "A dog runs in the park.,A cat sleeps on the sofa.,high\n",
        encoding="utf-8",
    )
    log_in(page, live_server.url, e2e_researcher.username)

    response = upload(page, live_server.url, source=bad, name="bad-scores")

    assert response is not None and response.status == 200
    error = page.locator("pre.error")
    expect(error).to_be_visible()
    expect(error).to_contain_text("bad-scores.csv, line 3")
    expect(error).to_contain_text("'score' must be a number, found 'high'")
    # The message names the uploaded file, never the server's storage path.
    assert str(settings.MEDIA_ROOT) not in error.inner_text()
    page.screenshot(path=str(screenshots / "datasets-import-error.png"), full_page=True)

    # The refused form comes back with what was entered (files must be chosen again).
    expect(page.locator("#upload-form input[name=name]")).to_have_value("bad-scores")
    assert not Dataset.objects.exists()
    job = DatasetImport.objects.get(name="bad-scores")
    assert job.status == DatasetImport.Status.FAILED
    assert job.dataset is None


def test_annotator_gets_403_on_datasets(live_server, page, e2e_annotator):
    log_in(page, live_server.url, e2e_annotator.username)

    response = page.goto(f"{live_server.url}/datasets/")

    assert response is not None
    assert response.status == 403
    expect(page.locator("#upload-form")).to_have_count(0)


def test_alpha_in_an_upper_cased_header_stays_alpha(live_server, page, e2e_researcher):
    """Table headers are upper-cased by the style sheet; α upper-cased reads as A (issue 20)."""
    from annotation.science.design import StudyDesign
    from annotation.studies.design_services import StudyCreateRequest, study_create
    from corpora.services import dataset_import
    from transforms.services import transform_run_create
    from transforms.tasks import start_run

    sts = dataset_import(source=DEMO_STS, task="sts", name="demo-sts")
    run = transform_run_create(dataset=sts, transformation="random_keywords", seed=1, limit=2, dispatch=False)
    start_run.delay(run.pk)
    run.refresh_from_db()
    study = study_create(
        actor=e2e_researcher,
        request=rostered(
            StudyCreateRequest(name="alpha", runs=[run], design=StudyDesign(llm_judges=(), items_per_transformation=2))
        ),
    )
    log_in(page, live_server.url, e2e_researcher.username)
    page.goto(f"{live_server.url}/annotation/studies/{study.pk}/")
    # innerText is the text as rendered, after text-transform.
    assert page.locator("#agreement th").last.inner_text() == "KRIPPENDORFF'S α (ORDINAL)"


CSP_WATCH = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", (e) =>
  window.__cspViolations.push(
    `${e.violatedDirective} blocked ${e.blockedURI || "inline"} (${e.sourceFile}:${e.lineNumber})`
  )
);
"""


def test_pages_break_no_content_security_policy(live_server, page, django_user_model):
    """Every kind of page (Shiftlab's, the admin, the API browser and docs) renders under the
    Content-Security-Policy with no violation: nothing inline is blocked."""
    from corpora.services import dataset_import

    dataset_import(source=DEMO_STS, task="sts", name="demo-sts")
    boss = make_user(django_user_model, "boss", Role.RESEARCHER)
    boss.is_staff = boss.is_superuser = True
    boss.save()
    page.add_init_script(CSP_WATCH)
    page.goto(f"{live_server.url}/accounts/login/")
    assert page.evaluate("window.__cspViolations") == []
    log_in(page, live_server.url, "boss")
    urls = [
        "/",
        "/datasets/",
        "/datasets/demo-sts/",
        "/transforms/",
        "/transforms/judge/",
        "/annotation/",
        "/annotation/exports/",
        "/benchmarks/",
        "/benchmarks/baselines/",
        "/audit/",
        "/admin/",
        "/admin/corpora/dataset/",
        "/admin/auth/user/add/",
        "/api/",
        "/api/datasets/",
        "/api/docs/",
        "/api/redoc/",
    ]
    seen = {}
    for url in urls:
        response = page.goto(f"{live_server.url}{url}", wait_until="networkidle")
        assert response is not None and response.status == 200, url
        exempt = url.startswith(tuple(settings.SHIFTLAB_CSP_EXEMPT_PATHS))
        assert exempt or "script-src 'self'" in response.headers["content-security-policy"], url
        if url == "/api/docs/":
            expect(page.locator(".swagger-ui .opblock").first).to_be_visible()
        seen[url] = page.evaluate("window.__cspViolations")
    assert not {url: found for url, found in seen.items() if found}
    expect(page.locator(".redoc-wrap").first).to_be_visible()
