"""Concurrent users and memory: several browser sessions stepping through the app at once.

    python benchmarks/soak.py [--model DIR] [--sessions 8] [--seconds 120] [--seed 0] [--smoke]

One ``streamlit run app.py`` on a free localhost port, one Chromium, one Playwright context per session,
each with its own sentence. First every session loads its sentence alone (one after the other) and
records what the page shows: the English text echoed back, the source-token badges, the French output
and the generated-token chips at every step. Then all sessions run at once for ``--seconds``, each
repeating a random action (▶, ◀, ⏮ / ⏭, another decoder layer) and, once every figure shows the new
state (``harness.browser.PAINTED_JS``), checking the page:

- errors: st.error / exception boxes, browser console errors and page errors, timeouts, server tracebacks;
- cross-talk: the English text, source tokens, French output or chips differ from the session's own
  (the chips must be its first ``step`` generated tokens);
- memory: VmRSS of the streamlit process and its children, sampled every second; the reading at the
  half-way mark (after the first minute of the default two) is compared with the one after the run.

``--smoke`` runs 2 sessions for 10 s on the tests' tiny random model. Prints a table and one verdict
line per target (exit status 0 either way): zero errors, zero cross-talk, final RSS ≤ 1.10 × half-way RSS.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as ``python benchmarks/X.py``: the repository root is not on the path
    sys.path.insert(0, str(ROOT))

from harness.browser import (  # noqa: E402
    BROWSER_ARGS,
    CHROMIUM,
    DEFAULT_MODEL,
    FIGURES_JS,
    PAGE_STATE_JS,
    PAINTED_JS,
    TIMEOUT_MS,
    VIEWPORT,
    app_env,
    build_smoke_model,
    median,
    require_chromium,
    row,
    serve,
    tree_rss_kb,
)

SENTENCES = (
    "I am a student.", "I like pizza.", "Hello world.", "The cat is sleeping on the sofa.",
    "A man in a blue shirt is standing on a ladder.", "We will go to the beach tomorrow if it does not rain.",
    "My sister reads a book in the garden.", "Two dogs are running on the beach.",
)  # fmt: skip
MAX_GROWTH = 0.10
SHOWN_PROBLEMS = 10  # problems listed in full after the table


@dataclass
class Session:
    index: int
    sentence: str
    page: object = None
    expected: dict = field(default_factory=dict)  # english, french, source, n, chips at the last step
    layers: list[str] = field(default_factory=list)
    tracking: int = 1
    step: int = 0
    layer: int = 0
    actions: int = 0
    layer_changes: int = 0
    times: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    crosstalk: list[str] = field(default_factory=list)


async def painted(page, step: int, tracking: int, layer: int | None = None) -> None:
    await page.wait_for_function(PAINTED_JS, arg=[step, tracking, layer], timeout=TIMEOUT_MS)


async def click(page, key: str) -> None:
    await page.locator(f".st-key-{key} button").first.click()


async def open_session(s: Session, browser, url: str) -> None:
    """Load the session's sentence with no other session active and record what the page shows."""
    s.page = page = await (await browser.new_context(viewport=VIEWPORT)).new_page()
    page.set_default_timeout(TIMEOUT_MS)

    def on_console(msg) -> None:
        if msg.type == "error":
            s.errors.append(f"session {s.index} console: {msg.text[:200]}")

    page.on("console", on_console)
    page.on("pageerror", lambda e: s.errors.append(f"session {s.index} page error: {str(e)[:200]}"))
    await page.goto(f"{url}/?{urlencode({'src': s.sentence})}")  # the app reads the sentence from the URL
    await painted(page, 0, 1)
    s.tracking = (await page.evaluate(FIGURES_JS))["tracking"]
    first = await page.evaluate(PAGE_STATE_JS)
    if first["english"] != s.sentence:
        raise RuntimeError(f"session {s.index} shows {first['english']!r}, not its sentence {s.sentence!r}")
    await click(page, "last")
    s.step = first["n"] - 1
    await painted(page, s.step, s.tracking)
    last = await page.evaluate(PAGE_STATE_JS)
    s.expected = {k: first[k] for k in ("english", "french", "source", "n")} | {"chips": last["chips"]}
    await page.locator(".st-key-layer [role=combobox]").click()
    s.layers = [t.strip() for t in await page.get_by_role("option").all_inner_texts()]
    await page.keyboard.press("Escape")


