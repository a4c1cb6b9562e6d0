"""Small screens, the keyboard, screen readers and the figures' toolbar, in a real browser (Playwright + Debian
chromium) against the tiny model: nothing makes the page scroll sideways at 390×844 or 768×1024, the stepper
stays in the window in "All stages", ← / → step except while typing, the step buttons and heatmaps have names,
no toolbar offers to upload a figure, each page has its address (older links still open theirs), and axe-core
(the engine bundled with axe-playwright-python; no network) finds no critical or serious violation on any page at
1366×768 and 390×844, each page's headings in order."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from functools import partial
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from classroom.db import URL_ENV
from harness.browser import DRAWN_JS, SCROLLED_JS, serve
from model.io.checkpoint import ENV_MODEL
from tests.helpers import seed_class, wait_idle, wait_still
from views.stepping import WHATIF_LABEL

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
TIMEOUT_MS = 120_000
STEP_NAMES = ("First position", "Previous position", "Next position", "Last position")
# The page's own sideways overflow: the document, and Streamlit's main container (the page scrolls inside it).
OVERFLOW_JS = """
() => {
  const main = document.querySelector('[data-testid="stMain"]');
  return {doc: document.documentElement.scrollWidth, view: innerWidth,
          main: main.scrollWidth, mainView: main.clientWidth};
}
"""
# Each figure: its own width, the width its frame shows, and whether that frame lies inside the window.
FRAMES_JS = """
() => [...document.querySelectorAll('.decoder-lens-plot')].filter(d => d._fullLayout).map(d => {
  const frame = d.parentElement.getBoundingClientRect();
  const title = String((d._fullLayout.title || {}).text || '').slice(0, 50);
  return {title, fixed: (d.layout || {}).width || null, drawn: d.getBoundingClientRect().width, frame: frame.width,
          scrolls: getComputedStyle(d.parentElement).overflowX,
          inside: frame.left >= -1 && frame.right <= innerWidth + 1};
})
"""


@pytest.fixture(scope="module")
def classes(tmp_path_factory):
    """This module's class store, with one class of a few students who have answered: the dashboard's path."""
    url = f"sqlite:///{tmp_path_factory.mktemp('classes') / 'classes.db'}"
    store, cls = seed_class(url, 4)
    yield url, f"/class?c={cls.id}&t={cls.secret}"
    store.close_connections()


@pytest.fixture(scope="module")
def server(tmp_path_factory, classes):
    from model.testing import build_tiny_model_dir

    tmp = tmp_path_factory.mktemp("a11y")
    model_dir = build_tiny_model_dir(tmp / "tiny")
    log = tmp / "streamlit.log"
    with serve(ROOT / "app.py", log, {ENV_MODEL: str(model_dir), URL_ENV: classes[0]}) as srv:
        yield srv.url
    text = log.read_text(errors="replace")
    assert "Traceback" not in text, text[-4000:]


def open_page(browser, url: str, width: int, height: int, min_plots: int = 1):
    """The page at ``url``, once it shows at least ``min_plots`` figures and every figure is drawn (the encoder's,
    in a closed expander, may not be: they are not counted on)."""
    page = browser.new_page(viewport={"width": width, "height": height})
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(url)
    page.wait_for_function(DRAWN_JS, arg=min_plots)
    return page


def position(page) -> int:
    m = re.search(r"Position (\d+) of", page.locator(".st-key-next_chip").inner_text())
    assert m, page.locator(".st-key-next_chip").inner_text()
    return int(m.group(1))


def wait_position(page, n: int) -> None:
    page.locator(".st-key-next_chip", has_text=f"Position {n} of").wait_for()


@pytest.mark.parametrize("width,height", [(390, 844), (768, 1024)])
@pytest.mark.parametrize("stage", ["default", "all"])
def test_small_screens_never_scroll_sideways(server, browser, width, height, stage):
    """Figures fit the column or scroll inside their own frame (square cells keep their size); the page itself
    never scrolls sideways. At 768 px every figure fits without scrolling."""
    ARTIFACTS.mkdir(exist_ok=True)
    query = "&stage=all" if stage == "all" else ""
    # 16 source tokens, 14 positions: square figures as wide as a tablet's column holds
    page = open_page(
        browser,
        f"{server}/?max_len=14&src=The+cat+is+sleeping+on+the+sofa.&step=3{query}",
        width,
        height,
        min_plots=10 if stage == "all" else 1,
    )
    try:
        wait_still(page, DRAWN_JS, TIMEOUT_MS, 1)  # laid out, and staying so
        size = page.evaluate(OVERFLOW_JS)
        assert size["doc"] <= size["view"], size
        assert size["main"] <= size["mainView"], size
        frames = page.evaluate(FRAMES_JS)
        assert frames and all(f["inside"] and f["scrolls"] == "auto" for f in frames), frames
        for f in frames:
            if f["fixed"]:  # square cells: drawn at their own width, however narrow the screen
                assert abs(f["drawn"] - f["fixed"]) <= 1, f
        if width >= 768:
            assert not [f for f in frames if f["drawn"] > f["frame"] + 1]  # everything fits
        else:
            assert any(f["drawn"] > f["frame"] + 1 for f in frames), frames  # some scroll in their frames
        page.screenshot(path=str(ARTIFACTS / f"small_screen_{width}_{stage}.png"))
    finally:
        page.close()


def test_stepper_stays_in_the_window_in_all_stages(server, browser):
    page = open_page(browser, f"{server}/?max_len=8&src=I+like+pizza.&stage=all", 390, 844, min_plots=10)
    try:
        page.evaluate(
            "() => { const m = document.querySelector('[data-testid=stMain]'); m.scrollTop = 0.8 * m.scrollHeight; }"
        )
        wait_still(page, "() => document.querySelector('[data-testid=stMain]').scrollTop", TIMEOUT_MS)
        assert page.evaluate("() => document.querySelector('[data-testid=stMain]').scrollTop") > 3000
        nxt = page.get_by_role("button", name="Next position")
        box = nxt.bounding_box()
        assert box and 0 <= box["y"] and box["y"] + box["height"] <= 844, box
        # the slider on the buttons' row: the stuck stepper keeps little of a phone's screen
        stuck = page.evaluate(
            "() => document.querySelector('.st-key-stepper').closest('[data-testid=stLayoutWrapper]')"
            ".getBoundingClientRect().height"
        )
        assert stuck <= 100, stuck
        nxt.click()  # reachable: clicked where it is, without scrolling back
        wait_position(page, 1)
        page.screenshot(path=str(ARTIFACTS / "stepper_sticky_390.png"))
    finally:
        page.close()


def test_arrow_keys_step_and_buttons_and_heatmaps_have_names(server, browser):
    page = open_page(browser, f"{server}/?max_len=8&src=I+like+pizza.", 1366, 768)
    try:
        for name in STEP_NAMES:
            page.get_by_role("button", name=name, exact=True).wait_for(timeout=10_000)  # visible, named
        assert position(page) == 0
        page.evaluate("() => document.activeElement && document.activeElement.blur()")
        page.keyboard.press("ArrowRight")
        wait_position(page, 1)
        page.keyboard.press("ArrowRight")
        wait_position(page, 2)
        page.keyboard.press("ArrowLeft")
        wait_position(page, 1)
        box = page.locator(".st-key-source textarea")
        box.click()
        box.press("End")
        box.press("ArrowLeft")
        box.press("ArrowRight")
        wait_idle(page, TIMEOUT_MS)  # a step would have started within the wait's stillness
        assert position(page) == 1  # typing in the text box does not step
        assert box.input_value() == "I like pizza."
        # Heatmaps read as one image with a line computed from their data. The drawing carries it, so it describes
        # what is drawn: a figure out of view keeps its last drawing (and line) until it scrolls near.
        page.locator(".decoder-lens-plot").first.scroll_into_view_if_needed()
        page.wait_for_function(SCROLLED_JS)
        alt = page.get_by_role(
            "img", name=re.compile(r"heatmap of \d+ rows? × \d+ columns?; row \d+ .* attends most to")
        )
        assert alt.count() >= 1
        label = alt.first.get_attribute("aria-label")
        assert re.search(r"\(\d\.\d\d\)\.$", label), label
    finally:
        page.close()


def test_toolbars_save_png_and_svg_and_never_offer_to_upload_a_figure(server, browser):
    page = open_page(browser, f"{server}/?max_len=8&src=I+like+pizza.&stage=all", 1366, 768, min_plots=10)
    try:
        titles = page.evaluate(
            "() => [...document.querySelectorAll('.modebar-btn')].map(b => b.getAttribute('data-title'))"
        )
        assert "Download plot as a PNG" in titles and "Download plot as an SVG" in titles  # the toolbars are there ...
        bad = [t for t in titles if re.search(r"share|cloud|chart studio|edit in", t or "", re.I)]
        assert not bad, bad  # ... without an upload button
    finally:
        page.close()


# Every block of code: whether it scrolls in its frame, and whether it is a keyboard stop.
CODE_FRAMES_JS = "() => [...document.querySelectorAll('pre')].map(p => [p.scrollWidth > p.clientWidth, p.tabIndex])"


def test_a_frame_that_comes_to_scroll_becomes_a_keyboard_stop(server, browser):
    """A block of code whose column narrows with no mutation the page watches and no window resize (a style set on
    its column, as a scrollbar appearing would) scrolls in its frame, and the keyboard reaches it; widened again, it
    is no stop."""
    stops = "() => { const f = (%s)(); return f.length > 0 && f.every(([s, t]) => t === (s ? 0 : -1)) && %s; }"
    page = browser.new_page(viewport={"width": 1366, "height": 768})
    page.set_default_timeout(TIMEOUT_MS)
    try:
        page.goto(f"{server}/about")
        page.wait_for_function("() => window.__decoderLensPage === true && document.querySelector('pre') !== null")
        page.wait_for_function(stops % (CODE_FRAMES_JS, "f.every(([s]) => !s)"))  # at 1366 none scrolls
        page.evaluate("() => document.querySelectorAll('pre').forEach(p => { p.parentElement.style.width = '60px'; })")
        page.wait_for_function(stops % (CODE_FRAMES_JS, "f.some(([s]) => s)"), timeout=10_000)
        page.evaluate("() => document.querySelectorAll('pre').forEach(p => { p.parentElement.style.width = ''; })")
        page.wait_for_function(stops % (CODE_FRAMES_JS, "f.every(([s]) => !s)"), timeout=10_000)
    finally:
        page.close()


def sidebar_shown(page) -> bool:
    return page.evaluate(
        "() => { const s = document.querySelector('[data-testid=stSidebar]'); "
        "return !!s && s.getBoundingClientRect().right > 10 && s.getBoundingClientRect().width > 100; }"
    )


def test_each_page_has_its_address_and_older_links_still_open_theirs(server, browser):
    """An older Explore link (the root with Explore's parameters) opens /explore with its query; the navigation bar
    moves between the pages' own paths, reached and followed by the keyboard; Learn opens without the sidebar."""
    page = open_page(browser, f"{server}/?max_len=8&src=I+like+pizza.&step=2", 1366, 768)
    try:
        url = urlsplit(page.url)
        assert url.path == "/explore" and parse_qs(url.query)["step"] == ["2"] and "page" not in parse_qs(url.query)
        wait_position(page, 2)
        assert sidebar_shown(page)  # Explore's choices
        page.get_by_role("link", name="Compare").first.click()
        page.get_by_role("heading", name=re.compile("Compare two sentences")).wait_for()
        assert urlsplit(page.url).path == "/compare"
        about = page.get_by_role("link", name="About").first
        about.focus()
        page.keyboard.press("Enter")
        page.get_by_role("heading", name=re.compile("About Decoder Lens")).wait_for()
        assert urlsplit(page.url).path == "/about" and not urlsplit(page.url).query
        page.get_by_role("link", name="Learn").first.click()
        page.get_by_role("heading", name=re.compile("Learn: how a decoder")).wait_for()
        page.wait_for_url(re.compile(r"chapter="))
        url = urlsplit(page.url)
        assert url.path == "/" and parse_qs(url.query)["chapter"] == ["0"]
        wait_idle(page, TIMEOUT_MS)
        assert not sidebar_shown(page)
        page.goto(f"{server}/?page=Compare&src=I+like+pizza.&srcb=I+like+pasta.")
        page.get_by_role("heading", name=re.compile("Compare two sentences")).wait_for()
        page.wait_for_url(re.compile(r"/compare\?"))
        url = urlsplit(page.url)
        assert url.path == "/compare" and parse_qs(url.query)["srcb"] == ["I like pasta."]
    finally:
        page.close()


SRC = "src=I+like+pizza."
# Each page axe reads: its address, the figures it shows at least, and the panel opened first (if any).
AXE_PAGES = {
    "learn-check": (f"/?chapter=0&{SRC}", 0, None),
    "learn-chapter-3": (f"/?chapter=3&{SRC}", 1, None),
    "learn-chapter-7": (f"/?chapter=7&{SRC}", 1, None),
    "learn-chapter-13": (f"/?chapter=13&{SRC}", 1, None),
    "explore": (f"/explore?max_len=8&{SRC}", 1, None),
    "explore-default": ("/explore", 1, None),  # what a student sees first: the selected stage's button included
    "explore-all-stages": (f"/explore?max_len=8&{SRC}&stage=all", 10, None),
    "explore-what-if": (f"/explore?max_len=8&{SRC}", 1, WHATIF_LABEL),
    "compare": (f"/compare?{SRC}&srcb=I+like+pasta.", 1, None),
    "about": ("/about", 0, None),
}
# Rules that only Streamlit's own markup breaks (the app cannot mend them), with the reason. None today.
STREAMLIT_ONLY: dict[str, str] = {}
# Every heading of the document in its order, the sidebar's included (it comes before the page's title).
HEADINGS_JS = """
() => [...document.querySelectorAll(':is(h1, h2, h3, h4, h5, h6)')]
  .filter(h => h.checkVisibility()).map(h => [Number(h.tagName[1]), h.innerText.trim().slice(0, 60)])
"""


def axe_report(results: dict) -> list[dict]:
    return [
        {"rule": v["id"], "impact": v["impact"], "nodes": len(v["nodes"]), "first": v["nodes"][0]["html"][:160]}
        for v in results["violations"]
    ]


def axe_check(page, name: str, width: int) -> None:
    """axe-core on the page as it is: no critical or serious violation the app can mend, headings in order. Its
    findings go to test-artifacts/axe_NAME_WIDTH.json, and a screenshot of the whole window beside them."""
    from axe_playwright_python.sync_playwright import Axe

    found = axe_report(Axe().run(page).response)
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / f"axe_{name}_{width}.json").write_text(json.dumps(found, indent=1, ensure_ascii=False))
    page.screenshot(path=str(ARTIFACTS / f"axe_{name}_{width}.png"))
    bad = [v for v in found if v["impact"] in ("critical", "serious") and v["rule"] not in STREAMLIT_ONLY]
    assert not bad, json.dumps(bad, indent=1, ensure_ascii=False)
    assert not [v for v in found if v["rule"] == "heading-order"], found
    levels = page.evaluate(HEADINGS_JS)
    assert levels and levels[0][0] == 1, levels  # the page's title first ...
    assert all(b[0] <= a[0] + 1 for a, b in zip(levels, levels[1:])), levels  # ... and no level skipped


