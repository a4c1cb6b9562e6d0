"""What a student still meets only in a browser, each edge checked where it happens: after a step, no figure shows
the previous position's numbers beside the new position's line (it is marked as being redrawn until it is drawn);
the selected stage button reads at AA contrast; Follow hypothesis keeps the slider on the position shown.

A missing browser is a failure, never a skip."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from harness.browser import IDLE_JS, serve
from model.io.checkpoint import ENV_MODEL, save_model_dir
from model.testing import make_model, make_tokenizer
from tests.e2e.test_learn_browser import at_position, open_options  # the step view shows a position, its run over

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_MS = 120_000
BEAM = "src=The%20cat%20is%20sleeping%20on%20the%20sofa.&strategy=beam&beam=5&max_len=10&stage=output"

# The position the step view's line names (null: none yet), in a watch's page function.
LINE_JS = """
  const line = () => {
    const p = [...document.querySelectorAll('.st-key-next_chip p')].map(p => p.textContent.match(/^Position (\\d+) of/))
      .find(Boolean);
    return p ? p[1] : null;
  };
"""

# Every animation frame: the position line's position and, for each figure whose title names a position and that is
# not marked as being redrawn (views/page.js: aria-busy, faded), that position. A frame where they differ is kept.
WATCH_JS = (
    """() => {
  window.__disagree = [];
  window.__frames = 0;"""
    + LINE_JS
    + """  const tick = () => {
    window.__frames++;
    const at = line();
    for (const div of document.querySelectorAll('.decoder-lens-plot')) {
      const title = div.querySelector('.gtitle')?.textContent || '';
      const m = title.match(/at position (\\d+)|^Position (\\d+)|up to position (\\d+)/);
      if (!m || at === null) continue;
      const shows = m[1] || m[2] || m[3];
      const marked = div.getAttribute('aria-busy') === 'true' && parseFloat(getComputedStyle(div).opacity) < 0.5;
      if (shows !== at && !marked) window.__disagree.push(`line ${at}, figure ${shows}: ${title}`);
    }
    requestAnimationFrame(tick);
  };
  requestAnimationFrame(tick);
}"""
)


@pytest.fixture
def page(browser):
    page = browser.new_page(viewport={"width": 1366, "height": 768})
    page.set_default_timeout(TIMEOUT_MS)
    yield page
    page.close()


def test_after_a_step_no_figure_shows_the_previous_position_unmarked(server, page):
    page.goto(f"{server}/explore?{BEAM}")
    at_position(page, 0)
    page.locator(".st-key-dec_topk .decoder-lens-plot").scroll_into_view_if_needed()
    page.wait_for_function(
        "() => (document.querySelector('.st-key-dec_topk .gtitle') || {}).textContent?.includes('position 0')"
    )
    page.evaluate(WATCH_JS)
    for t in range(1, 6):
        page.locator(".st-key-next button:visible").first.click()
        at_position(page, t)
        page.wait_for_function(
            "t => (document.querySelector('.st-key-dec_topk .gtitle') || {}).textContent?.includes(`position ${t}`)",
            arg=t,
        )
    frames, disagree = page.evaluate("() => [window.__frames, window.__disagree]")
    assert frames > 20, frames  # the watch ran through the steps
    assert not disagree, disagree[:5]
    # once drawn, the figures of the position shown are no longer marked
    page.wait_for_function(
        "() => [...document.querySelectorAll('.decoder-lens-plot')].every(d => d.getAttribute('aria-busy') !== 'true'"
        " || d.hasAttribute('data-deferred'))"
    )
    assert (
        page.evaluate("() => getComputedStyle(document.querySelector('.st-key-dec_topk .decoder-lens-plot')).opacity")
        == "1"
    )


# Every animation frame: the beam's tables (live hypotheses, finished pool) that show another position than the
# position line, or that are still the run before's (Streamlit's data-stale), and are not marked as being redrawn.
TABLES_WATCH_JS = (
    """() => {
  window.__tableUnmarked = [];
  window.__tablesSeen = 0;"""
    + LINE_JS
    + """  const tick = () => {
    const at = line();
    const tables = document.querySelectorAll('.stVerticalBlock:is([class*="st-key-beam_live"], '
      + '[class*="st-key-beam_finished"])');
    for (const el of tables) {
      window.__tablesSeen++;
      const m = [...el.classList].map(c => c.match(/^st-key-beam_(?:live|finished)_(\\d+)$/)).find(Boolean);
      const other = at !== null && (!m || m[1] !== at);  // a table that names no position: of any position
      const stale = Boolean(el.closest('[data-stale="true"]'));
      const marked = el.getAttribute('aria-busy') === 'true' && parseFloat(getComputedStyle(el).opacity) < 0.5;
      if ((other || stale) && !marked) window.__tableUnmarked.push(`line ${at}, ${el.className.match(/st-key-\\S+/)}`);
    }
    requestAnimationFrame(tick);
  };
  requestAnimationFrame(tick);
}"""
)


def test_after_a_step_the_beam_tables_of_the_previous_position_are_marked_until_redrawn(server, page):
    page.goto(f"{server}/explore?{BEAM}")
    at_position(page, 0)
    page.locator(".st-key-beam_live_0").scroll_into_view_if_needed()
    page.evaluate(TABLES_WATCH_JS)
    for t in range(1, 6):
        page.locator(".st-key-next button:visible").first.click()
        at_position(page, t)
        page.locator(f".st-key-beam_live_{t}").wait_for()
    seen, unmarked = page.evaluate("() => [window.__tablesSeen, window.__tableUnmarked]")
    assert seen > 20, seen  # the watch saw the tables through the steps
    assert not unmarked, unmarked[:5]
    # once redrawn, the tables of the position shown are no longer marked, and read at full opacity
    page.wait_for_function(
        "() => [...document.querySelectorAll('[class*=\"st-key-beam_\"]')].every(e => e.getAttribute('aria-busy')"
        " !== 'true')"
    )
    assert page.evaluate("() => getComputedStyle(document.querySelector('.st-key-beam_live_5')).opacity") == "1"


# The contrast ratio of an element's text with what is behind it (WCAG 2): its colour over the first opaque
# background up its ancestors, translucent ones composed on the way.
CONTRAST_JS = """(el) => {
  const rgba = (c) => c.match(/[\\d.]+/g).map(Number).concat([1]).slice(0, 4);
  const layers = [];
  for (let e = el; e; e = e.parentElement) {
    const c = rgba(getComputedStyle(e).backgroundColor);
    if (c[3] > 0) layers.push(c);
    if (c[3] === 1) break;
  }
  const over = ([r, g, b, a], u) => [r * a + u[0] * (1 - a), g * a + u[1] * (1 - a), b * a + u[2] * (1 - a)];
  let bg = [255, 255, 255];
  for (const c of layers.reverse()) bg = over(c, bg);
  const fg = over(rgba(getComputedStyle(el).color), bg);
  const lum = (c) => c.map((v) => v / 255).map((v) => (v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4))
    .reduce((s, v, i) => s + v * [0.2126, 0.7152, 0.0722][i], 0);
  const [hi, lo] = [lum(fg), lum(bg)].sort((x, y) => y - x);
  return (hi + 0.05) / (lo + 0.05);
}"""


def test_the_selected_stage_reads_at_aa_contrast(server, page):
    page.goto(f"{server}/explore")
    page.wait_for_function("() => window.__decoderLensPage === true")
    selected = page.locator('.st-key-stage button[aria-checked="true"]')
    selected.wait_for()
    ratio = selected.locator("p").first.evaluate(CONTRAST_JS)
    assert ratio >= 4.5, f"the selected stage's text reads {ratio:.2f}:1"


@pytest.fixture(scope="module")
def stopping_server(tmp_path_factory):
    """The tiny model made to write </s> now and then (its output bias raised for it): beam search's final candidates
    end at different positions, as a trained model's do."""
    tok = make_tokenizer()
    model = make_model(tok.vocab_size, final_logits_bias=True)
    with torch.no_grad():
        model.final_logits_bias[model.cfg.eos_id] = 4.6
    out = tmp_path_factory.mktemp("stopping")
    save_model_dir(model, tok, out / "model")
    with serve(ROOT / "app.py", out / "streamlit.log", {ENV_MODEL: str(out / "model")}) as srv:
        yield srv.url
    text = (out / "streamlit.log").read_text(errors="replace")
    assert "Traceback" not in text, text[-4000:]


