"""Nothing an annotator sees in Argilla runs as code, and every text looks exactly as written.

A study whose texts and guidelines are the hostile corpus of ``tests/xss_corpus.py`` is published to
a real local Argilla server (2.8, its bundled web app) and opened in headless Chromium as its
annotator: every record in the focus view, the guidelines panel, the questions' descriptions and a
search (the highlight path). A payload that runs is counted three ways: it calls ``shiftlabXss``
(a function the test installs in every frame), it opens a dialog, or it sends a request to a local
listener (any request leaving the Argilla server is counted too). The screenshot of the annotation
screen goes to ``var/screenshots/`` (with SHIFTLAB_UPDATE_SCREENSHOTS=1 also to ``docs/screenshots/``).
"""

from __future__ import annotations

import io
import os
import shutil
import threading
from collections import Counter
from contextlib import closing
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.conf import settings as django_settings
from django.core.management import call_command

from annotation.argilla import client as argilla
from annotation.argilla.display import Shown, for_argilla
from annotation.models import StudyItem
from annotation.science.design import StudyDesign
from annotation.studies.argilla_services import study_publish
from annotation.studies.design_services import StudyCreateRequest, study_create, study_lock
from annotation.studies.onboarding_services import argilla_password_set
from core.models import AuditEvent
from core.roles import Role
from corpora.services import dataset_import
from tests.argilla_ui import respond
from tests.browser_support import DOC_SCREENSHOTS, SCREENSHOTS, TIMEOUT_MS, chromium_browser
from tests.support import argilla_annotator_client, argilla_pending, eager_keyword_run, make_user, rostered
from tests.xss_corpus import corpus

try:
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
except ImportError:  # pragma: no cover - chromium_browser skips the test then
    PlaywrightTimeout = TimeoutError

