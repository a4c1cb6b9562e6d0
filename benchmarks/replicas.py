"""More than one server: replicas behind nginx, each browser kept on one, and what happens when one dies.

    python benchmarks/replicas.py [--model DIR] [--replicas 2] [--sessions 8] [--seconds 30] [--after 15]
                                  [--think 1] [--seed 0] [--json FILE] [--smoke]

Starts ``--replicas`` ``streamlit run app.py`` on free localhost ports and nginx in front of them with the
configuration ``deploy/serve.py`` renders (sticky by the cookie nginx sets itself; rendered into a temporary
folder with its pid, logs and temporary files: no root needed), then drives ``--sessions`` browser sessions
through nginx (one Playwright context each, each with its own sentence: ``harness/sessions.py``):

1. before: every session steps, switches stages and layers for ``--seconds``; each action is checked for errors
   (error boxes, console and page errors, timeouts, server tracebacks) and cross-talk (another session's text);
2. failover: the replica serving the most sessions is killed (SIGKILL, as a crash). Each of its sessions must
   reconnect through nginx (a new websocket, served by a surviving replica) and show the same view again — its
   sentence, output, step, stage and layer, from its URL — within 60 s, without a reload; the other sessions go on
   acting meanwhile and must not notice (no new websocket);
3. after: every session acts for ``--after`` seconds more, checked as before.

nginx's access log names, for each request, the session's route cookie and the replica that answered: each
session must have been served by one replica only before the kill, and by a survivor only after it.

``--smoke``: the tests' tiny random model, 4 sessions, a few seconds per phase. Prints a table and one verdict
line per target (exit status 0 either way): errors = 0, cross-talk = 0, sticky, spread over the replicas,
reconnect (every moved session back on its view), others undisturbed. ``--json FILE`` writes strict JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from deploy.serve import COOKIE, Nginx, find_nginx, start_replicas
from harness.browser import (
    BROWSER_ARGS,
    CHROMIUM,
    DEFAULT_MODEL,
    benchmark_model,
    finite,
    free_port,
    median,
    require_chromium,
    row,
)
from harness.sessions import (
    IDLE_PHASE,
    SENTENCES,
    Drive,
    Session,
    check,
    open_session,
    run_session,
    step_once,
    wait_view,
)

FULL = dict(sessions=8, seconds=30.0, after=15.0, think=1.0)
SMOKE = dict(sessions=4, seconds=4.0, after=3.0, think=0.3)
BEFORE, FAILOVER, AFTER = 0, 1, 2
RECONNECT_S = 60.0
QUIET_S = 1.0  # a restored page must stay painted, with no frame received, this long
SHOWN_PROBLEMS = 10
LOG_LINE = re.compile(r'^(\S+) (\S+) (\S+) "([^"]*)" (\d+) (\S+) "([^"]*)"$')


@dataclass
class Request:
    start: float  # epoch seconds
    route: str
    upstream: str  # the address that answered (the last one nginx tried)
    status: int
    uri: str


@dataclass
class Moved:
    """A session of the killed replica, through its failover."""

    reconnect_s: float | None = None  # from the kill to its view shown again
    socket_after_kill: bool = False
    restored: bool = False
    problems: list[str] = field(default_factory=list)


def read_log(path: Path) -> list[Request]:
    out = []
    for line in path.read_text().splitlines() if path.exists() else []:
        m = LOG_LINE.match(line)
        if not m or m.group(4) in ("", "-"):
            continue
        end, took, route, ups, status, _, uri = m.groups()
        out.append(Request(float(end) - float(took), route, ups.split(",")[-1].strip(), int(status), uri))
    return out


def served_by(requests: list[Request], route: str, since: float = 0.0, until: float = float("inf")) -> set[str]:
    return {r.upstream for r in requests if r.route == route and since <= r.start < until and r.status < 500}


async def route_of(s: Session) -> str:
    cookies = await s.page.context.cookies()
    return next((c["value"] for c in cookies if c["name"] == COOKIE), "")


async def restore(s: Session, drive: Drive, kill_mono: float, moved: Moved) -> None:
    """Wait until the session has a new websocket with a run on it and shows its view again (steady for QUIET_S);
    then check the page and take one step: the new session must answer the step buttons too."""
    deadline = kill_mono + RECONNECT_S
    while time.monotonic() < deadline:
        opened = [t for t, what in s.sockets if t >= kill_mono and what == "open"]
        if opened and s.last_frame > opened[0]:  # a new websocket, and the new server has sent a run
            moved.socket_after_kill = True
            break
        await asyncio.sleep(0.05)
    else:
        moved.problems.append(
            f"session {s.index}: no new websocket with a run on it within {RECONNECT_S:g} s of the kill"
        )
        return
    while time.monotonic() < deadline:
        try:
            await wait_view(s, None, max(1.0, (deadline - time.monotonic()) * 1000))
        except Exception:
            break
        shown_at = time.monotonic()
        await asyncio.sleep(QUIET_S)
        if s.last_frame > shown_at:
            continue  # the page is still receiving its run: look again
        try:
            await wait_view(s, None, 1000)
        except Exception:
            continue
        moved.reconnect_s = shown_at - kill_mono
        break
    if moved.reconnect_s is None:
        moved.problems.append(
            f"session {s.index}: its view (step {s.step}, stage {s.stage}, layer {s.layer}) "
            f"did not come back within {RECONNECT_S:g} s of the kill"
        )
        return
    bad = await check(s, FAILOVER)
    if not bad and not await step_once(s, drive):  # the new session must also answer the step buttons
        bad = [f"session {s.index}: the first step after the failover failed"]
    moved.restored = not bad
    moved.problems += bad


async def drive_all(url: str, replicas, nginx, args, drive: Drive) -> dict:
    from playwright.async_api import async_playwright

    sessions = [Session(i, SENTENCES[i % len(SENTENCES)]) for i in range(args.sessions)]
    by_address = {f"127.0.0.1:{r.port}": r for r in replicas}
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        try:
            for s in sessions:
                await open_session(s, browser, url, drive)
            routes = {s.index: await route_of(s) for s in sessions}
            drive.phase = BEFORE
            start = time.monotonic()
            await asyncio.gather(*(run_session(s, drive, start + args.seconds) for s in sessions))
            drive.phase = IDLE_PHASE
            log = read_log(nginx.access_log)
            home = {s.index: served_by(log, routes[s.index]) for s in sessions}
            counts = {a: sum(1 for s in sessions if home[s.index] == {a}) for a in by_address}
            victim = by_address[max(counts, key=counts.get)]
            moved = {s.index: Moved() for s in sessions if home[s.index] == {f"127.0.0.1:{victim.port}"}}
            sockets_before = {s.index: len(s.sockets) for s in sessions}
            drive.phase = FAILOVER
            kill_mono, kill_epoch = time.monotonic(), time.time()
            victim.kill()
            restoring = asyncio.gather(
                *(restore(s, drive, kill_mono, moved[i]) for i, s in enumerate(sessions) if i in moved)
            )
            others = [s for s in sessions if s.index not in moved]
            end = kill_mono + RECONNECT_S
            await asyncio.gather(restoring, *(run_session(s, drive, end, restoring.done) for s in others))
            failover_s = time.monotonic() - kill_mono
            drive.phase = AFTER
            start = time.monotonic()
            await asyncio.gather(*(run_session(s, drive, start + args.after) for s in sessions))
            drive.phase = IDLE_PHASE
            disturbed = [s.index for s in others if any(t >= kill_mono and w == "open" for t, w in s.sockets)]
        finally:
            await browser.close()
    return dict(
        sessions=sessions,
        routes=routes,
        victim=victim,
        moved=moved,
        kill_epoch=kill_epoch,
        failover_s=failover_s,
        disturbed=disturbed,
        sockets_before=sockets_before,
    )


def print_sessions(sessions, log: list[Request], routes, kill: float, moved: dict, survivors: set, name: dict):
    """One row per session: the replicas that served it before and after the kill, its actions and reconnect;
    returns the rows and the sessions that broke stickiness."""
    w = [8, 7, 7, 9, 9, 8, 7, 11, 10, 11]
    print(
        row(
            [
                "session",
                "before",
                "after",
                "actions",
                "p50 ms",
                "errors",
                "xtalk",
                "reconnect",
                "restored",
                "websockets",
            ],
            w,
            left=1,
        )
    )
    rows, sticky_bad = [], []
    for s in sessions:
        before = served_by(log, routes[s.index], until=kill)
        after = served_by(log, routes[s.index], since=kill)
        if len(before) != 1:
            sticky_bad.append(f"session {s.index}: served by {sorted(before)} before the kill")
        elif s.index in moved and not (len(after) == 1 and after <= survivors):
            sticky_bad.append(f"session {s.index}: served by {sorted(after)} after the kill, not by one survivor")
        elif s.index not in moved and not after <= before:
            sticky_bad.append(
                f"session {s.index}: moved from {sorted(before)} to {sorted(after)} though its replica lived"
            )
        m = moved.get(s.index)
        opens = sum(1 for _, what in s.sockets if what == "open")
        secs = [a.seconds for a in s.actions if a.phase >= 0]
        cells = [
            s.index,
            "/".join(name.get(a, a) for a in sorted(before)) or "-",
            "/".join(name.get(a, a) for a in sorted(after)) or "-",
            len(secs),
            f"{median(secs) * 1e3:.0f}",
            len(s.errors),
            len(s.crosstalk),
            "-" if m is None else ("none" if m.reconnect_s is None else f"{m.reconnect_s:.1f} s"),
            "-" if m is None else ("yes" if m.restored else "NO"),
            opens,
        ]
        print(row(cells, w, left=1))
        rows.append(
            {
                "session": s.index,
                "sentence": s.sentence,
                "route": routes[s.index],
                "replica_before": [name.get(a, a) for a in sorted(before)],
                "replica_after": [name.get(a, a) for a in sorted(after)],
                "actions": len(secs),
                "p50_ms": median(secs) * 1e3,
                "errors": len(s.errors),
                "crosstalk": len(s.crosstalk),
                "moved": m is not None,
                "reconnect_s": None if m is None else m.reconnect_s,
                "restored": None if m is None else m.restored,
                "websockets": opens,
            }
        )
    return rows, sticky_bad


def reconnect_problems(log: list[Request], kill: float, survivors: set, moved: dict, routes) -> list[str]:
    """What went wrong for the killed replica's sessions: their own checks, and any without a websocket to a
    survivor in nginx's access log after the kill."""
    streams = {
        r.route
        for r in log
        if r.uri.startswith("/_stcore/stream") and r.start >= kill and r.status == 101 and r.upstream in survivors
    }
    reconnect_bad = [p for m in moved.values() for p in m.problems]
    reconnect_bad += [
        f"session {i}: no websocket through nginx to a survivor after the kill in the access log"
        for i in moved
        if routes[i] not in streams
    ]
    return reconnect_bad


