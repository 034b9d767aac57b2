"""The annotator quality figures are inlined in the page (``|safe``): names in them are text."""

import xml.etree.ElementTree as ET

from annotation.science.plots import rating_distributions, time_vs_deviation


def test_names_in_the_figures_are_text_never_markup():
    names = ["<img src=x onerror=alert(1)>", 'b"><script>alert(2)</script>']
    for svg in (
        rating_distributions(names, [[0.5, 0.5], [0.2, 0.8]], [1, 2]),
        time_vs_deviation(names, [3, 4], [1, 2], min_seconds=3),
    ):
        root = ET.fromstring(svg)
        assert not {e.tag.rsplit("}", 1)[-1] for e in root.iter()} & {"img", "script", "foreignObject", "iframe"}
        assert names[0] in "".join(root.itertext())


def test_the_figures_are_csp_safe_accessible_and_drawn_to_scale():
    from annotation.science.plots import rates_with_intervals

    names = ["ann", "bob", "cy"]
    shares = [[0.5, 0.25, 0.25], [0.0, 1.0, 0.0], [0.2, 0.3, 0.5]]
    figures = (
        rating_distributions(names, shares, [1, 2, 3]),
        time_vs_deviation(names, [3.0, None, 12.5], [0.4, 1.0, 0.1], min_seconds=4),
        rates_with_intervals(names, [0.9, None, 0.5], [0.7, None, 0.2], [0.97, None, 0.8], xlabel="control pass rate"),
    )
    for svg in figures:
        root = ET.fromstring(svg)
        assert root.get("role") == "img" and root.get("aria-label")
        assert not any("style" in e.attrib for e in root.iter()) and "<style" not in svg
    # Each annotator's stacked bar spans the whole axis: its segments' widths add up to it.
    bars = [e for e in ET.fromstring(figures[0]).iter() if e.tag.endswith("rect") and e.find("{*}title") is not None]
    widths: dict[str, float] = {}
    for bar in bars:
        who = bar.find("{*}title").text.split(":")[0]
        widths[who] = widths.get(who, 0) + float(bar.get("width"))
    assert set(widths) == set(names) and max(widths.values()) - min(widths.values()) < 0.5
    # The annotator with no timing has no point; the others have one each.
    circles = [e for e in ET.fromstring(figures[1]).iter() if e.tag.endswith("circle")]
    assert len(circles) == 2
