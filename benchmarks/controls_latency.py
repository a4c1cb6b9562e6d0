"""Every control a student uses, timed in a real browser against the floor page's rerun, and the CLI's one-sentence
commands against ``python -c "import torch"``.

    python benchmarks/controls_latency.py [--model DIR] [--runs 3] [--busy] [--smoke] [--only NAME,…]

``streamlit run app.py`` on a free localhost port, driven by Playwright and Debian's Chromium, Explore opened on a
sentence in beam search (its step view shown and drawn first): each control from its click (or key; a select box's,
from the click on the option, the box opened before) until the page
shows what it asked for and is idle with every figure in view drawn (a download: until the file is handed over):
open *What if?*, force a token, Clear, open *Export*, the position's records (NPZ), the handout, a position's ZIP
in the handout opened from its file, change stage, layer, head, beam, the Follow-hypothesis pick, and the pages
switched Learn → Explore → Compare → Corpus → back. The floor is ``benchmarks/floor_app.py``'s
rerun (a button that redraws one heatmap), measured in the same run (``app_latency.measure_floor``). Then the CLI's
``translate``, ``trace`` and ``explain`` of one sentence, each from a fresh process, against ``python -c "import
torch"``. Prints a table (median of ``--runs``) and a verdict per target: every control ≤ 3 × the floor's rerun, a
page switch ≤ 2 s, no page switch whose first click is lost (one that brought no page in ``LOST_CLICK_MS`` is
clicked again, and counted; a force or Clear that changed nothing is clicked again too, what the page showed
printed, its time counted from the first click), each CLI command ≤ 2 × the import. ``--busy`` times every control
again while a second process keeps one core busy (a class shares its server), interleaved pass by pass with the
quiet ones, verdict: each control ≤ 2 × its quiet median, and no lost switch. ``--only`` times the controls named
(as the table names them, or the start of the name: "force", "change stage"), with the ones they need clicked first
(What if? opened before a token is forced, …), and the floor; not the CLI. The machine's load is the caller's to
say.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

from benchmarks.app_latency import measure_floor
from harness.browser import (
    BROWSER_ARGS,
    CHROMIUM,
    DEFAULT_MODEL,
    DRAWN_JS,
    IDLE_JS,
    ROOT,
    app_env,
    build_smoke_model,
    require_chromium,
    serve,
)

SENTENCE = "The little girl is reading a book in the garden."
QUERY = "src=The%20little%20girl%20is%20reading%20a%20book%20in%20the%20garden.&strategy=beam&beam=3&max_len=12"
TIMEOUT_MS = 300_000  # generous: a loaded 2-core machine can take minutes (harness.browser)
LOST_CLICK_MS = 60_000  # a page switch on a loaded machine takes seconds: none after a minute, the click was lost
MAX_CONTROL_RATIO, MAX_SWITCH_S, MAX_CLI_RATIO, MAX_BUSY_RATIO = 3.0, 2.0, 2.0, 2.0
SPIN = "while True: pass"  # one core kept busy
URL_HAS = (  # the link's parameter k is v (None: absent)
    "([k, v]) => { const got = new URL(location.href).searchParams.get(k);"
    " return v === null ? got === null : got === v; }"
)


# Every figure in the window drawn (heatmaps as images) and none being drawn: a figure new to the page below the
# window is drawn once the page's update is over, in idle moments (views/plot.js), as one whose update waits is.
VIEW_DRAWN_JS = """() => !document.querySelector('[data-drawing]') &&
  [...document.querySelectorAll('.decoder-lens-plot')].every((el) => {
    const r = el.getBoundingClientRect();
    if (!(r.bottom > 0 && r.top < innerHeight && el.offsetWidth > 0)) return true;
    const heat = (el._fullData || []).some((t) => t.type === 'heatmap');
    return Boolean(el._fullLayout && el.querySelector('.main-svg') && (!heat || el.querySelector('.hm image')));
  })"""


def settled(page) -> None:
    """The run is over and every figure in view is drawn."""
    page.wait_for_function(IDLE_JS, timeout=TIMEOUT_MS)
    page.wait_for_function(VIEW_DRAWN_JS, timeout=TIMEOUT_MS)


def opened(page) -> None:
    """Explore's step view shown (before its first run the page is idle with no figure: not yet opened), settled,
    and every figure below the window drawn too, at least one of them: the position's line shows before its figures
    are drawn, and a page with none drawn yet would have the first control timed with the page's first drawing."""
    page.locator(".st-key-next_chip").first.wait_for(timeout=TIMEOUT_MS)
    settled(page)
    page.wait_for_function(DRAWN_JS, arg=1, timeout=TIMEOUT_MS)