def report(res: dict, log: list[Request], replicas, tracebacks: int, model: Path, args) -> dict:
    sessions, routes, victim, moved = res["sessions"], res["routes"], res["victim"], res["moved"]
    name = {f"127.0.0.1:{r.port}": f"r{r.index}" for r in replicas}
    survivors = {a for a in name if a != f"127.0.0.1:{victim.port}"}
    kill = res["kill_epoch"]
    print(
        f"Replicas: {len(replicas)} streamlit replicas behind nginx (sticky cookie {COOKIE}), {len(sessions)} "
        f"browser sessions; model {model}; {args.seconds:g} s before the kill, {args.after:g} s after the "
        f"failover; replica r{victim.index} killed"
    )
    rows, sticky_bad = print_sessions(sessions, log, routes, kill, moved, survivors, name)
    print(
        "(before / after: the replicas that answered the session's requests started before / after the kill, "
        "from nginx's access log, - for none; reconnect: from the kill to its view shown again)"
    )
    reconnect_bad = reconnect_problems(log, kill, survivors, moved, routes)
    spread = {name[a]: sum(1 for s in sessions if served_by(log, routes[s.index], until=kill) == {a}) for a in name}
    problems = [t for s in sessions for _, t in s.errors + s.crosstalk] + sticky_bad + reconnect_bad
    for t in problems[:SHOWN_PROBLEMS]:
        print("  " + t)
    if len(problems) > SHOWN_PROBLEMS:
        print(f"  … and {len(problems) - SHOWN_PROBLEMS} more")
    print(
        f"sessions per replica before the kill: {', '.join(f'{k} {v}' for k, v in spread.items())}; "
        f"failover took {res['failover_s']:.1f} s; tracebacks in the replicas' logs: {tracebacks}"
    )
    n_err = sum(len(s.errors) for s in sessions) + tracebacks
    n_ct = sum(len(s.crosstalk) for s in sessions)
    n_act = sum(1 for s in sessions for a in s.actions if a.phase >= 0)
    restored = sum(1 for m in moved.values() if m.restored and not m.problems)
    ok_reconnect = bool(moved) and not reconnect_bad
    verdicts = {
        "errors = 0": n_err == 0,
        "cross-talk = 0": n_ct == 0,
        "sticky": not sticky_bad,
        "spread over replicas": all(spread.values()),
        "reconnect": ok_reconnect,
        "others undisturbed": not res["disturbed"],
    }
    print(f"verdict errors = 0: {'PASS' if verdicts['errors = 0'] else 'FAIL'} ({n_err} over {n_act} actions)")
    print(
        f"verdict cross-talk = 0: {'PASS' if verdicts['cross-talk = 0'] else 'FAIL'} ({n_ct} mismatches over "
        f"{n_act} checks)"
    )
    print(
        f"verdict sticky: {'PASS' if verdicts['sticky'] else 'FAIL'} ({len(sessions) - len(sticky_bad)} of "
        f"{len(sessions)} sessions on one replica before the kill and on a survivor after)"
    )
    print(
        f"verdict spread over replicas: {'PASS' if verdicts['spread over replicas'] else 'FAIL'} "
        f"({', '.join(f'{k} {v}' for k, v in spread.items())})"
    )
    slowest = max((m.reconnect_s for m in moved.values() if m.reconnect_s is not None), default=float("nan"))
    print(
        f"verdict reconnect: {'PASS' if ok_reconnect else 'FAIL'} ({restored} of {len(moved)} sessions of r"
        f"{victim.index} back on their view through nginx, slowest {slowest:.1f} s)"
    )
    print(
        f"verdict others undisturbed: {'PASS' if verdicts['others undisturbed'] else 'FAIL'} "
        f"({len(res['disturbed'])} of {len(sessions) - len(moved)} reconnected)"
    )
    return {
        "model": str(model),
        "replicas": len(replicas),
        "sessions": rows,
        "killed": f"r{victim.index}",
        "moved": len(moved),
        "restored": restored,
        "failover_s": res["failover_s"],
        "spread": spread,
        "errors": n_err,
        "crosstalk": n_ct,
        "actions": n_act,
        "tracebacks": tracebacks,
        "problems": problems,
        "verdicts": verdicts,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, default=DEFAULT_MODEL, help="model directory (default: the bundled one)")
    ap.add_argument("--replicas", type=int, default=2, help="streamlit replicas behind nginx (default 2)")
    ap.add_argument("--sessions", type=int, help="browser sessions (default 8; smoke 4)")
    ap.add_argument("--seconds", type=float, help="acting before the kill (default 30; smoke 4)")
    ap.add_argument("--after", type=float, help="acting after the failover (default 15; smoke 3)")
    ap.add_argument("--think", type=float, help="mean pause between a paint and the next click (default 1)")
    ap.add_argument("--action-timeout", type=float, default=30.0, help="seconds an action may take to paint")
    ap.add_argument("--seed", type=int, default=0, help="seed of the sessions' random actions")
    ap.add_argument("--json", type=Path, metavar="FILE", help="write every figure as strict JSON")
    ap.add_argument("--smoke", action="store_true", help="tiny random model, 4 sessions, a few seconds per phase")
    args = ap.parse_args(argv)
    require_chromium()
    find_nginx()
    base = SMOKE if args.smoke else FULL
    for key in ("sessions", "seconds", "after", "think"):
        if getattr(args, key) is None:
            setattr(args, key, base[key])
    if args.replicas < 2 or not 1 <= args.sessions <= len(SENTENCES) or args.seconds <= 0 or args.after <= 0:
        ap.error(f"--replicas ≥ 2, 1 ≤ --sessions ≤ {len(SENTENCES)}, --seconds and --after positive")
    with tempfile.TemporaryDirectory(prefix="replicas_") as d:
        tmp = Path(d)
        model, n_layers = benchmark_model(args.smoke, args.model, tmp, ap)
        drive = Drive(n_layers, timeout_ms=args.action_timeout * 1000, think=args.think, seed=args.seed)
        run_dir = tmp / "run"
        run_dir.mkdir()
        ports = []
        while len(ports) < args.replicas:
            if (p := free_port()) not in ports:
                ports.append(p)
        replicas = start_replicas(ports, run_dir, model)
        port = free_port()
        nginx = Nginx(run_dir, f"127.0.0.1:{port}", ports)
        try:
            nginx.start(f"http://127.0.0.1:{port}")
            res = asyncio.run(drive_all(f"http://127.0.0.1:{port}", replicas, nginx, args, drive))
        except Exception:
            for r in replicas:
                print(
                    f"--- replica {r.index} log (last lines)\n" + "\n".join(r.log.read_text().splitlines()[-15:]),
                    file=sys.stderr,
                )
            print("--- nginx error log\n" + (run_dir / "error.log").read_text()[-3000:], file=sys.stderr)
            raise
        finally:
            nginx.stop()  # first: open websockets are closed and logged
            for r in replicas:
                r.stop()
        tracebacks = sum(r.log.read_text(errors="replace").count("Traceback") for r in replicas)
        result = report(res, read_log(nginx.access_log), replicas, tracebacks, model, args)
    if args.json:
        args.json.write_text(json.dumps(finite(result), indent=1, allow_nan=False, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
