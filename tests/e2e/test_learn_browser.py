"""The Learn page in a real browser, with the keyboard alone: Tab to a control, Space to choose an answer (arrow keys
move within a group of answers), Enter to press a button; from the first check through every chapter to the final
check, at 1366×768 and 768×1024, each chapter's figure measured by the legibility harness (harness/legibility.py).

Then what only a browser shows of the edges a careful student meets: Next lands at the top of the new chapter,
Previous / Next are named by their visible labels, and Explore's Follow hypothesis keeps the position after the step
buttons.

Screenshots go to ``test-artifacts/learn/<viewport>_<chapter>.png``. A missing browser is a failure, never a skip.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from harness.browser import DRAWN_JS, IDLE_JS
from harness.legibility import violations
from model.lesson.learn import CHAPTER_KEYS
from tests import helpers

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "test-artifacts" / "learn"
TIMEOUT_MS = 120_000
SIZES = ((1366, 768), (768, 1024))
MAX_TABS = 150
ERROR_BOXES = '[data-testid="stException"], [data-testid="stAlertContentError"]'
FOCUSED_IN = "sel => { const a = document.activeElement; return !!a && !!a.closest(sel); }"
HEADER_JS = "() => (document.querySelector('[data-testid=\"stHeading\"] h2') || {}).textContent || ''"


def idle(page, plots: int = 0) -> None:
    """Wait until the run is over and ``plots`` figures (at least) are drawn; a figure is drawn once it is near the
    window (views/plot.js), so it is brought into view first."""
    helpers.wait_idle(page, TIMEOUT_MS)
    if plots:
        page.locator(".decoder-lens-plot").first.scroll_into_view_if_needed()
    page.wait_for_function(DRAWN_JS, arg=plots, timeout=TIMEOUT_MS)


def tab_to(page, selector: str) -> None:
    """Press Tab until the focus is inside ``selector`` (from wherever it is now, wrapping around the page)."""
    for _ in range(MAX_TABS):
        if page.evaluate(FOCUSED_IN, selector):
            return
        page.keyboard.press("Tab")
    raise AssertionError(f"Tab never reached {selector}")


def answer_and_check(page, radio: str, check: str) -> None:
    """Choose the focused group's first answer with Space, then press the check button with Enter."""
    tab_to(page, radio)
    page.keyboard.press("Space")
    tab_to(page, check)
    page.keyboard.press("Enter")
    idle(page, 1)


def submit_check(page, which: str) -> None:
    """Answer the five questions of the first ("pre") or final ("post") check by the keyboard, then submit it."""
    for i in range(1, 6):
        tab_to(page, f'[class*="st-key-learn_{which}_{i}_"]')
        page.keyboard.press("Space")
    tab_to(page, '[data-testid="stFormSubmitButton"]')
    page.keyboard.press("Enter")
    idle(page)


def walk(page, base: str, size: tuple[int, int], shots: Path, query: str = "") -> list[str]:
    """Go through the whole lesson by keyboard; returns the legibility problems met on the way."""
    problems: list[str] = []
    vp = f"{size[0]}x{size[1]}"
    page.set_viewport_size({"width": size[0], "height": size[1]})
    page.goto(f"{base}/?page=Learn{query}")
    page.locator(".st-key-learn_nav").wait_for(timeout=TIMEOUT_MS)
    idle(page)

    def check_page(name: str) -> None:
        errors = page.locator(ERROR_BOXES).all_inner_texts()
        assert not errors, (name, errors)
        problems.extend(f"{vp} {name}: {v}" for v in violations(page))
        page.screenshot(path=str(shots / f"{vp}_{name}.png"), full_page=True)

    submit_check(page, "pre")  # the first check
    assert page.get_by_text("Score:").count() == 1
    check_page("00_check")
    for k, key in enumerate(CHAPTER_KEYS, 1):
        tab_to(page, ".st-key-learn_next")
        page.keyboard.press("Enter")
        page.wait_for_function(f"() => ({HEADER_JS})().startsWith('{k}. ')", timeout=TIMEOUT_MS)
        idle(page, 1)
        assert f"chapter={k}" in page.url, page.url
        answer_and_check(page, f'[class*="st-key-learn_q_{key}_"]', f'[class*="st-key-learn_check_{key}_"]')
        feedback = page.locator('[data-testid="stAlertContainer"]').all_inner_texts()
        assert any("Right:" in t or "Not quite:" in t for t in feedback), (key, feedback)
        assert page.get_by_text("What to notice.").count() == 1, key
        assert page.get_by_text("The figure in words:").count() == 1, key
        check_page(f"{k:02d}_{key}")
    tab_to(page, ".st-key-learn_next")
    page.keyboard.press("Enter")
    page.get_by_text("The final check: five questions").wait_for(timeout=TIMEOUT_MS)
    idle(page)
    submit_check(page, "post")
    assert page.get_by_text("After the chapters").count() == 1
    assert f"chapter={len(CHAPTER_KEYS) + 1}" in page.url
    check_page(f"{len(CHAPTER_KEYS) + 1:02d}_check")
    return problems