def timed(page, act: Callable[[], None], done: Callable[[], None]) -> float:
    t0 = time.perf_counter()
    act()
    done()
    settled(page)
    return time.perf_counter() - t0


def url_is(page, key: str, value: str | None) -> Callable[..., None]:
    return lambda timeout=TIMEOUT_MS: page.wait_for_function(URL_HAS, arg=[key, value], timeout=timeout)


def url_set(page, key: str) -> Callable[..., None]:
    return lambda timeout=TIMEOUT_MS: page.wait_for_function(
        "k => new URL(location.href).searchParams.get(k) !== null", arg=key, timeout=timeout
    )


def once_more(page, what: str, wait: Callable[[int], None], click: Callable[[], None]) -> None:
    """``wait`` (given a timeout in ms) for what a click on ``what`` brings; none within ``LOST_CLICK_MS``: what the
    page shows is reported, and ``click`` once more (the time still counts from the first click, so the control
    fails its target, and the pass goes on)."""
    try:
        wait(LOST_CLICK_MS)
        return
    except Exception:
        print(f"After the click on {what}, nothing followed: {page_state(page)}; clicked again", file=sys.stderr)
    click()
    try:
        wait(TIMEOUT_MS)
    except Exception as e:  # say what the page shows instead, so that a failure can be read from the log
        raise RuntimeError(f"after two clicks on {what}, nothing followed: {page_state(page)}") from e


def pressed(page, key: str, done: Callable[..., None]) -> float:
    """Seconds from the click on the button ``key`` until ``done`` holds and the page is settled; a click lost is
    clicked once more (``once_more``)."""
    button = page.locator(f".st-key-{key} button").first
    return timed(page, button.click, lambda: once_more(page, repr(key), done, button.click))


def shows(page, selector: str) -> Callable[[], None]:
    return lambda: page.locator(selector).first.wait_for(timeout=TIMEOUT_MS)


def download(page, key: str, keep: dict[str, Path] | None = None) -> float:
    """Seconds from the click on the download button ``key`` until the file is handed over (kept in ``keep``)."""
    t0 = time.perf_counter()
    with page.expect_download(timeout=TIMEOUT_MS) as got:
        page.locator(f".st-key-{key} button").first.click()
    path = Path(got.value.path())
    secs = time.perf_counter() - t0
    if keep is not None:  # under its own name: a browser opens a page by its file's extension
        keep[key] = path.with_name(got.value.suggested_filename)
        got.value.save_as(keep[key])
    return secs


def handout_zip(page, handout: Path) -> float:
    """The handout opened from its file as a student opens it, then the first position's ZIP (every figure as PNG
    and SVG, made in the page): seconds from the click on its button until the file is handed over."""
    tab = page.context.browser.new_page(viewport={"width": 1366, "height": 768}, accept_downloads=True)
    try:
        tab.goto(handout.as_uri())
        tab.wait_for_function("() => window.Plotly && document.querySelector('.plot .main-svg')", timeout=TIMEOUT_MS)
        t0 = time.perf_counter()
        with tab.expect_download(timeout=TIMEOUT_MS) as got:
            tab.locator("button.zip").first.click()
        got.value.path()
        return time.perf_counter() - t0
    finally:
        tab.close()