def slider_value(page) -> str | None:
    return page.locator(".st-key-step input[type=range]").get_attribute("value")


def test_following_a_shorter_line_keeps_the_slider_on_the_position_shown(stopping_server, page):
    """At position 4 of the translation (positions 0–11), the final candidate that ends at position 8 is picked:
    the slider stays on 4 with its new range, and ▶ goes to 5."""
    page.goto(
        f"{stopping_server}/explore?src=The%20cat%20is%20sleeping%20on%20the%20sofa.&strategy=beam&beam=5"
        "&max_len=12&stage=output"
    )
    at_position(page, 0)
    for t in range(1, 5):
        page.locator(".st-key-next button:visible").first.click()
        at_position(page, t)
    options = open_options(page, page.locator(".st-key-follow_pick"))
    texts = options.all_inner_texts()
    ends = [len(t.split(" (score")[0].split(": ", 1)[1].split()) for t in texts if t.startswith("final ")]
    shorter = next(i for i, t in enumerate(texts) if t.startswith("final ") and 5 < ends[i] < 12)
    options.nth(shorter).click()
    page.wait_for_function("() => new URL(location.href).searchParams.get('follow') !== null")
    at_position(page, 4)
    line = page.locator(".st-key-next_chip").inner_text()
    assert "of 0–11" not in line, line  # the picked line's own range
    assert slider_value(page) == "4", (slider_value(page), line)
    page.locator(".st-key-next button:visible").first.click()
    at_position(page, 5)
    assert slider_value(page) == "5"


