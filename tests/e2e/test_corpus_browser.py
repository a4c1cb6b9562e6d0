"""The Corpus page in Chromium: a click on a sentence's point in a scatter names that sentence under the figure with
its link to Explore (the figure element hands the point back to the server, views/plot.js), and the page loads no
Plotly bundle but the page's own."""

from __future__ import annotations

import pytest

from harness.browser import DRAWN_JS, IDLE_JS
from model.interpret.corpus import MAX_BYTES
from tests.helpers import wait_still

TIMEOUT_MS = 120_000
PAIRS = [("the cat sat on the mat", "le chat est assis sur le tapis"), ("a dog runs", "un chien court")]
SCATTER = "[class*='st-key-corpus_scatter_source_share'] .decoder-lens-plot"  # its key ends with the set's id
# Where Plotly drew the point of sentence ``i``: the centre of its marker, in page coordinates.
POINT_JS = """([sel, i]) => {
  const gd = document.querySelector(sel), L = gd._fullLayout;
  for (const [c, trace] of gd._fullData.entries()) {
    const k = (trace.customdata || []).findIndex((d) => d[0] === i);
    if (k < 0) continue;
    const box = gd.querySelector('.nsewdrag').getBoundingClientRect();
    return {x: box.left + L.xaxis.l2p(trace.x[k]), y: box.top + L.yaxis.l2p(trace.y[k])};
  }
  return null;
}"""


def test_a_click_on_a_point_opens_its_sentence(browser, server):
    page = browser.new_page(viewport={"width": 1366, "height": 768})
    bundles = []
    page.on("request", lambda r: bundles.append(r.url) if "plotly" in r.url.lower() else None)
    try:
        page.goto(server + "/corpus?set=paste&run=1")
        box = page.locator(".st-key-corpus_paste textarea")
        box.fill("".join(f"{en}\t{fr}\n" for en, fr in PAIRS))
        box.press("Control+Enter")
        page.get_by_role("heading", name="What each head does over the set").wait_for(timeout=TIMEOUT_MS)
        page.locator(SCATTER).scroll_into_view_if_needed()
        wait_still(page, DRAWN_JS, TIMEOUT_MS, 3)
        assert page.get_by_text("Sentence 1:").count() == 0
        point = page.evaluate(POINT_JS, [SCATTER, 1])
        assert point is not None
        page.mouse.click(point["x"], point["y"])
        line = page.get_by_text("Sentence 1:")
        line.wait_for(timeout=TIMEOUT_MS)
        assert PAIRS[1][0] in line.inner_text()
        href = line.get_by_role("link", name="open it in Explore").get_attribute("href")
        assert href.startswith("/explore?") and "a+dog+runs" in href
        assert [u for u in bundles if "plotly-cartesian" not in u and "decoder-lens-plot" not in u] == []
    finally:
        page.close()


BOX_JS = """(sel) => {
  const el = document.querySelector(sel), box = (e) => { const r = e.getBoundingClientRect();
    return {left: r.left, top: r.top, right: r.right, bottom: r.bottom}; };
  return {title: box(el.querySelector('.gtitle')), modebar: box(el.querySelector('.modebar'))};
}"""


TABLE_JS = """() => {
  const frame = document.querySelector('[data-testid="stDataFrame"]');
  const bar = frame.querySelector('[data-testid="stElementToolbar"]');
  const above = document.querySelector('.st-key-corpus_flags');
  return {bar: bar.getBoundingClientRect().toJSON(), above: above.getBoundingClientRect().toJSON()};
}"""