def expander(page, label_start: str) -> Callable[[], None]:
    return lambda: page.get_by_text(label_start).first.click()


def pick(page, key: str, option: int | str) -> tuple[Callable[[], None], Callable[[], None]]:
    """Opening the select box ``key`` (typing ``option`` into its filter when it is a name, as a student filters a
    long list), then, timed, choosing its option at index ``option`` (or the one typed)."""
    box = page.locator(f".st-key-{key}").get_by_role("combobox")
    options = page.locator("[role=option]:visible")  # the open list's: another box's may linger, hidden

    def ready() -> None:
        # Scrolled to first: a box that the click scrolls into view opens its list and closes it as the page moves.
        box.scroll_into_view_if_needed()
        box.click()
        if isinstance(option, str):
            box.fill(option)
        else:
            options.first.wait_for(timeout=TIMEOUT_MS)

    def choose() -> None:
        if isinstance(option, str):
            box.press("Enter")
        else:
            options.nth(option).click()

    return ready, choose


def timed_pick(page, box: tuple[Callable[[], None], Callable[[], None]], done: Callable[[], None]) -> float:
    """A select box (``pick``) opened, then its choice timed from the click on the option: opening it is the
    browser's own and runs nothing."""
    ready, choose = box
    ready()
    return timed(page, choose, done)


# What a control needs clicked before it, in the same pass (``--only``).
NEEDS = {
    "force a token": "open What if?",
    "Clear": "force a token",
    "position's records (NPZ)": "open Export",
    "handout": "open Export",
    "a position's ZIP (handout)": "handout",
}


def selected(names: list[str], only: list[str] | None) -> list[str]:
    """The controls of ``names`` that ``only`` names (by the start of the name) and those they need, in pass order."""
    if not only:
        return names
    chosen = {n for n in names if any(n.lower().startswith(o.strip().lower()) for o in only)}
    if unknown := [o for o in only if not any(n.lower().startswith(o.strip().lower()) for n in names)]:
        raise SystemExit(f"--only: no control is named {', '.join(unknown)}; the controls: {', '.join(names)}")
    for name in list(chosen):
        while name in NEEDS:
            name = NEEDS[name]
            chosen.add(name)
    return [n for n in names if n in chosen]


def controls(page, url: str) -> list[tuple[str, Callable[[], float]]]:
    """Every control, in the order a pass clicks them (each one's seconds when called), from Explore's view of the
    sentence (the page opened by the caller)."""
    files: dict[str, Path] = {}
    seg = page.locator(".st-key-stage")
    slider = page.locator(".st-key-beam input[type=range]")
    out: list[tuple[str, Callable[[], float]]] = [
        ("open What if?", lambda: timed(page, expander(page, "What if?"), shows(page, ".st-key-whatif_go"))),
        ("force a token", lambda: pressed(page, "whatif_go", url_set(page, "forced"))),
        ("Clear", lambda: pressed(page, "clear_forced", url_is(page, "forced", None))),
        ("open Export", lambda: timed(page, expander(page, "Export:"), shows(page, ".st-key-dl_handout"))),
        ("position's records (NPZ)", lambda: download(page, "dl_steps")),
        ("handout", lambda: download(page, "dl_handout", files)),
        ("a position's ZIP (handout)", lambda: handout_zip(page, files["dl_handout"])),
        (
            "change stage",
            lambda: timed(
                page, lambda: seg.get_by_text("Cross-attention").first.click(), url_is(page, "stage", "cross")
            ),
        ),
        ("change layer", lambda: timed_pick(page, pick(page, "layer", 1), url_is(page, "layer", "1"))),
        ("change head", lambda: timed_pick(page, pick(page, "head", "head 1"), url_is(page, "head", "1"))),
        (
            "change beam",
            lambda: timed(page, lambda: (slider.focus(), slider.press("ArrowRight")), url_is(page, "beam", "4")),
        ),
        ("Follow-hypothesis pick", lambda: timed_pick(page, pick(page, "follow_pick", 1), url_set(page, "follow"))),
    ]
    for name, link, heading in (
        ("to Learn", "Learn", "Learn"),
        ("to Explore", "Explore", "Decoder Lens"),
        ("to Compare", "Compare", "Compare two sentences"),
        ("to Corpus", "Corpus", "Corpus"),
        ("back to Explore", "Explore", "Decoder Lens"),
    ):
        out.append((f"switch {name}", partial(switch, page, link, heading)))
    return out


