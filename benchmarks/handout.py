"""The handout's size and the time to write it: a line of ``--positions`` positions (a long sentence decoded greedily,
cut at that many new tokens), All stages (or ``--stage``), as the Export panel's button writes it.

    python benchmarks/handout.py [--model DIR] [--positions 15] [--stage all] [--runs 3] [--out FILE.html]

Prints the positions, the figures (and how many distinct ones the page holds), the page's size and Plotly's share of
it, and the time to write it (median of ``--runs``: the first run builds every figure; later runs find the figures
in the process's figure cache, as a second student asking for the same line would). Verdicts: ≤ 10 MB and written
≤ 5 s (the first run, no figure cached).
"""

from __future__ import annotations

import argparse
import re
import statistics
import time
from pathlib import Path

from harness.browser import DEFAULT_MODEL
from harness.handout import handout_args
from views.routes import PLOTLY_JS
from views.stepping import handout_bytes

SENTENCE = (
    "The little girl who lives next door is reading a long book about the old ships of the harbour with her "
    "grandmother every evening."
)
MAX_MB, MAX_S = 10.0, 5.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    ap.add_argument("--positions", type=int, default=15)
    ap.add_argument("--stage", default="all")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    made = handout_args(args.model, source=SENTENCE, max_len=args.positions, stage=args.stage)
    n = made[4].end + 1  # the followed line's positions
    times, cpu, page = [], [], b""
    for _ in range(args.runs):
        t0, c0 = time.perf_counter(), time.process_time()
        page = handout_bytes(*made)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    text = page.decode()
    n_figures = text.count('class="plot"')
    distinct = len(re.findall(r'"[0-9a-f]{16}":\{', text))
    mb, plotly_mb = len(page) / 1e6, PLOTLY_JS.stat().st_size / 1e6
    print(f"model {args.model.name}, stage {args.stage}, positions {n}")
    print(f"figures {n_figures} ({distinct} distinct, each written once)")
    print(f"size {mb:.2f} MB (Plotly's bundle {plotly_mb:.2f} MB of it)")
    again, again_cpu = statistics.median(times[1:] or times), statistics.median(cpu[1:] or cpu)
    print(f"written in {times[0]:.2f} s (first run; {cpu[0]:.2f} s of CPU)")
    print(f"written in {again:.2f} s ({again_cpu:.2f} s of CPU) with the figures cached (on a busy machine the CPU")
    print("seconds say more than the wall-clock ones)")
    print(f"verdict size ≤ {MAX_MB:g} MB: {'PASS' if mb <= MAX_MB else 'FAIL'} ({mb:.2f} MB)")
    print(f"verdict written ≤ {MAX_S:g} s: {'PASS' if times[0] <= MAX_S else 'FAIL'} ({times[0]:.2f} s)")
    if args.out:
        args.out.write_bytes(page)
        print(f"written to {args.out}")


if __name__ == "__main__":
    main()
