"""Answering as an annotator, for the tests that use a real Argilla server: the answers each planted
rater gives, a response through Argilla's REST API, and ratings clicked in Argilla's web UI."""

from __future__ import annotations

import time

import httpx

from annotation.argilla import client as argilla
from annotation.kinds import ItemKind


def answer(item, *, careless: bool = False, low: bool = False) -> dict[str, int]:
    """What each planted rater answers: careful raters get controls right; the careless one
    answers 3 to everything; ``low`` plants a low fluency rating on a real item."""
    if careless:
        return {"quality": 3, "fluency": 3}
    if item.kind == ItemKind.EASY_POSITIVE:
        return {"quality": 5, "fluency": 5}
    if item.kind == ItemKind.EASY_NEGATIVE:
        return {"quality": 1, "fluency": 4}
    return {"quality": 4, "fluency": 2 if low else 4}


def respond(client: httpx.Client, record_id, status: str, values: dict | None) -> None:
    body = {"status": status, "values": {q: {"value": v} for q, v in values.items()} if values else None}
    client.post(f"/api/v1/records/{record_id}/responses", json=body).raise_for_status()


_SPECIFICITY = {ItemKind.EASY_NEGATIVE: 0, ItemKind.REAL: 1, ItemKind.EASY_POSITIVE: 2}


def _squeeze(text: str) -> str:
    """Whitespace collapsed: the UI renders line breaks and runs of spaces its own way."""
    return " ".join(text.split())


def rate_in_ui(page, base_url: str, dataset_id, items_by_text, owner, user_id, n: int) -> list[str]:
    """Rate ``n`` records in the Argilla web UI; returns the external ids rated, in order."""
    rated = []
    for k in range(n):
        # A fresh load per record: right after a submission the page may still show the previous
        # record while it moves on, and reading it then would answer for the wrong record.
        page.goto(f"{base_url}/dataset/{dataset_id}/annotation-mode")
        page.locator("label[for=quality_4]").wait_for()
        body = _squeeze(page.locator("body").inner_text())
        shown = [i for (a, b), i in items_by_text.items() if _squeeze(a) in body and _squeeze(b) in body]
        assert shown, "the page shows none of the study's records"
        # An easy positive's near copy (the text minus its final stop) is found inside any page
        # showing that text, so the most specific kind wins: an easy negative's unrelated text, then
        # a real item's rewrite, then the near copy.
        item = min(shown, key=lambda i: _SPECIFICITY[i.kind])
        for question, value in answer(item).items():
            page.locator(f"label[for={question}_{value}]").click()
        page.get_by_role("button", name="Submit").click()
        deadline = time.monotonic() + 30
        while True:
            rows = [
                r
                for r in argilla.responses_fetch(dataset_id, client=owner)
                if r.user_id == user_id and r.status == "submitted"
            ]
            if len({r.record_external_id for r in rows}) > k:
                break
            assert time.monotonic() < deadline, "the UI submission never reached Argilla"
            page.wait_for_timeout(250)
        rated.append(next(r.record_external_id for r in rows if r.record_external_id not in rated))
    return rated