TITLE_LINES_JS = """(sel) => {
  const div = document.querySelector(sel);
  const title = div.querySelector('.gtitle');
  const lines = title.querySelectorAll('tspan.line');
  return [lines.length || 1, title.getBoundingClientRect().right - div.getBoundingClientRect().right];
}"""


@pytest.mark.parametrize(("width", "height", "most"), [(1366, 768, 1), (390, 844, 3)])
def test_a_bar_chart_s_title_wraps_only_where_the_column_needs_it(server, browser, width, height, most):
    page = browser.new_page(viewport={"width": width, "height": height})
    page.set_default_timeout(TIMEOUT_MS)
    try:
        page.goto(f"{server}/explore?src=I%20like%20pizza.&max_len=8&stage=output&step=3")
        at_position(page, 3)
        sel = ".st-key-dec_topk .decoder-lens-plot"
        page.locator(sel).scroll_into_view_if_needed()
        page.wait_for_function("s => document.querySelector(s + ' .gtitle')", arg=sel)
        lines, past = page.evaluate(TITLE_LINES_JS, sel)
        assert 1 <= lines <= most, lines  # a desktop: "Top 10 next tokens at position 3" on one line
        assert past <= 0, f"the title runs {past:.0f} px past the figure"
    finally:
        page.close()


def test_enter_in_explore_s_sentence_box_uses_the_sentence(server, page):
    page.goto(f"{server}/explore?max_len=8")
    page.wait_for_function("() => window.__decoderLensPage === true")
    box = page.locator(".st-key-source textarea")
    box.fill("I like pizza.")
    box.press("Enter")
    page.wait_for_function("() => new URL(location.href).searchParams.get('src') === 'I like pizza.'")
    page.wait_for_function(IDLE_JS)
    assert box.input_value() == "I like pizza."  # no second line
    assert "%0A" not in page.url, page.url


