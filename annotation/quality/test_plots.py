"""The annotator quality figures are inlined in the page (``|safe``): names in them are text."""

import xml.etree.ElementTree as ET

from annotation.quality.plots import rating_distributions, time_vs_deviation


def test_names_in_the_figures_are_text_never_markup():
    names = ["<img src=x onerror=alert(1)>", 'b"><script>alert(2)</script>']
    for svg in (
        rating_distributions(names, [[0.5, 0.5], [0.2, 0.8]], [1, 2]),
        time_vs_deviation(names, [3, 4], [1, 2], min_seconds=3),
    ):
        root = ET.fromstring(svg)
        assert not {e.tag.rsplit("}", 1)[-1] for e in root.iter()} & {"img", "script", "foreignObject", "iframe"}
        assert names[0] in "".join(root.itertext())
