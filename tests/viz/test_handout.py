"""The handout's page (``viz.handout``): self-contained, user text escaped, each distinct figure written once."""

from __future__ import annotations

import json
import re

import pytest

from viz.handout import HandoutFigure, HandoutPosition, handout_html

PLOTLY = "window.Plotly = {};"
FIG = json.dumps({"data": [{"type": "heatmap", "z": [[1, 2]]}], "layout": {"title": {"text": "a &lt;/script&gt; b"}}})


def table(page: str) -> dict:
    return json.loads(re.search(r'<script type="application/json" id="figures">(.*?)</script>', page, re.S).group(1))


def page_of(**kw) -> str:
    positions = (
        HandoutPosition("Position 0: reads <s> → predicts ␣La", (HandoutFigure("f1", "desc <b>one</b>", "p0_a"),)),
        HandoutPosition(
            "Position 1", (HandoutFigure("f1", "same figure again", "p1_a"), HandoutFigure("f2", "two", "p1_b"))
        ),
    )
    args = {
        "title": "Handout",
        "lines": (("English", "<img src=x onerror=alert(1)>"), ("French", "Le chat")),
        "positions": positions,
        "figures": {"f1": FIG, "f2": FIG.replace("heatmap", "bar")},
        "plotly_js": PLOTLY,
    }
    return handout_html(**{**args, **kw})


def test_one_self_contained_page_with_every_figure_once():
    page = page_of()
    assert page.count(PLOTLY) == 1  # Plotly inlined once
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=", page)  # nothing loaded from elsewhere
    figs = table(page)
    assert set(figs) == {"f1", "f2"} and figs["f1"]["layout"]["title"]["text"] == "a &lt;/script&gt; b"
    assert page.count('data-ref="f1"') == 2 and page.count('data-ref="f2"') == 1  # drawn twice, written once
    assert page.count("<section") == 2 and page.count('class="zip"') == 2
    assert "Position 0: reads &lt;s&gt; → predicts ␣La" in page


def test_user_text_is_escaped_and_cannot_close_the_script():
    page = page_of()
    assert "<img src=x" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "desc &lt;b&gt;one&lt;/b&gt;" in page
    evil = json.dumps({"data": [], "layout": {"title": {"text": "</script><script>alert(1)</script>"}}})
    page = page_of(figures={"f1": evil, "f2": FIG})
    assert "</script><script>alert(1)" not in page
    assert table(page)["f1"]["layout"]["title"]["text"] == "</script><script>alert(1)</script>"


def test_a_figure_missing_from_the_table_or_a_bundle_that_closes_the_script_is_refused():
    with pytest.raises(ValueError, match="missing"):
        page_of(figures={"f1": FIG})
    with pytest.raises(ValueError, match="closing script"):
        page_of(plotly_js="x = '</script>';")
