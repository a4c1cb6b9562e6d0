"""The handout opened from its file in Chromium, offline: no console error, no request outside the file, its figures
drawn with a toolbar that saves PNG and SVG, a position's ZIP holding each of its figures both ways, and axe-core
finds no critical or serious violation."""

from __future__ import annotations

import io
import zipfile

from axe_playwright_python.sync_playwright import Axe

from harness.handout import handout_of

DRAWN = "(n) => document.querySelectorAll('.plot.js-plotly-plot .main-svg').length >= n"


def test_the_handout_opens_offline_without_errors_and_saves_a_positions_figures(tiny_model_dir, browser, tmp_path):
    path = tmp_path / "handout.html"
    path.write_bytes(handout_of(tiny_model_dir, source="I like pizza.", max_len=3, stage="all"))
    page = browser.new_page(viewport={"width": 1366, "height": 768}, accept_downloads=True)
    errors, outside = [], []
    page.on("console", lambda m: m.type == "error" and errors.append(m.text))
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: r.url.startswith(("file:", "blob:", "data:")) or outside.append(r.url))
    page.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file:") else route.abort())
    try:
        page.goto(path.as_uri())
        first = page.locator("section").first
        n = first.locator(".plot").count()
        assert n > 10  # All stages at position 0
        page.wait_for_function(DRAWN, arg=1)
        svg = page.locator('.modebar-btn[data-title="Download plot as an SVG"]')
        png = page.locator('.modebar-btn[data-title="Download plot as a PNG"]')
        assert svg.count() >= 1 and png.count() >= 1
        with page.expect_download() as got:
            first.locator("button.zip").click()
        data = got.value.path().read_bytes()
        names = zipfile.ZipFile(io.BytesIO(data)).namelist()
        assert len(names) == 2 * n and sorted({name.rsplit(".", 1)[1] for name in names}) == ["png", "svg"], names
        z = zipfile.ZipFile(io.BytesIO(data))
        assert z.testzip() is None  # every entry's CRC checks
        assert all(z.read(m).startswith(b"\x89PNG") for m in names if m.endswith(".png"))
        assert all(b"<svg" in z.read(m)[:200] for m in names if m.endswith(".svg"))
        page.evaluate("() => document.querySelector('section:last-of-type').scrollIntoView()")
        page.wait_for_function(DRAWN, arg=n + 1)  # later positions drawn as they scroll near
        assert not errors, errors
        assert not outside, outside
        found = Axe().run(page).response["violations"]
        assert not [(v["id"], len(v["nodes"])) for v in found if v["impact"] in ("critical", "serious")], found
    finally:
        page.close()


def test_the_handout_prints_as_lecture_notes_with_every_figure_drawn(tiny_model_dir, browser, tmp_path):
    """Each position a page, each stage under its heading with its equation (MathML) before its figures; printed to
    PDF in Chromium, every figure is drawn (as an image in the print), none left blank."""
    import re

    n_positions = 4
    path = tmp_path / "handout.html"
    path.write_bytes(handout_of(tiny_model_dir, source="I like pizza.", max_len=n_positions, stage="all"))
    page = browser.new_page(viewport={"width": 1366, "height": 768})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(path.as_uri())
        sections = page.locator("section")
        assert sections.count() == n_positions
        first = sections.first
        assert first.locator(".stage h3").count() >= 5 and first.locator(".stage math").count() >= 5
        headings = first.locator(".stage h3").all_inner_texts()
        assert any("Masked self-attention" in h or "Self-attention" in h for h in headings), headings
        figures = page.locator(".plot").count()
        page.wait_for_function("() => document.documentElement.dataset.printReady", timeout=300_000)
        page.emulate_media(media="print")
        drawn = page.evaluate(
            "() => [...document.querySelectorAll('img.print-figure')].filter(i => i.complete && i.naturalWidth > 0"
            " && i.checkVisibility() && i.getBoundingClientRect().height > 20).length"
        )
        hidden = page.evaluate("() => [...document.querySelectorAll('.frame')].filter(f => f.checkVisibility()).length")
        assert drawn == figures and hidden == 0, (drawn, figures, hidden)
        pdf = page.pdf(format="A4", print_background=True)
        pages = len(re.findall(rb"/Type\s*/Page\b", pdf))
        assert pages >= n_positions, pages  # a page per position at least
        assert not errors, errors
    finally:
        page.close()


def test_on_a_phone_the_handout_scrolls_only_inside_its_frames(tiny_model_dir, browser, tmp_path):
    """Each stage's equation (MathML, 546 px) widened the page to 562 px in a 390 px window, cutting the text beside
    it: an equation now scrolls in its own frame, a keyboard stop only where it scrolls."""
    path = tmp_path / "handout.html"
    path.write_bytes(handout_of(tiny_model_dir, source="I like pizza.", max_len=2, stage="all"))
    page = browser.new_page(viewport={"width": 390, "height": 844})
    try:
        page.goto(path.as_uri())
        page.wait_for_function(DRAWN, arg=1)
        assert page.evaluate("() => document.documentElement.scrollWidth") <= 390
        wide = page.evaluate(
            "() => [...document.querySelectorAll('.eq')]"
            ".filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.tabIndex)"
        )
        assert wide and set(wide) == {0}  # some equations are wider than a phone, each reachable
        found = Axe().run(page).response["violations"]
        assert not [(v["id"], len(v["nodes"])) for v in found if v["impact"] in ("critical", "serious")], found
    finally:
        page.close()
