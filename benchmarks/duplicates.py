"""The duplicate-code check over the tree: the ``duplicates`` command (a developer's tool, not a dependency of the
project, so this is a script and not a test) lists the pairs of places that share six or more lines, the same or of
the same shape. Each pair it still finds must have its row, with the reason it stays, in docs/architecture.md
("Duplicate code left, and why").

    python benchmarks/duplicates.py [--seconds 120]

Prints the pairs found, the pairs without a reason (new: extract what the two places share, or give it a row) and
the rows whose pair is gone, then a verdict against the target; exits 1 when the verdict fails, 2 when the command
is missing or could not read the whole tree.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET = 15  # the pairs the tree may hold, each with its reason
ROW = re.compile(r"^D\d+ (\S+?):\d+-\d+ ~ (\S+?):\d+-\d+")
DOC = ROOT / "docs" / "architecture.md"
REASON = re.compile(r"^\| `(\S+)` ~ `(\S+)` \| (.+) \|$")


def reasons() -> dict[tuple[str, str], str]:
    """The pairs docs/architecture.md lists as left, each with its reason."""
    return {(a, b): why for a, b, why in (m.groups() for m in map(REASON.match, DOC.read_text().splitlines()) if m)}


def pairs(output: str) -> list[tuple[str, str]]:
    """The two files of each pair the command lists, in its order."""
    return [(m[1], m[2]) for m in map(ROW.match, output.splitlines()) if m]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=int, default=120, help="how long the command may read the tree")
    args = ap.parse_args(argv)
    tool = shutil.which("duplicates")
    if tool is None:
        print("the `duplicates` command is not on PATH: the check cannot run", file=sys.stderr)
        return 2
    cmd = [tool, "--repo", str(ROOT), "--most", "200", "--seconds", str(args.seconds)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    if "incomplete:" in out:
        print(f"the command did not read the whole tree (give it more --seconds):\n{out}", file=sys.stderr)
        return 2
    found, left = pairs(out), reasons()
    new = [p for p in found if p not in left]
    gone = sorted(set(left) - set(found))
    print(out.rstrip())
    print(f"pairs found: {len(found)}; rows with a reason: {len(left)}")
    print(f"new pairs (no reason in {DOC.name}): {new or 'none'}")
    print(f"rows whose pair is gone: {gone or 'none'}")
    ok = len(found) <= TARGET and not new and not gone
    print(f"{'PASS' if ok else 'FAIL'} duplicate pairs {len(found)} (target ≤ {TARGET}, each with its reason)")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