def switch(page, link: str, heading: str) -> float:
    """Seconds from the click on the page's link until its heading shows and the page is settled; a click that no
    page change follows is clicked once more (``once_more``)."""
    link_el = page.get_by_role("link", name=link, exact=True).first
    head = page.get_by_role("heading", level=1, name=heading, exact=False).first

    def arrived(timeout: int) -> None:
        head.wait_for(timeout=timeout)

    return timed(
        page, link_el.click, lambda: once_more(page, f"{link!r} (heading {heading!r})", arrived, link_el.click)
    )


def page_state(page) -> str:
    """The address, the headings and any error or alert the page shows: what a failed wait found instead."""
    said = page.evaluate(
        """() => ({url: location.href,
          headings: [...document.querySelectorAll('h1, h2')].map((h) => h.innerText.trim()).slice(0, 8),
          alerts: [...document.querySelectorAll('[data-testid="stAlert"], [data-testid="stException"]')]
            .map((a) => a.innerText.trim().slice(0, 300)),
          running: Boolean(document.querySelector('[data-testid="stStatusWidget"]')),
          stale: document.querySelectorAll('[data-stale="true"]').length})"""
    )
    return str(said)


def cli_times(model: Path, runs: int) -> dict[str, float]:
    """Median wall seconds of each one-sentence CLI command from a fresh process, and of importing torch."""
    py = sys.executable
    with tempfile.TemporaryDirectory() as d:
        commands = {
            'python -c "import torch"': [py, "-c", "import torch"],
            "translate": [py, "-m", "model", "translate", SENTENCE, "--model", str(model)],
            "trace": [py, "-m", "model", "trace", SENTENCE, "--model", str(model), "--out", f"{d}/t.npz"],
            "explain": [py, "-m", "model", "explain", SENTENCE, "--model", str(model)],
        }
        out = {}
        for name, cmd in commands.items():
            times = []
            for _ in range(runs):
                t0 = time.perf_counter()
                subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True)
                times.append(time.perf_counter() - t0)
            out[name] = statistics.median(times)
    return out


@contextlib.contextmanager
def one_core_busy(on: bool) -> Iterator[None]:
    """A second process spinning on one core while the block runs (nothing when ``on`` is false)."""
    spinner = subprocess.Popen([sys.executable, "-c", SPIN]) if on else None
    try:
        yield
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.wait()


def report_busy(quiet: dict[str, list[float]], busy: dict[str, list[float]]) -> None:
    print("With a second process keeping one core busy")
    print(f"{'control':<32}{'quiet':>10}{'busy':>10}{'× quiet':>10}  verdict")
    for name, times in busy.items():
        q, b = statistics.median(quiet[name]), statistics.median(times)
        verdict = f"{'PASS' if b <= MAX_BUSY_RATIO * q else 'FAIL'} (≤ {MAX_BUSY_RATIO:g}× quiet)"
        print(f"{name:<32}{q * 1000:>8.0f} ms{b * 1000:>8.0f} ms{b / q:>9.1f}×  {verdict}")
    if any(name.startswith("switch") for name in busy):
        print(lost_switches(busy))