PHONE_CUTS_JS = """() => {
  const out = [];
  for (const div of document.querySelectorAll('.decoder-lens-plot')) {
    const t = div.querySelector('.gtitle');
    if (t && t.getBoundingClientRect().right > div.getBoundingClientRect().right + 1)
      out.push(`title past its figure: ${t.textContent.slice(0, 60)}`);
  }
  for (const b of document.querySelectorAll('[data-testid="stMain"] button .stMarkdownEllipsis'))
    if (b.scrollWidth > b.clientWidth + 1) out.push(`button text cut: ${b.textContent.slice(0, 60)}`);
  for (const k of document.querySelectorAll('.katex-display')) {
    if (k.scrollWidth > k.clientWidth + 2) out.push(`equation ${k.scrollWidth} px in ${k.clientWidth} px`);
    // it breaks between its terms rather than shrinking: at 0.6 em its subscripts were 7 px
    const size = parseFloat(k.querySelector('.katex')?.style.fontSize || '1');
    if (size < 0.85) out.push(`equation drawn at ${size} em`);
  }
  return out;
}"""


@pytest.mark.parametrize(
    "path",
    [
        "/?chapter=8&max_len=8",
        "/explore?max_len=8&src=I%20like%20pizza.",
        "/compare?max_len=8&src=The%20girl%20is%20reading.&srcb=The%20girls%20are%20reading.",
    ],
)
def test_on_a_phone_titles_and_equations_fit(server, browser, path):
    page = browser.new_page(viewport={"width": 390, "height": 844})
    page.set_default_timeout(TIMEOUT_MS)
    try:
        page.goto(server + path)
        page.wait_for_function("() => window.__decoderLensPage === true")
        page.locator(".decoder-lens-plot").first.scroll_into_view_if_needed()
        page.wait_for_function("() => document.querySelector('.decoder-lens-plot .gtitle')")
        page.wait_for_function(IDLE_JS)
        page.wait_for_function("() => [...document.querySelectorAll('.katex-display')].every(k => k.dataset.fitFor)")
        assert page.evaluate(PHONE_CUTS_JS) == []
    finally:
        page.close()


PAGE_NAMES = ["Learn", "Explore", "Compare", "Corpus", "Class", "About"]


def test_on_a_phone_the_pages_are_a_menu_that_opens_by_keyboard(server, browser):
    """Streamlit takes the top navigation's links out of a phone's header: a Pages button in the header opens a menu
    of every page, reached and used by the keyboard (the button says whether it is open); a desktop shows the links
    and no menu."""
    page = browser.new_page(viewport={"width": 390, "height": 844})
    page.set_default_timeout(TIMEOUT_MS)
    try:
        page.goto(f"{server}/?chapter=2&max_len=8")
        page.wait_for_function("() => window.__decoderLensPage === true")
        page.wait_for_function(IDLE_JS)
        menu = page.get_by_role("button", name="Pages")
        assert menu.is_visible()
        # in the header's band, in reach at the top, once the menu's style (drawn in the same run) is applied: on a
        # busy machine the button can be laid out a frame before it
        page.wait_for_function(
            "() => [...document.querySelectorAll('button')].some(b => b.textContent.includes('Pages')"
            " && b.getBoundingClientRect().bottom <= 60)"
        )
        box = menu.bounding_box()
        assert box is not None and box["y"] + box["height"] <= 60
        assert menu.get_attribute("aria-expanded") == "false"
        menu.focus()
        page.keyboard.press("Enter")
        page.wait_for_function("() => document.activeElement?.closest('[data-testid=\"stPopoverBody\"]')")
        assert menu.get_attribute("aria-expanded") == "true"
        links = page.locator('[data-testid="stPopoverBody"] a')
        texts = [t.strip() for t in links.all_inner_texts()]  # each after its icon's name
        assert len(texts) == len(PAGE_NAMES) and all(t.endswith(n) for t, n in zip(texts, PAGE_NAMES)), texts
        page.keyboard.press("Escape")  # closed, and the keyboard is back on its button
        page.wait_for_function("() => document.activeElement?.textContent.includes('Pages')")
        page.keyboard.press("Enter")
        page.wait_for_function("() => document.activeElement?.closest('[data-testid=\"stPopoverBody\"]')")
        for _ in range(PAGE_NAMES.index("Compare")):
            page.keyboard.press("Tab")
        assert page.evaluate("() => document.activeElement.textContent").endswith("Compare")
        page.keyboard.press("Enter")
        page.wait_for_url("**/compare**")
        page.get_by_role("heading", level=1, name="Compare", exact=False).first.wait_for()
        page.set_viewport_size({"width": 1366, "height": 768})
        page.get_by_role("link", name="Learn", exact=True).first.wait_for()  # the header's own links
        assert not page.get_by_role("button", name="Pages").is_visible()
    finally:
        page.close()