class AxePages:
    """The axe tests' pages, each asked for while the test before it runs (its own page, in a context of its own):
    the server and the browser load the next page while axe reads this one. A test then waits for its page's
    state as if it had just asked for it, so axe reads the same state; pages asked for but not taken (a test
    deselected or failed) are closed with the module."""

    def __init__(self, browser, address, order: list[tuple[str, int, int]]):
        self.browser, self.address, self.order = browser, address, order  # address(name): the page's URL
        self.asked: dict[tuple[str, int, int], object] = {}

    def ask(self, key: tuple[str, int, int]) -> None:
        if key not in self.asked:
            name, width, height = key
            page = self.browser.new_page(viewport={"width": width, "height": height})
            page.set_default_timeout(TIMEOUT_MS)
            page.goto(self.address(name), wait_until="commit")
            self.asked[key] = page

    def take(self, key: tuple[str, int, int]):
        """The page of ``key``, loaded; the page of the test after it asked for."""
        self.ask(key)
        page = self.asked.pop(key)
        later = self.order[self.order.index(key) + 1 :] if key in self.order else []
        if later:
            self.ask(later[0])
        page.wait_for_load_state("load")
        return page

    def close(self) -> None:
        for page in self.asked.values():
            page.close()


@pytest.fixture(scope="module")
def axe_pages(request, server, classes, browser):
    """The module's axe pages, in the order of the axe tests that this session runs."""

    def address(name: str) -> str:
        path = AXE_PAGES[name][0] if name in AXE_PAGES else AXE_CLASS_CORPUS[name][0]
        return server + (path or classes[1])

    order = [
        (item.callspec.params["name"], item.callspec.params["width"], item.callspec.params["height"])
        for item in request.session.items
        if item.module is request.module and "axe_pages" in item.fixturenames
    ]
    pages = AxePages(browser, address, order)
    yield pages
    pages.close()