def new_page(browser, size: tuple[int, int]):
    page = browser.new_page(viewport={"width": size[0], "height": size[1]})
    page.set_default_timeout(TIMEOUT_MS)
    return page


def test_the_lesson_by_keyboard_alone_with_legible_figures(server, browser):
    shutil.rmtree(SHOTS, ignore_errors=True)
    SHOTS.mkdir(parents=True)
    console: list[str] = []
    problems: list[str] = []
    for size in SIZES:
        page = new_page(browser, size)
        page.on("console", lambda m: m.type in ("error", "warning") and console.append(m.text))
        problems += walk(page, server, size, SHOTS, "&max_len=8")
        page.close()
    assert not problems, "\n".join(problems)
    assert not console, console


# Plotly's draws on the page counted (a graph put back drawn is not one); the graphs kept off the page by id
COUNT_DRAWS_JS = """() => {
  const P = window.Plotly;
  if (!P.__counted) {
    const react = P.react, newPlot = P.newPlot;
    const onPage = (gd) => gd.isConnected && !gd.getRootNode().host;  // not in a shadow root: on the page
    window.__pageDraws = 0;
    P.react = function (gd, ...rest) { window.__pageDraws += onPage(gd); return react.call(this, gd, ...rest); };
    P.newPlot = function (gd, ...rest) { window.__pageDraws += onPage(gd); return newPlot.call(this, gd, ...rest); };
    P.__counted = true;
  }
  return window.__pageDraws;
}"""
TITLE_JS = "() => String(document.querySelector('.js-plotly-plot')._fullLayout.title.text || '')"
# a graph drawn off the page (views/plot.js keeps them) whose title no chapter shown so far had: the next one's
AHEAD_JS = """seen => [...(window.__decoderLensKept || new Map()).values()].some(
  d => d._fullLayout && !seen.includes(String(d._fullLayout.title.text || '')))"""


def test_a_chapter_read_then_turned_shows_its_figure_drawn_ahead_and_back_the_one_it_left(server, browser):
    """Read (a pause), then Next: the next chapter's graph was drawn off the page meanwhile and is put in place, with
    no draw on the page; Previous puts back the graph the page had. Each is the chapter's own figure, drawn."""
    page = new_page(browser, SIZES[0])
    page.goto(f"{server}/?chapter=1&max_len=8")
    idle(page, 1)
    first = page.evaluate(TITLE_JS)
    page.locator(".st-key-learn_next button").click()  # the lesson's first run built nothing ahead yet
    page.wait_for_function(f"() => ({HEADER_JS})().startsWith('2. ')", timeout=TIMEOUT_MS)
    idle(page, 1)
    page.evaluate(COUNT_DRAWS_JS)
    titles = {2: page.evaluate(TITLE_JS)}
    for k, button in ((3, "learn_next"), (4, "learn_next"), (3, "learn_prev"), (2, "learn_prev")):
        if button == "learn_next":  # reading: the page draws the next chapter's figure off the page
            page.wait_for_function(AHEAD_JS, arg=[first, *titles.values()], timeout=TIMEOUT_MS)
        before = page.evaluate(COUNT_DRAWS_JS)
        page.locator(f".st-key-{button} button").click()
        page.wait_for_function(f"() => ({HEADER_JS})().startsWith('{k}. ')", timeout=TIMEOUT_MS)
        idle(page, 1)
        assert page.evaluate(COUNT_DRAWS_JS) == before, f"chapter {k} ({button}): its figure was drawn again"
        title = page.evaluate(TITLE_JS)
        assert title and titles.setdefault(k, title) == title, (k, title)
        assert title != titles.get(k - 1 if button == "learn_next" else k + 1)
    assert page.locator(".js-plotly-plot").count() == 1  # the kept graphs are off the page
    page.close()


# What only a browser shows of the rough edges a careful student meets: every wait is for a condition.
# two animation frames: the page behaviour's MutationObserver (views/page.js) has named what the last run drew
FRAMES_JS = "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))"
BEAM = {"src": "The cat is sleeping on the sofa.", "strategy": "beam", "beam": "3", "max_len": "10"}


@pytest.fixture
def page(browser):  # one window at 1366 × 768, closed after its test
    page = browser.new_page(viewport={"width": 1366, "height": 768})
    page.set_default_timeout(TIMEOUT_MS)
    yield page
    page.close()


def chapter_shown(page, k: int) -> None:
    page.wait_for_function(f"() => ({HEADER_JS})().startsWith('{k}. ')", timeout=TIMEOUT_MS)
    page.wait_for_function(IDLE_JS, timeout=TIMEOUT_MS)


def landed_at_top(page) -> None:
    """Wait until the chapter's heading is in the upper half of the window."""
    page.wait_for_function(
        "() => { const h = document.querySelector('[data-testid=\"stHeading\"] h2').getBoundingClientRect();"
        " return h.top >= 0 && h.bottom <= window.innerHeight / 2; }",
        timeout=TIMEOUT_MS,
    )


