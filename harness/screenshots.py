"""The README's screenshots, one per page, taken from the app on the bundled model in Debian's chromium, so they show
what the app shows today: ``python -m harness.screenshots [--model DIR] [--out assets/screenshots]``.

Each is the window at 1366×900 once the page is drawn, scrolled to what the page is for, saved as a PNG of at most
256 colours (well under a hundred KB).
The Class page shows the dashboard of a class made up for the picture in a throwaway SQLite file."""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from playwright.sync_api import ViewportSize

from classroom.db import URL_ENV
from classroom.store import FINAL, QUESTIONS, Answer, Store
from harness.browser import BROWSER_ARGS, CHROMIUM, DEFAULT_MODEL, DRAWN_JS, IDLE_JS, ROOT, app_env, serve

OUT = ROOT / "assets" / "screenshots"
VIEWPORT = ViewportSize(width=1366, height=900)
TIMEOUT_MS = 300_000
SENTENCE = "The little girl is reading a book in the garden."
CORPUS_SET = (  # one the model gets right and three it gets wrong, so the picture shows what the flags name
    "A man is riding a bicycle.\tUn homme fait du vélo.\n"
    "A girl is playing the piano in a concert hall.\tUne fille joue du piano dans une salle de concert.\n"
    "A boy in a yellow raincoat jumps into a muddy puddle.\tUn garçon en imperméable jaune saute dans une flaque de "
    "boue.\n"
    "A man sells roasted chestnuts from a cart.\tUn homme vend des marrons grillés sur une charrette.\n"
)


@dataclass(frozen=True)
class Shot:
    """One page's picture: its file name, its address (``{class}`` is the made-up class's dashboard), the figures
    it shows at least once drawn, what is done on it first (if anything), and the element scrolled to the top of the
    window (``above`` pixels of what precedes it kept in view)."""

    name: str
    path: str
    figures: int
    action: Callable | None = None
    anchor: str | None = None
    above: int = 0


def analyse_set(page: Any) -> None:
    box = page.locator(".st-key-corpus_paste textarea")
    box.fill(CORPUS_SET)
    box.press("Control+Enter")
    page.locator(".st-key-corpus_go button").click()  # opening the page translates nothing until asked
    page.get_by_role("heading", name="What each head does over the set").wait_for(timeout=TIMEOUT_MS)
    page.wait_for_function(DRAWN_JS, arg=3, timeout=TIMEOUT_MS)


def heading(text: str) -> str:
    return f':is(h1, h2, h3):has-text("{text}")'


SHOTS = (
    Shot("learn", "/?chapter=6&src=" + SENTENCE.replace(" ", "+"), 1, anchor=".decoder-lens-plot", above=330),
    Shot(
        "explore",
        "/explore?src=" + SENTENCE.replace(" ", "+") + "&step=4&stage=self",
        1,
        anchor="text=Decoder stage to show",
        above=20,
    ),
    Shot(
        "compare",
        "/compare?src=The+girl+is+reading.&srcb=The+girls+are+reading.",
        2,
        anchor=".decoder-lens-plot",
        above=160,
    ),
    Shot("corpus", "/corpus?set=paste", 0, analyse_set, heading("Sentences"), 20),
    Shot("class", "{class}", 4, anchor=heading("The first check against the final one"), above=20),
    Shot("about", "/about", 0, anchor=heading("About Decoder Lens")),
)
# Scroll Streamlit's main column (the page scrolls inside it) to put an element under the app's top bar.
SCROLL_JS = """(el, above) => {
  const main = document.querySelector('[data-testid="stMain"]');
  main.scrollTop += el.getBoundingClientRect().top - 70 - above;
}"""


def made_up_class(url: str) -> str:
    """A class of 24 students through the lesson, most better at the final check than at the first: its dashboard's
    path (with the teacher's secret)."""
    store = Store.open(url)
    cls = store.create_class("Monday 9:00")
    for i in range(24):
        st = store.join(cls.id, f"student {i + 1}")
        store.answer_many(
            Answer(f"{st.id}:{q}:1", cls.id, st.id, q, f"option {(i * 7 + j) % 4}", 0, right, SENTENCE)
            for j, q in enumerate(QUESTIONS)
            for right in [(i * 7 + j) % (2 if q.startswith("pre_") else 3) != 1]
        )
        store.reach(cls.id, st.id, FINAL if i % 3 else 4 + i % 10, SENTENCE)
    store.close_connections()
    return f"/class?c={cls.id}&t={cls.secret}"


def quantised(path: Path) -> int:
    """Rewrite the PNG at ``path`` with at most 256 colours; its new size in bytes."""
    from PIL import Image

    with Image.open(path) as im:
        im.convert("RGB").quantize(256, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)
    return path.stat().st_size


def take(model: Path, out: Path) -> list[tuple[str, int]]:
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    sizes = []
    with tempfile.TemporaryDirectory() as tmp:
        db = f"sqlite:///{Path(tmp) / 'classes.db'}"
        dashboard = made_up_class(db)
        env = {**app_env(model), URL_ENV: db}
        with serve(ROOT / "app.py", Path(tmp) / "server.log", env) as server, sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
            for shot in SHOTS:
                page = browser.new_page(viewport=VIEWPORT)
                page.set_default_timeout(TIMEOUT_MS)
                page.goto(server.url + shot.path.replace("{class}", dashboard))
                page.wait_for_function(DRAWN_JS, arg=shot.figures)
                if shot.action:
                    shot.action(page)
                anchors = [shot.anchor] * 2 if shot.anchor else []  # again once the figures it showed are drawn
                for anchor in anchors:
                    page.locator(anchor).first.evaluate(SCROLL_JS, shot.above)
                    page.wait_for_function(DRAWN_JS, arg=shot.figures)
                    page.wait_for_timeout(500)  # the last figures' transitions
                page.wait_for_function(IDLE_JS)
                target = out / f"{shot.name}.png"
                page.screenshot(path=str(target))
                sizes.append((target.name, quantised(target)))
                page.close()
            browser.close()
            if server.tracebacks():  # a picture of a page that failed somewhere is no picture of the app
                raise SystemExit(f"the app logged a traceback:\n{server.log.read_text()[-3000:]}")
    return sizes


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=DEFAULT_MODEL, help="model directory (default: the bundled one)")
    ap.add_argument("--out", type=Path, default=OUT, help="folder the PNGs go to (default: assets/screenshots)")
    args = ap.parse_args(argv)
    for name, size in take(args.model, args.out):
        print(f"{name:14} {size / 1024:6.0f} KB")


if __name__ == "__main__":
    main()
