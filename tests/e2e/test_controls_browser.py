"""A student's controls in a browser, each doing only the work its change needs: opening *What if?* or *Export*, or
choosing inside one, reruns that panel alone, so the page is sent none of the step view's figures, chips or tables
again (each panel is a fragment of its own inside the step view's); forcing a token from the panel and Clear redraw
the translation and the step view for the new line, and send nothing of the page above them again; another stage
draws its figures in view at once and those below the window once the page's update is over, in an idle moment
(views/plot.js), and then every one of them.

A missing browser is a failure, never a skip."""

from __future__ import annotations

import time

from harness.browser import DRAWN_JS, IDLE_JS
from tests.e2e import test_student_edges_browser as edges
from tests.e2e.test_learn_browser import at_position, open_options
from tests.helpers import wait_idle

TIMEOUT_MS = 120_000
BEAM = "src=The%20cat%20is%20sleeping%20on%20the%20sofa.&strategy=beam&beam=3&max_len=8&stage=output&step=2"
# What the step view sends when it runs: a figure's element (views/plot.py) and the chips' line (views/stepping.py)
STEP_VIEW = (b'"figure": {', b"Generated so far")
# What a run of the whole Explore page sends above the translation: the title's caption and the sentence box's label
PAGE_TOP = (b"step through an English", b"English sentence (press Enter")
page = edges.page  # the fixture: a page at 1366 x 768


def received(page) -> list[bytes]:
    """Every websocket frame the page receives from now on (the list grows as they arrive)."""
    frames: list[bytes] = []

    def on_socket(ws) -> None:
        ws.on("framereceived", lambda f: frames.append(f if isinstance(f, bytes) else f.encode()))

    page.on("websocket", on_socket)
    return frames


def step_view_sent(frames: list[bytes]) -> list[bytes]:
    return [what for what in STEP_VIEW if any(what in f for f in frames)]


def settled(page) -> None:
    page.wait_for_function(IDLE_JS, timeout=TIMEOUT_MS)
    page.wait_for_function(DRAWN_JS, arg=1, timeout=TIMEOUT_MS)


def ran(page, frames: list[bytes]) -> None:
    """The run a choice started is over: its first frame came (on a busy machine a choice shows in the browser before
    its run starts, and an idle page then says nothing), the page has stayed idle since, and every figure is drawn."""
    end = time.monotonic() + TIMEOUT_MS / 1000
    while not frames:
        assert time.monotonic() < end, "the choice started no run"
        page.wait_for_timeout(20)  # Playwright hands the frames over while it waits
    wait_idle(page, TIMEOUT_MS)
    settled(page)


def open_panel(page, frames: list[bytes], key: str, shown: str) -> None:
    """Open the panel ``key`` by a click on its title, until ``shown`` is in it, the run over and every figure drawn."""
    frames.clear()
    page.locator(f".st-key-{key} summary").first.click()
    page.locator(shown).first.wait_for(timeout=TIMEOUT_MS)
    ran(page, frames)


def test_opening_a_panel_reruns_the_panel_alone(server, page):
    frames = received(page)
    page.goto(f"{server}/explore?{BEAM}")
    at_position(page, 2)
    settled(page)
    assert step_view_sent(frames) == list(STEP_VIEW)  # the first run sent the step view: what is looked for is there
    chips = page.locator(".st-key-chips").inner_text()
    figures = page.locator(".decoder-lens-plot").count()

    open_panel(page, frames, "whatif_open", ".st-key-whatif_go")
    assert frames and step_view_sent(frames) == []
    options = open_options(page, page.locator(".st-key-whatif_pick"))
    frames.clear()
    options.nth(2).click()  # another alternative: the panel's own choice
    page.wait_for_function(
        "() => document.querySelector('.st-key-whatif_pick input')?.value.startsWith('3. ')", timeout=TIMEOUT_MS
    )
    ran(page, frames)
    assert step_view_sent(frames) == []

    open_panel(page, frames, "export_open", ".st-key-dl_handout")
    assert frames and step_view_sent(frames) == []
    assert page.locator(".st-key-chips").inner_text() == chips  # the step view as it was, every figure still drawn
    assert page.locator(".decoder-lens-plot").count() == figures
    page.locator(".st-key-dl_steps button").wait_for(timeout=TIMEOUT_MS)  # the panel's buttons, shown


def french(page) -> str:
    """The French line's heading (the decoding, and the tokens forced) and its text."""
    return page.locator(".st-key-translation_block").inner_text().split("French (", 1)[1]


def test_a_token_forced_from_the_panel_and_clear_redraw_the_translation_and_the_step_view(server, page):
    frames = received(page)
    page.goto(f"{server}/explore?{BEAM}")
    at_position(page, 2)
    settled(page)
    assert [what for what in PAGE_TOP if any(what in f for f in frames)] == list(PAGE_TOP)  # looked for: there
    chips, own = page.locator(".st-key-chips").inner_text(), french(page)
    open_panel(page, frames, "whatif_open", ".st-key-whatif_go")

    frames.clear()
    page.locator(".st-key-whatif_go button").click()
    page.wait_for_function("() => new URL(location.href).searchParams.get('forced') !== null", timeout=TIMEOUT_MS)
    at_position(page, 3)  # the forced token read at the next position
    settled(page)
    assert step_view_sent(frames) == list(STEP_VIEW)
    assert not [what for what in PAGE_TOP if any(what in f for f in frames)]  # the page above: not run again
    assert "forced by you" in page.locator(".st-key-chips").inner_text()
    assert "1 token forced by you" in french(page) and "forced" not in own  # the French line is the forced one

    frames.clear()
    page.locator(".st-key-clear_forced button").click()
    page.wait_for_function("() => new URL(location.href).searchParams.get('forced') === null", timeout=TIMEOUT_MS)
    at_position(page, 3)
    settled(page)
    assert step_view_sent(frames) == list(STEP_VIEW)
    assert not [what for what in PAGE_TOP if any(what in f for f in frames)]
    assert "forced by you" not in page.locator(".st-key-chips").inner_text()
    assert french(page) == own
    page.locator(".st-key-prev button").first.click()
    at_position(page, 2)
    assert page.locator(".st-key-chips").inner_text() == chips  # the model's own line again


