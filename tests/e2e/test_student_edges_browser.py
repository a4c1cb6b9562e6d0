"""What a student still meets only in a browser, each edge checked where it happens: after a step, no figure shows
the previous position's numbers beside the new position's line (it is marked as being redrawn until it is drawn);
the selected stage button reads at AA contrast; Follow hypothesis keeps the slider on the position shown.

A missing browser is a failure, never a skip."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.browser import IDLE_JS, serve
from model.io.checkpoint import ENV_MODEL

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_MS = 120_000
BEAM = "src=The%20cat%20is%20sleeping%20on%20the%20sofa.&strategy=beam&beam=5&max_len=10&stage=output"

# Every animation frame: the position line's position and, for each figure whose title names a position and that is
# not marked as being redrawn (views/page.js: aria-busy, faded), that position. A frame where they differ is kept.
WATCH_JS = """() => {
  window.__disagree = [];
  window.__frames = 0;
  const line = () => {
    const p = [...document.querySelectorAll('.st-key-next_chip p')].map(p => p.textContent.match(/^Position (\\d+) of/))
      .find(Boolean);
    return p ? p[1] : null;
  };
  const tick = () => {
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


def at_position(page, step: int) -> None:
    page.wait_for_function(
        "t => [...document.querySelectorAll('.st-key-next_chip p')].some(p => p.textContent.startsWith("
        "`Position ${t} of`))",
        arg=step,
        timeout=TIMEOUT_MS,
    )
    page.wait_for_function(IDLE_JS, timeout=TIMEOUT_MS)


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
