"""The truth audit: seeded random states of the step view, every number shown in two places compared.

    python benchmarks/truth_audit.py [--model DIR] [--states 36] [--seed 0]

Prints the states visited, the checks made and every disagreement (the checks are listed in ``harness/audit.py``);
exits 1 if any. ``--model`` defaults to the tests' tiny model, built on the fly (the bundled one also works).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from harness.audit import audit
from model.testing import build_tiny_model_dir


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=None)
    ap.add_argument("--states", type=int, default=36)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    model = args.model or build_tiny_model_dir(Path(tempfile.mkdtemp()) / "tiny")
    t0 = time.perf_counter()
    rep = audit(model, n=args.states, seed=args.seed)
    print(
        f"truth audit: {rep.states} states visited, {rep.checks} checks, {len(rep.problems)} disagreements "
        f"({time.perf_counter() - t0:.0f} s)"
    )
    for p in rep.problems:
        print("  " + p)
    return 1 if rep.problems else 0


if __name__ == "__main__":
    sys.exit(main())