def test_opening_the_beam_candidates_reruns_the_translation_alone(server, page):
    frames = received(page)
    page.goto(f"{server}/explore?{BEAM}")
    at_position(page, 2)
    settled(page)
    open_panel(page, frames, "nbest_open", ".st-key-nbest_open [data-testid=stTable]")  # the candidates' table
    assert frames and step_view_sent(frames) == []
    assert not [what for what in PAGE_TOP if any(what in f for f in frames)]


# Every graph of the page and the element it sits in, marked; then how many of the page's graphs are not marked (new
# nodes: their elements were mounted anew and drawn from scratch) and how many marked ones left the page.
GRAPHS_JS = "[...document.querySelectorAll('.decoder-lens-plot')].flatMap((d) => [d, d.parentElement])"
MARK_JS = f"""() => {{ window.__marked = {GRAPHS_JS};
  window.__marked.forEach((n) => {{ n.__mark = true; }}); return window.__marked.length / 2; }}"""
UNMARKED_JS = f"""() => [{GRAPHS_JS}.filter((n) => !n.__mark).length,
  window.__marked.filter((n) => !n.isConnected).length]"""


def test_force_and_clear_update_every_graph_in_place(server, page):
    """A forced token and Clear redraw the page's graphs where they are, none remounted: an element whose place
    among the page's elements shifts (Clear's button, a note that comes or goes) is mounted anew by Streamlit, and
    every one after it with it, each graph then built from scratch instead of updated."""
    frames = received(page)
    page.goto(f"{server}/explore?{BEAM}")
    at_position(page, 2)
    settled(page)
    open_panel(page, frames, "whatif_open", ".st-key-whatif_go")
    assert page.evaluate(MARK_JS) > 0
    page.locator(".st-key-whatif_go button").click()
    page.wait_for_function("() => new URL(location.href).searchParams.get('forced') !== null", timeout=TIMEOUT_MS)
    at_position(page, 3)
    settled(page)
    assert page.evaluate(UNMARKED_JS) == [0, 0]  # after the force: the same graphs, updated

    page.locator(".st-key-clear_forced button").click()
    page.wait_for_function("() => new URL(location.href).searchParams.get('forced') === null", timeout=TIMEOUT_MS)
    at_position(page, 3)
    settled(page)
    assert page.evaluate(UNMARKED_JS) == [0, 0]  # after Clear too


# The browser's idle callbacks held back (views/plot.js draws a figure out of view in one), until released.
HOLD_IDLE_JS = """() => {
  window.__held = [];
  window.requestIdleCallback = (f) => window.__held.push(f);
  window.__release = () => {
    window.requestIdleCallback = (f) => setTimeout(f, 0);
    window.__held.splice(0).forEach((f) => f());
  };
}"""
# Each figure of the page: [drawn, in the window]
FIGURES_JS = """() => [...document.querySelectorAll('.decoder-lens-plot')].map((d) => {
  const r = d.getBoundingClientRect();
  return [d.classList.contains('js-plotly-plot'), r.bottom > 0 && r.top < innerHeight];
})"""


def test_another_stage_draws_the_figures_in_view_first_and_the_others_when_idle(server, page):
    page.goto(f"{server}/explore?{BEAM}")
    at_position(page, 2)
    settled(page)
    page.locator(".st-key-stage").evaluate("el => el.scrollIntoView({block: 'start'})")  # the stage's top in view
    page.evaluate(HOLD_IDLE_JS)
    page.locator(".st-key-stage").get_by_text("Cross-attention").first.click()
    page.wait_for_function("() => new URL(location.href).searchParams.get('stage') === 'cross'", timeout=TIMEOUT_MS)
    page.wait_for_function(IDLE_JS, timeout=TIMEOUT_MS)
    page.wait_for_function(
        "() => [...document.querySelectorAll('.decoder-lens-plot')].some((d) => d.classList.contains('js-plotly-plot')"
        " && d.querySelector('.gtitle')?.textContent.includes('Alignment'))",
        timeout=TIMEOUT_MS,
    )
    figures = page.evaluate(FIGURES_JS)
    assert any(seen for _, seen in figures) and not all(seen for _, seen in figures)
    assert all(drawn for drawn, seen in figures if seen)  # what the reader sees, drawn with no idle moment
    assert not any(drawn for drawn, seen in figures if not seen)  # the rest waits for one
    assert page.locator(".decoder-lens-plot:not(.js-plotly-plot)[data-deferred]").count() == sum(
        not seen for _, seen in figures
    )
    page.evaluate("window.__release()")
    page.wait_for_function(
        "n => document.querySelectorAll('.decoder-lens-plot.js-plotly-plot').length === n",
        arg=len(figures),
        timeout=TIMEOUT_MS,
    )  # then every one, one per idle moment, without a scroll
    settled(page)