@pytest.mark.parametrize("width, height", [(390, 844), (1366, 768)])
def test_the_toolbar_is_clear_of_the_titles(browser, server, width, height):
    """The flag chart and the second run's histogram: Plotly's toolbar (shown while the pointer is on the figure)
    never covers the title, on a phone's width too; nor does the sentences table's toolbar cover the flag filter's
    select just above the table (its chevron, on a phone)."""
    page = browser.new_page(viewport={"width": width, "height": height})
    try:
        page.goto(server + "/corpus?set=paste&run=1&vs=beam&vsbeam=2")
        box = page.locator(".st-key-corpus_paste textarea")
        box.fill("".join(f"{en}\t{fr}\n" for en, fr in PAIRS))
        box.press("Control+Enter")
        page.get_by_text("By sentence chrF").wait_for(timeout=TIMEOUT_MS)
        for key in ("corpus_flag_counts", "corpus_versus_histogram"):
            figure = page.locator(f".st-key-{key} .decoder-lens-plot")
            figure.scroll_into_view_if_needed()
            wait_still(page, DRAWN_JS, TIMEOUT_MS, 3)
            figure.hover()
            got = page.evaluate(BOX_JS, f".st-key-{key}")
            t, m = got["title"], got["modebar"]
            apart = t["bottom"] <= m["top"] or t["top"] >= m["bottom"] or t["right"] <= m["left"]
            assert apart and t["right"] <= width, (key, got)
        table = page.locator('[data-testid="stDataFrame"]').first
        table.scroll_into_view_if_needed()
        table.hover()
        page.locator('[data-testid="stElementToolbar"]').first.wait_for(timeout=TIMEOUT_MS)
        got = page.evaluate(TABLE_JS)
        assert got["bar"]["top"] >= got["above"]["bottom"] - 0.5, got
    finally:
        page.close()


@pytest.mark.parametrize("width, height", [(390, 844), (1366, 768)])
def test_a_refused_upload_says_why_in_a_sentence_one_can_see(browser, server, width, height):
    """A file over the upload limit is refused by the browser: the reason is written under the file's name, not only
    in its red icon's tooltip."""
    page = browser.new_page(viewport={"width": width, "height": height})
    try:
        page.goto(server + "/corpus?set=upload")
        upload = page.locator("[data-testid='stFileUploaderDropzoneInput']")
        upload.wait_for(state="attached", timeout=TIMEOUT_MS)
        upload.set_input_files(
            {"name": "big.tsv", "mimeType": "text/plain", "buffer": b"a\tb\n" * (MAX_BYTES // 4 + 1)}
        )
        alert = page.locator("[data-testid='stFileChip'] [role='alert']")
        alert.wait_for(state="attached", timeout=TIMEOUT_MS)
        box = alert.bounding_box()
        assert f"{MAX_BYTES // 2**20}.0MB or smaller" in alert.inner_text()
        assert box is not None and box["width"] > 150 and box["height"] >= 12 and box["x"] + box["width"] <= width
        assert page.get_by_text(f"Files up to {MAX_BYTES // 2**20} MB are read.").is_visible()
    finally:
        page.close()


def test_an_uploaded_set_is_kept_until_forgotten(browser, server):
    """The uploader's ✕ empties only the uploader: the set stays, said so, until "Forget this set", after which the
    page has no set to analyse."""
    page = browser.new_page(viewport={"width": 1366, "height": 768})
    try:
        page.goto(server + "/corpus?set=upload")
        upload = page.locator("[data-testid='stFileUploaderDropzoneInput']")
        upload.wait_for(state="attached", timeout=TIMEOUT_MS)
        upload.set_input_files({"name": "two.tsv", "mimeType": "text/plain", "buffer": b"one\tun\ntwo\tdeux\n"})
        page.get_by_text("2 sentences with references.").wait_for(timeout=TIMEOUT_MS)
        page.locator("[data-testid='stFileChip'] button").click()  # the uploader's ✕
        kept = page.get_by_text("The set kept from before: two.tsv")
        kept.wait_for(timeout=TIMEOUT_MS)
        assert page.get_by_text("2 sentences with references.").is_visible()
        page.get_by_role("button", name="Forget this set").click()
        kept.wait_for(state="detached", timeout=TIMEOUT_MS)
        page.wait_for_function(IDLE_JS, timeout=TIMEOUT_MS)
        assert page.get_by_text("2 sentences with references.").count() == 0
        assert page.get_by_role("button", name="Translate and analyse").count() == 0
        assert "digest" not in page.url
    finally:
        page.close()
