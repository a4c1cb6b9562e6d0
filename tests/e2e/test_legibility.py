"""Every figure the app draws is legible, in a real browser, at the screen sizes students use.

One `streamlit run app.py` on the tiny test model for the module, driven by Playwright + Debian chromium
(CI installs it; a missing browser is a failure, never a skip). Target lengths of 1, 8, 20 and 60 tokens
are forced through the URL (`forced=` ids, `max_len=N+1`, `step=N`; teacher forcing: a reference of N
tokens), so a random model gives exact sizes. States visited:

- 1366×768 (the smaller screen, where cells and labels are tightest): every stage of the step view and of
  the teacher-forcing view for every length, and every chapter of the Learn page (a 20-token translation);
- 1920×1080: every stage of both views for 60 tokens (the largest figures) except "All stages" (the same
  figures as the single stages, and the slowest page), and the Learn page's first chapter: a subset, as the full
  set at both sizes would double the run time;
- at both sizes, the Compare page with each patching map (decoder, encoder, heads), a contrast, and a stage of A
  and B with their difference.

Each state waits until the page is idle and every plot is drawn and runs `harness.legibility.violations`; with
LEGIBILITY_SHOTS=1 in the environment it also saves a full-page screenshot to
`test-artifacts/legibility/<viewport>_<length>tok_<view>_<stage>.png` (`<viewport>_learn_<chapter>.png` for the
Learn page; tests/e2e/test_learn_browser.py walks it by keyboard at 1366×768 and 768×1024), for a person to look
through: the page grown to its full height and drawn again takes a fifth of the run, and no check reads the images.
About 2.5 minutes on 2 cores without them.
Browser console errors and warnings (e.g. Plotly's "invalid color") fail the test too. Problems are
collected across all states and reported together at the end, so one run lists everything.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
from functools import partial
from pathlib import Path
from urllib.parse import urlencode

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from harness.browser import DRAWN_JS
from harness.legibility import violations
from model.core.tokenizer import SPECIALS, Tokenizer
from model.lesson.learn import CHAPTER_KEYS
from tests import helpers
from views.state import DEFAULT_STAGE, SITES, STAGE_LABELS, STAGES

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "test-artifacts" / "legibility"
TIMEOUT_MS = 120_000
SHOTS_ENV = "LEGIBILITY_SHOTS"  # "1": save each state's screenshot
MAX_SHOT_PX = 32_000  # taller pages are cut in the screenshot (never in the checks); "all" at 60 tokens: ~30,000
# viewport -> target length -> the stages checked, in both views
PLAN = {
    (1366, 768): dict.fromkeys((1, 8, 20, 60), STAGES),
    (1920, 1080): {60: tuple(s for s in STAGES if s != "all")},
}
VIEWS = ("step", "tf")
# Target length -> English source; longer targets get longer sources (cross-attention is target × source).
SOURCES = {
    1: "Hello world.",
    8: "I like pizza.",
    20: "A man in a blue shirt is standing on a ladder.",
    60: "A man in a blue shirt is standing on a ladder. The cat is sleeping on the sofa. We will go to the beach.",
}
FRENCH = (
    "Un homme en chemise bleue est debout sur une échelle. Le chat dort sur le canapé. "
    "Nous irons à la plage demain. Je suis étudiant. J'aime la pizza. Bonjour le monde."
)
# viewport -> Learn chapters checked there
LEARN_CHAPTERS = {(1366, 768): range(1, len(CHAPTER_KEYS) + 1), (1920, 1080): range(1, 2)}
LEARN_LENGTH = 20
LEARN_IS_JS = "k => !!document.querySelector('.st-key-learn_nav') && location.search.includes(`chapter=${k}&`)"
COMPARE = ("The cat is sleeping on the sofa.", "The man is sleeping on the sofa.")  # 16 tokens each (tiny tokenizer)
ERROR_BOXES = '[data-testid="stException"], [data-testid="stAlertContentError"]'
# Sizes of every plot, or null while the page is busy or a plot is not drawn: equal twice = settled.
LAYOUT_JS = f"""
() => {{
  if (!({DRAWN_JS})(1)) return null;
  return JSON.stringify([...document.querySelectorAll('.js-plotly-plot')].map(e => {{
    const r = e.getBoundingClientRect();
    return [Math.round(r.width), Math.round(r.height)];
  }}));
}}
"""
STAGE_IS_JS = "([stage, dflt]) => (new URLSearchParams(location.search).get('stage') || dflt) === stage"
TITLES_JS = "() => [...document.querySelectorAll('.js-plotly-plot')].map(e => e._fullLayout.title.text).join('|')"
PAGE_HEIGHT_JS = """
() => Math.max(document.documentElement.scrollHeight,
               ...[...document.querySelectorAll('[data-testid="stMain"], [data-testid="stSidebarContent"]')]
                 .map(e => e.scrollHeight))
