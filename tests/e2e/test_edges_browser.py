"""What only a browser shows of the rough edges a careful student meets: Learn's Next lands at the top of the new
chapter, Learn's Previous / Next are read by screen readers by their visible labels, and Explore's Follow
hypothesis keeps the position (and ``step`` in the URL) after stepping with the buttons. Every wait is for a
condition, never a fixed time. A missing browser is a failure, never a skip."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

from harness.browser import serve
from model.io.checkpoint import ENV_MODEL

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_MS = 120_000
HEADER_JS = "() => (document.querySelector('[data-testid=\"stHeading\"] h2') || {}).textContent || ''"
IDLE_JS = (
    "() => !document.querySelector('[data-testid=\"stStatusWidget\"]') && "
    "!document.querySelector('[data-stale=\"true\"]')"
)
# two animation frames: the page behaviour's MutationObserver (views/page.js) has named what the last run drew
FRAMES_JS = "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))"
BEAM = {"src": "The cat is sleeping on the sofa.", "strategy": "beam", "beam": "3", "max_len": "10"}


@pytest.fixture(scope="module")
def server(tiny_model_dir, tmp_path_factory):
    log = tmp_path_factory.mktemp("edges") / "streamlit.log"
    with serve(ROOT / "app.py", log, {ENV_MODEL: str(tiny_model_dir)}) as srv:
        yield srv.url
    text = log.read_text(errors="replace")
    assert "Traceback" not in text, text[-4000:]


@pytest.fixture
def page(browser):
    page = browser.new_page(viewport={"width": 1366, "height": 768})
    page.set_default_timeout(TIMEOUT_MS)
    yield page
    page.close()


def chapter_shown(page, k: int) -> None:
    page.wait_for_function(f"() => ({HEADER_JS})().startsWith('{k}. ')", timeout=TIMEOUT_MS)
    page.wait_for_function(IDLE_JS, timeout=TIMEOUT_MS)


def test_next_lands_at_the_top_of_the_new_chapter(server, page):
    page.goto(f"{server}/?chapter=1&max_len=8")
    chapter_shown(page, 1)
    nxt = page.locator(".st-key-learn_next button")
    nxt.scroll_into_view_if_needed()  # the buttons are below the chapter: the page is scrolled down to reach them
    heading = page.locator('[data-testid="stHeading"] h2').first
    assert heading.bounding_box()["y"] < 0, "the chapter's heading should be above the window before Next"
    nxt.click()
    chapter_shown(page, 2)
    # the new chapter's heading in the upper part of the window, below the app's top bar
    page.wait_for_function(
        "() => { const h = document.querySelector('[data-testid=\"stHeading\"] h2').getBoundingClientRect();"
        " return h.top >= 0 && h.bottom <= window.innerHeight / 2; }",
        timeout=TIMEOUT_MS,
    )
    top = page.evaluate(
        "() => { const h = document.querySelector('[data-testid=\"stHeading\"] h2').getBoundingClientRect();"
        " const bar = document.querySelector('[data-testid=\"stHeader\"]');"
        " return [h.top, bar ? bar.getBoundingClientRect().bottom : 0]; }"
    )
    assert top[0] >= top[1], f"the heading ({top[0]:.0f} px) is under the top bar (to {top[1]:.0f} px)"
    # and back: Previous lands at the top of the chapter before
    prev = page.locator(".st-key-learn_prev button")
    prev.scroll_into_view_if_needed()
    prev.click()
    chapter_shown(page, 1)
    page.wait_for_function(
        "() => { const h = document.querySelector('[data-testid=\"stHeading\"] h2').getBoundingClientRect();"
        " return h.top >= 0 && h.bottom <= window.innerHeight / 2; }",
        timeout=TIMEOUT_MS,
    )


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
    picker.get_by_role("combobox").click()
    options = page.get_by_role("option")
    options.first.wait_for()
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
