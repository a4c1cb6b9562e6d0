"""benchmarks/engines.py end to end on its tiny random model: export, CTranslate2 conversion, every engine."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "engines.py"
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
    engines = ["ours, untraced", "ours, record=True", "transformers generate()", "CTranslate2 float32",
               "CTranslate2 int8"]  # fmt: skip
    assert sorted(rows) == sorted(engines), out.stdout
    for name, (greedy, beam) in rows.items():
        for median, p95, tok_s, *_ in (greedy, beam):
            assert 0 < median <= p95 and tok_s > 0, (name, out.stdout)
    # same weights, same stopping rule: greedy CTranslate2 float32 must reproduce ours token for token
    assert rows["CTranslate2 float32"][0][3:] == [100.0, 100.0], out.stdout
    assert rows["transformers generate()"][0][3] == 100.0 and rows["ours, record=True"][0][3] == 100.0, out.stdout
    assert out.stdout.count("PASS") + out.stdout.count("FAIL") == 3, out.stdout
