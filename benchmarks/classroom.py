"""Capacity of one server: how many students can step through the app at once before it gets slow.

    python benchmarks/classroom.py [--model DIR] [--sessions 1,8,16,32] [--seconds 60] [--think 2]
                                   [--stages inputs,qkv,...] [--action-timeout 30] [--seed 0]
                                   [--profile [DIR]] [--json FILE] [--smoke]

One ``streamlit run app.py`` on a free localhost port and one Chromium (Debian's, driven by Playwright), one
Playwright context per session, each with its own sentence. For each N of ``--sessions`` (ascending) the pool of
sessions grows to N, each new one opened alone (its sentence from the URL, stepped to the end) to record what it
must show: the English text, the source tokens, the French output, the chips at every step. Then the N sessions
act at once for ``--seconds``, each repeating: a random action (▶, ◀, ⏮ / ⏭, another decoder stage, another
decoder layer), timed from the click until every figure is painted with the new state (the stepper's position,
the URL's stage and layer, every figure that shows a position shows the new one, every "(layer N)" title the new
layer, a stage switch's figures drawn: ``harness.browser.VIEW_PAINTED_JS``), then a check of the page, then a
pause of ``--think`` seconds on average (uniform between half and one and a half times it), as a student reads.

Per N it reports:

- click-to-paint p50 / p95 over every action, and p95 for ▶/◀ steps, stage switches and layer switches apart;
- errors: st.error / exception boxes, browser console errors and page errors, actions that did not paint within
  ``--action-timeout`` (counted at the time they waited), tracebacks in the server log;
- cross-talk: a session showing another sentence, source, output or chips than its own (its URL's too);
- server RSS (VmRSS of the streamlit process and its children: peak and end of the run) and server CPU
  (100 % = one core), the CPU of the browsers (every Chromium process of this run) and of the whole machine
  (100 % = every core), all from /proc.

Then "largest N with p95 ≤ 1.5 s" (with no error and no cross-talk) and what limits the server at the first N
beyond it (or at the largest N run): the server process' CPU (its Python runs one thread at a time, so near
100 % of a core it is saturated: more replicas, ``deploy/``, are the way on), or the machine's (the browsers
run on the same cores here, unlike a class's), or neither. ``--profile`` runs the server under pyinstrument
(``benchmarks/profiled_app.py``): the script runs of each N are written to DIR (default
``test-artifacts/classroom-profile``) as HTML and text call trees, and the functions with the most time of their
own are printed. Timings taken with ``--profile`` include the profiler's cost.

``--smoke``: the tests' tiny random model, N = 1 and 2, a few seconds each. ``--json FILE`` writes every figure
as strict JSON (no NaN: missing values are null). Prints a table and the verdict lines; exit status 0 either way.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

from harness.browser import (
    BROWSER_ARGS,
    CHROMIUM,
    DEFAULT_MODEL,
    app_env,
    benchmark_model,
    finite,
    machine_cpu_seconds,
    median,
    ms,
    p95,
    process_table,
    require_chromium,
    row,
    serve,
    session_counts,
    tree_cpu_seconds,
    tree_rss_kb,
)
from harness.profiling import IDLE, served_script, set_phase, wait_written
from harness.sessions import IDLE_PHASE, SENTENCES, Drive, Session, open_session, run_session
from views.cache import PROCESS_CACHE_BYTES, SESSION_CACHE_BYTES
from views.state import DECODER_STAGES, STAGES

ROOT = Path(__file__).resolve().parents[1]

FULL = dict(sessions=(1, 8, 16, 32), seconds=60.0, think=2.0)
SMOKE = dict(sessions=(1, 2), seconds=4.0, think=0.3)
TARGET_P95_S = 1.5
SATURATED = 0.85  # a share of one core (the server) or of every core (the machine) counted as saturation
SHOWN_PROBLEMS = 10
MIB = 2**20


def browser_cpu(table: dict) -> float:
    """CPU seconds of every Chromium process started by this benchmark (Playwright's driver starts them)."""
    return tree_cpu_seconds(os.getpid(), "chrom", table)


async def sample_rss(pid: int, out: list[int], stop: asyncio.Event) -> None:
    while not stop.is_set():
        out.append(tree_rss_kb(pid))
        try:
            await asyncio.wait_for(stop.wait(), 1.0)
        except TimeoutError:
            pass


async def measure(sessions: list[Session], drive: Drive, server, seconds: float) -> dict:
    pid = server.proc.pid
    table = process_table()
    cpu0 = (tree_cpu_seconds(pid, table=table), browser_cpu(table), machine_cpu_seconds())
    tracebacks0 = server.tracebacks()
    rss: list[int] = []
    stop = asyncio.Event()
    sampler = asyncio.create_task(sample_rss(pid, rss, stop))
    start = time.monotonic()
    await asyncio.gather(*(run_session(s, drive, start + seconds) for s in sessions))
    elapsed = time.monotonic() - start
    stop.set()
    await sampler
    table = process_table()
    server_s, browser_s = tree_cpu_seconds(pid, table=table) - cpu0[0], browser_cpu(table) - cpu0[1]
    busy, total = (b - a for a, b in zip(cpu0[2], machine_cpu_seconds()))
    end_rss = tree_rss_kb(pid)
    return dict(
        seconds=elapsed,
        server_cpu=server_s / elapsed,
        browser_cpu=browser_s / elapsed,
        machine_cpu=busy / total if total > 0 else 0.0,
        rss_peak=max(rss + [end_rss]) * 1024,
        rss_end=end_rss * 1024,
        tracebacks=server.tracebacks() - tracebacks0,
    )


def phase_figures(sessions: list[Session], phase: int, n: int, m: dict, opened_s: float) -> dict:
    acts = [a for s in sessions for a in s.actions if a.phase == phase]
    secs = [a.seconds for a in acts]
    kind = {k: [a.seconds for a in acts if a.kind == k] for k in ("step", "stage", "layer")}
    errors = sum(1 for s in sessions for p, _ in s.errors if p == phase) + m["tracebacks"]
    return {
        "sessions": n,
        "seconds": m["seconds"],
        "open_s": opened_s,
        "actions": len(acts),
        "actions_per_s": len(acts) / m["seconds"],
        "p50_ms": median(secs) * 1e3,
        "p95_ms": p95(secs) * 1e3,
        "max_ms": max(secs) * 1e3 if secs else float("nan"),
        **{f"{k}_actions": len(v) for k, v in kind.items()},
        **{f"{k}_p95_ms": p95(v) * 1e3 for k, v in kind.items()},
        "errors": errors,
        "timeouts": sum(1 for s in sessions for p in s.timeouts if p == phase),
        "tracebacks": m["tracebacks"],
        "crosstalk": sum(1 for s in sessions for p, _ in s.crosstalk if p == phase),
        "server_rss_mib_peak": m["rss_peak"] / MIB,
        "server_rss_mib_end": m["rss_end"] / MIB,
        "server_cpu_pct": m["server_cpu"] * 100,
        "browser_cpu_pct": m["browser_cpu"] * 100,
        "machine_cpu_pct": m["machine_cpu"] * 100,
    }


async def classroom(
    url: str, server, counts: tuple[int, ...], seconds: float, drive: Drive, profile_dir: Path | None
) -> tuple[list[Session], list[dict], dict]:
    from playwright.async_api import async_playwright

    sessions = [Session(i, SENTENCES[i % len(SENTENCES)]) for i in range(max(counts))]
    phases, profiles = [], {}
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        try:
            opened = 0
            for phase, n in enumerate(counts):
                drive.phase = IDLE_PHASE
                t0 = time.monotonic()
                for s in sessions[opened:n]:
                    await open_session(s, browser, url, drive)
                opened = max(opened, n)
                opened_s = time.monotonic() - t0
                drive.phase = phase
                if profile_dir:
                    set_phase(profile_dir, f"N{n}")
                m = await measure(sessions[:n], drive, server, seconds)
                if profile_dir:
                    set_phase(profile_dir, IDLE)
                    profiles[n] = wait_written(profile_dir, f"N{n}")
                phases.append(phase_figures(sessions, phase, n, m, opened_s))
        finally:
            drive.phase = IDLE_PHASE
            await browser.close()
    return sessions, phases, profiles


def ok(ph: dict) -> bool:
    return (
        ph["p95_ms"] == ph["p95_ms"]
        and ph["p95_ms"] <= TARGET_P95_S * 1e3
        and not ph["errors"]
        and not (ph["crosstalk"])
    )


def limit(ph: dict, cores: int) -> str:
    """What limits the server at this N, in words."""
    server, browsers, machine = ph["server_cpu_pct"], ph["browser_cpu_pct"], ph["machine_cpu_pct"]
    where = (
        f"at N={ph['sessions']}: server {server:.0f}% of a core, browsers {browsers:.0f}% of a core, "
        f"machine {machine:.0f}% of its {cores} cores busy"
    )
    if server >= SATURATED * 100:
        return (
            f"the server's CPU {where}: its Python runs one thread at a time, so one server process is "
            f"saturated near 100% of a core; more replicas (deploy/) take more sessions"
        )
    if machine >= SATURATED * 100:
        return (
            f"the machine's CPU {where}: the browsers share the server's cores here (in a class they run "
            f"on the students' machines), so this N is a lower bound of the server's capacity"
        )
    return f"neither CPU is saturated {where}: the time goes to waiting (the network, the browsers' paint)"


def print_phase_table(phases: list[dict]) -> None:
    """One row per class size N: actions, latencies, failures and what the machine spent."""
    w = [4, 8, 7, 8, 8, 9, 9, 9, 7, 9, 10, 9, 9, 10, 9]
    head = [
        "N",
        "actions",
        "per s",
        "p50 ms",
        "p95 ms",
        "step p95",
        "stage p95",
        "layer p95",
        "errors",
        "timeouts",
        "crosstalk",
        "RSS MiB",
        "server %",
        "browsers %",
        "machine %",
    ]
    print(row(head, w, left=0))
    for ph in phases:
        cells = [
            ph["sessions"],
            ph["actions"],
            f"{ph['actions_per_s']:.1f}",
            ms(ph["p50_ms"]),
            ms(ph["p95_ms"]),
            ms(ph["step_p95_ms"]),
            ms(ph["stage_p95_ms"]),
            ms(ph["layer_p95_ms"]),
            ph["errors"],
            ph["timeouts"],
            ph["crosstalk"],
            f"{ph['server_rss_mib_peak']:.0f}",
            f"{ph['server_cpu_pct']:.0f}",
            f"{ph['browser_cpu_pct']:.0f}",
            f"{ph['machine_cpu_pct']:.0f}",
        ]
        print(row(cells, w, left=0))
    print(
        "(RSS: peak of the streamlit process and its children; server % and browsers %: 100 = one core; "
        "machine %: 100 = every core)"
    )


def print_profiles(profiles: dict, phases: list[dict], profile_dir) -> None:
    """Where each profiled phase's script runs spent their own time."""
    for n, prof in profiles.items():
        if not prof:
            print(f"profile N={n}: not written by the server")
            continue
        print(
            f"profile N={n}: {prof['runs']} script runs, {prof['wall_s']:.1f} s of script-run wall time "
            f"(server CPU in that phase: {next(ph for ph in phases if ph['sessions'] == n)['server_cpu_pct']:.0f}% "
            f"of a core); most time of their own (s):"
        )
        for name, secs in prof["top_self"][:10]:
            print(f"  {secs:8.2f}  {name}")
    if profiles:
        print(f"profiles (HTML and text call trees): {profile_dir}")


def report(sessions: list[Session], phases: list[dict], profiles: dict, model: Path, args, profile_dir) -> dict:
    cores = os.cpu_count() or 1
    print(
        f"Classroom: N concurrent browser sessions, {args.seconds:g} s each N; model {model}; think "
        f"{args.think * 0.5:g}–{args.think * 1.5:g} s between a paint and the next click; stages "
        f"{','.join(args.stage_list)}; {cores} cores"
    )
    print_phase_table(phases)
    problems = [(p, t) for s in sessions for p, t in s.errors + s.crosstalk if p >= 0]
    for _, t in problems[:SHOWN_PROBLEMS]:
        print("  " + t)
    if len(problems) > SHOWN_PROBLEMS:
        print(f"  … and {len(problems) - SHOWN_PROBLEMS} more")
    top = phases[-1]
    print(
        f"session cache bound: {SESSION_CACHE_BYTES / MIB:.0f} MiB per session, {PROCESS_CACHE_BYTES / MIB:.0f} "
        f"MiB for every session together; server RSS at N={top['sessions']}: peak "
        f"{top['server_rss_mib_peak']:.0f} MiB, end {top['server_rss_mib_end']:.0f} MiB"
    )
    passing = [ph["sessions"] for ph in phases if ok(ph)]
    largest = max(passing) if passing else None
    beyond = next((ph for ph in phases if not ok(ph)), top)
    print(
        f"largest N with p95 ≤ {TARGET_P95_S:g} s: {largest if largest is not None else 'none'} "
        f"(and no error, no cross-talk; N run: {','.join(str(ph['sessions']) for ph in phases)})"
    )
    what = limit(beyond, cores)
    print(f"limit: {what}")
    print_profiles(profiles, phases, profile_dir)
    n_err = sum(ph["errors"] for ph in phases)
    n_ct = sum(ph["crosstalk"] for ph in phases)
    n_act = sum(ph["actions"] for ph in phases)
    print(f"verdict errors = 0: {'PASS' if n_err == 0 else 'FAIL'} ({n_err} over {n_act} actions)")
    print(f"verdict cross-talk = 0: {'PASS' if n_ct == 0 else 'FAIL'} ({n_ct} mismatches over {n_act} checks)")
    return {
        "model": str(model),
        "seconds_per_n": args.seconds,
        "think_s": args.think,
        "stages": list(args.stage_list),
        "cores": cores,
        "target_p95_s": TARGET_P95_S,
        "session_cache_bytes": SESSION_CACHE_BYTES,
        "process_cache_bytes": PROCESS_CACHE_BYTES,
        "phases": phases,
        "largest_n": largest,
        "limit": what,
        "profiles": {str(n): p for n, p in profiles.items()},
        "errors": n_err,
        "crosstalk": n_ct,
        "actions": n_act,
        "verdicts": {"errors = 0": n_err == 0, "cross-talk = 0": n_ct == 0},
    }


def stages_arg(text: str) -> tuple[str, ...]:
    stages = tuple(x.strip() for x in text.split(",") if x.strip())
    bad = [x for x in stages if x not in STAGES]
    if bad or not stages:
        raise argparse.ArgumentTypeError(f"unknown stage(s) {bad}; choose from {','.join(STAGES)}")
    return stages


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, default=DEFAULT_MODEL, help="model directory (default: the bundled one)")
    ap.add_argument(
        "--sessions",
        type=partial(session_counts, most=len(SENTENCES)),
        help="session counts N, e.g. 1,8,16,32 (default; smoke 1,2)",
    )
    ap.add_argument("--seconds", type=float, help="length of the concurrent run for each N (default 60; smoke 4)")
    ap.add_argument("--think", type=float, help="mean pause between a paint and the next click (default 2; smoke 0.3)")
    ap.add_argument(
        "--stages",
        type=stages_arg,
        default=DECODER_STAGES,
        help=f"stages the sessions switch between (default: {','.join(DECODER_STAGES)})",
    )
    ap.add_argument("--action-timeout", type=float, default=30.0, help="seconds an action may take to paint")
    ap.add_argument("--seed", type=int, default=0, help="seed of the sessions' random actions")
    ap.add_argument(
        "--profile",
        nargs="?",
        const=ROOT / "test-artifacts" / "classroom-profile",
        type=Path,
        metavar="DIR",
        help="run the server under pyinstrument; profiles in DIR (default test-artifacts/classroom-profile)",
    )
    ap.add_argument("--json", type=Path, metavar="FILE", help="write every figure as strict JSON")
    ap.add_argument("--smoke", action="store_true", help="tiny random model, N = 1 and 2, a few seconds each")
    args = ap.parse_args(argv)
    require_chromium()
    base = SMOKE if args.smoke else FULL
    counts = args.sessions or base["sessions"]
    args.seconds = args.seconds or base["seconds"]
    args.think = base["think"] if args.think is None else args.think
    args.stage_list = args.stages
    if args.seconds <= 0 or args.think < 0 or args.action_timeout <= 0:
        ap.error("--seconds and --action-timeout must be positive, --think not negative")
    with tempfile.TemporaryDirectory(prefix="classroom_") as d:
        tmp = Path(d)
        model, n_layers = benchmark_model(args.smoke, args.model, tmp, ap)
        drive = Drive(n_layers, args.stages, args.action_timeout * 1000, args.think, args.seed)
        env, script = served_script(app_env(model), args.profile)
        log = tmp / "streamlit.log"
        try:
            with serve(script, log, env) as server:
                sessions, phases, profiles = asyncio.run(
                    classroom(server.url, server, counts, args.seconds, drive, args.profile)
                )
        except Exception:
            print("--- streamlit log (last lines)\n" + "\n".join(log.read_text().splitlines()[-20:]), file=sys.stderr)
            raise
        result = report(sessions, phases, profiles, model, args, args.profile)
    if args.json:
        args.json.write_text(json.dumps(finite(result), indent=1, allow_nan=False, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