def lost_switches(times: dict[str, list[float]]) -> str:
    """A verdict line on the page switches whose first click brought no page (``switch`` clicked again after
    ``LOST_CLICK_MS``): a median hides one, a student clicking a link that does nothing does not."""
    switches = [t for name, ts in times.items() if name.startswith("switch") for t in ts]
    lost = sum(t >= LOST_CLICK_MS / 1000 for t in switches)
    return f"page switches whose first click was lost: {lost} of {len(switches)}  {'FAIL' if lost else 'PASS'} (none)"


def report(app: dict[str, list[float]], floor_s: float, cli: dict[str, float]) -> None:
    print(f"floor page's rerun (median): {floor_s * 1000:.0f} ms")
    print(f"{'control':<32}{'median':>10}{'× floor':>10}  verdict")
    for name, times in app.items():
        m = statistics.median(times)
        switch = name.startswith("switch")
        ok = m <= MAX_SWITCH_S if switch else m <= MAX_CONTROL_RATIO * floor_s
        target = f"≤ {MAX_SWITCH_S:g} s" if switch else f"≤ {MAX_CONTROL_RATIO:g}× floor"
        print(f"{name:<32}{m * 1000:>8.0f} ms{m / floor_s:>9.1f}×  {'PASS' if ok else 'FAIL'} ({target})")
    if any(name.startswith("switch") for name in app):
        print(lost_switches(app))
    if not cli:
        return
    base = cli['python -c "import torch"']
    print(f'CLI, one sentence, fresh process (python -c "import torch": {base:.2f} s)')
    for name, secs in cli.items():
        if name.startswith("python"):
            continue
        ok = secs <= MAX_CLI_RATIO * base
        print(
            f"{name:<32}{secs:>8.2f} s {secs / base:>8.2f}×  {'PASS' if ok else 'FAIL'} (≤ {MAX_CLI_RATIO:g}× import)"
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--busy", action="store_true", help="each pass again with one core kept busy")
    ap.add_argument("--smoke", action="store_true", help="the tests' tiny random model, one run")
    ap.add_argument("--only", type=lambda s: s.split(","), help="these controls only (and those they need), no CLI")
    args = ap.parse_args(argv)
    require_chromium()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="controls_") as d:
        tmp = Path(d)
        model = build_smoke_model(tmp / "tiny") if args.smoke else args.model
        runs = 1 if args.smoke else args.runs
        app: dict[bool, dict[str, list[float]]] = {False: {}, True: {}}
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
            try:
                with serve(ROOT / "app.py", tmp / "app.log", app_env(model)) as server:
                    try:
                        for _ in range(runs):
                            for busy in (False, True) if args.busy else (False,):
                                with one_core_busy(busy):
                                    passes(browser, server.url, app[busy], args.only)
                    except Exception:  # the server's own words beside the failure
                        print("The app's log, last lines:", *log_tail(tmp / "app.log"), sep="\n", file=sys.stderr)
                        raise
                floor = measure_floor(browser, tmp, (64, 64), max(5, 3 * runs), 1)
            finally:
                browser.close()
        report(app[False], statistics.median(floor["step"]), {} if args.only else cli_times(model, runs))
        if args.busy:
            report_busy(app[False], app[True])
    return 0


def log_tail(log: Path, lines: int = 60) -> list[str]:
    return log.read_text(errors="replace").splitlines()[-lines:] if log.exists() else ["(no log)"]


def passes(browser, url: str, into: dict[str, list[float]], only: list[str] | None = None) -> None:
    """One pass over every control (or those ``only`` selects) in a fresh page, each time added to ``into``."""
    page = browser.new_page(viewport={"width": 1366, "height": 768}, accept_downloads=True)
    page.set_default_timeout(TIMEOUT_MS)
    try:
        page.goto(f"{url}/explore?{QUERY}&stage=output&step=2")
        opened(page)
        every = controls(page, url)
        chosen = selected([name for name, _ in every], only)
        for name, control in every:
            if name in chosen:
                into.setdefault(name, []).append(control())
    finally:
        page.close()


if __name__ == "__main__":
    sys.exit(main())
