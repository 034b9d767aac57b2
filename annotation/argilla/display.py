"""How a text must be written for Argilla's web app to show it as written, and run none of it.

Pure: no Django, no I/O. ``client`` passes every text it sends to Argilla through ``for_argilla``,
so this is the one place that knows how the UI shows each kind of text.

What Argilla 2.8's web app does with each (read in its bundled frontend, checked in Chromium by
``tests/test_argilla_xss_browser.py``):

- a record's text field (``use_markdown`` off) goes into the page as HTML (``innerHTML``), and a
  text holding a closed tag pair (``<b>x</b>``) into a same-origin ``<iframe srcdoc>``: either
  way a dataset or LLM text ran as code, with the annotator's API key in reach;
- a question's description is shown in a tooltip as HTML;
- the dataset's guidelines are Markdown, turned into HTML and cleaned by DOMPurify, which keeps
  ``<style>`` (one line restyles or hides the whole page), ``<object>`` and ``<embed>``, and lets
  ``![](url)`` load any URL;
- titles (of fields and questions), option labels and names are set as text.

So HTML-shown texts get ``&``, ``<`` and ``>`` (and carriage returns, which the HTML parser would
drop) as character references, which the browser shows as the characters themselves; Markdown
guidelines get the same, so raw HTML shows as text while Markdown formatting still works, and the
``[`` of ``![`` too, so an image shows as the text that asked for it instead of loading; text-set
strings go as they are (a reference there would show literally). ``from_argilla`` undoes it
exactly, for anything read back from Argilla.

Limit: in a guideline's Markdown code span or code block, ``&``, ``<``, ``>`` and ``![`` show as
their escaped form (Markdown does not decode references there).
"""

from __future__ import annotations

import html
from enum import StrEnum


class Shown(StrEnum):
    """How Argilla's web app puts a string on the page."""

    HTML = "html"  # record text fields, question descriptions
    MARKDOWN = "markdown"  # dataset guidelines
    TEXT = "text"  # field and question titles, option labels, dataset and workspace names


_REFERENCES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "\r": "&#13;"})


def for_argilla(text: str, shown: Shown) -> str:
    """``text`` written so that Argilla's web app, putting it on the page as ``shown``, shows
    exactly its characters and runs none of them as code."""
    if shown is Shown.TEXT:
        return text
    encoded = text.translate(_REFERENCES)
    if shown is Shown.MARKDOWN:
        encoded = encoded.replace("![", "!&#91;")
    return encoded


def from_argilla(text: str, shown: Shown) -> str:
    """The text ``for_argilla(..., shown)`` was made from (what a person sees in Argilla)."""
    # Every "&" of an encoded text starts a reference for_argilla wrote: unescaping is exact.
    return text if shown is Shown.TEXT else html.unescape(text)