def check(s: Session, shown: dict) -> None:
    e = s.expected
    want = {**{k: e[k] for k in ("english", "french", "source", "n")}, "step": s.step,
            "chips": e["chips"][: s.step] or ["<s>"]}  # fmt: skip
    for key, value in want.items():
        if shown[key] != value:
            s.crosstalk.append(f"session {s.index} {key}: shows {shown[key]!r}, expected {value!r}")
    if shown["errors"]:
        s.errors.append(f"session {s.index}: {shown['errors']} error box(es) at step {s.step}")


async def act(s: Session, rng: random.Random) -> None:
    """One random action, timed until every figure shows its result, then the page checked."""
    page, last = s.page, s.expected["n"] - 1
    choice = rng.choices(("next", "prev", "jump", "layer"), weights=(45, 20, 10, 25))[0]
    if choice == "next" and s.step == last or choice == "prev" and s.step == 0:
        choice = "jump"
    layer = None
    t0 = time.perf_counter()
    if choice in ("next", "prev"):
        s.step += 1 if choice == "next" else -1
        await click(page, choice)
    elif choice == "jump":
        key = "first" if s.step > last / 2 else "last"
        s.step = 0 if key == "first" else last
        await click(page, key)
    else:
        layer = int(rng.choice([x for x in s.layers if x != str(s.layer)] or s.layers))
        await page.locator(".st-key-layer [role=combobox]").click()
        await page.get_by_role("option", name=str(layer), exact=True).click()
        s.layer = layer
        s.layer_changes += 1
    try:
        await painted(page, s.step, s.tracking, layer)
    except Exception as e:  # a timeout: counted, then the page is checked as it stands
        s.errors.append(f"session {s.index}: {choice} did not paint: {str(e).splitlines()[0][:160]}")
    s.times.append(time.perf_counter() - t0)
    s.actions += 1
    check(s, await page.evaluate(PAGE_STATE_JS))


async def run_session(s: Session, seed: int, deadline: float) -> None:
    rng = random.Random(seed * 1000 + s.index)
    while time.monotonic() < deadline:
        await act(s, rng)


async def sample_rss(pid: int, out: list[tuple[float, int]], start: float, stop: asyncio.Event) -> None:
    while not stop.is_set():
        out.append((time.monotonic() - start, tree_rss_kb(pid)))
        try:
            await asyncio.wait_for(stop.wait(), 1.0)
        except TimeoutError:
            pass


async def soak(url: str, pid: int, n_sessions: int, seconds: float, seed: int) -> tuple[list[Session], dict]:
    from playwright.async_api import async_playwright

    sessions = [Session(i, SENTENCES[i % len(SENTENCES)]) for i in range(n_sessions)]
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        try:
            for s in sessions:
                await open_session(s, browser, url)
            samples: list[tuple[float, int]] = []
            stop = asyncio.Event()
            start = time.monotonic()
            sampler = asyncio.create_task(sample_rss(pid, samples, start, stop))
            await asyncio.gather(*(run_session(s, seed, start + seconds) for s in sessions))
            stop.set()
            await sampler
            elapsed = time.monotonic() - start
        finally:
            await browser.close()
    mid = min(samples, key=lambda ts: abs(ts[0] - seconds / 2))
    rss = dict(start=samples[0][1], mid=mid[1], mid_at=mid[0], final=tree_rss_kb(pid),
               peak=max(kb for _, kb in samples), elapsed=elapsed)  # fmt: skip
    return sessions, rss


