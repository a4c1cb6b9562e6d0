"""The decoding benchmarks end to end on tiny random models: engines.py (export, CTranslate2 conversion,
every engine), decode.py, gemv.py and step_profile.py."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from benchmarks.gemv import METHODS

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "engines.py"
NUM = r"\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\d+)%\s+(\d+)%"
ROW = re.compile(rf"^\s*1\s+(.+?)\s{{2,}}{NUM}\s+\|{NUM}\s*$")


def test_engines_smoke():
    out = subprocess.run([sys.executable, str(SCRIPT), "--smoke"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    rows = {}
    for line in out.stdout.splitlines():
        if m := ROW.match(line):
            greedy, beam = [float(x) for x in m.groups()[1:6]], [float(x) for x in m.groups()[6:]]
            rows[m.group(1).split(" (")[0]] = (greedy, beam)
    engines = [
        "ours, untraced",
        "ours, untraced, numpy step",
        "ours, record=True",
        "transformers generate()",
        "CTranslate2 float32",
        "CTranslate2 int8",
    ]
    assert sorted(rows) == sorted(engines), out.stdout
    for name, (greedy, beam) in rows.items():
        for median, p95, tok_s, *_ in (greedy, beam):
            assert 0 < median <= p95 and tok_s > 0, (name, out.stdout)
    # same weights, same stopping rule: greedy CTranslate2 float32 must reproduce ours token for token
    assert rows["CTranslate2 float32"][0][3:] == [100.0, 100.0], out.stdout
    assert rows["transformers generate()"][0][3] == 100.0 and rows["ours, record=True"][0][3] == 100.0, out.stdout
    # the numpy step decodes what the compiled one does, token for token, greedy and beam
    assert rows["ours, untraced, numpy step"][0][3] == rows["ours, untraced, numpy step"][1][3] == 100.0, out.stdout
    assert out.stdout.count("PASS") + out.stdout.count("FAIL") == 4, out.stdout
    assert "the compiled step faster than the numpy step (numpy / compiled: " in out.stdout, out.stdout
    # --smoke runs 2 interleaved rounds: every verdict shows the combined ratio and each round's own
    pair = r"([\d.]+)x \[([\d.]+) ([\d.]+)\]"
    verdicts = re.findall(
        rf"^\[threads 1\] (?:PASS|FAIL)  .+\((?:ours / CT2: |numpy / compiled: )?greedy {pair}, beam {pair}\)$",
        out.stdout,
        re.M,
    )
    assert len(verdicts) == 4, out.stdout
    for ratios in verdicts:
        assert all(float(x) > 0 for x in ratios), out.stdout


def run_script(name: str, *args: str) -> str:
    script = SCRIPT.parent / name
    out = subprocess.run([sys.executable, str(script), "--smoke", *args], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def test_decode_benchmark_smoke():
    out = run_script("decode.py")
    rows = re.findall(
        r"^\s+([12])\s+(transformers generate\(\)|ours, untraced|ours, record=True \(full trace\))"
        r"\s+([\d.]+)\s+([\d.]+)\s+(\d+)/(\d+)",
        out,
        re.M,
    )
    assert len(rows) == 6, out
    for _, _, greedy, beam, g_tok, b_tok in rows:
        assert float(greedy) > 0 and float(beam) > 0 and int(g_tok) == int(b_tok) == 30, out
    steps = re.findall(r"^\s+([12])\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)$", out, re.M)
    assert [s[0] for s in steps] == ["1", "2"] and all(float(x) > 0 for s in steps for x in s[1:]), out
    assert len(re.findall(r"^\[threads [12]\] (PASS|FAIL)  ", out, re.M)) == 8, out


def test_gemv_benchmark_smoke():
    out = run_script("gemv.py")
    names = "|".join(map(re.escape, METHODS))
    rows = re.findall(rf"^\s+([12])\s+([15])\s+({names})\s+([\d.]+)\s+([\d.e+-]+)\s+([\d.e+-]+)$", out, re.M)
    assert len(rows) == 16, out  # 2 thread counts x 2 row counts x 4 methods
    for *_, ms, gbs, diff in rows:
        assert float(ms) > 0 and float(gbs) > 0 and float(diff) < 1e-5, out  # the same products, faster or not
    assert len(re.findall(r"^\[threads [12], rows [15]\] fastest: .+, [\d.]+x as fast as F\.linear$", out, re.M)) == 4


def test_step_profile_smoke():
    out = run_script("step_profile.py", "--pyinstrument")
    labels = [
        "self-attention fused W_Q|W_K|W_V",
        "self-attention W_O",
        "FFN W_1",
        "FFN W_2",
        "output projection (tied embedding)",
    ]
    products = {
        m[0]: [float(x) for x in m[1:]]
        for m in re.findall(r"^(.+?)\s{2,}([\d.]+)\s+([\d.]+)\s+(\d+)%\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)x$", out, re.M)
    }
    assert sorted(products) == sorted(labels), out
    for calls, per_step, _, per_call, hot, ratio in products.values():
        # every figure is printed to 0.1: the products and the ratio are checked within that rounding
        assert calls >= 1 and per_step > 0 and hot > 0, out
        assert abs(per_call * calls - per_step) <= 0.05 * (calls + 1) + 1e-9, out
        low, high = (per_call - 0.05) / (hot + 0.05) - 0.05, (per_call + 0.05) / (hot - 0.05) + 0.05
        assert low <= ratio <= high, out
    shares = re.findall(r"^(?!step total).+?\s{2,}[\d.]+\s+[\d.]+\s+(\d+)%", out, re.M)
    assert len(shares) == len(labels) + 5 and abs(sum(map(int, shares)) - 100) <= 6, out  # every part, rounded
    assert re.search(r"^verdict: weight products take \d+% of a step", out, re.M), out
    # pyinstrument's call tree
    assert "decode_all" in out and re.search(r"search  \S*model/decode/decoding.py", out), out
