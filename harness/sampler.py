"""Real browsers sampled under a protocol-level load (``benchmarks/capacity.py`` runs this in its own process, so
Playwright's asyncio stays apart from the load generator's gevent).

    python -m harness.sampler URL OUT [--sessions 2] [--n-layers 6] [--stages inputs,...,all] [--think 2] [--seed 0]

Opens ``--sessions`` Chromium sessions on URL (``harness.sessions``: each its own context and sentence, opened from
the URL and stepped to its end), then acts as they do (▶, ◀, ⏮ / ⏭, another stage, another layer; think time
between half and one and a half ``--think``), each action timed from the click until every figure is painted.
One JSON line per event goes to OUT: ``{"t": epoch seconds at its end, "kind": …, "seconds": …, "errors": [...],
"crosstalk": [...]}``, kind "ready" (Chromium is up), "open" (its seconds: from loading the page to its first view
painted), "step", "stage", "layer" or "failed". After "ready" it waits for the file ``OUT.go`` to open its sessions
(so they open with a class arriving at once); it stops once the file ``OUT.stop`` exists.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TextIO

from harness.browser import BROWSER_ARGS, CHROMIUM
from harness.sessions import SENTENCES, Drive, Session, act, open_session
from views.state import DECODER_STAGES

PHASE = 0


def write(
    out: TextIO, kind: str, seconds: float | None, errors: Iterable[str] = (), crosstalk: Iterable[str] = ()
) -> None:
    out.write(
        json.dumps(
            {"t": time.time(), "kind": kind, "seconds": seconds, "errors": list(errors), "crosstalk": list(crosstalk)}
        )
        + "\n"
    )
    out.flush()


async def sample(s: Session, browser: Any, url: str, drive: Drive, out: TextIO, stop: Path) -> None:
    t0 = time.perf_counter()
    try:
        await open_session(s, browser, url, drive)
    except Exception as e:
        write(out, "open", time.perf_counter() - t0, [f"session {s.index}: {type(e).__name__}: {str(e)[:160]}"])
        return
    write(out, "open", s.first_paint_s, [t for _, t in s.errors])
    rng = random.Random(drive.seed * 100_003 + s.index)
    while not stop.exists():
        errors, crosstalk, actions = len(s.errors), len(s.crosstalk), len(s.actions)
        try:
            await act(s, drive, rng)
        except Exception as e:  # a click that could not happen: counted
            s.errors.append((PHASE, f"session {s.index}: {type(e).__name__}: {str(e).splitlines()[0][:160]}"))
        if len(s.actions) > actions:
            a = s.actions[-1]
            write(out, a.kind, a.seconds, [t for _, t in s.errors[errors:]], [t for _, t in s.crosstalk[crosstalk:]])
        else:
            write(out, "failed", None, [t for _, t in s.errors[errors:]])
        await asyncio.sleep(drive.think * rng.uniform(0.5, 1.5))


async def main_async(args: argparse.Namespace) -> None:
    from playwright.async_api import async_playwright

    drive = Drive(args.n_layers, args.stages, args.action_timeout * 1000, args.think, args.seed, PHASE)
    stop = Path(f"{args.out}.stop")
    sessions = [Session(1000 + i, SENTENCES[-1 - i]) for i in range(args.sessions)]
    with open(args.out, "a") as out:
        async with async_playwright() as p:
            browser = await p.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
            write(out, "ready", 0.0)
            go = Path(f"{args.out}.go")
            while not go.exists() and not stop.exists():
                await asyncio.sleep(0.02)
            try:
                await asyncio.gather(*(sample(s, browser, args.url, drive, out, stop) for s in sessions))
            finally:
                await browser.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("url")
    ap.add_argument("out", type=Path)
    ap.add_argument("--sessions", type=int, default=2)
    ap.add_argument("--n-layers", type=int, required=True)
    ap.add_argument("--stages", default=",".join((*DECODER_STAGES, "all")))
    ap.add_argument("--think", type=float, default=2.0)
    ap.add_argument("--action-timeout", type=float, default=30.0)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    args.stages = tuple(args.stages.split(","))
    asyncio.run(main_async(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
