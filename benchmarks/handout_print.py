"""The handout printed: a line of ``--positions`` positions, All stages (or ``--stage``), opened in Chromium from its
file, printed to PDF once every figure is drawn for the print (the page's Print button waits for the same).

    python benchmarks/handout_print.py [--model DIR] [--positions 15] [--stage all]

Prints the figures, how many are drawn in the print (a visible, loaded image each), the seconds from opening the
page until all were ready, and the PDF's pages. Verdict: 100 % of the figures drawn, a page per position at least.
"""

from __future__ import annotations

import argparse
import re
import tempfile
import time
from pathlib import Path

from benchmarks.handout import SENTENCE
from harness.browser import BROWSER_ARGS, CHROMIUM, DEFAULT_MODEL
from harness.handout import handout_of

DRAWN_JS = (
    "() => [...document.querySelectorAll('img.print-figure')].filter(i => i.complete && i.naturalWidth > 0"
    " && i.checkVisibility() && i.getBoundingClientRect().height > 20).length"
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    ap.add_argument("--positions", type=int, default=15)
    ap.add_argument("--stage", default="all")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    page_bytes = handout_of(args.model, source=SENTENCE, max_len=args.positions, stage=args.stage)
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        path = Path(tmp) / "handout.html"
        path.write_bytes(page_bytes)
        browser = p.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        page = browser.new_page(viewport={"width": 1366, "height": 768})
        start = time.perf_counter()
        page.goto(path.as_uri())
        page.wait_for_function("() => document.documentElement.dataset.printReady", timeout=600_000)
        ready = time.perf_counter() - start
        figures = page.locator(".plot").count()
        page.emulate_media(media="print")
        drawn = page.evaluate(DRAWN_JS)
        pdf = page.pdf(format="A4")
        browser.close()
    pages = len(re.findall(rb"/Type\s*/Page\b", pdf))
    print(f"model {args.model.name}, stage {args.stage}, positions {args.positions}")
    print(f"figures {figures}, drawn in the print {drawn} ({drawn / max(figures, 1):.0%})")
    print(f"ready to print {ready:.1f} s after opening; PDF {pages} pages, {len(pdf) / 1e6:.1f} MB")
    ok = drawn == figures and pages >= args.positions
    print(f"verdict every figure drawn, a page per position: {'PASS' if ok else 'FAIL'}")


if __name__ == "__main__":
    main()
