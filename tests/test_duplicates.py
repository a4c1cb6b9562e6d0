"""The duplicate-code check over the tree: the workplace's ``duplicates`` command lists the pairs of places that
share six or more lines (the same lines, or lines of the same shape). Each pair it still finds is listed by its two
files, with the reason it stays, in docs/architecture.md ("Duplicate code left, and why"); a new pair fails (extract
what the two places share, or give it a row there), and so does a listed pair it no longer finds (take it off). A
missing command is a failure, never a skip."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MOST = 30  # the pairs the tree still holds; lower it as pairs go
ROW = re.compile(r"^D\d+ (\S+?):\d+-\d+ ~ (\S+?):\d+-\d+")
DOC = ROOT / "docs" / "architecture.md"
REASON = re.compile(r"^\| `(\S+)` ~ `(\S+)` \| (.+) \|$")


def reasons() -> dict[tuple[str, str], str]:
    """The pairs docs/architecture.md lists as left, each with its reason."""
    return {(a, b): why for a, b, why in (m.groups() for m in map(REASON.match, DOC.read_text().splitlines()) if m)}


def pairs(output: str) -> list[tuple[str, str]]:
    """The two files of each pair the command lists, in its order."""
    return [m.groups() for m in map(ROW.match, output.splitlines()) if m]


def test_the_rows_are_read_as_pairs_of_files():
    out = (
        "2 pairs of places (3 files read), each sharing runs of 6 or more lines\n"
        "D1 a/x.py:10-24 ~ b/y.py:40-54 shape (+2 more runs)\n"
        "D2 a/x.py:1-7 ~ a/x.py:30-36 shape boilerplate\n"
        "left out: 1 run of 6 lines that stand in more than 8 places each (too common to list)\n"
    )
    assert pairs(out) == [("a/x.py", "b/y.py"), ("a/x.py", "a/x.py")]
    assert ("model/core/keys.py", "model/core/keys.py") in reasons()  # the table is read


def test_every_duplicate_pair_left_has_its_reason():
    tool = shutil.which("duplicates")
    assert tool, "the `duplicates` command (the workplace's duplicate finder) is not on PATH: the check cannot run"
    out = subprocess.run(
        [tool, "--repo", str(ROOT), "--most", "200", "--seconds", "120"], capture_output=True, text=True, check=True
    ).stdout
    assert "incomplete:" not in out, out
    found = pairs(out)
    assert len(found) <= MOST, f"{len(found)} duplicate pairs, at most {MOST}:\n{out}"
    left = reasons()
    assert len(left) <= MOST and all(why.strip() for why in left.values())
    new = [p for p in found if p not in left]
    assert not new, f"new duplicate pairs: extract what they share, or give each its row in {DOC.name}: {new}"
    gone = sorted(set(left) - set(found))
    assert not gone, f"these pairs are gone: take their rows off {DOC.name} (and lower MOST): {gone}"