def report(sessions: list[Session], rss: dict, tracebacks: int, model: Path, seconds: float) -> None:
    print(f"Soak: {len(sessions)} concurrent browser sessions for {rss['elapsed']:.0f} s (asked {seconds:g} s); "
          f"model {model}")  # fmt: skip
    w = [9, 52, 8, 7, 13, 7, 11]
    print(row(["session", "sentence", "actions", "layers", "median (ms)", "errors", "cross-talk"], w, left=2))
    for s in sessions:
        text = s.sentence if len(s.sentence) <= 50 else s.sentence[:49] + "…"
        cells = [s.index, text, s.actions, s.layer_changes, f"{median(s.times) * 1e3:.0f}", len(s.errors),
                 len(s.crosstalk)]  # fmt: skip
        print(row(cells, w, left=2))
    mb = {k: rss[k] / 1024 for k in ("start", "mid", "final", "peak")}
    print(f"server RSS (MiB, streamlit and children): start {mb['start']:.0f}, at {rss['mid_at']:.0f} s "
          f"{mb['mid']:.0f}, final {mb['final']:.0f}, peak {mb['peak']:.0f}")  # fmt: skip
    print(f"tracebacks in the server log: {tracebacks}")
    problems = [p for s in sessions for p in s.errors + s.crosstalk]
    for p in problems[:SHOWN_PROBLEMS]:
        print("  " + p)
    if len(problems) > SHOWN_PROBLEMS:
        print(f"  … and {len(problems) - SHOWN_PROBLEMS} more")
    n_err = sum(len(s.errors) for s in sessions) + tracebacks
    n_ct = sum(len(s.crosstalk) for s in sessions)
    n_act = sum(s.actions for s in sessions)
    print(f"verdict errors = 0: {'PASS' if n_err == 0 else 'FAIL'} ({n_err} over {n_act} actions)")
    print(f"verdict cross-talk = 0: {'PASS' if n_ct == 0 else 'FAIL'} ({n_ct} mismatches over {n_act} checks)")
    growth = rss["final"] / rss["mid"] - 1
    print(f"verdict final RSS ≤ {1 + MAX_GROWTH:.2f}× half-way RSS: {'PASS' if growth <= MAX_GROWTH else 'FAIL'} "
          f"({mb['final']:.0f} MiB vs {mb['mid']:.0f} MiB: {growth:+.1%})")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, default=DEFAULT_MODEL, help="model directory (default: the bundled one)")
    ap.add_argument("--sessions", type=int, help="concurrent browser sessions (default 8; smoke 2)")
    ap.add_argument("--seconds", type=float, help="length of the concurrent run (default 120; smoke 10)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the sessions' random actions")
    ap.add_argument("--smoke", action="store_true", help="tiny random model, 2 sessions for 10 s (a quick check)")
    args = ap.parse_args(argv)
    require_chromium()
    sessions = args.sessions or (2 if args.smoke else 8)
    seconds = args.seconds or (10.0 if args.smoke else 120.0)
    if sessions < 1 or seconds <= 0:
        ap.error("--sessions must be at least 1 and --seconds positive")
    with tempfile.TemporaryDirectory(prefix="soak_") as d:
        tmp = Path(d)
        model = build_smoke_model(tmp / "tiny") if args.smoke else args.model
        if not (model / "config.json").is_file():
            ap.error(f"{model} is not a model directory (no config.json)")
        log = tmp / "streamlit.log"
        try:
            with serve(ROOT / "app.py", log, app_env(model)) as server:
                result, rss = asyncio.run(soak(server.url, server.proc.pid, sessions, seconds, args.seed))
                tracebacks = server.tracebacks()
        except Exception:
            print("--- streamlit log (last lines)\n" + "\n".join(log.read_text().splitlines()[-20:]), file=sys.stderr)
            raise
        report(result, rss, tracebacks, model, seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