# Where each of the header's page links is drawn (its text after its icon's name, its left edge, its top).
NAV_LINKS_JS = """() => [...document.querySelectorAll('[data-testid="stTopNav"] a')].map(a => {
  const r = a.getBoundingClientRect();
  return [a.innerText.trim().split('\\n').pop(), Math.round(r.left), Math.round(r.top)];
})"""


def test_the_page_links_stay_where_they_are_when_the_page_changes(server, page):
    """Explore shows the sidebar, Learn and Corpus close it: the header's page links are drawn at the same places on
    each, and do not move while the page changes, so that a link pressed as the page changes is the link released."""
    page.goto(f"{server}/explore?{BEAM}")
    page.wait_for_function("() => window.__decoderLensPage === true")
    page.wait_for_function(IDLE_JS)
    sidebar = "() => document.querySelector('[data-testid=\"stSidebar\"]')?.getBoundingClientRect().right > 200"
    page.wait_for_function(sidebar)  # shown here; Corpus and Learn close it
    page.wait_for_function(f"() => ({NAV_LINKS_JS})().length === {len(PAGE_NAMES)}")  # drawn (late on a busy machine)
    first = page.evaluate(NAV_LINKS_JS)
    assert [name for name, _, _ in first] == PAGE_NAMES
    for link, heading in (("Corpus", "Corpus"), ("Learn", "Learn"), ("Explore", "Decoder Lens")):
        page.evaluate(  # every frame while the page changes: the links' places when they differ from the first
            """(first) => { window.__moved = []; const links = """
            + NAV_LINKS_JS
            + """; const tick = () => { const now = JSON.stringify(links());
              if (now !== JSON.stringify(first)) window.__moved.push(now);
              if (!window.__stop) requestAnimationFrame(tick); };
              window.__stop = false; requestAnimationFrame(tick); }""",
            first,
        )
        page.get_by_role("link", name=link, exact=True).first.click()
        page.get_by_role("heading", level=1, name=heading, exact=False).first.wait_for()
        page.wait_for_function(IDLE_JS)
        page.wait_for_timeout(500)  # the sidebar's own transition is over
        assert page.evaluate("() => { window.__stop = true; return window.__moved; }") == [], link
        assert page.evaluate(NAV_LINKS_JS) == first, link