"""


def french_reference(tok: Tokenizer, n: int) -> str:
    """French words whose tokenization has exactly ``n`` tokens, none of them special."""
    words, total = [], 0
    for word in itertools.cycle(FRENCH.split()):
        k = len(tok.encode(word))
        if total + k <= n:  # the corpus has one-token words ("le", "sur"), so this always ends
            words.append(word)
            total += k
        if total == n:
            break
    text = " ".join(words)
    ids = tok.encode(text)
    assert len(ids) == n and min(ids) >= len(SPECIALS), (text, ids)
    return text


def url(base: str, n: int, reference: str, ids: list[int], view: str, stage: str) -> str:
    query = dict(
        src=SOURCES[n],
        ref=reference,
        forced=".".join(map(str, ids)),
        max_len=str(n + 1),
        step=str(n),
        tab=view,
        stage=stage,
    )
    return f"{base}/?{urlencode(query)}"


def settle(page) -> None:
    """Wait until the page is idle, every plot is drawn, and the plots' sizes hold still."""
    page.wait_for_function(DRAWN_JS, arg=1, timeout=TIMEOUT_MS)
    helpers.wait_still(page, LAYOUT_JS, TIMEOUT_MS)


def screenshot(page, path: Path, size: tuple[int, int]) -> None:
    """The whole page: Streamlit scrolls inside its main element, so grow the viewport to its height."""
    height = min(max(page.evaluate(PAGE_HEIGHT_JS), size[1]), MAX_SHOT_PX)
    page.set_viewport_size({"width": size[0], "height": height})
    page.wait_for_function(DRAWN_JS, arg=1, timeout=TIMEOUT_MS)
    page.screenshot(path=str(path), animations="disabled")
    page.set_viewport_size({"width": size[0], "height": size[1]})


def test_figures_legible(server, browser, tiny_model_dir):
    tok = Tokenizer.load(tiny_model_dir / "tokenizer.json")
    refs = {n: french_reference(tok, n) for n in SOURCES}
    shots = os.environ.get(SHOTS_ENV) == "1"
    shutil.rmtree(SHOTS, ignore_errors=True)
    if shots:
        SHOTS.mkdir(parents=True)
    problems: list[str] = []  # legibility violations, and states that did not show what they should
    console: list[str] = []
    at = {"state": "start"}  # the state on screen, for console messages

    def visit(page, size: tuple[int, int], name: str, act, ready: str | None = None, arg=None) -> bool:
        """``act()``, wait for ``ready`` (JS, optional) and a settled page, then check it and take its screenshot."""
        at["state"] = name
        try:
            act()
            if ready:
                page.wait_for_function(ready, arg=arg, timeout=30_000)
            settle(page)
        except PlaywrightTimeout as e:
            problems.append(f"{name}: the page never showed the state: {str(e).splitlines()[0]}")
            return False
        errors = page.locator(ERROR_BOXES).all_inner_texts()
        if errors:
            problems.append(f"{name}: the app shows an error: {' | '.join(errors)}")
        problems.extend(f"{name}: {v}" for v in violations(page))
        if shots:
            screenshot(page, SHOTS / (name.replace("/", "_") + ".png"), size)
        return True

    def on_console(msg) -> None:
        if msg.type in ("error", "warning"):
            console.append(f"{at['state']}: console.{msg.type}: {msg.text}")

    for size, lengths in PLAN.items():
        vp = f"{size[0]}x{size[1]}"
        page = browser.new_page(viewport={"width": size[0], "height": size[1]})
        page.set_default_timeout(TIMEOUT_MS)
        page.on("console", on_console)
        page.on("pageerror", lambda e: console.append(f"{at['state']}: page error: {e}"))
        for n, view in itertools.product(lengths, VIEWS):
            ids = tok.encode(refs[n])
            for i, stage in enumerate(lengths[n]):
                name = f"{vp}/{n:02d}tok/{view}/{stage}"
                if i == 0:
                    act = partial(page.goto, url(server, n, refs[n], ids, view, stage))
                else:  # a click reruns the script without reloading the page: much faster than a new URL
                    label = re.compile(f"^{re.escape(STAGE_LABELS[stage])}$")
                    button = page.locator(".st-key-stage button").filter(has_text=label).first
                    # The click event alone, without the pointer's: the page holds the figures out of view for a
                    # second after a reader's press (views/plot.js), and this test waits for every figure drawn.
                    act = partial(button.dispatch_event, "click")
                if not visit(page, size, name, act, STAGE_IS_JS, [stage, DEFAULT_STAGE]) or view != "step":
                    continue
                want = f"Generated so far ({n} token{'s' if n != 1 else ''})"
                chips = page.locator(".st-key-chips").inner_text()
                if want not in chips:
                    problems.append(f"{name}: expected {want!r}, the page shows {chips[:80]!r}")
        for k in LEARN_CHAPTERS[size]:
            query = urlencode(dict(page="Learn", chapter=k, src=SOURCES[LEARN_LENGTH], max_len=LEARN_LENGTH))
            visit(page, size, f"{vp}/learn/{k:02d}", partial(page.goto, f"{server}/?{query}"), LEARN_IS_JS, k)
        for site, stage in zip(SITES, ("cross", "self", "inputs")):  # the Compare page: every map kind
            q = dict(
                page="Compare",
                src=COMPARE[0],
                srcb=COMPARE[1],
                contrast="la",
                site=site,
                stage=stage,
                step="3",
                max_len="8",
            )
            visit(page, size, f"{vp}/compare/{site}", partial(page.goto, f"{server}/?{urlencode(q)}"))
        page.close()
    report = []
    if problems:
        report += [f"{len(problems)} legibility problems:", *problems]
    if console:
        report += [f"{len(console)} browser console errors / warnings:", *console]
    if report:
        pytest.fail("\n".join(report), pytrace=False)
