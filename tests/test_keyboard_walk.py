"""A keyboard-only walk (issue 42): every action reachable with Tab and Enter, with a visible focus.

Headless Chromium on the seeded demo (what `make demo` starts with), no mouse: a researcher signs
in, goes through the pages a researcher opens, invites an annotator from the project page, and the
invitee opens the link, chooses their account and lands on *My Argilla account*, all by keyboard.

On each page every visible control (links, buttons, fields, summaries, scrollable tables) must be
reached by pressing Tab from the top of the page, and each one, once reached, must show a focus
indicator (an outline or a shadow that it does not have unfocused).
"""

from __future__ import annotations

import io
import re

import pytest
from django.core.management import call_command
from django.urls import reverse

from core.projects import project_create
from core.rosters import project_annotators
from tests.browser_support import chromium_browser
from tests.support import PASSWORD

pytestmark = [pytest.mark.services, pytest.mark.browser, pytest.mark.django_db(transaction=True)]

NEW_PASSWORD = "keyboard-only-passphrase-77"

# Marks every visible control with its index and returns how many there are.
MARK_CONTROLS = """() => {
  const selector = 'a[href], button, input:not([type=hidden]), select, textarea, summary, [tabindex]';
  const visible = (e) => {
    const r = e.getBoundingClientRect(), cs = getComputedStyle(e);
    return r.width > 0 && r.height > 0 && cs.visibility !== 'hidden' && cs.display !== 'none';
  };
  const controls = Array.from(document.querySelectorAll(selector)).filter(
    (e) => !e.disabled && e.tabIndex >= 0 && visible(e) && !e.closest('details:not([open]) > :not(summary)'));
  controls.forEach((e, i) => { e.dataset.kw = String(i); });
  return controls.length;
}"""

# The focused control: its mark, a description, and whether it shows a focus indicator.
FOCUSED = """() => {
  const e = document.activeElement;
  if (!e || e === document.body) return null;
  const cs = getComputedStyle(e);
  const outline = cs.outlineStyle !== 'none' && parseFloat(cs.outlineWidth) > 0;
  const shadow = cs.boxShadow && cs.boxShadow !== 'none';
  const text = (e.innerText || e.value || e.getAttribute('aria-label') || e.name || '').trim().slice(0, 40);
  return {kw: e.dataset.kw ?? null, what: `${e.tagName.toLowerCase()} "${text}"`, indicated: outline || shadow};
}"""


def tab_through(page) -> list[dict]:
    """Press Tab from the top of the page until focus leaves it or comes back; what was focused."""
    count = page.evaluate(MARK_CONTROLS)
    # From the top: a focused body is where Tab starts over (a #fragment in the URL would otherwise
    # start it at that anchor, as it does for the person after submitting the invitation form).
    page.evaluate(
        """() => { const b = document.body; b.tabIndex = -1; b.focus(); b.removeAttribute('tabindex');
                   window.scrollTo(0, 0); }"""
    )
    seen: list[dict] = []
    for _ in range(count + 5):
        page.keyboard.press("Tab")
        focused = page.evaluate(FOCUSED)
        if focused is None or (seen and focused["kw"] is not None and focused["kw"] == seen[0]["kw"]):
            break
        seen.append(focused)
    return seen


def check_page(page, path: str) -> None:
    count = page.evaluate(MARK_CONTROLS)
    seen = tab_through(page)
    reached = {f["kw"] for f in seen if f["kw"] is not None}
    missing = page.evaluate(
        """(reached) => Array.from(document.querySelectorAll('[data-kw]'))
             .filter((e) => !reached.includes(e.dataset.kw))
             .map((e) => e.tagName.toLowerCase() + ' "' +
                         (e.innerText || e.value || e.name || '').trim().slice(0, 40) + '"')""",
        sorted(reached),
    )
    assert not missing, f"{path}: not reachable with Tab ({len(missing)} of {count}): {missing[:10]}"
    unmarked = [f["what"] for f in seen if not f["indicated"]]
    assert not unmarked, f"{path}: focus not visible on {unmarked[:10]}"


def tab_to(page, selector: str, limit: int = 200) -> None:
    """Press Tab until the element ``selector`` has the focus (from wherever the focus is)."""
    for _ in range(limit):
        if page.evaluate("(s) => document.activeElement && document.activeElement.matches(s)", selector):
            return
        page.keyboard.press("Tab")
    raise AssertionError(f"{page.url}: {selector} is never reached with Tab")


def keyboard_log_in(page, base_url: str, username: str, password: str = PASSWORD) -> None:
    page.goto(f"{base_url}/accounts/login/")
    tab_to(page, "#id_username")
    page.keyboard.type(username)
    tab_to(page, "#id_password")
    page.keyboard.type(password)
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert "/accounts/login/" not in page.url, f"log-in as {username} by keyboard failed"


@pytest.fixture
def demo(db):
    call_command("seed_demo", password=PASSWORD, stdout=io.StringIO())
    from django.contrib.auth import get_user_model

    researcher = get_user_model().objects.get(username="researcher")
    return project_create(slug="lab", name="The Lab", owner=researcher, actor=None)


def test_a_researcher_and_an_invited_annotator_need_no_mouse(live_server, demo):
    base = live_server.url
    with chromium_browser() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900}, locale="en-US")
        keyboard_log_in(page, base, "researcher")
        for path in (
            "/",
            "/datasets/",
            "/transforms/",
            "/annotation/",
            "/annotation/exports/",
            "/benchmarks/",
            "/benchmarks/baselines/",
            "/projects/",
            f"/projects/{demo.slug}/",
            "/audit/",
        ):
            response = page.goto(f"{base}{path}")
            assert response is not None and response.status == 200, path
            check_page(page, path)

        # Invite an annotator: Tab to the form, type, Enter.
        page.goto(f"{base}/projects/{demo.slug}/")
        tab_to(page, "#id_email")
        page.keyboard.type("kim@example.org")
        tab_to(page, "#invite-submit")
        with page.expect_navigation():
            page.keyboard.press("Enter")
        link = page.locator("#issued-link").input_value()
        assert re.fullmatch(rf"{re.escape(base)}/invitations/[\w-]+/", link), link
        check_page(page, "project page with its new link")

        # The invitee, in a browser of their own.
        invitee = browser.new_context(locale="en-US").new_page()
        invitee.goto(link)
        check_page(invitee, "invitation page")
        tab_to(invitee, "#id_username")
        invitee.keyboard.type("kim")
        tab_to(invitee, "#id_password1")
        invitee.keyboard.type(NEW_PASSWORD)
        tab_to(invitee, "#id_password2")
        invitee.keyboard.type(NEW_PASSWORD)
        with invitee.expect_navigation():
            invitee.keyboard.press("Enter")
        assert invitee.url.endswith(reverse("annotation:my-argilla")), invitee.url
        check_page(invitee, "My Argilla account")
        invitee.goto(f"{base}/")
        check_page(invitee, "the annotator's home")
    assert [u.username for u in project_annotators(demo)] == ["kim"]