def test_after_next_the_keyboard_starts_at_the_chapter_s_top_a_few_stops_from_its_question(server, page):
    page.goto(f"{server}/?chapter=2&max_len=8")
    page.wait_for_function("() => window.__decoderLensPage === true")
    page.wait_for_function("() => (document.querySelector('[data-testid=\"stHeading\"] h2') || {}).textContent")
    page.wait_for_function(IDLE_JS)
    page.locator(".st-key-learn_next button").focus()
    page.keyboard.press("Enter")
    page.wait_for_function(
        "() => (document.querySelector('[data-testid=\"stHeading\"] h2') || {}).textContent?.startsWith('3. ')"
    )
    page.wait_for_function("() => document.activeElement?.matches('[class*=\"st-key-learn_chapter_3\"]')")
    top = page.evaluate("() => document.activeElement.getBoundingClientRect().top")
    assert 0 <= top < 768, top  # the focus is where the reader is: the new chapter's top, in the window
    page.keyboard.press("Enter")  # pressed again: nothing is skipped
    page.wait_for_function(IDLE_JS)
    assert page.evaluate("() => document.querySelector('[data-testid=\"stHeading\"] h2').textContent").startswith("3. ")
    stops = 0
    while not page.evaluate("() => !!document.activeElement?.closest('[class*=\"st-key-learn_q_qkv_\"]')"):
        page.keyboard.press("Tab")
        stops += 1
        assert stops <= 8, "the question is more than 8 Tab stops from the chapter's top"


def test_on_a_phone_the_add_and_norm_figure_shows_every_std_marker(server, browser):
    """Learn's Add & Norm chapter asks which row has the largest σ: on a phone its figure is drawn in the column, so
    every mean and std marker is on screen (its heatmaps kept 600 px and scrolled the std line out of view)."""
    page = browser.new_page(viewport={"width": 390, "height": 844})
    page.set_default_timeout(TIMEOUT_MS)
    try:
        page.goto(f"{server}/?chapter=8&max_len=8")
        page.wait_for_function("() => window.__decoderLensPage === true")
        plot = page.locator(".decoder-lens-plot").first
        plot.scroll_into_view_if_needed()
        page.wait_for_function("() => document.querySelectorAll('.decoder-lens-plot .scatterlayer .point').length")
        page.wait_for_function(IDLE_JS)
        box = plot.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390, box
        points = page.evaluate(
            """() => [...document.querySelector('.decoder-lens-plot').querySelectorAll('.scatterlayer .point')]
              .map(p => { const r = p.getBoundingClientRect(); return [r.left, r.right]; })"""
        )
        assert points and all(0 <= left and right <= 390 for left, right in points), points
    finally:
        page.close()


def test_the_downloaded_summary_names_the_hypothesis_the_page_follows(stopping_server, browser):
    """A final candidate other than the translation picked, the Summary (JSON) downloaded from Export names it as the
    page does: its rank among the final candidates, its tokens, and the page's sentence about where it ended."""
    import json

    page = browser.new_page(viewport={"width": 1366, "height": 768}, accept_downloads=True)
    page.set_default_timeout(TIMEOUT_MS)
    try:
        page.goto(
            f"{stopping_server}/explore?src=The%20cat%20is%20sleeping%20on%20the%20sofa.&strategy=beam&beam=5"
            "&max_len=12&stage=output"
        )
        at_position(page, 0)
        for _ in range(5):  # a run that redraws the box closes its open list: open it again and pick
            options = open_options(page, page.locator(".st-key-follow_pick"))
            texts = options.all_inner_texts()
            second = next(i for i, t in enumerate(texts) if t.startswith("final 2:"))
            try:
                options.nth(second).click(timeout=10_000)
                break
            except PlaywrightTimeout:
                page.keyboard.press("Escape")
        page.wait_for_function("() => new URL(location.href).searchParams.get('follow') !== null")
        page.get_by_text("Following:").first.wait_for()
        page.wait_for_function(IDLE_JS)
        following = page.get_by_text("Following:").first.inner_text()
        page.get_by_text("Export: summary (JSON)").first.click()
        button = page.get_by_role("button", name="Summary (JSON)")
        with page.expect_download() as got:
            button.click()
        followed = json.loads(got.value.path().read_text())["followed"]
        assert followed["final_rank"] == 2 and followed["how"] in ("finished", "cut")
        assert followed["said"] and followed["said"] in following, (followed, following)
        assert " ".join(followed["tokens"]) in following
    finally:
        page.close()
