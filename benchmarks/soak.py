"""Concurrent users and memory: several browser sessions stepping through the app at once.

    python benchmarks/soak.py [--model DIR] [--sessions 8] [--seconds 120] [--seed 0] [--smoke]

One ``streamlit run app.py`` on a free localhost port, one Chromium, one Playwright context per session,
each with its own sentence (``harness/sessions.py``, as in classroom.py). First every session loads its
sentence alone (one after the other), steps to its end and records what the page shows: the English text
echoed back, the source-token badges, the French output and the generated-token chips at every step. Then
all sessions run at once for ``--seconds`` with no pause between actions, each repeating a random action
(▶, ◀, ⏮ / ⏭, another decoder layer; the default stage throughout) and, once the page shows the new state
(``harness.browser.VIEW_PAINTED_JS``; 30 s at most), checking the page:

- errors: st.error / exception boxes, browser console errors and page errors, timeouts, server tracebacks;
- cross-talk: the English text, source tokens, French output, chips or the URL's sentence differ from the
  session's own (the chips must be its first ``step`` generated tokens);
- memory: VmRSS of the streamlit process and its children, sampled every second; the reading at the
  half-way mark (after the first minute of the default two) is compared with the one after the run.

``--smoke`` runs 2 sessions for 4 s on the tests' tiny random model. Prints a table and one verdict
line per target (exit status 0 either way): zero errors, zero cross-talk, final RSS ≤ 1.10 × half-way RSS.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

from harness.browser import (
    BROWSER_ARGS,
    CHROMIUM,
    DEFAULT_MODEL,
    app_env,
    benchmark_model,
    median,
    require_chromium,
    row,
    serve,
    tree_rss_kb,
)
from harness.sessions import IDLE_PHASE, SENTENCES, Drive, Session, open_session, run_session
from views.state import DEFAULT_STAGE

ROOT = Path(__file__).resolve().parents[1]

MAX_GROWTH = 0.10
SHOWN_PROBLEMS = 10  # problems listed in full after the table


async def rss_until(pid: int, start: float, done: asyncio.Future) -> list[tuple[float, int]]:
    """(seconds since ``start``, server RSS in KiB) every second until ``done``."""
    samples = []
    while True:
        samples.append((time.monotonic() - start, tree_rss_kb(pid)))
        if done.done():
            return samples
        await asyncio.wait([done], timeout=1.0)


async def soak(url: str, pid: int, n_sessions: int, seconds: float, drive: Drive) -> tuple[list[Session], dict]:
    from playwright.async_api import async_playwright

    sessions = [Session(i, SENTENCES[i % len(SENTENCES)]) for i in range(n_sessions)]
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        try:
            for s in sessions:
                await open_session(s, browser, url, drive)
            drive.phase = 0
            start = time.monotonic()
            running = asyncio.gather(*(run_session(s, drive, start + seconds) for s in sessions))
            samples = await rss_until(pid, start, running)
            await running
            elapsed = time.monotonic() - start
        finally:
            drive.phase = IDLE_PHASE
            await browser.close()
    mid = min(samples, key=lambda ts: abs(ts[0] - seconds / 2))
    rss = dict(
        start=samples[0][1],
        mid=mid[1],
        mid_at=mid[0],
        final=tree_rss_kb(pid),
        peak=max(kb for _, kb in samples),
        elapsed=elapsed,
    )
    return sessions, rss


def report(sessions: list[Session], rss: dict, tracebacks: int, model: Path, seconds: float) -> None:
    print(
        f"Soak: {len(sessions)} concurrent browser sessions for {rss['elapsed']:.0f} s (asked {seconds:g} s); "
        f"model {model}"
    )
    w = [9, 52, 8, 7, 13, 7, 11]
    print(row(["session", "sentence", "actions", "layers", "median (ms)", "errors", "cross-talk"], w, left=2))
    for s in sessions:
        text = s.sentence if len(s.sentence) <= 50 else s.sentence[:49] + "…"
        layers = sum(1 for a in s.actions if a.kind == "layer")
        cells = [
            s.index,
            text,
            len(s.actions),
            layers,
            f"{median([a.seconds for a in s.actions]) * 1e3:.0f}",
            len(s.errors),
            len(s.crosstalk),
        ]
        print(row(cells, w, left=2))
    mb = {k: rss[k] / 1024 for k in ("start", "mid", "final", "peak")}
    print(
        f"server RSS (MiB, streamlit and children): start {mb['start']:.0f}, at {rss['mid_at']:.0f} s "
        f"{mb['mid']:.0f}, final {mb['final']:.0f}, peak {mb['peak']:.0f}"
    )
    print(f"tracebacks in the server log: {tracebacks}")
    problems = [t for s in sessions for _, t in s.errors + s.crosstalk]
    for p in problems[:SHOWN_PROBLEMS]:
        print("  " + p)
    if len(problems) > SHOWN_PROBLEMS:
        print(f"  … and {len(problems) - SHOWN_PROBLEMS} more")
    n_err = sum(len(s.errors) for s in sessions) + tracebacks
    n_ct = sum(len(s.crosstalk) for s in sessions)
    n_act = sum(len(s.actions) for s in sessions)
    print(f"verdict errors = 0: {'PASS' if n_err == 0 else 'FAIL'} ({n_err} over {n_act} actions)")
    print(f"verdict cross-talk = 0: {'PASS' if n_ct == 0 else 'FAIL'} ({n_ct} mismatches over {n_act} checks)")
    growth = rss["final"] / rss["mid"] - 1
    print(
        f"verdict final RSS ≤ {1 + MAX_GROWTH:.2f}× half-way RSS: {'PASS' if growth <= MAX_GROWTH else 'FAIL'} "
        f"({mb['final']:.0f} MiB vs {mb['mid']:.0f} MiB: {growth:+.1%})"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, default=DEFAULT_MODEL, help="model directory (default: the bundled one)")
    ap.add_argument("--sessions", type=int, help="concurrent browser sessions (default 8; smoke 2)")
    ap.add_argument("--seconds", type=float, help="length of the concurrent run (default 120; smoke 4)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the sessions' random actions")
    ap.add_argument("--smoke", action="store_true", help="tiny random model, 2 sessions for 4 s (a quick check)")
    args = ap.parse_args(argv)
    require_chromium()
    sessions = args.sessions or (2 if args.smoke else 8)
    seconds = args.seconds or (4.0 if args.smoke else 120.0)
    if sessions < 1 or seconds <= 0:
        ap.error("--sessions must be at least 1 and --seconds positive")
    with tempfile.TemporaryDirectory(prefix="soak_") as d:
        tmp = Path(d)
        model, n_layers = benchmark_model(args.smoke, args.model, tmp, ap)
        drive = Drive(n_layers, stages=(DEFAULT_STAGE,), think=0.0, seed=args.seed)
        log = tmp / "streamlit.log"
        try:
            with serve(ROOT / "app.py", log, app_env(model)) as server:
                result, rss = asyncio.run(soak(server.url, server.proc.pid, sessions, seconds, drive))
                tracebacks = server.tracebacks()
        except Exception:
            print("--- streamlit log (last lines)\n" + "\n".join(log.read_text().splitlines()[-20:]), file=sys.stderr)
            raise
        report(result, rss, tracebacks, model, seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