pytestmark = [pytest.mark.services, pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SHOT = "argilla-xss-corpus.png"
ITEMS = 18  # 36 texts: the corpus and a plain filler
# Argilla's web app asks for its own fonts (which fail offline): not a payload's request.
ARGILLA_FONTS = ("https://fonts.googleapis.com/", "https://fonts.gstatic.com/")
GUIDELINES_MARKDOWN = "Rate each pair. **Read both texts.**"


class _Listener(BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self):  # noqa: N802 - the name http.server calls
        self.hits.append(self.path)
        self.send_response(204)
        self.end_headers()

    do_POST = do_GET

    def log_message(self, *args):
        pass


@pytest.fixture
def exfil():
    """A local HTTP listener standing for an attacker's server; yields (base URL, paths requested)."""
    hits: list[str] = []
    handler = type("Listener", (_Listener,), {"hits": hits})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", hits
    finally:
        server.shutdown()
        server.server_close()


def _corpus_study(researcher, texts: list[str], guidelines: str):
    """A study of ``ITEMS`` real pairs whose texts are ``texts`` (in pairs), not yet published."""
    sts = dataset_import(source=django_settings.BASE_DIR / "fixtures/sts/demo-sts.csv", task="sts", name="demo-sts")
    run = eager_keyword_run(sts, limit=ITEMS)
    design = StudyDesign(
        items_per_transformation=ITEMS,
        raters_per_item=1,
        batch_size=ITEMS,
        controls_per_batch=0,
        min_control_ratings=0,
        llm_judges=(),
        seed=3,
        guidelines=guidelines,
    )
    study = study_lock(
        study=study_create(
            actor=researcher, request=rostered(StudyCreateRequest(name="xss-corpus", runs=[run], design=design))
        )
    )
    items = list(study.items.order_by("position"))
    assert len(items) == ITEMS
    for k, item in enumerate(items):
        StudyItem.objects.filter(pk=item.pk).update(text_a=texts[2 * k], text_b=texts[2 * k + 1])
    return study


def _guidelines(payloads: dict[str, str]) -> str:
    picked = ("img-onerror", "svg-onload", "style-tag", "object-js", "markdown-link-js", "markdown-image-exfil")
    lines = [GUIDELINES_MARKDOWN, "", *(f"- {payloads[name]}" for name in picked), "", payloads["autolink-exfil"]]
    return "\n".join(lines)


def test_hostile_texts_show_literally_and_never_run(argilla_server, settings, django_user_model, exfil):
    settings.ARGILLA_API_URL, settings.ARGILLA_API_KEY = argilla_server.url, argilla_server.api_key
    exfil_url, exfil_hits = exfil
    payloads = dict(corpus(exfil_url))
    texts = [*payloads.values()]
    texts += [f"A plain filler text number {k}." for k in range(2 * ITEMS - len(texts))]
    researcher = make_user(django_user_model, "rosalind", Role.RESEARCHER)
    annotator = make_user(django_user_model, "ada", Role.ANNOTATOR)
    study = _corpus_study(researcher, texts, _guidelines(payloads))
    study_publish(study=study, annotators=[annotator], actor=researcher)
    password = "ada-chose-this-1"  # as ada would on My Argilla account
    argilla_password_set(user=annotator, password=password, actor=annotator)
    dataset_id = study.annotators.get().argilla_dataset_id
    base = argilla_server.url
    own = (base, "data:", *ARGILLA_FONTS)

    ran, dialogs, foreign, shown, markup = [], [], [], [], []
    with chromium_browser() as browser:
        context = browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-US")
        context.set_default_timeout(TIMEOUT_MS)
        context.expose_binding("shiftlabXss", lambda source, name=None: ran.append(str(name)))
        context.on("request", lambda r: None if r.url.startswith(own) else foreign.append(r.url))
        page = context.new_page()
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.goto(f"{base}/sign-in")
        page.locator("input[name=Username]").fill("ada")
        page.locator("input[name=Password]").fill(password)
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(f"{base}/")

        # Every record in the focus view: the two fields show their text, and nothing but text.
        for number in range(1, ITEMS + 1):
            page.goto(f"{base}/dataset/{dataset_id}/annotation-mode?page={number}&status=pending")
            fields = page.locator(".text_field_component .content-area > :first-child")
            fields.first.wait_for(state="attached")  # a payload may have hidden the page
            page.wait_for_timeout(300)  # time for an onerror or onload to fire
            assert fields.count() == 2
            for k in range(2):
                field = fields.nth(k)
                if field.locator("*").count():  # markup: an element where only text should be
                    markup.append(field.evaluate("node => node.outerHTML")[:200])
                shown.append(field.evaluate("node => node.textContent"))

        # The guidelines (Markdown) panel, and the questions' descriptions (tooltips). A payload that
        # hid or replaced the page leaves no panel to read: that shows as missing guidelines below.
        page.goto(f"{base}/dataset/{dataset_id}/annotation-mode")
        page.locator(".text_field_component").first.wait_for(state="attached")
        rendered, strong, guide_markup = "", [], -1
        try:
            page.get_by_role("button", name="Expand Panel").first.click(timeout=10_000)
            guidelines = page.locator(".annotation-guidelines").filter(visible=True)
            guidelines.wait_for(timeout=10_000)
            page.wait_for_timeout(500)
            rendered = guidelines.inner_text()
            strong = guidelines.locator("strong").all_inner_texts()
            guide_markup = guidelines.locator(
                "img, svg, style, object, embed, iframe, script, a[href^=javascript]"
            ).count()
            guidelines.get_by_text("click me").click(timeout=10_000)  # a javascript: link, cleaned by Argilla
            for icon in page.locator(".icon-info").all():
                icon.click(timeout=10_000)
            page.wait_for_timeout(500)
        except PlaywrightTimeout:
            pass

        # A search: the UI highlights the matches in the texts it shows.
        page.goto(f"{base}/dataset/{dataset_id}/annotation-mode")
        page.locator(".text_field_component").first.wait_for(state="attached")
        highlighted = 0
        try:
            page.locator(".search-area").first.click(timeout=10_000)
            page.keyboard.type("onerror")
            page.keyboard.press("Enter")
            page.wait_for_timeout(1500)
            # Matches are marked with the CSS Custom Highlight API: ranges, no markup.
            highlighted = page.evaluate("() => [...CSS.highlights.values()].reduce((n, h) => n + h.size, 0)")
        except PlaywrightTimeout:
            pass

        # The screenshot: the record whose first text is the payload of the report.
        number = shown.index(payloads["img-onerror-alert"]) // 2 + 1 if payloads["img-onerror-alert"] in shown else 1
        page.goto(f"{base}/dataset/{dataset_id}/annotation-mode?page={number}&status=pending")
        page.locator(".text_field_component").first.wait_for(state="attached")
        page.wait_for_timeout(500)
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / SHOT))
        context.close()

    assert ran == [] and dialogs == [], f"{len(ran) + len(dialogs)} payloads ran: {ran} {dialogs}"
    assert strong == ["Read both texts."]  # the guidelines' Markdown still works
    assert guide_markup == 0
    for name in ("img-onerror", "svg-onload", "style-tag", "object-js", "autolink-exfil"):
        assert payloads[name] in rendered, (name, rendered)
    assert exfil_hits == [] and foreign == [], (exfil_hits, foreign)
    assert markup == [], markup
    assert highlighted > 0  # the search found and marked payload text
    assert Counter(shown) == Counter(texts), [t[:80] for t in (Counter(shown) - Counter(texts))]
    if os.environ.get("SHIFTLAB_UPDATE_SCREENSHOTS") == "1":
        DOC_SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(SCREENSHOTS / SHOT, DOC_SCREENSHOTS / SHOT)


