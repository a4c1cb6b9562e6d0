"""The benchmarks run end to end (``--smoke``: tiny random model; the browser ones: a few clicks, 2 sessions).

Smoke runs need not meet the targets, but they must measure: every figure printed is a positive number
and every verdict line is there. A missing Chromium (or, for replicas.py, nginx) is a failure, never a skip.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from model.lesson.learn import CHAPTER_KEYS

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
NUMBER = r"(\d+(?:\.\d+)?)"
TIMEOUT_S = 600


def run_smoke(script: str, *extra: str) -> str:
    """The script's ``--smoke`` output (it exited 0); it drives Chromium, which must be there."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium (apt-get install chromium); .ci/run does this")
    proc = subprocess.run(smoke_command(script, *extra), cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert proc.returncode == 0, f"{script} exited {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def smoke_command(script: str, *extra: str) -> list[str]:
    return [sys.executable, str(ROOT / "benchmarks" / script), "--smoke", *extra]


def verdict(out: str, target: str) -> str:
    m = re.search(rf"^verdict {re.escape(target)}: (PASS|FAIL) \(.+\)$", out, re.M)
    assert m, f"no verdict line for {target!r}:\n{out}"
    return m.group(1)


def test_app_latency_smoke():
    out = run_smoke("app_latency.py")
    for name in (
        "app: ▶ step to painted (ms)",
        "floor: button to painted (ms)",
        "app: received per ▶ step (KB)",
        "app, All stages: ▶ step to painted (ms)",
        "app, All stages: received per ▶ (KB)",
        "app: new sentence to painted (ms)",
        "app: cold start to painted page (s)",
        "floor: cold start to painted page (s)",
        "app, Learn: chapter to painted, read 0.3 s first (ms)",
        "app, Learn: chapter to painted, turned at once (ms)",
        "app, Compare: ▶ step to painted (ms)",
        "floor, Nagle on (stock): button to painted (ms)",
    ):
        m = re.search(rf"^{re.escape(name)}\s+(\d+)\s+{NUMBER}\s+{NUMBER}$", out, re.M)
        assert m, f"no row {name!r}:\n{out}"
        n, med, p95 = int(m.group(1)), float(m.group(2)), float(m.group(3))
        assert n >= 1 and 0 < med <= p95, m.group(0)
    m = re.search(
        r"^app, default view: (\d+) figures on the page, (\d+) follow the step; "
        r"app, All stages: (\d+) figures on the page, (\d+) follow the step$",
        out,
        re.M,
    )
    assert m, out
    plots, tracking, all_plots, all_tracking = map(int, m.groups())
    assert 1 <= tracking <= plots < all_plots and tracking < all_tracking <= all_plots, m.group(0)
    verdict(out, "step-to-paint ≤ 2× floor")
    verdict(out, "bytes per step ≤ 200 KB")
    verdict(out, "Learn chapter-to-paint ≤ 1.5× floor, read 0.3 s first")
    assert re.search(
        r"^measure Learn chapter-to-paint ≤ 1.5× floor, turned at once, not a verdict: (PASS|FAIL)", out, re.M
    )
    for walk in ("read 0.3 s first", "turned at once"):
        m = re.search(rf"^app, Learn: chapter to painted, {walk} \(ms\)\s+(\d+)", out, re.M)
        assert m and int(m.group(1)) == 2 * (len(CHAPTER_KEYS) - 1), out  # every chapter turned to, there and back
    assert len(re.findall(r"each chapter's median: the slowest, [a-z_]+, \d+ ms", out)) == 2, out
    verdict(out, "Compare step-to-paint ≤ 1.5× the step view's (median; p95 ≤ 2×)")
    verdict(out, "All stages step-to-paint ≤ 3× floor (median; p95 ≤ 4×)")
    verdict(out, "cold start ≤ 1.3× floor")
    assert "errors on the page or tracebacks in the server log: 0" in out, out


def test_soak_smoke():
    out = run_smoke("soak.py")
    rows = re.findall(r"^(\d+)\s+.+?\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)$", out, re.M)
    assert len(rows) == 2, out
    for _, actions, _, med, _, _ in rows:
        assert int(actions) >= 1 and int(med) > 0, out
    m = re.search(rf"start {NUMBER}, at {NUMBER} s {NUMBER}, final {NUMBER}, peak {NUMBER}$", out, re.M)
    assert m and all(float(m.group(i)) > 0 for i in (1, 3, 4, 5)), out
    assert verdict(out, "errors = 0") == "PASS", out
    assert verdict(out, "cross-talk = 0") == "PASS", out
    verdict(out, "final RSS ≤ 1.10× half-way RSS")


IN_PROCESS = {  # script: its timed rows, their figures, how many of those (first ones) must be positive, verdicts
    "completeness.py": (("bart",), rf"{NUMBER}\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}", 0, ("completeness ≤ 5 %",)),
    "explain.py": (
        (
            "recorded greedy decode",
            "logit lens, every layer and position",
            "head importance, 16 heads",
            "attribution IG, ",
            "attribution ixg, every output token",
        ),
        rf"{NUMBER}\s+{NUMBER}",
        2,
        ("lens ≤ 10% of the recorded decode", "head importance ≤ 3 s", "IG attribution ≤ 3 s"),
    ),
    "patching.py": (("map at position 1", "map at position 19"), rf"{NUMBER}\s+{NUMBER}", 2, ()),
    "corpus.py": (
        (
            "rows, every column and flag (in process)",
            "rows through the CLI",
            "head table over 9 sentences",
            "the set with its head table through the CLI",
            "greedy against beam 5 through the CLI",
        ),
        rf"{NUMBER}(?:\s+{NUMBER})?",  # wall s, then CPU s
        1,
        (
            "rows in process ≤ 60 s",
            "rows through the CLI ≤ 60 s",
            "head table over 9 ≤ 60 s",
            "the set with its head table ≤ 90 s",
            "greedy against beam 5 ≤ 90 s",
        ),
    ),
}


@pytest.fixture(scope="module")
def in_process_runs(request, tmp_path_factory) -> Iterator[dict[str, tuple[subprocess.Popen, Path, Path]]]:
    """The in-process smokes of this session's tests, started at once: none drives a browser or holds a target, and
    each runs on one core most of the time, so they share the machine's cores; each test reads its own script's."""
    scripts = sorted(
        {item.callspec.params["script"] for item in request.session.items if item.originalname == IN_PROCESS_TEST}
    )
    tmp = tmp_path_factory.mktemp("in_process")
    runs = {}
    for script in scripts:
        out, err = tmp / f"{script}.out", tmp / f"{script}.err"
        with out.open("w") as o, err.open("w") as e:
            runs[script] = (subprocess.Popen(smoke_command(script), cwd=ROOT, stdout=o, stderr=e, text=True), out, err)
    yield runs
    for proc, _, _ in runs.values():
        if proc.poll() is None:
            proc.kill()
            proc.wait()


IN_PROCESS_TEST = "test_in_process_smoke"


@pytest.mark.parametrize("script", sorted(IN_PROCESS))
def test_in_process_smoke(script, in_process_runs):
    """No browser here: the explain and corpus benchmarks run the tiny model in-process (corpus: through the CLI
    too)."""
    names, figures, positive, targets = IN_PROCESS[script]
    proc, stdout, stderr = in_process_runs[script]
    returncode = proc.wait(timeout=TIMEOUT_S)
    out, err = stdout.read_text(), stderr.read_text()
    assert returncode == 0, f"{script} exited {returncode}\n{out[-3000:]}\n{err[-3000:]}"
    for name in names:
        m = re.search(rf"^{re.escape(name)}.*?\s{figures}$", out, re.M)
        assert m and all(float(x) > 0 for x in m.groups()[:positive]), f"no row {name!r}:\n{out}"
    assert "the CLI failed" not in out, out
    for target in targets:
        verdict(out, target)


def strict_json(path: Path) -> dict:
    def refuse(name: str):
        raise AssertionError(f"{path} holds {name}: not strict JSON")

    return json.loads(path.read_text(), parse_constant=refuse)


def test_classroom_smoke(tmp_path):
    out = run_smoke("classroom.py", "--json", str(tmp_path / "classroom.json"))
    rows = re.findall(
        rf"^\s*(\d+)\s+(\d+)\s+{NUMBER}\s+(\d+)\s+(\d+)\s+(?:\S+\s+){{3}}(\d+)\s+(\d+)\s+(\d+)"
        rf"\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)$",
        out,
        re.M,
    )
    assert [int(r[0]) for r in rows] == [1, 2], out
    for _, actions, _, p50, p95, errors, timeouts, crosstalk, rss, _, _, _ in rows:
        assert int(actions) >= 1 and 0 < int(p50) <= int(p95), out
        assert int(errors) == int(timeouts) == int(crosstalk) == 0 and int(rss) > 0, out
    m = re.search(r"^largest N with p95 ≤ 1\.5 s: (\d+|none) ", out, re.M)
    assert m, out
    assert re.search(
        r"^session cache bound: \d+ MiB per session, \d+ MiB for every session together; server RSS "
        r"at N=2: peak \d+ MiB",
        out,
        re.M,
    ), out
    assert re.search(r"^limit: .*at N=\d+: server \d+% of a core, browsers \d+% of a core", out, re.M), out
    assert verdict(out, "errors = 0") == "PASS", out
    assert verdict(out, "cross-talk = 0") == "PASS", out
    data = strict_json(tmp_path / "classroom.json")
    assert [ph["sessions"] for ph in data["phases"]] == [1, 2]
    assert all(ph["server_cpu_pct"] > 0 and ph["browser_cpu_pct"] > 0 for ph in data["phases"]), data
    assert data["verdicts"] == {"errors = 0": True, "cross-talk = 0": True}, data


@pytest.mark.alone  # a replica answering late under another worker's load lets nginx move a browser before the kill
def test_replicas_smoke(tmp_path):
    if not (shutil.which("nginx") or Path("/usr/sbin/nginx").exists()):
        pytest.fail("nginx is missing: install Debian's nginx (apt-get install nginx); .ci/run does this")
    out = run_smoke("replicas.py", "--json", str(tmp_path / "replicas.json"))
    rows = re.findall(
        r"^(\d+)\s+(r\d|-)\s+(r\d|-)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\S+(?: s)?)\s+(\S+)\s+(\d+)$", out, re.M
    )
    assert len(rows) == 4, out
    moved = [r for r in rows if r[8] != "-"]
    assert moved and all(r[8] == "yes" and r[2] != r[1] for r in moved), out
    assert all(r[2] in (r[1], "-") for r in rows if r[8] == "-"), out  # the others stay where they were
    for target in ("errors = 0", "cross-talk = 0", "sticky", "reconnect", "others undisturbed"):
        assert verdict(out, target) == "PASS", out
    verdict(out, "spread over replicas")  # 4 random cookies can all land on one replica: reported, not required
    data = strict_json(tmp_path / "replicas.json")
    assert data["moved"] >= 1 and data["restored"] == data["moved"], data
    assert all(data["verdicts"][k] for k in ("errors = 0", "cross-talk = 0", "sticky", "reconnect")), data


def test_controls_latency_smoke():
    """Every control timed once quiet and once with a core kept busy, each with its verdict, the CLI's too."""
    out = run_smoke("controls_latency.py", "--busy")
    controls = (
        "open What if?",
        "force a token",
        "Clear",
        "open Export",
        "position's records (NPZ)",
        "handout",
        "a position's ZIP (handout)",
        "change stage",
        "change layer",
        "change head",
        "change beam",
        "Follow-hypothesis pick",
        "switch to Learn",
        "switch to Explore",
        "switch to Compare",
        "switch to Corpus",
        "switch back to Explore",
    )
    quiet, busy = out.split("With a second process keeping one core busy")
    for part in (quiet, busy):
        assert re.search(r"^page switches whose first click was lost: \d+ of 5  (PASS|FAIL) \(none\)$", part, re.M)
    for name in controls:
        assert re.search(rf"^{re.escape(name)} +\d+ ms .*(PASS|FAIL) \(", quiet, re.M), (name, quiet)
        assert re.search(rf"^{re.escape(name)} +\d+ ms +\d+ ms .*(PASS|FAIL) \(≤ 2× quiet\)", busy, re.M), (name, busy)
    for name in ("translate", "trace", "explain"):
        assert re.search(rf"^{name} +[\d.]+ s +[\d.]+×  (PASS|FAIL) \(≤ 2× import\)", quiet, re.M), (name, quiet)


def test_corpus_bar_smoke():
    """The corpus benchmark's ``bar`` part measures the page's progress bar against the clock: a gap in [0, 1]."""
    out = run_smoke("corpus.py", "--parts", "bar")
    gaps = re.findall(r"^measure, not a verdict: the page's progress bar .+ strays at most (\d\.\d+) from", out, re.M)
    assert gaps and all(0.0 <= float(g) <= 1.0 for g in gaps), out
