"""How texts are written for Argilla's web app (``annotation.argilla.display``); the real UI is
checked in Chromium by tests/test_argilla_xss_browser.py."""

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from annotation.argilla.display import Shown, for_argilla, from_argilla
from tests.xss_corpus import corpus

# Every character that means something to HTML or Markdown, and others, often.
TEXTS = st.text(alphabet=st.sampled_from("<>&;#![]()/\\\"'`*_ \r\n\tab1\u202e\u200bé🧪") | st.characters(), max_size=80)


@settings(max_examples=300, deadline=None)
@given(TEXTS, st.sampled_from(list(Shown)))
def test_what_argilla_shows_is_the_text_itself(text, shown):
    assert from_argilla(for_argilla(text, shown), shown) == text


@settings(max_examples=300, deadline=None)
@given(TEXTS, st.sampled_from([Shown.HTML, Shown.MARKDOWN]))
def test_nothing_sent_as_html_can_open_a_tag(text, shown):
    sent = for_argilla(text, shown)
    assert "<" not in sent and ">" not in sent and "\r" not in sent
    # Every "&" starts one of the references written here: none of the text's own survives.
    assert re.sub(r"&(amp|lt|gt|#13|#91);", "", sent).count("&") == 0
    if shown is Shown.MARKDOWN:
        assert "![" not in sent  # no Markdown image: nothing loads from a URL in the text


def test_the_payloads_of_the_issue():
    assert for_argilla("<img src=x onerror=alert(1)>", Shown.HTML) == "&lt;img src=x onerror=alert(1)&gt;"
    assert for_argilla("&lt; stays &lt;", Shown.HTML) == "&amp;lt; stays &amp;lt;"
    assert for_argilla("**Bold** <b>x</b> ![i](http://e/x.png)", Shown.MARKDOWN) == (
        "**Bold** &lt;b&gt;x&lt;/b&gt; !&#91;i](http://e/x.png)"
    )
    assert for_argilla("Quality <1-5> & more", Shown.TEXT) == "Quality <1-5> & more"  # the UI sets it as text
    for _, text in corpus("http://127.0.0.1:9"):
        assert from_argilla(for_argilla(text, Shown.HTML), Shown.HTML) == text