def open_for_axe(axe_pages: AxePages, name: str, width: int, height: int, plots: int):
    page = axe_pages.take((name, width, height))
    page.get_by_role("heading", level=1).first.wait_for()
    page.wait_for_function("() => window.__decoderLensPage === true")  # the page's own behaviour and styles
    wait_still(page, DRAWN_JS, TIMEOUT_MS, plots)
    return page


# A small set pasted on the Corpus page (the bundled sets live in a data directory the tests do not rely on).
CORPUS_SET = "the cat sat on the mat\tle chat est assis sur le tapis\na dog runs\tun chien court\nI like pizza.\n"


def create_class(page) -> None:
    page.locator(".st-key-class_name input").fill("Monday 9:00")
    page.get_by_role("button", name="Create the class").click()
    page.get_by_role("link", name="Open the dashboard").wait_for()
    wait_idle(page, TIMEOUT_MS)


def analyse_pasted_set(page) -> None:
    box = page.locator(".st-key-corpus_paste textarea")
    box.fill(CORPUS_SET)
    box.press("Control+Enter")
    page.get_by_role("heading", name="What each head does over the set").wait_for()
    wait_still(page, DRAWN_JS, TIMEOUT_MS, 3)


# The Class and Corpus pages: the address (a path, or the seeded dashboard's), the figures shown at least, and what
# is done on the page before axe reads it (if anything).
AXE_CLASS_CORPUS = {
    "class": ("/class", 0, None),
    "class-created": ("/class", 0, create_class),
    "class-dashboard": (None, 4, None),
    "corpus": ("/corpus?set=paste", 0, None),
    "corpus-analysed": ("/corpus?set=paste&run=1", 0, analyse_pasted_set),
}


def open_panel(panel: str | None, plots: int, page) -> None:
    if panel:
        page.get_by_text(panel).first.click()
        page.locator(".st-key-whatif_go").wait_for()
        wait_still(page, DRAWN_JS, TIMEOUT_MS, plots)


def act_then_idle(action, page) -> None:
    if action:
        action(page)
    wait_idle(page, TIMEOUT_MS)


def axe_case(name: str) -> tuple[int, Callable]:
    """The figures shown at least on page ``name``, and what is done there before axe reads it."""
    if name in AXE_PAGES:
        _, plots, panel = AXE_PAGES[name]
        return plots, partial(open_panel, panel, plots)
    _, plots, action = AXE_CLASS_CORPUS[name]
    return plots, partial(act_then_idle, action)


@pytest.mark.parametrize("width,height", [(1366, 768), (390, 844)])
@pytest.mark.parametrize("name", [*AXE_PAGES, *AXE_CLASS_CORPUS])
def test_axe_finds_no_serious_violation_and_headings_are_in_order(axe_pages, name, width, height):
    plots, action = axe_case(name)
    page = open_for_axe(axe_pages, name, width, height, plots)
    try:
        action(page)
        axe_check(page, name, width)
    finally:
        page.close()