def test_texts_published_before_are_sent_again_encoded(argilla_server, settings, django_user_model):
    """Records logged by an older Shiftlab hold their texts raw: resending writes them as the web
    app must get them, and keeps the annotator's answers."""
    settings.ARGILLA_API_URL, settings.ARGILLA_API_KEY = argilla_server.url, argilla_server.api_key
    texts = [text for _, text in corpus("http://127.0.0.1:9")]
    texts += [f"A plain filler text number {k}." for k in range(2 * ITEMS - len(texts))]
    researcher = make_user(django_user_model, "rosalind", Role.RESEARCHER)
    annotator = make_user(django_user_model, "ada", Role.ANNOTATOR)
    study = _corpus_study(researcher, texts, "Rate each pair.")
    study_publish(study=study, annotators=[annotator], actor=researcher)
    ada = study.annotators.get()
    items = {i.external_id: i for i in study.items.all()}
    with closing(argilla.client_get()) as owner:
        raw = [{"external_id": e, "fields": {"original": i.text_a, "transformed": i.text_b}} for e, i in items.items()]
        owner.put(f"/api/v1/datasets/{ada.argilla_dataset_id}/records/bulk", json={"items": raw}).raise_for_status()
        client = argilla_annotator_client(owner, ada.argilla_user_id)
        first = argilla_pending(client, ada.argilla_dataset_id)[0]
        respond(client, first["id"], "submitted", {"quality": 4, "fluency": 5})
        held = {r["external_id"]: r["fields"] for r in argilla_pending(client, ada.argilla_dataset_id)}
        assert held[next(iter(held))]["original"] == items[next(iter(held))].text_a  # raw, as an old publish left it

        out = io.StringIO()
        call_command("study", "resend-texts", str(study.pk), "--as", "rosalind", stdout=out)
        assert out.getvalue().strip() == f"Sent the texts of {ITEMS} records again."

        records = owner.get(f"/api/v1/datasets/{ada.argilla_dataset_id}/records", params={"limit": 100}).json()
        assert len(records["items"]) == ITEMS
        for record in records["items"]:
            item = items[record["external_id"]]
            assert record["fields"] == {
                "original": for_argilla(item.text_a, Shown.HTML),
                "transformed": for_argilla(item.text_b, Shown.HTML),
            }
        answers = list(argilla.responses_fetch(ada.argilla_dataset_id, client=owner))
        assert {(r.record_external_id, r.question, r.value) for r in answers} == {
            (first["external_id"], "quality", 4),
            (first["external_id"], "fluency", 5),
        }
    event = AuditEvent.objects.get(verb="study.argilla.texts_resend")
    assert event.payload == {"records": ITEMS, "annotators": ["ada"]}