def test_next_lands_at_the_top_of_the_new_chapter(server, page):
    page.goto(f"{server}/?chapter=1&max_len=8")
    chapter_shown(page, 1)
    # the buttons are below the chapter: scrolled down to reach them (once its figure is drawn), the heading is
    # above the window
    page.wait_for_function(
        "() => { const b = document.querySelector('.st-key-learn_next button'); if (!b) return false;"
        " b.scrollIntoView({block: 'end'});"
        " return document.querySelector('[data-testid=\"stHeading\"] h2').getBoundingClientRect().bottom < 0; }",
        timeout=TIMEOUT_MS,
    )
    page.locator(".st-key-learn_next button").click()
    chapter_shown(page, 2)
    landed_at_top(page)  # below the app's top bar:
    top = page.evaluate(
        "() => { const h = document.querySelector('[data-testid=\"stHeading\"] h2').getBoundingClientRect();"
        " const bar = document.querySelector('[data-testid=\"stHeader\"]');"
        " return [h.top, bar ? bar.getBoundingClientRect().bottom : 0]; }"
    )
    assert top[0] >= top[1], f"the heading ({top[0]:.0f} px) is under the top bar (to {top[1]:.0f} px)"
    # and back: Previous, reached at the bottom of the chapter, lands at the top of the chapter before
    page.locator(".st-key-learn_prev button").scroll_into_view_if_needed()
    page.locator(".st-key-learn_prev button").click()
    chapter_shown(page, 1)
    landed_at_top(page)


def test_previous_and_next_are_named_by_their_visible_labels(server, page):
    page.goto(f"{server}/?chapter=3&max_len=8")
    chapter_shown(page, 3)
    page.wait_for_function("() => window.__decoderLensPage === true", timeout=TIMEOUT_MS)
    page.evaluate(FRAMES_JS)
    for key, label in (("learn_prev", "◀ Previous: "), ("learn_next", "Next: ")):
        button = page.locator(f".st-key-{key} button")
        seen = button.inner_text().strip()
        assert seen.startswith(label), seen
        aria = button.get_attribute("aria-label")
        assert aria is None or aria == seen, (key, aria, seen)
        assert page.get_by_role("button", name=seen, exact=True).count() == 1, seen
    for name in ("Previous position", "Next position"):
        assert page.get_by_role("button", name=name, exact=True).count() == 0, name


def query(page) -> dict[str, str]:
    return {k: v[-1] for k, v in parse_qs(urlparse(page.url).query).items()}


def press(page, key: str) -> None:
    page.locator(f".st-key-{key} button:visible").first.click()


def open_options(page, picker):
    """Open a select box's list and return its options. A click that lands while a run redraws the box closes with
    it, so the box is clicked again until its list shows."""
    options = page.get_by_role("option")
    for _ in range(TIMEOUT_MS // 5_000):
        page.wait_for_function(IDLE_JS, timeout=TIMEOUT_MS)
        picker.get_by_role("combobox").click()
        try:
            options.first.wait_for(timeout=5_000)
            return options
        except PlaywrightTimeout:
            page.keyboard.press("Escape")
    raise AssertionError("the select box's list never opened")


def at_position(page, step: int) -> None:
    """Wait until the step view shows ``step`` (its "Position t of 0–n" line) and the run is over."""
    page.wait_for_function(
        "t => [...document.querySelectorAll('.st-key-next_chip p')].some(p => p.textContent.startsWith("
        "`Position ${t} of`))",
        arg=step,
        timeout=TIMEOUT_MS,
    )
    page.wait_for_function(IDLE_JS, timeout=TIMEOUT_MS)


def test_following_a_live_hypothesis_after_stepping_keeps_the_position(server, page):
    page.goto(f"{server}/explore?" + "&".join(f"{k}={v}" for k, v in BEAM.items()))
    at_position(page, 0)
    press(page, "last")
    page.wait_for_function("() => new URL(location.href).searchParams.get('step') !== null", timeout=TIMEOUT_MS)
    page.wait_for_function(IDLE_JS, timeout=TIMEOUT_MS)
    press(page, "first")
    at_position(page, 0)
    for t in range(1, 5):
        press(page, "next")
        at_position(page, t)
    assert query(page).get("step") == "4", page.url
    picker = page.locator(".st-key-follow_pick")
    options = open_options(page, picker)
    texts = options.all_inner_texts()
    current = picker.inner_text()
    live = [i for i, o in enumerate(texts) if o.startswith("live at position 4:") and o.strip() not in current]
    assert live, texts
    options.nth(live[-1]).click()  # the least likely: another line than the translation shown
    page.wait_for_function("() => new URL(location.href).searchParams.get('follow') !== null", timeout=TIMEOUT_MS)
    page.wait_for_function(IDLE_JS, timeout=TIMEOUT_MS)
    at_position(page, 4)  # the picked line is shown at the position it was picked at, and the link says so
    assert query(page).get("step") == "4", page.url
    assert len(query(page)["follow"].split(".")) == 4  # the hypothesis live at position 4: four tokens
