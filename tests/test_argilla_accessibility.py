"""Argilla's rating screen measured with axe-core (issue 31), as an annotator sees it: a study
published to a real local Argilla server (its bundled web app), opened in headless Chromium at
1400 and 390 px, checked with axe-core once per width (the guidelines panel is not opened).

What Shiftlab controls (the questions' titles and descriptions, the guidelines' Markdown) is kept
clean; the rest belongs to Argilla's web app. The test fails on a serious or critical violation of
a rule outside ``UPSTREAM`` (a new kind, e.g. from a change of Shiftlab's field settings), and prints
each one with its targets; docs/argilla.md reports the upstream ones in words ready to file.
``UPSTREAM`` lists rule ids, not targets: a new violation of a listed rule (say another element
without contrast) passes unseen.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest
from django.conf import settings as django_settings

from annotation.science.design import StudyDesign
from annotation.studies.argilla_services import study_publish
from annotation.studies.design_services import StudyCreateRequest, study_create, study_lock
from annotation.studies.onboarding_services import argilla_password_set
from core.roles import Role
from corpora.services import dataset_import
from tests.browser_support import SCREENSHOTS, TIMEOUT_MS, chromium_browser
from tests.support import eager_keyword_run, make_user, rostered

try:
    import axe_playwright_python
except ImportError:  # pragma: no cover - the test skips
    axe_playwright_python = None

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

BLOCKING = ("serious", "critical")
# Violations of Argilla's own web app (2.8), reported upstream in docs/argilla.md.
UPSTREAM = {
    # critical
    "aria-allowed-attr",  # the active question's wrapper carries an ARIA attribute its role does not allow
    "aria-required-children",  # .questions: a role whose required children are missing
    "aria-valid-attr-value",  # the status filter and the Previous/Next buttons: an ARIA attribute with an invalid value
    "button-name",  # the search icon button has no name
    # serious
    "aria-input-field-name",  # the comment textarea (role textbox) has no name
    "color-contrast",  # the user button and the status selector
    "listitem",  # <li> outside a list
    "nested-interactive",  # clickable rows and dropdowns holding buttons
}


def _axe(page, axe: str) -> list[dict]:
    page.evaluate(axe)
    return page.evaluate("axe.run(document, {resultTypes: ['violations']})")["violations"]


def test_argilla_rating_screen_has_only_the_reported_violations(argilla_server, settings, django_user_model):
    if axe_playwright_python is None:
        pytest.skip("needs axe-playwright-python (pip install -r requirements-dev.txt)")
    axe = (Path(axe_playwright_python.__file__).parent / "axe.min.js").read_text(encoding="utf-8")
    settings.ARGILLA_API_URL, settings.ARGILLA_API_KEY = argilla_server.url, argilla_server.api_key
    researcher = make_user(django_user_model, "rosalind", Role.RESEARCHER)
    annotator = make_user(django_user_model, "ada", Role.ANNOTATOR)
    sts = dataset_import(source=django_settings.BASE_DIR / "fixtures/sts/demo-sts.csv", task="sts", name="demo-sts")
    design = StudyDesign(
        items_per_transformation=3,
        raters_per_item=1,
        batch_size=3,
        controls_per_batch=0,
        min_control_ratings=0,
        llm_judges=(),
        seed=3,
        guidelines="Rate each pair.\n\n## Quality\n\nDoes the rewrite keep the meaning?",
    )
    run = eager_keyword_run(sts, limit=3)
    study = study_lock(
        study=study_create(
            actor=researcher, request=rostered(StudyCreateRequest(name="a11y", runs=[run], design=design))
        )
    )
    study_publish(study=study, annotators=[annotator], actor=researcher)
    argilla_password_set(user=annotator, password="ada-chose-this-1", actor=annotator)
    dataset_id = study.annotators.get().argilla_dataset_id
    base = argilla_server.url
    found: dict[tuple[str, str], set[str]] = defaultdict(set)  # (rule, impact) -> where
    with chromium_browser() as browser:
        for width, height in ((1400, 900), (390, 780)):
            context = browser.new_context(viewport={"width": width, "height": height}, locale="en-US")
            context.set_default_timeout(TIMEOUT_MS)
            page = context.new_page()
            page.goto(f"{base}/sign-in")
            page.locator("input[name=Username]").fill("ada")
            page.locator("input[name=Password]").fill("ada-chose-this-1")
            page.get_by_role("button", name="Sign in").click()
            page.wait_for_url(f"{base}/")
            page.goto(f"{base}/dataset/{dataset_id}/annotation-mode")
            page.locator(".text_field_component").first.wait_for(state="attached")
            page.wait_for_timeout(500)
            for violation in _axe(page, axe):
                targets = [str(n["target"]) for n in violation["nodes"][:2]]
                found[(violation["id"], violation["impact"])].add(f"{width} px {len(violation['nodes'])}x {targets}")
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SCREENSHOTS / f"argilla-rating-{width}.png"))
            context.close()
    for (rule, impact), where in sorted(found.items()):
        print(f"{impact:9} {rule}: {sorted(where)}")
    new = sorted(rule for rule, impact in found if impact in BLOCKING and rule not in UPSTREAM)
    assert not new, f"serious or critical axe violations not reported upstream: {new}"
