"""End to end in a real browser: `streamlit run app.py` on a free port, driven by Playwright + Debian chromium.

CI (.ci/run) installs chromium; a missing browser is a failure, never a skip.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from pathlib import Path

from tests import helpers

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
XSS = "<img src=x onerror=alert(1)>"
TIMEOUT_MS = 90_000
PLOT_SIZES_JS = """() => [...document.querySelectorAll('.js-plotly-plot')].map(e => {
  const r = e.getBoundingClientRect();
  return [Math.round(r.width), Math.round(r.height)];
})"""


def set_source(page, text: str) -> None:
    box = page.locator(".st-key-source textarea")
    box.fill(text)
    box.press("Control+Enter")  # commit the text area (as blurring it would)


def chips_text(page) -> str:
    return page.locator(".st-key-chips").inner_text()


def wait_idle(page) -> None:
    helpers.wait_idle(page, TIMEOUT_MS)


def wait_for_chips(page, n: int) -> None:
    label = f"({n} token{'s' if n != 1 else ''})"
    page.locator(".st-key-chips", has_text=label).wait_for(timeout=TIMEOUT_MS)
    badges = max(n, 1)  # with nothing generated yet, one badge shows the start token <s>
    page.wait_for_function(
        "n => document.querySelectorAll('.st-key-chips .stMarkdownBadge').length === n", arg=badges, timeout=TIMEOUT_MS
    )


def test_browser_end_to_end(server, browser):
    ARTIFACTS.mkdir(exist_ok=True)
    dialogs: list[str] = []
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        page.set_default_timeout(TIMEOUT_MS)

        def on_dialog(d) -> None:
            dialogs.append(d.message)
            d.dismiss()

        page.on("dialog", on_dialog)
        page.goto(f"{server}/?max_len=12")  # short decodes keep the test fast; also checks the URL is read
        page.locator(".st-key-source textarea").wait_for()
        wait_idle(page)

        set_source(page, "I like pizza.")
        page.locator('[data-testid="stText"]', has_text="I like pizza.").first.wait_for()
        wait_idle(page)
        wait_for_chips(page, 0)
        for n in range(1, 4):
            page.locator(".st-key-next button:visible").first.click()
            wait_for_chips(page, n)
            wait_idle(page)
        assert page.locator(".st-key-chips .stMarkdownBadge").count() == 3
        assert "Generated so far (3 tokens)" in chips_text(page)
        step_text = page.locator(".st-key-next_chip").inner_text()
        m = re.search(r"Position 3 of 0–(\d+)", step_text)
        assert m and int(m.group(1)) + 1 <= 12, step_text  # max_len=12 from the URL: positions 0..11 at most

        # The default stage draws a few figures; "All stages" draws every stage's figures.
        few = page.locator(".js-plotly-plot").count()
        assert 1 <= few < 10, few
        page.locator(".st-key-stage button", has_text="All stages").first.click()
        wait_idle(page)
        assert "stage=all" in page.url  # the URL keeps the stage
        assert "Generated so far (3 tokens)" in chips_text(page)  # and the step

        # Plotly heatmaps rendered: SVG plots with heatmap layers drawn as images.
        page.wait_for_function(
            "() => document.querySelectorAll('.js-plotly-plot .main-svg').length >= 10 && "
            "document.querySelectorAll('.js-plotly-plot .hm image').length >= 10"
        )
        assert page.locator(".js-plotly-plot svg.main-svg").count() >= 10
        page.set_viewport_size({"width": 1400, "height": 3200})  # chips and the first heatmaps in one shot
        helpers.wait_still(page, PLOT_SIZES_JS, TIMEOUT_MS)  # redrawn at the new width
        page.screenshot(path=str(ARTIFACTS / "browser.png"))
        page.set_viewport_size({"width": 1400, "height": 1000})

        # User text is shown as text, never interpreted as HTML.
        set_source(page, XSS)
        page.locator('[data-testid="stText"]', has_text=XSS).first.wait_for()
        wait_idle(page)
        helpers.wait_images_settled(page, TIMEOUT_MS)  # an injected image's error handler has had its turn
        assert dialogs == []
        assert page.locator('img[src="x"]').count() == 0
        assert page.locator('[data-testid="stText"]', has_text=XSS).first.inner_text().strip() == XSS
        assert page.locator('[data-testid="stException"]').count() == 0
        page.screenshot(path=str(ARTIFACTS / "browser_xss.png"))
    finally:
        page.close()
    assert dialogs == []


# Where each figure is: "seen" well in the window, "near" below it within ``reach`` px, else "edge or far".
PLACES_JS = """(reach) => [...document.querySelectorAll('.decoder-lens-plot')].map(e => {
  const r = e.getBoundingClientRect();
  if (r.bottom > 0 && r.top < innerHeight - 150) return 'seen';
  return r.top > innerHeight && r.top < innerHeight + reach ? 'near' : 'edge or far';
})"""


def near_margin() -> int:
    """How far below the window a waiting figure is drawn without a scroll (views/plot.js ``NEAR``), in px."""
    match = re.search(r'const NEAR = "(\d+)px', (ROOT / "views" / "plot.js").read_text())
    assert match, "views/plot.js defines NEAR"
    return int(match.group(1))


@contextmanager
def all_stages_at_the_stepper(server, browser):
    """A page of the "All stages" view at 1366 × 768, drawn, the step buttons scrolled to the top of the window."""
    from harness.browser import PAINTED_JS

    page = browser.new_page(viewport={"width": 1366, "height": 768})
    try:
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(f"{server}/?max_len=12&stage=all&src=I+like+pizza.")
        page.wait_for_function(PAINTED_JS, arg=[0, 10, None])
        # the figures below the window are drawn once the first page's update is over (views/plot.js)
        page.wait_for_function("() => !document.querySelector('.decoder-lens-plot:not(.js-plotly-plot)')")
        page.locator(".st-key-next").first.evaluate("e => e.scrollIntoView({block: 'start'})")
        yield page
    finally:
        page.close()


def test_figures_stay_on_the_page_and_out_of_view_ones_update_when_they_scroll_near(server, browser):
    """Every figure keeps its graph between steps (updated in place, not rebuilt); after ▶ in "All stages" the
    figures far below the window wait, marked ``data-deferred``, still showing the previous position, and are
    brought up to date when they scroll near."""
    from harness.browser import PAINTED_JS, SHOWN_JS

    with all_stages_at_the_stepper(server, browser) as page:
        plots = page.locator(".decoder-lens-plot")
        n = plots.count()
        assert n >= 20, n
        page.evaluate("() => document.querySelectorAll('.decoder-lens-plot').forEach((e, i) => e.__mark = i)")
        page.locator(".st-key-next button").first.click()
        page.wait_for_function(PAINTED_JS, arg=[1, 10, None])
        marks = page.evaluate("() => [...document.querySelectorAll('.decoder-lens-plot')].map(e => e.__mark)")
        assert marks == list(range(n))  # the same elements: each graph was updated where it was
        # those near the window are drawn once the page's update is over; from then on the rest wait for a scroll
        page.wait_for_function(
            "(m) => ![...document.querySelectorAll('[data-deferred], [data-drawing]')]"
            ".some(e => e.getBoundingClientRect().top < innerHeight + m)",
            arg=near_margin(),
        )
        deferred = page.locator(".decoder-lens-plot[data-deferred]")
        waiting = deferred.count()
        assert waiting >= 5, waiting  # most of the page is out of view
        last = deferred.last
        assert 1 not in last.evaluate(SHOWN_JS)  # not redrawn yet
        # ... nor laid out or painted: the browser skips a graph out of view, and renders one in view
        skipped = "e => !e.querySelector('.main-svg').checkVisibility({contentVisibilityAuto: true})"
        assert last.evaluate(skipped) and not plots.nth(0).evaluate(skipped)
        tracked = [i for i in range(n) if plots.nth(i).evaluate(SHOWN_JS)]
        drawn = [i for i in tracked if plots.nth(i).get_attribute("data-deferred") is None]
        assert drawn and all(plots.nth(i).evaluate(SHOWN_JS) == [1] for i in drawn)
        target = tracked[-1]
        plots.nth(target).evaluate("e => e.scrollIntoView({block: 'center'})")
        page.wait_for_function(
            "([i]) => { const e = document.querySelectorAll('.decoder-lens-plot')[i]; "
            "return !e.hasAttribute('data-deferred') && !e.hasAttribute('data-drawing'); }",
            arg=[target],
        )
        assert plots.nth(target).evaluate(SHOWN_JS) == [1]


def test_a_step_draws_the_figures_in_view_at_once_and_those_just_below_once_its_update_is_over(server, browser):
    """After ▶ in "All stages", a figure in the window is drawn at once (never marked waiting), and one just below it
    (within the page's drawing margin, out of the window) waits, marked ``data-deferred``, and is drawn once the
    page's update is over, without any scrolling: the step paints what the reader sees first."""
    from harness.browser import PAINTED_JS, SHOWN_JS

    margin = near_margin()
    with all_stages_at_the_stepper(server, browser) as page:
        # where each figure is: well in the window, or below it well within the margin (a step lengthens the page
        # above them by a row of its table, and a figure at the window's edge may leave it), once the page stays so
        helpers.wait_still(page, PLACES_JS, TIMEOUT_MS, margin // 2)
        places = page.evaluate(PLACES_JS, margin // 2)
        plots = page.locator(".decoder-lens-plot")
        tracking = [plots.nth(i).evaluate(SHOWN_JS) == [0] for i in range(len(places))]  # redrawn by a step
        seen = [i for i, w in enumerate(places) if w == "seen" and tracking[i]]
        near = [i for i, w in enumerate(places) if w == "near" and tracking[i]]
        assert seen and near, (places, tracking)
        page.evaluate(
            """() => {
              window.__waited = new Set();
              const plots = [...document.querySelectorAll('.decoder-lens-plot')];
              new MutationObserver((records) => records.forEach((m) => {
                if (m.target.hasAttribute('data-deferred')) window.__waited.add(plots.indexOf(m.target));
              })).observe(document.body, {attributes: true, attributeFilter: ['data-deferred'], subtree: true});
            }"""
        )
        page.locator(".st-key-next button").first.click()
        page.wait_for_function(PAINTED_JS, arg=[1, 10, None])
        page.wait_for_function(  # the figures just below follow without a scroll
            """(near) => near.every((i) => {
              const e = document.querySelectorAll('.decoder-lens-plot')[i];
              return !e.hasAttribute('data-deferred') && !e.hasAttribute('data-drawing');
            })""",
            arg=near,
        )
        waited = set(page.evaluate("() => [...window.__waited]"))
        assert not waited & set(seen), (waited, seen)  # in the window: drawn at once
        assert set(near) <= waited, (waited, near)  # just below: waited for the step's update to be over
        assert all(plots.nth(i).evaluate(SHOWN_JS) == [1] for i in seen + near)


def test_plotly_is_fetched_with_the_page_not_after_its_first_figure(server, browser):
    """The page's shell (views/shell.py) preloads Plotly's bundle from its <head>: the request starts before the
    document has been parsed (the first figure's loader would start it only once the page's elements arrive),
    Plotly is fetched once, and the preload is used (Chromium warns in the console about one that is not)."""
    from harness.browser import DRAWN_JS
    from views.plot import PLOTLY_ROUTE

    page = browser.new_page(viewport={"width": 1366, "height": 768})
    try:
        page.set_default_timeout(TIMEOUT_MS)
        console = []
        page.on("console", lambda m: console.append(m.text) if m.type in ("warning", "error") else None)
        page.goto(f"{server}/?max_len=12&src=I+like+pizza.")
        page.wait_for_function(DRAWN_JS, arg=1)
        page.wait_for_timeout(3500)  # Chromium's "preloaded but not used" warning comes ~3 s after load
        starts = page.evaluate(
            """(route) => [performance.getEntriesByType('navigation')[0].domContentLoadedEventStart,
                performance.getEntriesByType('resource').filter(e => e.name.endsWith(route))
                    .map(e => e.startTime)]""",
            PLOTLY_ROUTE,
        )
    finally:
        page.close()
    parsed, plotly = starts
    assert len(plotly) == 1, plotly
    assert plotly[0] < parsed, starts
    assert not [m for m in console if "preload" in m], console
