"""How many students one server holds, measured over Streamlit's own protocol, with real browsers sampled beside.

    python benchmarks/capacity.py [--model DIR] [--sessions 8,16,32,64,128,256] [--seconds 60] [--think 2]
                                  [--browsers 2] [--burst 30] [--configs single,nginx] [--json FILE] [--smoke]

No browser per student: each simulated student (``harness/protocol.py``) is one WebSocket speaking the browser's
protocol (``BackMsg`` rerun requests with widget states, the ``ForwardMsg`` stream up to ``script_finished``), so
one light process (Locust's users, on gevent) drives hundreds of them and the server's cores stay the server's.
Each student opens its own sentence from the URL, then repeats the mixed class: ▶ / ◀ / ⏮ / ⏭ 60 %, another
decoder stage (All stages among them) 20 % or layer 10 %, a new sentence 10 %, with a think time of 1–3 s
(``--think`` × 0.5–1.5) after each answer. Per action: the server time, from the request to the end of the
script's run; checked: the session's own sentence, source tokens, output, position and chips in what came back
(cross-talk), and no exception or error box. Beside them ``--browsers`` real Chromium sessions
(``harness/sampler.py``, in a process of its own) do the same actions and time them from the click to every
figure painted: what a student feels.

For each configuration of ``--configs``:

- ``single``: one ``streamlit run app.py``; first the server's CPU time per action type, from its process's CPU
  time over a run of actions of one type by one student alone (so a reader can size any machine);
- ``nginx``: 2 replicas behind nginx as ``deploy/serve.py`` renders it (sticky cookie), as ``replicas.py`` does;

then a class arriving at once (``--burst`` students opening their first page within one second, the browsers
opening theirs with them: each first page's server time, and the browsers' time to a painted page, ≤ 5 s), then
the sweep: for each N of ``--sessions`` the class grows to N students and acts for ``--seconds``: server time
p50 / p95 (and per action type), the browsers' click-to-paint p95, errors, cross-talk, server CPU (100 % = one
core; summed over the replicas) and RSS, the load generator's own CPU, and the machine's load average before and
after (other work on the machine shows there: on a shared machine the times are upper bounds and the capacity a
lower bound). The sweep stops at the first N past the server's target (server p95 > 1.0 s, an error or a
cross-talk; the browsers' p95 is reported beside). Then, per configuration, the largest N
with server p95 ≤ 1.0 s, browser p95 ≤ 1.5 s, no error and no cross-talk, and the replicas' capacity against the
single process's, and what stopped the sweep (the server's own core, or the machine's other work).
``--profile [DIR]`` runs the one server's script under pyinstrument (``benchmarks/profiled_app.py``; timings then
include the profiler's cost): the call trees of each action type alone and of each N are written to DIR, and the
functions with the most time of their own are printed per action type and for the first N past the limit.

``--smoke``: the tests' tiny model, a few students for a few seconds, one browser, through one server and through
nginx. ``--json FILE`` writes every figure as strict JSON (no NaN: missing values are null). Prints tables and
verdict lines; exit status 0 either way.
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()  # before anything imports socket or threading: Locust's users are greenlets

import argparse
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import gevent
from locust import User, constant, task
from locust.env import Environment
from locust.exception import StopUser

from deploy.serve import Nginx, find_nginx, start_replicas
from harness.browser import (
    DEFAULT_MODEL,
    app_env,
    benchmark_model,
    finite,
    free_port,
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
from harness.protocol import ACTIONS, WEIGHTS, Outcome, Student, reference
from harness.sessions import SENTENCES
from views.state import DECODER_STAGES, STAGES

ROOT = Path(__file__).resolve().parents[1]
FULL = dict(
    sessions=(8, 16, 32, 64, 128, 256), seconds=60.0, think=2.0, browsers=2, burst=30, sentences=40, cost_actions=16
)
SMOKE = dict(sessions=(2, 4), seconds=5.0, think=0.5, browsers=1, burst=4, sentences=4, cost_actions=2)
TARGET_SERVER_S = 1.0
TARGET_BROWSER_S = 1.5
BURST_WINDOW_S = 1.0
BURST_PAINT_S = 5.0
SATURATED = 0.85  # a share of the server's cores, or of the machine's, counted as saturated
SPAWN_RATE = 16.0  # students joining per second while the class grows
SETTLE_S = 3.0  # after the last student opened, before a window is measured
CONFIGS = ("single", "nginx")
CLASSES = (30, 100, 300)  # class sizes docs/serving.md sizes replicas for
CPU_SHARE = 0.7  # of a core, a replica's load with room for a class's bursts (sizing by CPU)
REPLICAS = 2
MIB = 2**20
SHOWN_PROBLEMS = 10


class Bench:
    """What the students share: the server's address, the references, the settings, and the record of every
    action (epoch seconds at its end, the student, the outcome)."""

    def __init__(self, url: str, refs: dict, n_layers: int, stages: tuple[str, ...], think: float, seed: int):
        self.url, self.refs, self.n_layers, self.stages = url, refs, n_layers, stages
        self.think, self.seed = think, seed
        self.records: list[tuple[float, int, object]] = []
        self.opened = 0
        self.next_index = 0


class StudentUser(User):
    """A Locust user around ``harness.protocol.Student``; the think time is drawn by the student's own seeded
    random stream (``wait_time`` is only Locust's pause between tasks, zero here)."""

    abstract = True
    bench: Bench
    wait_time = constant(0)

    def on_start(self) -> None:
        b = self.bench
        self.index = b.next_index
        b.next_index += 1
        sentences = list(b.refs)
        self.rng = random.Random(b.seed * 100_003 + self.index)
        self.student = Student(
            self.index, b.url, sentences[self.index % len(sentences)], b.refs, b.n_layers, b.stages, self.rng
        )
        try:
            self.record(self.student.open())
        except Exception as e:
            self.failed("open", e)
            raise StopUser() from e
        finally:
            b.opened += 1

    def on_stop(self) -> None:
        self.student.close()

    @task
    def act(self) -> None:
        try:
            self.record(self.student.act())
        except Exception as e:  # a lost connection or a timeout: counted, and the student leaves
            self.failed("action", e)
            raise StopUser() from e
        gevent.sleep(self.bench.think * self.rng.uniform(0.5, 1.5))

    def record(self, out) -> None:
        self.bench.records.append((time.time(), self.index, out))
        bad = out.problems + out.crosstalk
        self.environment.events.request.fire(
            request_type="WS",
            name=out.kind,
            response_time=out.seconds * 1e3,
            response_length=out.received_bytes,
            exception=RuntimeError(bad[0]) if bad else None,
            context={},
        )

    def failed(self, what: str, e: Exception) -> None:
        text = f"student {self.index}: {what} failed: {type(e).__name__}: {str(e)[:160]}"
        self.bench.records.append((time.time(), self.index, Outcome("failed", float("nan"), "", [text])))
        self.environment.events.request.fire(
            request_type="WS", name=what, response_time=0, response_length=0, exception=e, context={}
        )


class Servers:
    """The server processes of a configuration: their CPU seconds and RSS."""

    def __init__(self, pids: list[int], nginx_pid: int | None = None):
        self.pids, self.nginx_pid = pids, nginx_pid

    def cpu(self) -> float:
        table = process_table()
        return sum(tree_cpu_seconds(p, table=table) for p in self.pids)

    def nginx_cpu(self) -> float:
        return tree_cpu_seconds(self.nginx_pid) if self.nginx_pid else 0.0

    def rss(self) -> int:
        return sum(tree_rss_kb(p) for p in self.pids) * 1024


class Sampler:
    """The browsers, in a process of their own (``harness/sampler.py``)."""

    def __init__(self, url: str, sessions: int, n_layers: int, stages, think: float, seed: int, out: Path):
        self.out = out
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "harness.sampler",
                url,
                str(out),
                "--sessions",
                str(sessions),
                "--n-layers",
                str(n_layers),
                "--stages",
                ",".join(stages),
                "--think",
                str(think),
                "--seed",
                str(seed),
            ],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=open(f"{out}.stderr", "w"),  # noqa: SIM115
        )

    def events(self) -> list[dict]:
        if not self.out.exists():
            return []
        return [json.loads(line) for line in self.out.read_text().splitlines() if line.endswith("}")]

    def wait(self, kind: str, count: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and sum(e["kind"] == kind for e in self.events()) < count:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the browser sampler exited: {Path(f'{self.out}.stderr').read_text()[-2000:]}")
            gevent.sleep(0.2)

    def stop(self) -> None:
        Path(f"{self.out}.stop").touch()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def spawn(runner, bench: Bench, n: int, timeout: float) -> float:
    """Grow the class to ``n`` students; returns the seconds until every one had its first page."""
    t0 = time.monotonic()
    target = bench.opened + (n - runner.user_count)
    runner.start(n, spawn_rate=SPAWN_RATE if n > runner.user_count + 1 else n)
    while bench.opened < target and time.monotonic() - t0 < timeout:
        gevent.sleep(0.1)
    return time.monotonic() - t0


def outcomes(bench: Bench, since: float, until: float) -> list:
    return [o for t, _, o in bench.records if since <= t < until]


def window(runner, bench: Bench, servers: Servers, sampler: Sampler | None, n: int, seconds: float) -> dict:
    """The class of ``n`` acting for ``seconds``: every figure of one row of the sweep."""
    load0 = loadavg()
    cpu0, own0, mach0, ng0 = servers.cpu(), time.process_time(), machine_cpu_seconds(), servers.nginx_cpu()
    rss: list[int] = []
    start = time.time()
    t0 = time.monotonic()
    runner.environment.stats.reset_all()
    while time.monotonic() - t0 < seconds:
        rss.append(servers.rss())
        gevent.sleep(min(1.0, max(0.0, seconds - (time.monotonic() - t0))))
    elapsed = time.monotonic() - t0
    end = time.time()
    cpu, own, ng = servers.cpu() - cpu0, time.process_time() - own0, servers.nginx_cpu() - ng0
    busy, total = (b - a for a, b in zip(mach0, machine_cpu_seconds()))
    acts = [o for o in outcomes(bench, start, end) if o.kind != "open"]
    secs = [o.seconds for o in acts if o.kind != "failed"]
    by_kind = {k: [o.seconds for o in acts if o.kind == k] for k in ("step", "stage", "layer", "sentence")}
    steps_all = [o.seconds for o in acts if o.kind == "step" and o.stage == "all"]
    browser = [
        e
        for e in (sampler.events() if sampler else [])
        if start <= e["t"] < end and e["kind"] in ("step", "stage", "layer", "failed")
    ]
    b_secs = [e["seconds"] for e in browser if e["seconds"] is not None]
    problems = [p for o in acts for p in o.problems] + [p for e in browser for p in e["errors"]]
    crosstalk = [p for o in acts for p in o.crosstalk] + [p for e in browser for p in e["crosstalk"]]
    stats = runner.environment.stats.total
    return {
        "sessions": n,
        "seconds": elapsed,
        "actions": len(acts),
        "actions_per_s": len(acts) / elapsed,
        "server_p50_ms": median(secs) * 1e3,
        "server_p95_ms": p95(secs) * 1e3,
        "server_max_ms": max(secs) * 1e3 if secs else float("nan"),
        **{f"{k}_actions": len(v) for k, v in by_kind.items()},
        **{f"{k}_p95_ms": p95(v) * 1e3 for k, v in by_kind.items()},
        "step_in_all_p95_ms": p95(steps_all) * 1e3,
        "browser_actions": len(b_secs),
        "browser_p50_ms": median(b_secs) * 1e3,
        "browser_p95_ms": p95(b_secs) * 1e3,
        "errors": len(problems),
        "crosstalk": len(crosstalk),
        "problems": (problems + crosstalk)[:SHOWN_PROBLEMS],
        "server_cpu_pct": cpu / elapsed * 100,
        "server_cpu_ms_per_action": cpu / len(acts) * 1e3 if acts else float("nan"),
        "server_rss_mib_peak": max(rss + [servers.rss()]) / MIB,
        "nginx_cpu_pct": ng / elapsed * 100,
        "loadgen_cpu_pct": own / elapsed * 100,
        "machine_cpu_pct": busy / total * 100 if total > 0 else float("nan"),
        "loadavg_before": load0,
        "loadavg_after": loadavg(),
        "locust": {
            "requests": stats.num_requests,
            "failures": stats.num_failures,
            "median_ms": stats.median_response_time,
            "p95_ms": stats.get_response_time_percentile(0.95),
            "requests_per_s": stats.total_rps,
        },
    }


def passes(ph: dict, with_browsers: bool) -> bool:
    s, b = ph["server_p95_ms"], ph["browser_p95_ms"]
    browser_ok = not with_browsers or (b == b and b <= TARGET_BROWSER_S * 1e3)
    return s == s and s <= TARGET_SERVER_S * 1e3 and browser_ok and not ph["errors"] and not ph["crosstalk"]


def cost(
    url: str, refs: dict, servers: Servers, n_layers: int, stages, k: int, seed: int, profile: Path | None = None
) -> dict:
    """The server's CPU milliseconds per action type: ``k`` actions of one type by one student alone, the server
    process's CPU time over them divided by ``k``; and the median server time of those actions."""
    sentences = list(refs)
    st = Student(-1, url, sentences[0], refs, n_layers, stages, random.Random(seed))
    others = [x for x in stages if x not in ("all", st.stage)]
    out = {}

    def measure(kind: str, action) -> None:
        gevent.sleep(0.3)  # let the server finish sending
        if profile:
            set_phase(profile, kind.replace(" ", "-"))
        c0, secs, bad = servers.cpu(), [], []
        for i in range(k):
            o = action(i)
            secs.append(o.seconds)
            bad += o.problems + o.crosstalk
        gevent.sleep(0.3)
        out[kind] = {
            "cpu_ms": (servers.cpu() - c0) / k * 1e3,
            "server_ms": median(secs) * 1e3,
            "actions": k,
            "problems": bad[:3],
        }
        if profile:
            set_phase(profile, IDLE)
            out[kind]["profile"] = wait_written(profile, kind.replace(" ", "-"))

    def reopen(i: int):
        st.close()
        st.sentence, st.step = sentences[i % len(sentences)], 0
        return st.open()

    try:
        measure("open", reopen)
        measure("step", lambda i: st.act("next" if st.step < st.ref["n"] - 1 else "jump"))
        measure("stage", lambda i: st.act("stage", others[i % len(others)]))
        measure("layer", lambda i: st.act("layer"))
        measure("sentence", lambda i: st.act("sentence"))
        if "all" in stages:
            measure("to all", lambda i: (st.act("stage", others[0]), st.act("stage", "all"))[1])
            out["to all"]["cpu_ms"] -= out["stage"]["cpu_ms"]  # each of those was a switch away, then back to All
            measure("step in all", lambda i: st.act("next" if st.step < st.ref["n"] - 1 else "jump"))
    finally:
        st.close()
    return out


def burst(runner, bench: Bench, n: int, timeout: float) -> dict:
    """``n`` students open their first page within BURST_WINDOW_S, then leave."""
    t0 = time.time()
    runner.start(n, spawn_rate=n / BURST_WINDOW_S)
    deadline = time.monotonic() + timeout
    while bench.opened < n and time.monotonic() < deadline:
        gevent.sleep(0.1)
    opens = [o for t, _, o in bench.records if t >= t0 and o.kind in ("open", "failed")]
    runner.stop()
    secs = [o.seconds for o in opens if o.kind == "open"]
    return {
        "students": n,
        "opened": len(secs),
        "open_p50_ms": median(secs) * 1e3,
        "open_max_ms": max(secs) * 1e3 if secs else float("nan"),
        "errors": sum(len(o.problems) for o in opens) + n - len(secs),
        "crosstalk": sum(len(o.crosstalk) for o in opens),
    }


def start_behind_nginx(run_dir: Path, model: Path):
    """REPLICAS streamlit replicas behind nginx on free ports; returns the url, their processes and how to stop them."""
    ports = []
    while len(ports) < REPLICAS:
        if (p := free_port()) not in ports:
            ports.append(p)
    replicas = start_replicas(ports, run_dir, model)
    port = free_port()
    nginx = Nginx(run_dir, f"127.0.0.1:{port}", ports)
    url = f"http://127.0.0.1:{port}"

    def stop() -> None:
        nginx.stop()
        for r in replicas:
            r.stop()

    try:
        nginx.start(url)
    except BaseException:
        stop()
        raise
    servers = Servers([r.proc.pid for r in replicas], nginx.proc.pid)
    return url, servers, stop


def run_config(name: str, args, model: Path, n_layers: int, tmp: Path, report: dict) -> None:
    """Start the configuration's servers, then the per-action cost (single only), the burst and the sweep."""
    run_dir = tmp / name
    run_dir.mkdir()
    stages = args.stage_list
    if name == "single":
        # with --profile the script runs under pyinstrument (timings include its cost)
        env, script = served_script(app_env(model), args.profile)
        ctx = serve(script, run_dir / "streamlit.log", env)
        server = ctx.__enter__()
        url, servers, stop = server.url, Servers([server.proc.pid]), lambda: ctx.__exit__(None, None, None)
    else:
        url, servers, stop = start_behind_nginx(run_dir, model)
    sampler = None
    out: dict = {"config": name, "url_kind": "one server" if name == "single" else f"nginx, {REPLICAS} replicas"}
    try:
        t0 = time.monotonic()
        refs = {s: reference(url, s) for s in args.sentence_list}
        out["references_s"] = time.monotonic() - t0
        if name == "single":
            out["cost"] = cost(url, refs, servers, n_layers, stages, args.cost_actions, args.seed, args.profile)
        bench = Bench(url, refs, n_layers, stages, args.think, args.seed)
        user = type("Student", (StudentUser,), {"bench": bench, "abstract": False})
        env = Environment(user_classes=[user])
        runner = env.create_local_runner()
        if args.browsers:
            sampler = Sampler(url, args.browsers, n_layers, stages, args.think, args.seed, run_dir / "browsers.jsonl")
            sampler.wait("ready", 1, 120)
        load0 = loadavg()
        t_burst = time.time()
        if sampler:  # the browsers open with the class
            Path(f"{sampler.out}.go").touch()
        out["burst"] = burst(runner, bench, args.burst, 120)
        if sampler:
            sampler.wait("open", args.browsers, 120)
            opens = [e for e in sampler.events() if e["kind"] == "open"]
            out["burst"]["browser_open_ms"] = [e["seconds"] * 1e3 for e in opens if e["seconds"] is not None]
            out["burst"]["browser_errors"] = (
                sum(len(e["errors"]) for e in opens) + args.browsers - len(out["burst"]["browser_open_ms"])
            )
            out["burst"]["browser_open_after_s"] = [e["t"] - t_burst for e in opens]  # painted, from the burst's start
        out["burst"]["loadavg_before"], out["burst"]["loadavg_after"] = load0, loadavg()
        out["sweep"] = []
        bench.opened = 0
        print(row(HEAD, WIDTHS, left=1), flush=True)
        for n in args.counts:
            spawn_s = spawn(runner, bench, n, timeout=max(120.0, n / SPAWN_RATE * 4))
            gevent.sleep(SETTLE_S)
            profiled = args.profile and name == "single"
            if profiled:
                set_phase(args.profile, f"N{n}")
            ph = window(runner, bench, servers, sampler, n, args.seconds)
            if profiled:
                set_phase(args.profile, IDLE)
                ph["profile"] = wait_written(args.profile, f"N{n}")
            ph["spawn_s"] = spawn_s
            ph["browsers"] = args.browsers
            out["sweep"].append(ph)
            print_row(name, ph)
            if not passes(ph, False):
                break  # past the server's limit: a larger class only waits longer
        runner.quit()
        out["largest_n"] = max((ph["sessions"] for ph in out["sweep"] if passes(ph, bool(args.browsers))), default=None)
        out["largest_n_server"] = max((ph["sessions"] for ph in out["sweep"] if passes(ph, False)), default=None)
        out["tracebacks"] = sum(p.read_text(errors="replace").count("Traceback") for p in run_dir.glob("*.log"))
    finally:
        if sampler:
            sampler.stop()
        stop()
    report["configs"].append(out)


HEAD = [
    "config",
    "N",
    "actions",
    "per s",
    "p50 ms",
    "p95 ms",
    "step p95",
    "stage p95",
    "layer p95",
    "sent. p95",
    "all-step p95",
    "browser p95",
    "errors",
    "xtalk",
    "server %",
    "RSS MiB",
    "loadgen %",
    "load before→after",
]
WIDTHS = [7, 4, 7, 6, 7, 7, 8, 9, 9, 9, 12, 11, 6, 5, 8, 7, 9, 22]


def print_row(name: str, ph: dict) -> None:
    cells = [
        name,
        ph["sessions"],
        ph["actions"],
        f"{ph['actions_per_s']:.1f}",
        ms(ph["server_p50_ms"]),
        ms(ph["server_p95_ms"]),
        ms(ph["step_p95_ms"]),
        ms(ph["stage_p95_ms"]),
        ms(ph["layer_p95_ms"]),
        ms(ph["sentence_p95_ms"]),
        ms(ph["step_in_all_p95_ms"]),
        ms(ph["browser_p95_ms"]),
        ph["errors"],
        ph["crosstalk"],
        f"{ph['server_cpu_pct']:.0f}",
        f"{ph['server_rss_mib_peak']:.0f}",
        f"{ph['loadgen_cpu_pct']:.0f}",
        f"{'/'.join(f'{x:g}' for x in ph['loadavg_before'][:1])}→{ph['loadavg_after'][0]:g}",
    ]
    print(row(cells, WIDTHS, left=1), flush=True)
    for p in ph["problems"][:3]:
        print("    " + p, flush=True)


def limit(c: dict) -> str:
    """What stopped the sweep, in words: the server's own cores, or the machine's (other work on it)."""
    beyond = next((ph for ph in c["sweep"] if not passes(ph, False)), None)
    if beyond is None:
        return "none reached: every N run met the server's target"
    cores = 1 if c["config"] == "single" else REPLICAS
    used = beyond["server_cpu_pct"] / cores
    load = beyond["loadavg_after"][0]
    where = (
        f"at N={beyond['sessions']}: server {beyond['server_cpu_pct']:.0f}% of a core ({used:.0f}% of its "
        f"{cores} core(s)), machine load average {load:g} on {os.cpu_count()} cores, "
        f"{beyond['errors']} errors, {beyond['crosstalk']} cross-talk"
    )
    if used >= SATURATED * 100:
        return f"the server's own CPU {where}: its Python runs one thread at a time; more replicas take more students"
    if load > (os.cpu_count() or 1) * SATURATED:
        return (
            f"the machine, not the server, {where}: other processes held the cores the server waited for, so "
            "this N is a lower bound of the server's capacity; rerun on a quiet machine"
        )
    return f"neither CPU is saturated {where}: the time went to waiting"


def print_costs(single: dict, args) -> None:
    """What one student alone costs the server per action, and where its profiled runs spent their time."""
    print("server CPU per action, one student alone (ms of CPU; median server time ms):")
    for kind, c in single["cost"].items():
        print(
            f"  {kind:12s} {c['cpu_ms']:7.1f}  {c['server_ms']:7.1f}" + (f"  {c['problems']}" if c["problems"] else "")
        )
    for kind, c in single["cost"].items():
        prof = c.get("profile")
        if prof:
            print(f"profile {kind}: {prof['runs']} script runs, {prof['wall_s']:.2f} s; most time of its own (s):")
            for fn, secs in prof["top_self"][:8]:
                print(f"  {secs:7.3f}  {fn}")
    if args.profile:
        print(f"profiles (HTML and text call trees): {args.profile}")


def per_replica(report: dict, single: dict) -> None:
    """How many students one replica takes, measured and by CPU, and the replicas a class needs."""
    rows = single["sweep"]
    per = sum(ph["server_cpu_pct"] for ph in rows) / sum(ph["sessions"] for ph in rows)
    by_cpu = math.floor(CPU_SHARE * 100 / per) if per > 0 else None
    cap = single["largest_n_server"]
    at = next((ph for ph in rows if ph["sessions"] == cap), rows[-1])
    need = {n: math.ceil(n / cap) for n in CLASSES} if cap else None
    need_cpu = {n: math.ceil(n / by_cpu) for n in CLASSES} if by_cpu else None
    report["per_replica"] = {
        "students": cap,
        "cpu_pct_per_student": per,
        "students_by_cpu": by_cpu,
        "cpu_ms_per_action": at["server_cpu_ms_per_action"],
        "rss_mib": at["server_rss_mib_peak"],
        "replicas_for": need,
        "replicas_for_by_cpu": need_cpu,
    }
    print(
        f"one replica, measured: {cap if cap else 'no'} students at server p95 ≤ {TARGET_SERVER_S:g} s"
        + (
            f" ({at['server_cpu_pct']:.0f}% of a core, RSS {at['server_rss_mib_peak']:.0f} MiB); replicas for a "
            f"class of {', '.join(f'{n}: {k}' for n, k in need.items())}"
            if need
            else ""
        )
    )
    print(
        f"one replica, by CPU: {per:.1f}% of a core per student ({at['server_cpu_ms_per_action']:.0f} ms of CPU "
        f"per action), so {by_cpu} students at {CPU_SHARE:.0%} of a core; replicas for a class of "
        f"{', '.join(f'{n}: {k}' for n, k in need_cpu.items()) if need_cpu else '-'} (one more keeps a class "
        "going when one fails)"
    )


def summary(report: dict, args) -> None:
    configs = {c["config"]: c for c in report["configs"]}
    print(
        "(server times: from the request to the end of the script's run; browser: click to every figure painted, "
        f"{args.browsers} Chromium session(s) beside the N students; server %: 100 = one core, summed over the "
        "replicas; loadgen %: this process; load: the machine's 1-minute load average before → after the window, "
        f"on {os.cpu_count()} cores)"
    )
    single = configs.get("single")
    if single and single.get("cost"):
        print_costs(single, args)
    for name, c in configs.items():
        b = c["burst"]
        opens = b.get("browser_open_ms", [])
        worst = max(opens) if opens else float("nan")
        errors = b["errors"] + b.get("browser_errors", 0)
        ok = not errors and b["open_max_ms"] <= BURST_PAINT_S * 1e3 and (not opens or worst <= BURST_PAINT_S * 1e3)
        print(
            f"verdict {name} burst: {'PASS' if ok else 'FAIL'} ({b['opened']} of {b['students']} students opened "
            f"within {BURST_WINDOW_S:g} s: first page's server time median {ms(b['open_p50_ms'])} ms, slowest "
            f"{ms(b['open_max_ms'])} ms; browsers' first page painted in {', '.join(ms(x) for x in opens) or '-'}"
            f" ms; target ≤ {BURST_PAINT_S:g} s; errors {errors})"
        )
        largest, server_only = c["largest_n"], c["largest_n_server"]
        print(
            f"verdict {name} capacity: {largest if largest is not None else 'none'} (largest N with server p95 ≤ "
            f"{TARGET_SERVER_S:g} s, browser p95 ≤ {TARGET_BROWSER_S:g} s, no error, no cross-talk; server p95 "
            f"alone: {server_only if server_only is not None else 'none'}; N run: "
            f"{','.join(str(ph['sessions']) for ph in c['sweep'])})"
        )
        c["limit"] = limit(c)
        print(f"limit {name}: {c['limit']}")
        beyond = next((ph for ph in c["sweep"] if not passes(ph, False)), None)
        prof = beyond and beyond.get("profile")
        if prof:
            print(
                f"profile {name} N={beyond['sessions']}: {prof['runs']} script runs, {prof['wall_s']:.1f} s; most "
                "time of its own (s):"
            )
            for fn, secs in prof["top_self"][:10]:
                print(f"  {secs:7.2f}  {fn}")
    if single and single["sweep"]:
        per_replica(report, single)
    if single and "nginx" in configs:
        a, b = single["largest_n_server"], configs["nginx"]["largest_n_server"]
        ratio = b / a if a and b else float("nan")
        report["replica_ratio"] = ratio
        print(
            f"verdict replicas ≥ 1.7× one process: {'PASS' if ratio == ratio and ratio >= 1.7 else 'FAIL'} "
            f"({REPLICAS} replicas {b if b is not None else 'none'} vs one process {a if a is not None else 'none'}"
            f" by server p95 alone; the ratio is only as fine as the steps of --sessions)"
        )
    n_err = sum(ph["errors"] for c in configs.values() for ph in c["sweep"]) + sum(
        c["tracebacks"] for c in configs.values()
    )
    n_ct = sum(ph["crosstalk"] for c in configs.values() for ph in c["sweep"])
    n_act = sum(ph["actions"] + ph["browser_actions"] for c in configs.values() for ph in c["sweep"])
    print(
        f"verdict errors = 0: {'PASS' if n_err == 0 else 'FAIL'} ({n_err} over {n_act} actions, server tracebacks "
        "included)"
    )
    print(f"verdict cross-talk = 0: {'PASS' if n_ct == 0 else 'FAIL'} ({n_ct} mismatches over {n_act} checks)")
    report["errors"], report["crosstalk"], report["actions"] = n_err, n_ct, n_act


def make_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, default=DEFAULT_MODEL, help="model directory (default: the bundled one)")
    ap.add_argument("--sessions", type=session_counts, help="class sizes N (default 8,16,32,64,128,256; smoke 2,4)")
    ap.add_argument("--seconds", type=float, help="measured window per N (default 60; smoke 5)")
    ap.add_argument("--think", type=float, help="mean pause after an answer (default 2: 1–3 s; smoke 0.5)")
    ap.add_argument("--browsers", type=int, help="Chromium sessions sampled beside the students (default 2)")
    ap.add_argument("--burst", type=int, help="students arriving within one second (default 30; smoke 4)")
    ap.add_argument("--configs", default=",".join(CONFIGS), help="single,nginx (default both)")
    ap.add_argument(
        "--stages",
        default=",".join((*DECODER_STAGES, "all")),
        help="stages to switch between (default: every decoder stage and All stages)",
    )
    ap.add_argument("--seed", type=int, default=0, help="seed of the students' random actions")
    ap.add_argument(
        "--profile",
        nargs="?",
        const=ROOT / "test-artifacts" / "capacity-profile",
        type=Path,
        metavar="DIR",
        help="profile the one server's script runs per action type with pyinstrument "
        "(default DIR test-artifacts/capacity-profile)",
    )
    ap.add_argument("--json", type=Path, metavar="FILE", help="write every figure as strict JSON")
    ap.add_argument("--smoke", action="store_true", help="tiny model, a few students for a few seconds")
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = make_parser()
    args = ap.parse_args(argv)
    base = SMOKE if args.smoke else FULL
    args.counts = args.sessions or base["sessions"]
    for key in ("seconds", "think", "browsers", "burst"):
        if getattr(args, key) is None:
            setattr(args, key, base[key])
    args.cost_actions = base["cost_actions"]
    args.sentence_list = SENTENCES[: base["sentences"]]
    args.stage_list = tuple(x.strip() for x in args.stages.split(",") if x.strip())
    configs = tuple(x.strip() for x in args.configs.split(",") if x.strip())
    if any(x not in STAGES for x in args.stage_list) or not args.stage_list:
        ap.error(f"--stages: choose from {','.join(STAGES)}")
    if any(x not in CONFIGS for x in configs) or not configs:
        ap.error(f"--configs: choose from {','.join(CONFIGS)}")
    if args.seconds <= 0 or args.think < 0 or args.browsers < 0 or args.burst < 1:
        ap.error("--seconds and --burst must be positive, --think and --browsers not negative")
    if args.browsers:
        require_chromium()
    if "nginx" in configs:
        find_nginx()
    report = {
        "cores": os.cpu_count(),
        "think_s": args.think,
        "seconds_per_n": args.seconds,
        "stages": list(args.stage_list),
        "sentences": len(args.sentence_list),
        "browsers": args.browsers,
        "targets": {"server_p95_s": TARGET_SERVER_S, "browser_p95_s": TARGET_BROWSER_S, "burst_paint_s": BURST_PAINT_S},
        "mix_pct": dict(zip(ACTIONS, WEIGHTS)),
        "loadavg_start": loadavg(),
        "configs": [],
    }
    with tempfile.TemporaryDirectory(prefix="capacity_") as d:
        tmp = Path(d)
        model, n_layers = benchmark_model(args.smoke, args.model, tmp, ap)
        report["model"] = str(model if not args.smoke else "tiny (model/testing.py)")
        print(
            f"Capacity: simulated students over Streamlit's protocol (Locust users), {args.seconds:g} s per N, "
            f"think {args.think * 0.5:g}–{args.think * 1.5:g} s; model {report['model']}; "
            f"{args.browsers} browser(s) sampled; {os.cpu_count()} cores, load average {report['loadavg_start']}",
            flush=True,
        )
        for name in configs:
            try:
                run_config(name, args, model, n_layers, tmp, report)
            except Exception:
                for log in sorted((tmp / name).glob("*.log")) + sorted((tmp / name).glob("*.stderr")):
                    print(
                        f"--- {log.name} (last lines)\n" + "\n".join(log.read_text().splitlines()[-15:]),
                        file=sys.stderr,
                    )
                raise
        summary(report, args)
    report["loadavg_end"] = loadavg()
    if args.json:
        args.json.write_text(json.dumps(finite(report), indent=1, allow_nan=False, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
