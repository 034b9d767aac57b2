"""The annotator quality page in a real browser (Chromium via Playwright, as tests/test_browser.py):
it renders its table and three inline SVG figures under the site's CSP, and its screenshot goes to
``var/screenshots/`` (with SHIFTLAB_UPDATE_SCREENSHOTS=1 also to ``docs/screenshots/``)."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest
from django.urls import reverse

from annotation.kinds import ItemKind
from core.roles import Role
from tests.browser_support import DOC_SCREENSHOTS, expect, log_in
from tests.support import make_user, published_keyword_study
from tests.test_annotator_quality import rate_all
from tests.test_browser import browser, page, screenshots  # noqa: F401

pytestmark = [pytest.mark.services, pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# name -> (seconds per item, noise of their answers; None: answers 3 to every real item)
RATERS = {"amira": (45, 0.3), "bruno": (30, 0.5), "chen": (60, 0.8), "dana": (12, 1.5), "eli": (2, None)}


def test_annotator_quality_page(live_server, page, django_user_model, screenshots):  # noqa: F811
    researcher = make_user(django_user_model, "rosalind", Role.RESEARCHER)
    study = published_keyword_study(researcher=researcher, name="quality-demo", limit=16, items=16, batch_size=8)
    rng = np.random.default_rng(5)
    truth = {item.pk: int(rng.integers(1, 6)) for item in study.items.all()}
    for name, (seconds, noise) in RATERS.items():

        def answer(item, question, n, noise=noise):
            if item.kind != ItemKind.REAL:
                return item.expected.get(question, 4)
            if noise is None:
                return 3
            return int(np.clip(np.rint(truth[item.pk] + noise * rng.normal()), 1, 5))

        rate_all(study, django_user_model, name, answer=answer, seconds=seconds)
    log_in(page, live_server.url, researcher.username)
    violations = []
    page.on("console", lambda m: violations.append(m.text) if "Content Security Policy" in m.text else None)
    response = page.goto(f"{live_server.url}{reverse('annotation:annotators', args=[study.pk])}")
    assert response is not None and response.status == 200
    expect(page.locator("#annotator-quality tr")).to_have_count(1 + len(RATERS))
    expect(page.locator(".quality-figures svg")).to_have_count(3)
    assert not violations, violations
    shot = screenshots / "annotator-quality.png"
    page.screenshot(path=str(shot), full_page=True)
    if os.environ.get("SHIFTLAB_UPDATE_SCREENSHOTS") == "1":
        DOC_SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, DOC_SCREENSHOTS / "annotator-quality.png")
