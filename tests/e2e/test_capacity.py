"""The protocol-level load: a simulated student's checks catch another session's state, and benchmarks/capacity.py
runs end to end (``--smoke``: the tiny model, a few students, one browser, through one server and through nginx).
A missing Chromium or nginx is a failure, never a skip."""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.protocol import Student, badge_labels, reference
from views.state import DECODER_STAGES

ROOT = Path(__file__).resolve().parents[2]

NUMBER = r"(\d+(?:\.\d+)?)"
A, B = "I like pizza.", "The cat is sleeping on the sofa."


def test_badge_labels_keep_escapes_and_brackets():
    body = r"**Generated so far (2 tokens):** :blue-badge[\<s\> 0\.50] :orange-badge[a\]b 0\.25]"
    assert badge_labels(body) == [r"\<s\> 0\.50", r"a\]b 0\.25"]


def test_student_checks_catch_another_sessions_state(server):
    """A student's answer checked against another sentence's reference is cross-talk, against its own it is
    clean; stepping and switching keep it clean."""
    refs = {A: reference(server, A), B: reference(server, B)}
    assert refs[A]["english"] == A and refs[A]["source"] != refs[B]["source"]
    good = Student(0, server, A, refs, 2, DECODER_STAGES, random.Random(0))
    out = good.open()
    assert out.kind == "open" and out.seconds > 0 and not out.problems and not out.crosstalk, out
    for choice in ("next", "next", "prev", "jump", "stage", "layer", "sentence", "next"):
        out = good.act(choice)
        assert not out.problems and not out.crosstalk, (choice, out)
    assert good.sentence == B and good.step == 1
    wrong = Student(1, server, A, {A: refs[B], B: refs[B]}, 2, DECODER_STAGES, random.Random(1))
    out = wrong.open()
    assert any(c.startswith("student 1 (open) source:") for c in out.crosstalk), out
    good.sentence = A  # as if its answers were another session's
    out = good.act("stage")  # the step view's fragment alone: its chips are not A's
    assert any(c.startswith("student 0 (stage) chips:") for c in out.crosstalk), out
    out = good.act("layer")  # the whole page: neither the English nor the URL is A's
    assert any(c.startswith("student 0 (layer) english:") for c in out.crosstalk), out
    assert any("URL query" in c for c in out.crosstalk), out
    good.close()
    wrong.close()


@pytest.mark.alone  # it loads the server up to its limit and requires no error: not beside another worker's load
def test_capacity_smoke(tmp_path):
    if not Path("/usr/bin/chromium").exists():
        pytest.fail("/usr/bin/chromium is missing: install Debian's chromium (apt-get install chromium)")
    if not (shutil.which("nginx") or Path("/usr/sbin/nginx").exists()):
        pytest.fail("nginx is missing: install Debian's nginx (apt-get install nginx); .ci/run does this")
    out_json = tmp_path / "capacity.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "capacity.py"), "--smoke", "--json", str(out_json)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = proc.stdout
    assert proc.returncode == 0, f"capacity.py exited {proc.returncode}\n{out[-3000:]}\n{proc.stderr[-3000:]}"
    rows = re.findall(
        rf"^(single|nginx)\s+(\d+)\s+(\d+)\s+{NUMBER}\s+(\d+)\s+(\d+)\s.*?\s(\d+|-)\s+(\d+)\s+(\d+)"
        rf"\s+(\d+)\s+(\d+)\s+(\d+)\s+\S+→\S+$",
        out,
        re.M,
    )
    assert [(r[0], int(r[1])) for r in rows] == [("single", 2), ("single", 4), ("nginx", 2), ("nginx", 4)], out
    for _, _, actions, _, p50, p95, browser, errors, crosstalk, cpu, rss, _ in rows:
        assert int(actions) >= 1 and 0 < int(p50) <= int(p95), out
        assert browser == "-" or int(browser) > 0, out
        assert int(errors) == int(crosstalk) == 0 and int(cpu) > 0 and int(rss) > 0, out
    costs = {
        k: (float(a), float(b))
        for k, a, b in re.findall(
            rf"^  (open|step|stage|layer|sentence|to all|step in all)\s+{NUMBER}\s+{NUMBER}$", out, re.M
        )
    }
    assert set(costs) == {"open", "step", "stage", "layer", "sentence", "to all", "step in all"}, out
    assert all(a > 0 and b > 0 for a, b in costs.values()), out
    assert (
        len(re.findall(r"^limit (single|nginx): (none reached|the server's own CPU|the machine|neither)", out, re.M))
        == 2
    ), out
    assert re.search(r"^one replica, measured: (\d+|no) students at server p95", out, re.M), out
    m = re.search(
        rf"^one replica, by CPU: {NUMBER}% of a core per student \((\d+) ms of CPU per action\), so (\d+) "
        r"students at 70% of a core; replicas for a class of 30: (\d+), 100: (\d+), 300: (\d+)",
        out,
        re.M,
    )
    assert m and float(m.group(1)) > 0 and int(m.group(2)) > 0, out
    assert int(m.group(4)) <= int(m.group(5)) <= int(m.group(6)), out
    for target in ("errors = 0", "cross-talk = 0"):
        assert re.search(rf"^verdict {re.escape(target)}: PASS \(", out, re.M), out
    for line in ("single burst", "single capacity", "nginx burst", "nginx capacity", "replicas ≥ 1.7× one process"):
        assert re.search(rf"^verdict {re.escape(line)}: ", out, re.M), out

    def refuse(name: str):
        raise AssertionError(f"{out_json} holds {name}: not strict JSON")

    data = json.loads(out_json.read_text(), parse_constant=refuse)
    assert [c["config"] for c in data["configs"]] == ["single", "nginx"], data
    single = data["configs"][0]
    assert all(c["cpu_ms"] > 0 and c["server_ms"] > 0 and not c["problems"] for c in single["cost"].values()), single
    for c in data["configs"]:
        b = c["burst"]
        assert b["opened"] == b["students"] == 4 and b["errors"] == 0 and b["crosstalk"] == 0, b
        assert len(b["browser_open_ms"]) == 1 and b["browser_open_ms"][0] > 0, b
        assert sum(ph["browser_actions"] for ph in c["sweep"]) >= 1, c  # the browser acted under the load
        for ph in c["sweep"]:
            assert ph["server_cpu_pct"] > 0 and ph["loadavg_before"] and ph["loadavg_after"], ph
            assert ph["locust"]["requests"] >= ph["actions"] > 0, ph
    assert data["errors"] == 0 and data["crosstalk"] == 0, data
